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

package lease

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/token"
)

// A semaphore is a lock with several permits, on the same single Lease, so that every rule of a
// lock holds for it unchanged: one compare-and-swap orders every grant, so each permit's token is
// the resourceVersion its grant was conditioned on and strictly above every token the lock issued
// before (annotation fencedlock.io/token is the last one issued, on any permit); one queue serves
// every permit in ticket order. A lock is a semaphore of one permit whose holder is the Lease's
// spec.holderIdentity, as Kubernetes tools expect; a Lease whose lock admits more (annotation
// fencedlock.io/permits, set by the manager from spec.permits) carries each held permit as an
// annotation fencedlock.io/permit-<n> instead, and no spec.holderIdentity. The pure functions
// work on State.Permits and write the format the Lease is in.

// MaxPermits is the most holders one lock admits at once (spec.permits).
const MaxPermits = 100

// Permit is one held permit.
type Permit struct {
	// Number is the permit's number, from 1; a lock's holder holds permit 1.
	Number int
	Holder string
	// Token is the fencing token of the permit's grant.
	Token token.Token
	// Ticket is the queue ticket the grant served, zero if it was taken directly. For a lock it is
	// the Lease's last served ticket (State.Served), as before semaphores.
	Ticket      Ticket
	AcquireTime *metav1.MicroTime
	RenewTime   *metav1.MicroTime
}

// held returns the permits held: s.Permits, or for a lock's State built by hand with a Holder
// only (not by Read), its holder as permit 1.
func (s State) held() []Permit {
	if len(s.Permits) == 0 && s.Holder != "" && !s.Semaphore {
		return []Permit{{Number: 1, Holder: s.Holder, Token: s.Token, Ticket: s.Served, AcquireTime: s.AcquireTime,
			RenewTime: s.RenewTime}}
	}
	return s.Permits
}

// Permit returns the permit holder holds with tok.
func (s State) Permit(holder string, tok token.Token) (Permit, bool) {
	for _, p := range s.held() {
		if p.Holder == holder && p.Token == tok {
			return p, true
		}
	}
	return Permit{}, false
}

// HolderOf returns the permit held by holder, if any: one identity holds at most one permit of a
// lock.
func (s State) HolderOf(holder string) (Permit, bool) {
	for _, p := range s.held() {
		if p.Holder == holder {
			return p, true
		}
	}
	return Permit{}, false
}

// Full reports whether the lock admits no further holder now: as many permits are held as it
// admits (or more, after spec.permits was lowered).
func (s State) Full() bool { return len(s.held()) >= max(s.Limit, 1) }

// Holders returns the holders' identities in permit order.
func (s State) Holders() []string {
	held := s.held()
	h := make([]string, len(held))
	for i, p := range held {
		h[i] = p.Holder
	}
	return h
}

// OfPermit returns s as seen by one permit's holder: the lock as if p were its only grant, so
// that what is judged per grant (expiry, the observation of renewals) is written once for locks
// and semaphores.
func (s State) OfPermit(p Permit) State {
	v := s
	v.Holder, v.Token, v.AcquireTime, v.RenewTime = p.Holder, p.Token, p.AcquireTime, p.RenewTime
	v.Served = p.Ticket
	v.Permits = []Permit{p}
	return v
}

// readPermits fills s.Limit, s.Semaphore and s.Permits from l.
func readPermits(l *coordinationv1.Lease, s *State) error {
	s.Limit = 1
	if v, ok := l.Annotations[locksv1alpha1.PermitsAnnotation]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxPermits {
			return fmt.Errorf("lease %s/%s: annotation %s: %q is not a number of permits from 1 to %d",
				l.Namespace, l.Name, locksv1alpha1.PermitsAnnotation, v, MaxPermits)
		}
		s.Limit, s.Semaphore = n, true
	}
	if !s.Semaphore {
		if s.Holder != "" {
			s.Permits = []Permit{{Number: 1, Holder: s.Holder, Token: s.Token, Ticket: s.Served,
				AcquireTime: s.AcquireTime, RenewTime: s.RenewTime}}
		}
		return nil
	}
	for k, v := range l.Annotations {
		ns, ok := strings.CutPrefix(k, locksv1alpha1.PermitAnnotationPrefix)
		if !ok {
			continue
		}
		p, err := ParsePermit(ns, v)
		if err != nil {
			return fmt.Errorf("lease %s/%s: annotation %s: %w", l.Namespace, l.Name, k, err)
		}
		s.Permits = append(s.Permits, p)
	}
	slices.SortFunc(s.Permits, func(a, b Permit) int { return a.Number - b.Number })
	return nil
}

