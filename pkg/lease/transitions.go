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
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/token"
)

// The transitions of the lock's Lease. Each changes a copy of the Lease read at some
// resourceVersion; the caller writes it conditioned on that resourceVersion (CAS).
//
// Who may do what (docs/protocol.md, sections 2 and 3):
//   - anyone: Grant a free lock nobody waits for; Renew and Release its own grant; join, beat and
//     leave the queue (Queue, queue_lease.go) and mark the lock waited for (MarkWaiting, MarkLeft);
//   - the manager alone: Initialize, Revoke, Settle (serve the queue on a free lock, drop the
//     waiting mark of an empty queue), grant pods, and judge who is alive (Judge).
//
// A grant from the queue is always made by someone else than the waiter: the releasing holder in
// its release (a handover), or the manager. A queued waiter never takes the lock itself; it is
// served when the Lease shows it as holder with its ticket (Served).

// Actor is who makes a transition.
type Actor int

const (
	// Client is a holder or waiter: pkg/lock, kubectl fencedlock, any third party.
	Client Actor = iota
	// Manager is the fencedlock manager: it alone grants pods and revokes.
	Manager
)

// ErrQueueNeeded is returned by Release, Revoke and Settle when the Lease says waiters may be
// queued and no queue was given: read the queue Lease (after the lock's Lease, so that the
// write's compare-and-swap covers the read) and decide again with it.
var ErrQueueNeeded = errors.New("the lock's Lease says waiters may be queued: read its queue and decide again")

// Handover says what a write that ended a grant, or settled a free lock, did for the queue.
type Handover struct {
	// To is the waiter granted the lock in the same write, nil if none; Token is its token.
	To    *Waiter
	Token token.Token
	// Permit is the number of the permit granted to To (1 for a lock).
	Permit int
	// Reserved is the ticket of the pod the free lock is now kept for (a client's release cannot
	// grant a pod), zero if none.
	Reserved Ticket
}

// Initialize stamps an unstamped Lease with token = its own resourceVersion and no holder. Every
// token issued on an earlier incarnation of the Lease is lower than this one (etcd revisions are
// global), so a recreated Lease supersedes all earlier grants. It is a no-op on a stamped Lease.
func Initialize(l *coordinationv1.Lease) (changed bool, err error) {
	s, err := Read(l)
	if err != nil {
		return false, err
	}
	if s.Initialized() {
		return false, nil
	}
	tok, err := token.FromResourceVersion(l.ResourceVersion)
	if err != nil {
		return false, err
	}
	setAnnotation(l, locksv1alpha1.TokenAnnotation, tok.String())
	stampProtocol(l)
	l.Spec.HolderIdentity = nil
	return true, nil
}

// ServeIssued counts every ticket up to issued as served, on a Lease stamped afresh (Initialize)
// after it was deleted: it forgot which tickets were served, and the queue's entries are of
// waiters that may be long gone. Queued clients then see they were passed over and join again
// (Skipped), and the manager queues its pods again, instead of the queue serving stale entries.
func ServeIssued(l *coordinationv1.Lease, issued Ticket) {
	if issued != 0 {
		setAnnotation(l, locksv1alpha1.TicketAnnotation, issued.String())
	}
}

// Grant makes holder the holder of a free lock (a free permit of a semaphore) that nobody waits
// for, with the resourceVersion l was read at as its token. A lock that is held (a semaphore
// whose permits are all held, or one already held by holder), kept for a queued pod, or waited
// for is refused with a HeldError: the caller joins the queue instead. The permit granted is
// s.Permit(holder, token) of the Lease written.
func Grant(l *coordinationv1.Lease, holder string, now time.Time) (token.Token, error) {
	if holder == "" {
		return 0, errors.New("holder identity must not be empty")
	}
	s, err := Read(l)
	if err != nil {
		return 0, err
	}
	if !s.Initialized() {
		return 0, ErrNotInitialized
	}
	if mine, ok := s.HolderOf(holder); ok {
		return 0, &HeldError{Holder: holder, Token: mine.Token, Own: true}
	}
	if s.Full() || s.Reserved != 0 || s.Waiting {
		e := &HeldError{Token: s.Token, Reserved: s.Reserved, Waiting: !s.Full() && s.Waiting, Limit: s.Limit}
		if s.Full() && !s.Semaphore {
			e.Holder = s.Holder
		} else if s.Full() {
			e.Holders = s.Holders()
		}
		return 0, e
	}
	p, err := grant(l, s, holder, 0, now) // not from the queue: a lock's served ticket stays as it is
	return p.Token, err
}

