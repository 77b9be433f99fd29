/*
Copyright 2026 The fencedlock Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package lock

import (
	"slices"

	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/token"
)

// Status is what a waiting Acquire saw of the lock, as given to the WithWaitCallback function.
type Status struct {
	// Holders hold the lock now, in permit order: a lock's holder, a semaphore's permits.
	Holders []Holder
	// Permits is how many holders the lock admits at once: 1 for a lock, spec.permits for a
	// semaphore.
	Permits int
	// Token is the last token the lock issued; zero while the manager has not initialized it.
	Token token.Token
	// Queued says a free permit goes to the lock's queue (waiters are queued, or it is kept for a
	// queued pod), not to a newcomer.
	Queued bool
	// Ahead is how many waiters joined the queue before this caller and were not served yet, at
	// most: some may have left since. -1 when this caller is not queued.
	Ahead int
}

// Holder is one holding of a lock: its identity, its fencing token and its permit's number.
type Holder struct {
	Identity string
	Token    token.Token
	Permit   int
}

// Initialized reports whether the manager has initialized the lock: until then nobody gets it.
func (s Status) Initialized() bool { return !s.Token.IsZero() }

// Full reports whether every permit is held.
func (s Status) Full() bool { return len(s.Holders) >= s.Permits }

// HolderOf returns identity's holding, if it holds the lock (a permit of it).
func (s Status) HolderOf(identity string) (Holder, bool) {
	i := slices.IndexFunc(s.Holders, func(h Holder) bool { return h.Identity == identity })
	if i < 0 {
		return Holder{}, false
	}
	return s.Holders[i], true
}

// statusOf is the Status of st for an acquisition queued with ticket (zero: not queued).
func statusOf(st lease.State, ticket lease.Ticket) Status {
	s := Status{Permits: max(st.Limit, 1), Token: st.Token, Queued: st.Waiting || st.Reserved != 0, Ahead: -1}
	for _, p := range st.Permits {
		s.Holders = append(s.Holders, Holder{Identity: p.Holder, Token: p.Token, Permit: p.Number})
	}
	if ticket != 0 {
		s.Ahead = int(ticket - 1 - min(st.Served, ticket-1))
	}
	return s
}

// waiting tells the wait callback what the waiter sees now if its holders or token differ from
// what it was last told.
func (l *Locker) waiting(a *acquisition, st lease.State) {
	if l.onWait == nil {
		return
	}
	s := statusOf(st, a.ticket)
	if a.told && s.Token == a.seen.Token && slices.Equal(s.Holders, a.seen.Holders) {
		return
	}
	a.seen, a.told = s, true
	l.onWait(s)
}