// ParsePermit parses permit annotation fencedlock.io/permit-<number> with value v:
// "<token> <ticket> <acquireTime> <renewTime> <holder>", times in RFC 3339 with microseconds
// (the holder is the rest of the value and may contain spaces).
func ParsePermit(number, v string) (Permit, error) {
	n, err := strconv.Atoi(number)
	if err != nil || n < 1 || n > MaxPermits || strconv.Itoa(n) != number {
		return Permit{}, fmt.Errorf("permit number %q is not a number from 1 to %d", number, MaxPermits)
	}
	f := strings.SplitN(v, " ", 5)
	if len(f) != 5 || f[4] == "" {
		return Permit{}, fmt.Errorf("%q is not \"<token> <ticket> <acquireTime> <renewTime> <holder>\"", v)
	}
	p := Permit{Number: n, Holder: f[4]}
	if p.Token, err = token.Parse(f[0]); err != nil {
		return Permit{}, err
	}
	// Any decimal, as fencedlock.io/ticket: the lease-protocol policy admits a permit's ticket of
	// up to 16 digits in a client's grant, above MaxTicket too. A ticket no queue issued serves
	// nobody (Served compares it with a waiter's); refusing it would make the Lease unreadable to
	// every client, the manager and the fence, a lock wedged by one admitted write.
	t, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return Permit{}, fmt.Errorf("ticket %q is not a ticket", f[1])
	}
	p.Ticket = Ticket(t)
	for i, at := range []**metav1.MicroTime{&p.AcquireTime, &p.RenewTime} {
		tm, err := time.Parse(metav1.RFC3339Micro, f[2+i])
		if err != nil {
			return Permit{}, fmt.Errorf("%q is not a time in RFC 3339 with microseconds", f[2+i])
		}
		mt := metav1.NewMicroTime(tm)
		*at = &mt
	}
	return p, nil
}

// String returns the permit annotation's value.
func (p Permit) String() string {
	return fmt.Sprintf("%s %s %s %s %s", p.Token, p.Ticket, microString(p.AcquireTime), microString(p.RenewTime), p.Holder)
}

func microString(t *metav1.MicroTime) string {
	if t == nil {
		return time.Unix(0, 0).UTC().Format(metav1.RFC3339Micro)
	}
	return t.UTC().Format(metav1.RFC3339Micro)
}

// writePermit stores p on l in the format l is in: spec.holderIdentity and its times for a lock,
// annotation fencedlock.io/permit-<n> for a semaphore.
func writePermit(l *coordinationv1.Lease, s State, p Permit) {
	if !s.Semaphore {
		l.Spec.HolderIdentity = &p.Holder
		l.Spec.AcquireTime, l.Spec.RenewTime = p.AcquireTime, p.RenewTime
		return
	}
	setAnnotation(l, locksv1alpha1.PermitAnnotation(p.Number), p.String())
}

// clearPermit removes permit p from l; a lock's times stay as the last holder's.
func clearPermit(l *coordinationv1.Lease, s State, p Permit) {
	if !s.Semaphore {
		l.Spec.HolderIdentity = nil
		return
	}
	delete(l.Annotations, locksv1alpha1.PermitAnnotation(p.Number))
}

// freeNumber is the lowest permit number not held in s.
func freeNumber(s State) int {
	n := 1
	for _, p := range s.Permits { // in number order
		if p.Number != n {
			break
		}
		n++
	}
	return n
}

// without returns s with permit p removed.
func without(s State, p Permit) State {
	s.Permits = slices.DeleteFunc(slices.Clone(s.Permits), func(q Permit) bool { return q.Number == p.Number })
	if !s.Semaphore {
		s.Holder = ""
	}
	return s
}

// SetPermits is the manager's write of spec.permits onto the lock's Lease l, and reports whether
// it changed l. A lock that admits more than one holder carries its holders as permit
// annotations: going from 1 to more moves a holder from spec.holderIdentity to permit 1 with its
// token, times and ticket; going back to 1 returns to the lock format once at most one permit is
// held and its token is the lock's last (until then the Lease stays a semaphore of one permit).
func SetPermits(l *coordinationv1.Lease, n int) (bool, error) {
	if n < 1 || n > MaxPermits {
		return false, fmt.Errorf("permits %d is not from 1 to %d", n, MaxPermits)
	}
	s, err := Read(l)
	if err != nil {
		return false, err
	}
	changed := setPermits(l, s, n)
	if changed {
		stampProtocol(l)
	}
	return changed, nil
}

// setPermits is SetPermits on l read as s.
func setPermits(l *coordinationv1.Lease, s State, n int) bool {
	switch {
	case !s.Semaphore && n == 1:
		return false
	case !s.Semaphore:
		setAnnotation(l, locksv1alpha1.PermitsAnnotation, strconv.Itoa(n))
		if len(s.Permits) == 1 {
			l.Spec.HolderIdentity = nil
			s.Semaphore = true
			writePermit(l, s, s.Permits[0])
		}
		return true
	case n > 1 || len(s.Permits) > 1 || (len(s.Permits) == 1 && s.Permits[0].Token != s.Token):
		if s.Limit == n {
			return false
		}
		setAnnotation(l, locksv1alpha1.PermitsAnnotation, strconv.Itoa(n))
		return true
	}
	delete(l.Annotations, locksv1alpha1.PermitsAnnotation)
	if len(s.Permits) == 1 {
		p := s.Permits[0]
		delete(l.Annotations, locksv1alpha1.PermitAnnotation(p.Number))
		s.Semaphore = false
		p.Number = 1
		writePermit(l, s, p) // fencedlock.io/ticket stays: it is the lock's last served ticket
	}
	return true
}

// HoldersText says who holds the lock, for people (a pod's condition, kubectl fencedlock why): its
// holder and token, a semaphore's first three permits, or that it is free.
func (s State) HoldersText() string {
	held := s.held()
	if len(held) == 0 {
		return "the lock is free (granted from the queue next)"
	}
	if s.Limit <= 1 {
		return fmt.Sprintf("held by %s (token %s)", held[0].Holder, held[0].Token)
	}
	const shown = 3
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d permits held: ", len(held), s.Limit)
	for i, p := range held[:min(len(held), shown)] {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s (token %s)", p.Holder, p.Token)
	}
	if more := len(held) - shown; more > 0 {
		fmt.Fprintf(&b, " and %d more", more)
	}
	return b.String()
}