// grant gives the lowest free permit to holder with a new token and the grant's times, served
// from the queue's ticket (zero for a direct grant; a lock records it as fencedlock.io/ticket,
// written by serve); the checks are the caller's.
func grant(l *coordinationv1.Lease, s State, holder string, ticket Ticket, now time.Time) (Permit, error) {
	tok, err := token.FromResourceVersion(l.ResourceVersion)
	if err != nil {
		return Permit{}, err
	}
	if tok <= s.Token {
		// Only possible if etcd's revision went backwards, e.g. a snapshot restored without
		// `etcdutl snapshot restore --bump-revision`: issuing this token would break fencing.
		return Permit{}, fmt.Errorf("refusing to grant token %s: not above the lock's current token %s "+
			"(etcd revision went backwards; was etcd restored without --bump-revision?)", tok, s.Token)
	}
	t := metav1.NewMicroTime(now.Truncate(time.Microsecond))
	p := Permit{Number: freeNumber(s), Holder: holder, Token: tok, Ticket: ticket, AcquireTime: &t, RenewTime: &t}
	setAnnotation(l, locksv1alpha1.TokenAnnotation, tok.String())
	stampProtocol(l)
	writePermit(l, s, p)
	transitions := s.Transitions + 1
	l.Spec.LeaseTransitions = &transitions
	return p, nil
}

// CheckHolder returns a LostError unless holder holds the lock (a permit of it) with tok.
func CheckHolder(l *coordinationv1.Lease, holder string, tok token.Token) error {
	s, err := Read(l)
	if err != nil {
		return err
	}
	_, err = checkHolder(s, holder, tok)
	return err
}

func checkHolder(s State, holder string, tok token.Token) (Permit, error) {
	if p, ok := s.Permit(holder, tok); ok {
		return p, nil
	}
	return Permit{}, &LostError{Holder: holder, Token: tok, NowHolder: s.Holder, NowToken: s.Token,
		Revoked: s.RevokedToken == tok, Semaphore: s.Semaphore}
}

// Renew records a renewal by holder; the token never changes. A renewal is a change of the
// permit's renewTime (spec.renewTime for a lock): the manager times expiry from when it observes
// that value change, so when now would store the value already there (a frozen or coarse clock,
// or the same microsecond), the stored value is moved on by a microsecond.
func Renew(l *coordinationv1.Lease, holder string, tok token.Token, now time.Time) error {
	s, err := Read(l)
	if err != nil {
		return err
	}
	p, err := checkHolder(s, holder, tok)
	if err != nil {
		return err
	}
	t := metav1.NewMicroTime(now.Truncate(time.Microsecond))
	if prev := p.RenewTime; prev != nil && prev.Truncate(time.Microsecond).Equal(t.Time) {
		t = metav1.NewMicroTime(t.Add(time.Microsecond))
	}
	p.RenewTime = &t
	writePermit(l, s, p)
	stampProtocol(l)
	return nil
}

// OnlyRenewed reports whether cur, a later version of the Lease old, differs from it only by
// renewals (see Renew): every grant kept (holder, token, ticket, acquireTime), one renewTime or
// more moved on, and nothing else written. It returns cur's state. A manager can note such a
// write as the signs of life it is without judging the lock again: nothing it judges by changed.
func OnlyRenewed(old, cur *coordinationv1.Lease) (State, bool) {
	if old == nil || cur == nil || old.UID != cur.UID {
		return State{}, false
	}
	was, err := Read(old)
	if err != nil {
		return State{}, false
	}
	st, err := Read(cur)
	if err != nil || len(st.Permits) != len(was.Permits) {
		return st, false
	}
	// Replay the renewals on old: with them, it must be cur.
	replay, renewed := old.DeepCopy(), false
	for i, p := range st.Permits {
		q := was.Permits[i]
		if p.Number != q.Number || p.Holder != q.Holder || p.Token != q.Token || p.Ticket != q.Ticket ||
			!SameTime(p.AcquireTime, q.AcquireTime) {
			return st, false
		}
		if !SameTime(p.RenewTime, q.RenewTime) {
			writePermit(replay, was, p)
			renewed = true
		}
	}
	replay.ResourceVersion, replay.ManagedFields = cur.ResourceVersion, cur.ManagedFields
	return st, renewed && equality.Semantic.DeepEqual(replay, cur)
}

// SameTime reports whether two optional times are the same instant (both unset counts as same).
func SameTime(a, b *metav1.MicroTime) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(b)
}

// Release ends holder's grant and serves the queue in the same write (see serve). q is the
// lock's queue, read after l; it may be nil when the Lease does not say waiters may be queued,
// and Release returns ErrQueueNeeded when it does. The token stays on the Lease so the fence
// keeps refusing lower tokens.
func Release(l *coordinationv1.Lease, holder string, tok token.Token, q *Queue, now time.Time) (Handover, error) {
	return end(l, holder, tok, q, Client, now)
}

