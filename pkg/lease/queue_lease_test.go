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
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
)

func pod(n string) string { return locksv1alpha1.PodHolderPrefix + n + "/uid-" + n }

// A pod added by a write takes that write's resourceVersion as its ticket; the next write carries
// it, and records the version it is written over, so re-adding an entry as stored is a change.
func TestQueueAddTakesTheWritesVersion(t *testing.T) {
	now := time.Unix(1000, 0)
	l := &coordinationv1.Lease{}
	l.ResourceVersion = "40"
	var q Queue
	q.Add(pod("a"), now)
	if err := WriteQueue(l, q); err != nil {
		t.Fatal(err)
	}
	stored := l.Annotations[locksv1alpha1.QueueAnnotation]
	l.ResourceVersion = "41" // the API server's version of that write
	q = ReadQueue(l)
	if len(q.Waiters) != 1 || q.Waiters[0].Ticket != 41 || q.Waiters[0].Holder != pod("a") {
		t.Fatalf("read back %+v; want pod a at ticket 41", q.Waiters)
	}
	q.Add(pod("b"), now)
	if err := WriteQueue(l, q); err != nil {
		t.Fatal(err)
	}
	l.ResourceVersion = "45"
	q = ReadQueue(l)
	if len(q.Waiters) != 2 || q.Waiters[0].Ticket != 41 || q.Waiters[1].Ticket != 45 {
		t.Fatalf("read back %+v; want a at 41 (carried), b at 45", q.Waiters)
	}
	if h, ok := q.Head(41); !ok || h.Holder != pod("b") {
		t.Fatalf("after 41 was served the head is b; got %+v", h)
	}
	q.Trim(41)
	if len(q.Waiters) != 1 {
		t.Fatalf("trim: %+v", q.Waiters)
	}
	// The same write as the first, over another version: not a no-op.
	again := &coordinationv1.Lease{}
	again.ResourceVersion = "50"
	var first Queue
	first.Add(pod("a"), now)
	if err := WriteQueue(again, first); err != nil {
		t.Fatal(err)
	}
	if again.Annotations[locksv1alpha1.QueueAnnotation] == stored {
		t.Fatalf("re-adding pod a over version 50 stores what was stored over 40: %s", stored)
	}
	if got := first.Merge([]Waiter{{Ticket: 3, Holder: "client"}}); len(got.Waiters) != 1 || len(got.Added) != 1 {
		t.Fatalf("merge: %+v", got)
	}
	// Two entries added in one write would share its resourceVersion as their ticket.
	first.Add(pod("b"), now)
	if err := WriteQueue(again, first); !errors.Is(err, ErrOneAddedPerWrite) {
		t.Fatalf("two entries added in one write: %v; want ErrOneAddedPerWrite", err)
	}
}

