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
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
)

// A waiter Lease is one waiting identity of a lock (docs/protocol.md, the queue format):
// its waiter is the only one that writes it, besides the manager, so joins do not conflict with
// each other. Its ticket is the resourceVersion of its join (the write that created it or last
// changed locksv1alpha1.JoinAnnotation): etcd's revisions order the joins of every waiter of a
// lock as they were committed. Every write after the join carries that ticket in
// locksv1alpha1.TicketAnnotation, since each write changes the resourceVersion (Stamp).

// WaiterTicket returns the ticket of waiter Lease l: its TicketAnnotation, or, when it carries
// none (its last write was its join), its resourceVersion.
func WaiterTicket(l *coordinationv1.Lease) (Ticket, error) {
	t, err := ParseTicket(stampOf(l))
	if err != nil {
		return 0, fmt.Errorf("waiter lease %s/%s: %w", l.Namespace, l.Name, err)
	}
	return t, nil
}

// stampOf is the ticket waiter Lease l stands for, as stored: its TicketAnnotation, or its
// resourceVersion when its last write was its join.
func stampOf(l *coordinationv1.Lease) string {
	if v, ok := l.Annotations[locksv1alpha1.TicketAnnotation]; ok {
		return v
	}
	return l.ResourceVersion
}

// Stamp applies the ticket rule to next, a write of waiter Lease old: a join (a write that
// changes JoinAnnotation) carries no ticket, since its own resourceVersion will be it; any other
// write carries old's ticket.
func Stamp(old, next *coordinationv1.Lease) {
	if old.Annotations[locksv1alpha1.JoinAnnotation] != next.Annotations[locksv1alpha1.JoinAnnotation] {
		delete(next.Annotations, locksv1alpha1.TicketAnnotation)
		return
	}
	setAnnotation(next, locksv1alpha1.TicketAnnotation, stampOf(old))
}

// JoinWaiter makes next, a write of identity's waiter Lease old (nil: a create), the identity's
// join: it sets the holder, moves JoinAnnotation on, and sets acquireTime and renewTime to now.
func JoinWaiter(old, next *coordinationv1.Lease, identity string, now time.Time) {
	n := 0
	if old != nil {
		n, _ = strconv.Atoi(old.Annotations[locksv1alpha1.JoinAnnotation])
	}
	next.Spec.HolderIdentity = &identity
	t := metav1.NewMicroTime(now)
	next.Spec.AcquireTime, next.Spec.RenewTime = &t, &t // acquireTime: when it joined (Waiter.Since)
	setAnnotation(next, locksv1alpha1.JoinAnnotation, strconv.Itoa(n+1))
	if old != nil {
		Stamp(old, next)
	}
}

// ErrNotQueued is returned by BeatWaiter and LeaveWaiter when the waiter Lease no longer shows
// the identity waiting with its ticket: the manager judged it dead, it queued again elsewhere, or
// the Lease is gone. Its waiter is not queued: it joins again (or, leaving, has nothing to do).
var ErrNotQueued = errors.New("the waiter Lease does not show this waiter with this ticket: join the queue again")

// Waits reports whether waiter Lease w (nil: none) shows identity waiting with ticket t.
func Waits(w *coordinationv1.Lease, identity string, t Ticket) bool {
	if w == nil || w.Spec.HolderIdentity == nil || *w.Spec.HolderIdentity != identity {
		return false
	}
	got, err := WaiterTicket(w)
	return err == nil && got == t
}

// BeatWaiter makes next, a write of waiter Lease old, the beat of identity waiting with ticket t:
// a new renewTime, the ticket carried. ErrNotQueued when old does not show it waiting.
func BeatWaiter(old, next *coordinationv1.Lease, identity string, t Ticket, now time.Time) error {
	if !Waits(old, identity, t) {
		return ErrNotQueued
	}
	rt := metav1.NewMicroTime(now)
	next.Spec.RenewTime = &rt
	Stamp(old, next)
	return nil
}

// LeaveWaiter makes next, a write of waiter Lease old, identity's leaving the queue it waits in
// with ticket t: no holder, the ticket carried. ErrNotQueued when old does not show it waiting.
func LeaveWaiter(old, next *coordinationv1.Lease, identity string, t Ticket) error {
	if !Waits(old, identity, t) {
		return ErrNotQueued
	}
	next.Spec.HolderIdentity = nil
	Stamp(old, next)
	return nil
}

// IsWaiterLease reports whether l is labelled as a waiter Lease: managed by fencedlock, role
// waiter. Only such a Lease is judged by the waiter Lease policy (config/policy/waiter_lease.yaml),
// which keeps its ticket and its name's lock; any other Lease, whatever it says, is nobody's
// place in a queue: every reader ignores it (a Lease without the managed-by label carries any
// ticket its writer likes).
func IsWaiterLease(l *coordinationv1.Lease) bool {
	return l.Labels[locksv1alpha1.ManagedByLabel] == locksv1alpha1.ManagedByValue &&
		l.Labels[locksv1alpha1.RoleLabel] == locksv1alpha1.RoleWaiter
}