// Revoke ends holder's grant on behalf of the manager (it expired, or its pod ended), records
// the revoked token when revoked is set, so the holder and observers can tell why, and serves
// the queue in the same write. q is as for Release.
func Revoke(l *coordinationv1.Lease, holder string, tok token.Token, revoked bool, q *Queue,
	now time.Time) (Handover, error) {
	h, err := end(l, holder, tok, q, Manager, now)
	if err == nil && revoked {
		setAnnotation(l, locksv1alpha1.RevokedTokenAnnotation, tok.String())
	}
	return h, err
}

func end(l *coordinationv1.Lease, holder string, tok token.Token, q *Queue, by Actor, now time.Time) (Handover, error) {
	s, err := Read(l)
	if err != nil {
		return Handover{}, err
	}
	p, err := checkHolder(s, holder, tok)
	if err != nil {
		return Handover{}, err
	}
	if s.Waiting && q == nil {
		return Handover{}, ErrQueueNeeded
	}
	clearPermit(l, s, p)
	stampProtocol(l)
	return serve(l, without(s, p), q, by, p.Holder, now)
}

// Settle is the manager's write on a lock nobody else will serve: on a lock with room (a free
// lock; a semaphore with a permit free, after a release or spec.permits raised), grant the
// queue's live head (or keep serving the pod it is kept for) and drop a reservation whose pod
// is no longer queued, or drop the waiting mark when the queue is empty; on a full lock, set the
// mark when a waiter is queued and the Lease does not say so. A full lock's mark over an empty
// queue stays: the release that reads the queue empty drops it in its own write, where the
// manager's write would cost one more and could collide with that release. One write
// grants at most one permit, so every grant has its own token: the manager settles again after
// each write while there is room and a waiter. q is the queue as the manager judged it (Judge).
// It reports whether l changed.
func Settle(l *coordinationv1.Lease, q Queue, now time.Time) (Handover, bool, error) {
	s, err := Read(l)
	if err != nil {
		return Handover{}, false, err
	}
	before := l.DeepCopy()
	var h Handover
	switch {
	case !s.Initialized():
		return Handover{}, false, ErrNotInitialized
	case s.Full():
		if _, ok := q.Head(s.Served); ok && !s.Waiting {
			setAnnotation(l, locksv1alpha1.WaitingAnnotation, "true")
		}
		repairTicket(l, s, q)
	default:
		if h, err = serve(l, s, &q, Manager, "", now); err != nil {
			return Handover{}, false, err
		}
	}
	changed := !annotationsAndHolderEqual(before, l)
	if changed {
		stampProtocol(l)
	}
	return h, changed, nil
}

// serve is the end of every write that leaves room on the lock (a release, a revocation, a
// settlement): the free permit goes to the live head of q (Queue.Head) in the same write. A
// client cannot grant a pod, so a pod head is served by keeping the permit free for it
// (Reserved) until the manager grants it. The waiting mark is cleared when the queue read was
// empty and left set when a waiter was served, even the last: under contention the holder just
// served over usually queues again at once, and its mark write would collide with the release of
// the waiter it served (measured: 1.3 conflicts per grant at 4 clients, 0.5 with the mark kept).
// The next release reads the queue, and clears the mark if it is empty. A waiter that joined after
// q was read sets the mark again when it sees it cleared. A semaphore whose spec.permits was
// lowered below the permits still held has no room: nobody is served until enough are released.
// ended is the holder whose grant this write ends ("" for a settlement).
func serve(l *coordinationv1.Lease, s State, q *Queue, by Actor, ended string, now time.Time) (Handover, error) {
	delete(l.Annotations, locksv1alpha1.ReservedAnnotation)
	var waiting []Waiter
	if q != nil {
		waiting = q.Waiting(s.Served)
	}
	if by == Manager && q != nil {
		repairTicket(l, s, *q) // the head's ticket, if one is served below, replaces it
	}
	if len(waiting) == 0 {
		delete(l.Annotations, locksv1alpha1.WaitingAnnotation)
		return Handover{}, nil
	}
	setAnnotation(l, locksv1alpha1.WaitingAnnotation, "true")
	if s.Full() || (s.ForgedTicket != 0 && by != Manager) {
		// A client cannot lower a forged ticket to the head's (the policy lets a ticket only
		// rise): the free lock is left to the queue, whose head the manager serves.
		return Handover{}, nil
	}
	head := waiting[0]
	if _, holds := s.HolderOf(head.Holder); holds {
		// One identity holds at most one permit (Served could not tell two apart). A head that
		// holds one already was served from an earlier entry it never learned of (its join raced
		// the handover); it waits, as on a full lock, until that permit ends: the holder releases
		// it, or the manager revokes it when it is not renewed. (Found by the model check.)
		return Handover{}, nil
	}
	if head.Holder == ended && !s.Semaphore && by != Manager {
		// The head is the releasing holder itself, queued again: a second Acquire of its Locker, or
		// a waiter Lease naming it that someone else wrote. A lock's holder cannot be handed the
		// lock by its own release: the API server takes a write that keeps the holder for no grant,
		// and refuses its new token. The free lock is left to the queue, as for a pod: the
		// manager grants the head (Settle), with a token of its own.
		return Handover{}, nil
	}
	if head.IsPod() && by != Manager {
		setAnnotation(l, locksv1alpha1.ReservedAnnotation, head.Ticket.String())
		return Handover{Reserved: head.Ticket}, nil
	}
	p, err := grant(l, s, head.Holder, head.Ticket, now)
	if err != nil {
		return Handover{}, err
	}
	setAnnotation(l, locksv1alpha1.TicketAnnotation, head.Ticket.String())
	return Handover{To: &head, Token: p.Token, Permit: p.Number}, nil
}

