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
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
)

// commit stands for the API server: it gives the write the next resourceVersion.
func commit(l *coordinationv1.Lease, rv *int) *coordinationv1.Lease {
	*rv++
	out := l.DeepCopy()
	out.ResourceVersion = itoa(*rv)
	return out
}

func itoa(n int) string { return Ticket(n).String() }

func TestWaiterTicketIsTheJoinsResourceVersionAcrossLaterWrites(t *testing.T) {
	rv := 100
	now := time.Date(2026, 12, 6, 13, 0, 0, 0, time.UTC)
	created := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "w"}}
	JoinWaiter(nil, created, "alice", now)
	l := commit(created, &rv) // the join: ticket 101
	for i := range 3 {        // beats
		next := l.DeepCopy()
		rt := metav1.NewMicroTime(now.Add(time.Duration(i+1) * time.Second))
		next.Spec.RenewTime = &rt
		Stamp(l, next)
		l = commit(next, &rv)
		if got, err := WaiterTicket(l); err != nil || got != 101 {
			t.Fatalf("after beat %d (resourceVersion %s): ticket %d, %v; want 101", i+1, l.ResourceVersion, got, err)
		}
	}
	next := l.DeepCopy()
	JoinWaiter(l, next, "alice", now.Add(time.Minute)) // joins again: its ticket is this write's
	l = commit(next, &rv)
	if got, _ := WaiterTicket(l); got != Ticket(rv) || l.Annotations[locksv1alpha1.TicketAnnotation] != "" {
		t.Fatalf("after a second join at resourceVersion %d: ticket %d, annotations %v", rv, got, l.Annotations)
	}
	next = l.DeepCopy()
	next.Annotations[locksv1alpha1.TicketAnnotation] = "7" // a writer that tries to jump the queue
	Stamp(l, next)
	if got, _ := WaiterTicket(commit(next, &rv)); got != Ticket(rv-1) {
		t.Fatalf("a write that sets its own ticket: stamped %d, want %d (its join's)", got, rv-1)
	}
}

func TestWaitersSkipsTheServedTheGoneAndTheMalformed(t *testing.T) {
	lease := func(name, holder, rv, ticket string) coordinationv1.Lease {
		l := coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv,
			Labels: map[string]string{locksv1alpha1.ManagedByLabel: locksv1alpha1.ManagedByValue,
				locksv1alpha1.RoleLabel: locksv1alpha1.RoleWaiter}}}
		if holder != "" {
			l.Spec.HolderIdentity = &holder
		}
		if ticket != "" {
			l.Annotations = map[string]string{locksv1alpha1.TicketAnnotation: ticket}
		}
		return l
	}
	unjudged := lease("unlabelled", "mallory", "80", "26") // no policy judged its ticket
	delete(unjudged.Labels, locksv1alpha1.ManagedByLabel)
	got, bad := Waiters([]coordinationv1.Lease{
		unjudged,
		lease("pod", "pod/p/uid", "30", ""), // pods queue on the queue Lease: malformed
		lease("late", "carol", "40", ""),    // joined last
		lease("served", "bob", "90", "20"),  // served: ticket 20 <= 25
		lease("left", "", "50", "30"),       // left: no holder
		lease("first", "alice", "95", "26"), // joined first, beat since
		lease("broken", "dave", "60", "x"),  // malformed ticket
		lease("zero", "erin", "70", "0"),    // malformed ticket
	}, 25)
	if len(got) != 2 || got[0].Holder != "alice" || got[0].Ticket != 26 || got[1].Holder != "carol" || got[1].Ticket != 40 {
		t.Fatalf("waiting: %+v; want alice (26), then carol (40)", got)
	}
	if len(bad) != 3 {
		t.Fatalf("malformed: %v; want the two with tickets x and 0, and the pod", bad)
	}
}

func TestCheckWaiterLeaseRefusesALeaseNotLabelledAsThisLocksWaiter(t *testing.T) {
	ref := &metav1.OwnerReference{Kind: locksv1alpha1.Kind, Name: "ledger", UID: "uid-a"}
	w := NewWaiter("ns", locksv1alpha1.WaiterLeaseName(ref.UID, "alice"), ref)
	if err := CheckWaiterLease(w, ref.UID); err != nil {
		t.Fatalf("a waiter Lease as NewWaiter makes it: %v", err)
	}
	if err := CheckWaiterLease(w, "uid-b"); err == nil {
		t.Fatal("another lock's waiter Lease is accepted")
	}
	squat := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: w.Name}}
	err := CheckWaiterLease(squat, ref.UID)
	if err == nil || !strings.Contains(err.Error(), "delete it") || !strings.Contains(err.Error(), w.Name) {
		t.Fatalf("an unlabelled Lease at the waiter Lease's name: %v; want a refusal naming it and what to do", err)
	}
}

func TestWaiterLeaseNameIsAValidNameForAnyIdentity(t *testing.T) {
	a := locksv1alpha1.WaiterLeaseName("0b5d2a47-1f0e-4c3a-9a56-2f1e8c7d9b10", "alice@build-7")
	b := locksv1alpha1.WaiterLeaseName("0b5d2a47-1f0e-4c3a-9a56-2f1e8c7d9b10", string(make([]byte, 1024)))
	if a == b || len(a) != len(b) {
		t.Fatalf("names %q and %q", a, b)
	}
	if errs := validation.IsDNS1123Subdomain(b); len(errs) > 0 {
		t.Fatalf("name %q: %v", b, errs)
	}
}