// CheckWaiterLease returns an error unless l, read at the name of a waiter Lease of the lock
// whose uid is lockUID, is labelled as one (IsWaiterLease, of that lock). A Lease someone else
// made at that name without the labels is judged by no policy and read by nobody as a waiter:
// joining on it would wait for ever. Only deleting it helps, and a waiter's principal may not
// delete Leases, so the join fails and says so.
func CheckWaiterLease(l *coordinationv1.Lease, lockUID types.UID) error {
	if IsWaiterLease(l) && l.Labels[locksv1alpha1.LockUIDLabel] == string(lockUID) {
		return nil
	}
	return fmt.Errorf("lease %s/%s, this identity's waiter Lease, is not labelled as one (%s=%s, %s=%s, %s=%s): it was "+
		"not made by a fencedlock client, and no reader of the queue would see this waiter in it; delete it "+
		"(kubectl delete lease -n %s %s) and acquire again (see docs/protocol.md, the queue format)",
		l.Namespace, l.Name, locksv1alpha1.ManagedByLabel, locksv1alpha1.ManagedByValue,
		locksv1alpha1.RoleLabel, locksv1alpha1.RoleWaiter, locksv1alpha1.LockUIDLabel, lockUID, l.Namespace, l.Name)
}

// Waiters returns the waiters of a lock's waiter Leases that still wait, in ticket order: those
// with a holder and a ticket above served. Leases not labelled as waiter Leases (IsWaiterLease)
// are ignored. A Lease whose ticket or holder does not follow the format is returned apart, with
// why, for the manager to report: no reader stops at it.
func Waiters(leases []coordinationv1.Lease, served Ticket) (waiting []Waiter, malformed []error) {
	for i := range leases {
		l := &leases[i]
		if !IsWaiterLease(l) {
			continue // no policy judged it: not a place in the queue
		}
		h := l.Spec.HolderIdentity
		if h == nil || *h == "" {
			continue // left, or dropped by the manager
		}
		t, err := WaiterTicket(l)
		switch {
		case err != nil:
			malformed = append(malformed, err)
			continue
		case len(*h) > MaxHolderLen:
			malformed = append(malformed, fmt.Errorf("waiter lease %s/%s: holder is %d bytes long, at most %d are allowed",
				l.Namespace, l.Name, len(*h), MaxHolderLen))
			continue
		case (Waiter{Holder: *h}).IsPod():
			// Pods are queued by the manager, on the queue Lease; no pod stands behind this one.
			malformed = append(malformed, fmt.Errorf(
				"waiter lease %s/%s: holder %q is a pod's identity (%s…): pods are queued by the manager, on the queue Lease",
				l.Namespace, l.Name, *h, locksv1alpha1.PodHolderPrefix))
			continue
		case t <= served:
			continue // served or skipped
		}
		w := Waiter{Ticket: t, Holder: *h}
		if at := l.Spec.AcquireTime; at != nil {
			w.Since = metav1.NewTime(at.Time) // informational, on the waiter's clock
		}
		if rt := l.Spec.RenewTime; rt != nil {
			w.Beat = rt.UnixMicro() // a beat is a new renewTime: Judge sees it change
		}
		waiting = append(waiting, w)
	}
	slices.SortFunc(waiting, func(a, b Waiter) int { return cmp.Compare(a.Ticket, b.Ticket) })
	return waiting, malformed
}

// LockOf returns the FencedLock controller reference of lock Lease l, or nil if it has none (a
// Lease written by an older manager, or not a lock's Lease).
func LockOf(l *coordinationv1.Lease) *metav1.OwnerReference {
	if l == nil {
		return nil
	}
	ref := metav1.GetControllerOf(l)
	if ref == nil || ref.Kind != locksv1alpha1.Kind || ref.UID == "" {
		return nil
	}
	return ref
}

// NewWaiter returns the waiter Lease name of the lock ref names, as its waiter creates it: labelled
// for the manager's cache and the lock's label watch, and owned (not controlled) by the
// FencedLock, so that the garbage collector deletes it with the lock.
func NewWaiter(namespace, name string, ref *metav1.OwnerReference) *coordinationv1.Lease {
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name,
		Labels: map[string]string{locksv1alpha1.ManagedByLabel: locksv1alpha1.ManagedByValue,
			locksv1alpha1.LockUIDLabel: string(ref.UID), locksv1alpha1.RoleLabel: locksv1alpha1.RoleWaiter},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name, UID: ref.UID}},
		ManagedFields:   ResetManagedFields()}}
}

// ParseTicket parses a resourceVersion as the ticket it stands for.
func ParseTicket(rv string) (Ticket, error) {
	t, err := strconv.ParseUint(rv, 10, 64)
	if err != nil || t == 0 || Ticket(t) > MaxTicket {
		return 0, fmt.Errorf("%q is not a ticket (an integer from 1 to %d)", rv, MaxTicket)
	}
	return Ticket(t), nil
}
