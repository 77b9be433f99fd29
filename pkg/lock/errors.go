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
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/token"
)

// The errors of this package's calls. Besides these, a call returns the API server's errors
// (k8s.io/apimachinery/pkg/api/errors) and the context's, wrapped.
var (
	// ErrNoLease means the lock's Lease does not exist (yet): the FencedLock is missing or the
	// fencedlock manager has not created its Lease. Acquire waits for it; the other calls fail.
	ErrNoLease = errors.New("lock has no Lease: create the FencedLock and make sure the fencedlock manager is running")

	// ErrNotInitialized means the lock's Lease has no token yet: the fencedlock manager has not
	// stamped it. Acquire waits; TryAcquire fails with it.
	ErrNotInitialized = lease.ErrNotInitialized

	// ErrInvalidIdentity is matched by the error of New and NewForConfig for a holder identity
	// they refuse; see ValidateIdentity.
	ErrInvalidIdentity = errors.New("invalid holder identity")

	// ErrHeld is matched by every *HeldError: TryAcquire found the lock held.
	ErrHeld = errors.New("lock is held")

	// ErrReserved is matched by every *ReservedError: TryAcquire found the lock (a permit of a
	// semaphore) free, but owed to the waiters in its queue.
	ErrReserved = errors.New("lock is free but reserved for its queue")

	// ErrLost is matched by every *LostError: the grant no longer holds the lock.
	ErrLost = errors.New("grant lost")

	// ErrQueueFull is matched by Acquire's error when the lock's queue has no room for another
	// waiter.
	ErrQueueFull = lease.ErrQueueFull

	// ErrKeepAliveRunning is returned by Grant.KeepAlive while the grant's keep-alive runs.
	ErrKeepAliveRunning = errors.New("a keep-alive of this grant is running already")
)

// VersionError means the lock's Lease was written by a newer protocol version than this package
// speaks (docs/protocol.md, versions): every call fails with it, at once and without writing,
// rather than misread the Lease. Upgrade the client. It is lease.VersionError, the one type
// every reader of a Lease returns.
type VersionError = lease.VersionError

// HeldError means the lock cannot be taken because it is held: by another holder, every permit
// of a semaphore, or (a semaphore) by this identity already, which holds one permit at a time.
type HeldError struct {
	// Holder is a lock's holder, or this identity when it holds a permit of the semaphore
	// already; empty when Holders is set.
	Holder string
	// Holders are the holders of every permit of a semaphore.
	Holders []string
	// Token is Holder's token, or the last token the semaphore issued.
	Token token.Token
	// Permits is the lock's number of permits (spec.permits), zero if unknown.
	Permits int
}

func (e *HeldError) Error() string {
	if e.Holder != "" {
		return fmt.Sprintf("lock is held by %q with token %s", e.Holder, e.Token)
	}
	return fmt.Sprintf("all %d permits of the lock are held (by %s; last token %s)",
		e.Permits, strings.Join(quoteAll(e.Holders), ", "), e.Token)
}

// Is makes a *HeldError match ErrHeld.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// ReservedError means the lock (a permit of a semaphore) is free but not for a newcomer: it is
// kept for a queued pod the manager grants it to, or it goes to the waiters already queued.
// Acquire joins the queue and is served in turn.
type ReservedError struct {
	// Token is the lock's last token.
	Token token.Token
	// Pod: the lock is kept for a queued pod, which the manager grants it to.
	Pod bool
	// Permits is the lock's number of permits (spec.permits), zero if unknown.
	Permits int
}

func (e *ReservedError) Error() string {
	if e.Pod {
		return fmt.Sprintf("lock is free but kept for a queued pod (token %s): the manager grants it", e.Token)
	}
	return fmt.Sprintf("lock is free but waiters are queued (token %s): it goes to the head of the queue; join the queue",
		e.Token)
}

// Is makes a *ReservedError match ErrReserved.
func (e *ReservedError) Is(target error) bool { return target == ErrReserved }

// LostError means a grant no longer holds the lock: its Lease has another holder or token, or
// the grant could not be renewed within its lease duration (Err).
type LostError struct {
	Holder    string      // the grant's holder identity
	Token     token.Token // the grant's token
	NowHolder string      // the lock's holder now, empty if free or a semaphore
	NowToken  token.Token // the lock's last token now
	// Revoked: the manager revoked the grant because it was not renewed in time.
	Revoked bool
	// Semaphore: the grant was a permit of a semaphore, whose NowToken is the last token issued
	// on any permit.
	Semaphore bool
	// Err, if set, is the renewal error that kept failing for a whole lease duration: the grant is
	// presumed lost, since the manager will have revoked it by then.
	Err error
}

func (e *LostError) Error() string {
	why := "released"
	switch {
	case e.Err != nil:
		return fmt.Sprintf("grant of %q with token %s presumed lost: could not renew within the lease duration: %v",
			e.Holder, e.Token, e.Err)
	case e.Revoked:
		why = "revoked by the manager because it expired"
	case e.Semaphore:
		why = fmt.Sprintf("the permit was released or revoked (the semaphore's last token is %s)", e.NowToken)
	case e.NowToken != e.Token:
		why = fmt.Sprintf("superseded by token %s", e.NowToken)
	}
	return fmt.Sprintf("grant of %q with token %s was lost: %s", e.Holder, e.Token, why)
}

// Is makes a *LostError match ErrLost.
func (e *LostError) Is(target error) bool { return target == ErrLost }

// Unwrap returns the renewal error of a grant presumed lost, or nil.
func (e *LostError) Unwrap() error { return e.Err }

// fromLease turns the refusals of pkg/lease's transitions into this package's errors; other
// errors pass through.
func fromLease(err error) error {
	if h, ok := errors.AsType[*lease.HeldError](err); ok {
		if h.Holder == "" && len(h.Holders) == 0 {
			return &ReservedError{Token: h.Token, Pod: h.Reserved != 0, Permits: h.Limit}
		}
		return &HeldError{Holder: h.Holder, Holders: h.Holders, Token: h.Token, Permits: h.Limit}
	}
	if l, ok := errors.AsType[*lease.LostError](err); ok {
		return &LostError{Holder: l.Holder, Token: l.Token, NowHolder: l.NowHolder, NowToken: l.NowToken,
			Revoked: l.Revoked, Semaphore: l.Semaphore}
	}
	return err
}

// notFree reports whether err says the lock cannot be taken now: held, or reserved for its queue.
func notFree(err error) bool { return errors.Is(err, ErrHeld) || errors.Is(err, ErrReserved) }

func quoteAll(ss []string) []string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return q
}
