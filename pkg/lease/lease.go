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

// Package lease is fencedlock's protocol, written once: the state a lock's Lease and queue Lease
// carry, and every transition on them, as pure functions of what was read and the time now. The
// Go client (pkg/lock), kubectl fencedlock and the manager are drivers: they read, decide with a
// function of this package, and write once, with compare-and-swap (an update conditioned on the
// resourceVersion the decision was computed from), so two writers can never both succeed from the
// same state. No function here calls the API server; one that needs a fact it was not given (the
// queue, for a release of a lock with waiters) asks for it with an error (ErrQueueNeeded).
// docs/protocol.md is the normative text of the same rules, and the conformance fixtures and the
// model check (this package's tests) run these functions.
//
// The fencing token of a grant is the resourceVersion the granting update was conditioned on. It
// is written in that same update as annotation fencedlock.io/token, so a holder never exists
// without its token, and it is strictly greater than every earlier token of the lock: each grant
// is conditioned on a resourceVersion produced after the previous grant's write, and etcd
// revisions only grow (see docs/design.md for the argument and the one way to break it).
package lease

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/token"
)

// State is what a Lease says about its lock.
type State struct {
	// Holder is the current holder's identity; empty when the lock is free.
	Holder string
	// Token is the lock's current token: the holder's, or the last grant's when free. Zero until
	// the controller has initialized the Lease.
	Token token.Token
	// RevokedToken is the token of the last grant the controller revoked, zero if none.
	RevokedToken token.Token
	// AcquireTime and RenewTime are the holder's own claims, informational only: expiry is judged
	// by observation on one clock, never by comparing these with another machine's clock.
	AcquireTime *metav1.MicroTime
	RenewTime   *metav1.MicroTime
	// Transitions counts grants since the Lease was created.
	Transitions int32
	// Duration is the lease duration holders must renew within.
	Duration time.Duration
	// Served is the queue ticket of the last grant made from the lock's queue: waiters at or
	// below it were served or skipped.
	Served Ticket
	// ForgedTicket is a fencedlock.io/ticket at or above the Lease's own resourceVersion, which no
	// handover writes (see forgedTicket); Served is then zero: the queue is read as if nobody had
	// been served, until the manager repairs the ticket (Settle).
	ForgedTicket Ticket
	// Reserved is, on a free lock, the ticket of the queued pod it is kept for; zero if none.
	Reserved Ticket
	// Waiting says waiters may be queued (WaitingAnnotation): a release must read the queue, and
	// the free lock goes to the queue's head only.
	Waiting bool
	// Limit is how many holders the lock admits at once: 1 for a lock, spec.permits for a
	// semaphore (PermitsAnnotation).
	Limit int
	// Semaphore says the Lease carries its holders as permit annotations (permits.go); Holder,
	// AcquireTime and RenewTime are then empty, and Token is the last token issued on any permit.
	Semaphore bool
	// Permits are the grants held now, in permit-number order: a lock's holder is permit 1.
	Permits []Permit
}

// Held reports whether someone holds the lock (a permit of it).
func (s State) Held() bool { return len(s.held()) > 0 }

// Initialized reports whether the Lease carries a token, i.e. the controller has stamped it.
func (s State) Initialized() bool { return !s.Token.IsZero() }

// Read parses the lock state a Lease carries.
func Read(l *coordinationv1.Lease) (State, error) {
	if _, err := CheckProtocol(l); err != nil {
		return State{}, err
	}
	s := State{
		AcquireTime: l.Spec.AcquireTime,
		RenewTime:   l.Spec.RenewTime,
	}
	if l.Spec.HolderIdentity != nil {
		s.Holder = *l.Spec.HolderIdentity
	}
	if l.Spec.LeaseTransitions != nil {
		s.Transitions = *l.Spec.LeaseTransitions
	}
	if l.Spec.LeaseDurationSeconds != nil {
		s.Duration = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	var err error
	if v, ok := l.Annotations[locksv1alpha1.TokenAnnotation]; ok {
		if s.Token, err = token.Parse(v); err != nil {
			return s, fmt.Errorf("lease %s/%s: annotation %s: %w", l.Namespace, l.Name, locksv1alpha1.TokenAnnotation, err)
		}
	}
	if v, ok := l.Annotations[locksv1alpha1.RevokedTokenAnnotation]; ok {
		if s.RevokedToken, err = token.Parse(v); err != nil {
			return s, fmt.Errorf("lease %s/%s: annotation %s: %w",
				l.Namespace, l.Name, locksv1alpha1.RevokedTokenAnnotation, err)
		}
	}
	if s.Served, err = parseTicket(l, locksv1alpha1.TicketAnnotation); err != nil {
		return s, err
	}
	// A reservation that is not a ticket (an older policy let any value in) keeps the lock for
	// nobody: read as none, and dropped by the next write that serves the queue (serve).
	s.Reserved, _ = parseTicket(l, locksv1alpha1.ReservedAnnotation)
	s.Waiting = l.Annotations[locksv1alpha1.WaitingAnnotation] == "true"
	if _, ok := l.Annotations[locksv1alpha1.PermitsAnnotation]; ok { // a semaphore (permits.go)
		s.Holder, s.AcquireTime, s.RenewTime = "", nil, nil
	}
	if err := readPermits(l, &s); err != nil {
		return s, err
	}
	if forgedTicket(l, s.Served) {
		s.ForgedTicket, s.Served = s.Served, 0
	}
	return s, nil
}

// forgedTicket reports whether served, the ticket Lease l carries, is one no handover wrote. A
// handover writes the head's ticket, the resourceVersion of a join it read, so below the
// resourceVersion of the handover itself, and every later write of l only raises l's
// resourceVersion: a ticket at or above it was chosen by its writer, which the lease-protocol
// policy cannot see (it knows no resourceVersion but the one a write is conditioned on).
// Believed, it would count every later waiter as served. A Lease without a resourceVersion (one
// built in memory) is judged by nobody here.
//
// It is a variable only so that the model check can put the protocol without it back
// (TestModelFindsForgedTicket, which swaps it while no other test runs); nothing else assigns it.
var forgedTicket = func(l *coordinationv1.Lease, served Ticket) bool {
	rv, err := ParseTicket(l.ResourceVersion)
	return err == nil && served != 0 && served >= rv
}

// ErrNotInitialized means the Lease has no token yet: the controller has not stamped it.
var ErrNotInitialized = errors.New("lease not initialized by the fencedlock controller yet")

// HeldError means the lock cannot be taken now: someone holds it (every permit of a semaphore is
// held), or it has room but it is owed to the queue (kept for a queued pod, or waiters are
// queued). Join the queue and wait.
type HeldError struct {
	// Holder and Token are the holder of a lock (a semaphore: the caller's own permit, when it
	// holds one already); Holders the holders of a semaphore's Limit permits.
	Holder  string
	Token   token.Token
	Holders []string
	Limit   int
	// Reserved is the ticket of the pod a free lock is kept for (Holder is then empty).
	Reserved Ticket
	// Waiting: the free lock is owed to the waiters already queued (Holder is then empty).
	Waiting bool
	// Own: Holder is the caller, which holds a permit already (one identity holds at most one).
	Own bool
}

func (e *HeldError) Error() string {
	switch {
	case e.Own:
		return fmt.Sprintf("%q already holds a permit of the lock (token %s): one identity holds at most one; "+
			"wait until it is released or revoked", e.Holder, e.Token)
	case e.Holder != "":
		return fmt.Sprintf("lock is held by %q with token %s", e.Holder, e.Token)
	case len(e.Holders) > 0 && len(e.Holders) >= e.Limit:
		return fmt.Sprintf("all %d permits of the lock are held (by %s; last token %s)",
			e.Limit, strings.Join(quoteAll(e.Holders), ", "), e.Token)
	case e.Reserved != 0:
		return fmt.Sprintf("lock is free but kept for the queued pod with ticket %s (token %s): the manager grants it",
			e.Reserved, e.Token)
	}
	return fmt.Sprintf("lock is free but waiters are queued (token %s): it goes to the head of the queue; join the queue",
		e.Token)
}

func quoteAll(ss []string) []string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return q
}

