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
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
)

const trustUID = types.UID("0b5d2a47")

func TestCheckLockLease(t *testing.T) {
	owned := func(uid types.UID, labels map[string]string) error {
		l := mk("10", "intruder", "99999999999")
		l.Labels = labels
		l.OwnerReferences = []metav1.OwnerReference{{APIVersion: locksv1alpha1.GroupVersion.String(),
			Kind: locksv1alpha1.Kind, Name: "lock", UID: uid, Controller: new(true)}}
		return CheckLockLease(l, trustUID)
	}
	managed := map[string]string{locksv1alpha1.ManagedByLabel: locksv1alpha1.ManagedByValue}
	if err := owned(trustUID, managed); err != nil {
		t.Fatalf("the manager's Lease: %v", err)
	}
	for name, err := range map[string]error{
		// Row 1 of issue 42: anyone may create this one; the token on it was chosen by its writer.
		"unlabelled, controlled by the lock": owned(trustUID, nil),
		"labelled, another lock's":           owned("other", managed),
		"a waiter Lease's labels": owned(trustUID, map[string]string{locksv1alpha1.ManagedByLabel: locksv1alpha1.ManagedByValue,
			locksv1alpha1.RoleLabel: locksv1alpha1.RoleWaiter}),
	} {
		if _, ok := errors.AsType[*ForeignLeaseError](err); !ok {
			t.Errorf("%s: CheckLockLease = %v; want a ForeignLeaseError", name, err)
		}
	}
}

// A ticket at or above the Lease's resourceVersion was written by no handover (row 2 of issue 42):
// read as no ticket, served by no client's release, and replaced by the manager.
func TestForgedTicket(t *testing.T) {
	forged := func() *coordinationv1.Lease {
		l := mk("50", "a", "40")
		l.Annotations[locksv1alpha1.TicketAnnotation] = "999999999999999999"
		l.Annotations[locksv1alpha1.WaitingAnnotation] = "true"
		return l
	}
	st, err := Read(forged())
	if err != nil || st.Served != 0 || st.ForgedTicket != 999999999999999999 {
		t.Fatalf("Read = Served %d, ForgedTicket %d, %v; want 0 and the forged ticket", st.Served, st.ForgedTicket, err)
	}
	if Skipped(st, "b", 45) {
		t.Error("a waiter below a forged ticket reads as skipped")
	}
	honest := mk("50", "a", "40")
	honest.Annotations[locksv1alpha1.TicketAnnotation] = "49"
	if st, _ := Read(honest); st.ForgedTicket != 0 || st.Served != 49 {
		t.Errorf("an honest ticket below the resourceVersion: Served %d, ForgedTicket %d", st.Served, st.ForgedTicket)
	}

	q := &Queue{Waiters: []Waiter{{Ticket: 45, Holder: "b"}, {Ticket: 47, Holder: "c"}}}
	l := forged()
	h, err := Release(l, "a", 40, q, now)
	if err != nil || h.To != nil || l.Spec.HolderIdentity != nil || l.Annotations[locksv1alpha1.WaitingAnnotation] != "true" {
		t.Fatalf("a client's release on a forged ticket = %+v, %v, holder %v; want the lock free for the manager, waiting kept",
			h, err, l.Spec.HolderIdentity)
	}
	l.ResourceVersion = "51"
	h, changed, err := Settle(l, *q, now)
	if err != nil || !changed || h.To == nil || h.To.Holder != "b" || l.Annotations[locksv1alpha1.TicketAnnotation] != "45" {
		t.Fatalf("the manager's Settle = %+v, %v, %v, ticket %q; want b served and the ticket 45", h, changed, err,
			l.Annotations[locksv1alpha1.TicketAnnotation])
	}

	held := forged()
	if _, changed, err := Settle(held, *q, now); err != nil || !changed || held.Annotations[locksv1alpha1.TicketAnnotation] != "44" {
		t.Errorf("Settle of a held lock with a forged ticket: changed %v, %v, ticket %q; want 44, just below the head",
			changed, err, held.Annotations[locksv1alpha1.TicketAnnotation])
	}
	alone := forged()
	if _, _, err := Settle(alone, Queue{}, now); err != nil || alone.Annotations[locksv1alpha1.TicketAnnotation] != "50" {
		t.Errorf("Settle with nobody queued: %v, ticket %q; want the resourceVersion read, 50", err,
			alone.Annotations[locksv1alpha1.TicketAnnotation])
	}
}

// A reservation that is not a ticket (an older policy admitted any value) reads as none, and the
// manager's next write drops it: one write must not make the Lease unreadable to everyone.
func TestJunkReservation(t *testing.T) {
	l := mk("50", "", "40")
	l.Annotations[locksv1alpha1.ReservedAnnotation] = "x"
	st, err := Read(l)
	if err != nil || st.Reserved != 0 {
		t.Fatalf("Read = Reserved %d, %v; want none and no error", st.Reserved, err)
	}
	if _, changed, err := Settle(l, Queue{}, now); err != nil || !changed {
		t.Fatalf("Settle = %v, %v; want the reservation dropped", changed, err)
	}
	if _, ok := l.Annotations[locksv1alpha1.ReservedAnnotation]; ok {
		t.Error("the junk reservation is still there")
	}
}
