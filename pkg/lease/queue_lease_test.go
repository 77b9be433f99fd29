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
	if !q.Beat(c, "c") || q.Waiters[0].Beat != 1 || q.Beat(99, "c") || q.Beat(c, "someone else") {
		t.Fatalf("beat: %+v", q.Waiters)
	}
	if q.Leave(c, "someone else") || !q.Leave(c, "c") || q.Leave(c, "c") || len(q.Waiting(0)) != 0 {
		t.Fatalf("leave: %+v", q.Waiters)
	}
}

// Entries that do not follow the format are skipped, never fatal; writers other than the
// manager keep them as they were, and a value that is not a queue at all is moved aside.
func TestQueueToleratesMalformedEntries(t *testing.T) {
	v := `{"next": 9, "waiters": [
		{"ticket": 3, "holder": "a", "beat": "soon"},
		{"ticket": 4, "holder": "b", "since": "2026-01-01T00:00:00Z", "beat": 2, "extra": true},
		{"ticket": 4, "holder": "dup"},
		{"holder": "no-ticket"},
		{"ticket": 5, "holder": ""},
		{"ticket": -6, "holder": "neg"},
		{"ticket": 7, "holder": "c", "beat": -1},
		"not an object",
		{"ticket": 8, "holder": "d"}]}`
	q := ParseQueue(v)
	if len(q.Waiters) != 2 || q.Waiters[0].Holder != "b" || q.Waiters[0].Beat != 2 || q.Waiters[1].Holder != "d" {
		t.Fatalf("well-formed entries %+v; want b and d", q.Waiters)
	}
	if len(q.Malformed) != 7 || q.Next != 9 {
		t.Fatalf("malformed %d, next %d; want 7, 9", len(q.Malformed), q.Next)
	}
	if h, ok := q.Head(0); !ok || h.Holder != "b" {
		t.Fatalf("head %+v; a malformed entry is skipped", h)
	}
	if tk := q.Join("e", 0, time.Unix(1, 0)); tk != 9 {
		t.Fatalf("ticket %d; want 9", tk)
	}
	l := &coordinationv1.Lease{}
	if err := WriteQueue(l, q); err != nil {
		t.Fatal(err)
	}
	back := ReadQueue(l)
	if len(back.Waiters) != 3 || len(back.Malformed) != 7 || back.Next != 10 {
		t.Fatalf("read back %+v", back)
	}

	for _, bad := range []string{"{not json", `[1,2]`, `{"waiters": {"ticket": 1}}`, `"q"`} {
		q := ParseQueue(bad)
		if q.Unreadable != bad || len(q.Waiters) != 0 {
			t.Fatalf("%s: %+v; want an empty queue that remembers the value", bad, q)
		}
		tk := q.Join("a", 41, time.Unix(1, 0))
		l := &coordinationv1.Lease{}
		if err := WriteQueue(l, q); err != nil || tk != 42 {
			t.Fatalf("%s: join %d, write %v", bad, tk, err)
		}
		if l.Annotations[locksv1alpha1.QueueUnreadableAnnotation] != bad || len(ReadQueue(l).Waiters) != 1 {
			t.Fatalf("%s: annotations %v", bad, l.Annotations)
		}
	}
	if q := ParseQueue(`{"next": "x", "waiters": [{"ticket": 3, "holder": "a"}]}`); len(q.Waiters) != 1 || q.Join("b", 0, time.Unix(1, 0)) != 4 {
		t.Fatalf("a next that is not a ticket is recomputed from the entries: %+v", q)
	}
}

func TestQueueBound(t *testing.T) {
	big := Queue{}
	for range 300 {
		big.Join(strings.Repeat("x", 1000), 0, time.Unix(1000, 0))
	}
	if err := WriteQueue(&coordinationv1.Lease{}, big); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("300 waiters of 1000 bytes: %v; want ErrQueueFull", err)
	}
	if q := ParseQueue(`{"waiters":[{"ticket":1,"holder":"` + strings.Repeat("x", MaxHolderLen+1) + `"}]}`); len(q.Malformed) != 1 {
		t.Fatalf("a holder over %d bytes is malformed: %+v", MaxHolderLen, q)
	}
	// A ticket with no successor would wrap every ticket computed after it.
	q := ParseQueue(`{"next": 18446744073709551615, "waiters":[{"ticket":18446744073709551615,"holder":"evil"}]}`)
	if len(q.Malformed) != 1 || q.Join("b", 0, time.Unix(1, 0)) != 1 {
		t.Fatalf("a ticket above MaxTicket is malformed and next is recomputed: %+v", q)
	}
}
