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
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
)

func TestQueueJoinTrimHead(t *testing.T) {
	now := time.Unix(1000, 0)
	var q Queue
	a := q.Join("a", 0, now)
	b := q.Join("b", 0, now)
	if a != 1 || b != 2 {
		t.Fatalf("tickets %d, %d; want 1, 2", a, b)
	}
	if h, ok := q.Head(0); !ok || h.Holder != "a" {
		t.Fatalf("head %+v", h)
	}
	if h, ok := q.Head(a); !ok || h.Holder != "b" {
		t.Fatalf("after a was served the head is b; got %+v", h)
	}
	// A join after the lock served past the queue's counter (a recreated queue Lease) still gets
	// a ticket above the last served one.
	c := q.Join("c", 10, now)
	if c != 11 || len(q.Waiters) != 1 {
		t.Fatalf("ticket %d, waiters %+v; want 11 alone (a and b trimmed)", c, q.Waiters)
	}
	if !q.BeatFor(c) || q.Waiters[0].Beat != 1 || q.BeatFor(99) {
		t.Fatalf("beat: %+v", q.Waiters)
	}
	if !q.Leave(c) || q.Leave(c) || len(q.Waiting(0)) != 0 {
		t.Fatalf("leave: %+v", q.Waiters)
	}
}

func TestQueueRoundTripAndBound(t *testing.T) {
	l := &coordinationv1.Lease{}
	q := Queue{Next: 1}
	q.Join("pod/w-0/uid", 0, time.Unix(1000, 0))
	if err := WriteQueue(l, q); err != nil {
		t.Fatal(err)
	}
	got, err := ReadQueue(l)
	if err != nil || len(got.Waiters) != 1 || got.Waiters[0].Holder != "pod/w-0/uid" || !got.Waiters[0].IsPod() {
		t.Fatalf("read back %+v, %v", got, err)
	}
	l.Annotations[locksv1alpha1.QueueAnnotation] = "{not json"
	if _, err := ReadQueue(l); err == nil {
		t.Fatal("a malformed queue must be an error")
	}
	big := Queue{}
	for range 300 {
		big.Join(strings.Repeat("x", 1000), 0, time.Unix(1000, 0))
	}
	if err := WriteQueue(l, big); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("300 waiters of 1000 bytes: %v; want ErrQueueFull", err)
	}
}

func TestReleaseTo(t *testing.T) {
	now := time.Unix(2000, 0)
	held := func() *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{ResourceVersion: "20", Annotations: map[string]string{
				locksv1alpha1.TokenAnnotation: "10", locksv1alpha1.WaitingAnnotation: "true"}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: new("a")},
		}
	}
	// A client head is granted in the releasing write, with the write's token and its ticket.
	l := held()
	tok, err := ReleaseTo(l, "a", 10, &Waiter{Ticket: 5, Holder: "b"}, now)
	st, _ := Read(l)
	if err != nil || tok != 20 || st.Holder != "b" || st.Token != 20 || st.Ticket != 5 || !st.Waiting {
		t.Fatalf("handover to a client: tok %d err %v state %+v", tok, err, st)
	}
	// A pod head is kept for the controller: free, reserved, and refused to anyone else.
	l = held()
	if tok, err = ReleaseTo(l, "a", 10, &Waiter{Ticket: 6, Holder: "pod/w/uid"}, now); err != nil || tok != 0 {
		t.Fatalf("handover to a pod: %d, %v", tok, err)
	}
	st, _ = Read(l)
	if st.Held() || st.Reserved != 6 {
		t.Fatalf("state %+v; want free and reserved for ticket 6", st)
	}
	l.ResourceVersion = "21"
	if _, err := Grant(l, "barger", now); !IsHeld(err) || !strings.Contains(err.Error(), "kept for the waiter with ticket 6") {
		t.Fatalf("a grant on a reserved lock: %v", err)
	}
	if _, err := GrantWaiter(l, Waiter{Ticket: 6, Holder: "pod/w/uid"}, now); err != nil {
		t.Fatal(err)
	}
	if st, _ = Read(l); st.Reserved != 0 || st.Ticket != 6 || st.Holder != "pod/w/uid" {
		t.Fatalf("state %+v", st)
	}
	// Nobody waits: a plain release that keeps the waiting mark.
	l = held()
	if _, err = ReleaseTo(l, "a", 10, nil, now); err != nil {
		t.Fatal(err)
	}
	if st, _ = Read(l); st.Held() || !st.Waiting || st.Token != 10 {
		t.Fatalf("state %+v", st)
	}
	// Only the holder with its token releases.
	if _, err := ReleaseTo(held(), "a", 9, nil, now); !IsLost(err) {
		t.Fatalf("release with another token: %v", err)
	}
}