// LostError means the caller's grant no longer exists: the Lease has another holder or token.
type LostError struct {
	Holder    string      // the caller
	Token     token.Token // the caller's token
	NowHolder string      // the Lease's holder now, empty if free
	NowToken  token.Token // the Lease's token now
	Revoked   bool        // the controller revoked the caller's grant because it expired
	// Semaphore: the grant was a permit of a semaphore, whose NowToken is the last token issued on
	// any permit (and NowHolder empty).
	Semaphore bool
}

func (e *LostError) Error() string {
	why := "released"
	switch {
	case e.Revoked:
		why = "revoked by the controller because it expired"
	case e.Semaphore:
		why = fmt.Sprintf("the permit was released or revoked (the semaphore's last token is %s)", e.NowToken)
	case e.NowToken != e.Token:
		why = fmt.Sprintf("superseded by token %s", e.NowToken)
	}
	return fmt.Sprintf("grant of %q with token %s was lost: %s", e.Holder, e.Token, why)
}

// IsHeld reports whether err says the lock is held by someone else.
func IsHeld(err error) bool { var h *HeldError; return errors.As(err, &h) }

// IsLost reports whether err says the caller's grant is gone.
func IsLost(err error) bool { var l *LostError; return errors.As(err, &l) }

func setAnnotation(l *coordinationv1.Lease, k, v string) {
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[k] = v
}

// ResetManagedFields is the managedFields value that tells the API server to drop an object's
// managed fields (one empty entry; an empty list would be omitted on the wire). A Lease without
// managed fields stays without them: the API server tracks fields on an update only if the object
// already has some, or on server-side apply. The tracking costs a Lease write about a sixth of its
// time (the field manager compares the whole object, annotations included), and fencedlock needs
// none of it: the Lease names its holder and token, Events carry the grants, and the audit log
// says who wrote. So every fencedlock Lease write resets them; the first write after the manager
// creates a Lease removes those the create recorded.
func ResetManagedFields() []metav1.ManagedFieldsEntry { return []metav1.ManagedFieldsEntry{{}} }

// Writer writes a Lease with its resourceVersion as a precondition and returns what was stored.
type Writer interface {
	Update(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error)
}

// CAS applies mutate to a copy of cur and writes the copy conditioned on cur's resourceVersion.
// It fails with a Conflict error (apierrors.IsConflict) if the Lease changed since cur was read,
// and without writing if mutate fails. cur is never modified.
//
// Every write also resets the Lease's managed fields (see ResetManagedFields).
func CAS(ctx context.Context, w Writer, cur *coordinationv1.Lease,
	mutate func(*coordinationv1.Lease) error) (*coordinationv1.Lease, error) {
	if cur.ResourceVersion == "" {
		return nil, errors.New("lease CAS needs a resourceVersion to condition on")
	}
	next := cur.DeepCopy()
	if err := mutate(next); err != nil {
		return nil, err
	}
	next.ManagedFields = ResetManagedFields()
	out, err := w.Update(ctx, next)
	if err != nil {
		if apierrors.IsConflict(err) {
			return nil, err // callers test IsConflict; keep the API error unwrapped
		}
		return nil, fmt.Errorf("updating lease %s/%s: %w", cur.Namespace, cur.Name, err)
	}
	return out, nil
}