// repairTicket replaces a forged ticket (State.ForgedTicket) of the Lease l the manager writes by
// one that skips no waiter of q still waiting: just below the lowest of their tickets, and never
// above the resourceVersion l was read at, so that it reads back below the Lease's own.
func repairTicket(l *coordinationv1.Lease, s State, q Queue) {
	if s.ForgedTicket == 0 {
		return
	}
	t, _ := ParseTicket(l.ResourceVersion)
	if head, ok := q.Head(0); ok && head.Ticket-1 < t {
		t = head.Ticket - 1
	}
	if t == 0 {
		delete(l.Annotations, locksv1alpha1.TicketAnnotation)
		return
	}
	setAnnotation(l, locksv1alpha1.TicketAnnotation, t.String())
}

// MarkWaiting sets the waiting mark on the lock's Lease l, the second step of joining the queue,
// and reports whether it changed. A queued waiter sets it again whenever it sees it cleared.
// A Lease of a newer protocol version (CheckProtocol) is not written: the waiter's next read of it
// reports the VersionError.
func MarkWaiting(l *coordinationv1.Lease) bool {
	if _, err := CheckProtocol(l); err != nil || l.Annotations[locksv1alpha1.WaitingAnnotation] == "true" {
		return false
	}
	setAnnotation(l, locksv1alpha1.WaitingAnnotation, "true")
	stampProtocol(l)
	return true
}

// Served reports whether the Lease state s shows the grant of holder's queue entry t.
func Served(s State, holder string, t Ticket) bool {
	if t == 0 {
		return false
	}
	p, ok := s.HolderOf(holder)
	return ok && p.Ticket == t
}

// Skipped reports whether the lock has served past ticket t without serving holder: the entry
// was dropped (judged dead or malformed) and the waiter must join again.
func Skipped(s State, holder string, t Ticket) bool { return s.Served >= t && !Served(s, holder, t) }

// MarkLeft is the second step of leaving the queue, after the entry with ticket t was removed:
// a write to the lock's Lease, so that a handover computed from a queue read before the entry went
// fails its compare-and-swap rather than grant a waiter that left. A Lease that shows holder
// served with t already is refused with ErrServedWhileLeaving: release that grant instead.
func MarkLeft(l *coordinationv1.Lease, holder string, t Ticket) error {
	s, err := Read(l)
	if err != nil {
		return err
	}
	if Served(s, holder, t) {
		return ErrServedWhileLeaving
	}
	setAnnotation(l, locksv1alpha1.LeftAnnotation, t.String())
	stampProtocol(l)
	return nil
}

// ErrServedWhileLeaving means a waiter that left the queue was granted the lock before its
// leaving reached the Lease: it holds the lock and must release it (which serves the next waiter).
var ErrServedWhileLeaving = errors.New("the lock was handed to this waiter before it left the queue: release it")

// annotationsAndHolderEqual reports whether a Settle changed nothing a reader decides on.
func annotationsAndHolderEqual(a, b *coordinationv1.Lease) bool {
	if len(a.Annotations) != len(b.Annotations) {
		return false
	}
	for k, v := range a.Annotations {
		if w, ok := b.Annotations[k]; !ok || w != v {
			return false
		}
	}
	ah, bh := a.Spec.HolderIdentity, b.Spec.HolderIdentity
	return (ah == nil) == (bh == nil) && (ah == nil || *ah == *bh)
}