// Entries that do not follow the format are skipped, never fatal; writers other than the
// manager keep them as they were, and a value that is not a queue at all is moved aside.
func TestQueueToleratesMalformedEntries(t *testing.T) {
	v := `{"after": "x", "waiters": [
		{"ticket": 3, "holder": "pod/a/u", "beat": "soon"},
		{"ticket": 4, "holder": "pod/b/u", "since": "2026-01-01T00:00:00Z", "beat": 2, "extra": true},
		{"ticket": 4, "holder": "pod/dup/u"},
		{"holder": "pod/no-ticket/u"},
		{"ticket": 5, "holder": ""},
		{"ticket": -6, "holder": "pod/neg/u"},
		{"ticket": 7, "holder": "pod/c/u", "beat": -1},
		{"ticket": 8, "holder": "a-client"},
		"not an object",
		{"ticket": 9, "holder": "pod/d/u"}]}`
	q := ParseQueue(v, 20)
	if len(q.Waiters) != 2 || q.Waiters[0].Holder != "pod/b/u" || q.Waiters[0].Beat != 2 || q.Waiters[1].Holder != "pod/d/u" {
		t.Fatalf("well-formed entries %+v; want b and d", q.Waiters)
	}
	if len(q.Malformed) != 8 {
		t.Fatalf("malformed %d; want 8 (a client entry among them)", len(q.Malformed))
	}
	if h, ok := q.Head(0); !ok || h.Holder != "pod/b/u" {
		t.Fatalf("head %+v; a malformed entry is skipped", h)
	}
	q.Add(pod("e"), time.Unix(1, 0))
	l := &coordinationv1.Lease{}
	l.ResourceVersion = "20"
	if err := WriteQueue(l, q); err != nil {
		t.Fatal(err)
	}
	l.ResourceVersion = "21"
	back := ReadQueue(l)
	if len(back.Waiters) != 3 || len(back.Malformed) != 8 || back.Waiters[2].Ticket != 21 {
		t.Fatalf("read back %+v", back)
	}
	if q := ParseQueue(`{"waiters":[{"ticket":0,"holder":"pod/a/u"}]}`, 0); len(q.Malformed) != 1 {
		t.Fatalf("ticket 0 on a version that is not a ticket is malformed: %+v", q)
	}

	for _, bad := range []string{"{not json", `[1,2]`, `{"waiters": {"ticket": 1}}`, `"q"`} {
		q := ParseQueue(bad, 20)
		if q.Unreadable != bad || len(q.Waiters) != 0 {
			t.Fatalf("%s: %+v; want an empty queue that remembers the value", bad, q)
		}
		q.Add(pod("a"), time.Unix(1, 0))
		l := &coordinationv1.Lease{}
		l.ResourceVersion = "41"
		if err := WriteQueue(l, q); err != nil {
			t.Fatalf("%s: write %v", bad, err)
		}
		if l.Annotations[locksv1alpha1.QueueUnreadableAnnotation] != bad || len(ReadQueue(l).Waiters) != 1 {
			t.Fatalf("%s: annotations %v", bad, l.Annotations)
		}
	}
}

func TestQueueBound(t *testing.T) {
	big := Queue{}
	for i := range 300 {
		big.Waiters = append(big.Waiters, Waiter{Ticket: Ticket(i + 1),
			Holder: locksv1alpha1.PodHolderPrefix + strings.Repeat("x", 1000) + strconv.Itoa(i)})
	}
	if err := WriteQueue(&coordinationv1.Lease{}, big); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("300 waiters of 1000 bytes: %v; want ErrQueueFull", err)
	}
	if q := ParseQueue(`{"waiters":[{"ticket":1,"holder":"pod/`+strings.Repeat("x", MaxHolderLen+1)+`"}]}`, 0); len(q.Malformed) != 1 {
		t.Fatalf("a holder over %d bytes is malformed: %+v", MaxHolderLen, q)
	}
	if q := ParseQueue(`{"waiters":[{"ticket":18446744073709551615,"holder":"pod/evil/u"}]}`, 0); len(q.Malformed) != 1 {
		t.Fatalf("a ticket above MaxTicket is malformed: %+v", q)
	}
}

func TestQueuePosition(t *testing.T) {
	q := Queue{Waiters: []Waiter{{Ticket: 3, Holder: "a"}, {Ticket: 5, Holder: "pod/p/1"}, {Ticket: 8, Holder: "c"}}}
	cases := []struct {
		served  Ticket
		holder  string
		pos, of int
	}{
		{0, "pod/p/1", 2, 3},
		{3, "pod/p/1", 1, 2}, // a was served
		{5, "pod/p/1", 0, 1}, // served: waits no more
		{0, "nobody", 0, 3},
	}
	for _, tc := range cases {
		if pos, of := q.Position(tc.served, tc.holder); pos != tc.pos || of != tc.of {
			t.Errorf("Position(%d, %q) = %d of %d; want %d of %d", tc.served, tc.holder, pos, of, tc.pos, tc.of)
		}
	}
}
