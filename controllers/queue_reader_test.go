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

package controllers

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
)

// queueLease is a queue Lease at resourceVersion rv holding n pod entries and one malformed entry.
func queueLease(uid types.UID, rv string, n int) *coordinationv1.Lease {
	q := lease.Queue{Malformed: []lease.Malformed{{Raw: []byte(`{"ticket":"7"}`)}}}
	at := time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC)
	for i := range n {
		q.Waiters = append(q.Waiters, lease.Waiter{Ticket: lease.Ticket(i + 1), Since: metav1.NewTime(at),
			Holder: locksv1alpha1.PodHolderIdentity(fmt.Sprintf("worker-%04d", i), "0b5d2a47-1f0e-4c3a-9a56-2f1e8c7d9b10")})
	}
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{UID: uid, ResourceVersion: rv}}
	if err := lease.WriteQueue(l, q); err != nil {
		panic(err)
	}
	return l
}

// The reader returns what lease.ReadQueue returns, for every version, and nothing a caller changes
// in one read reaches the next.
func TestQueueReaderReadsAsParsing(t *testing.T) {
	r := newQueueReader()
	lock := types.NamespacedName{Namespace: "ns", Name: "jobs"}
	long := queueLease("uid-1", "10", 200)
	if len(long.Annotations[locksv1alpha1.QueueAnnotation]) < keepQueueBytes {
		t.Fatal("the long queue is too short to be kept: the test would not test keeping")
	}
	for _, tc := range []struct {
		name string
		ql   *coordinationv1.Lease
	}{
		{"a long queue", long},
		{"the same version again: kept", long},
		{"a new version", queueLease("uid-1", "11", 201)},
		{"a new Lease of the same name at a version seen before", queueLease("uid-2", "10", 199)},
		{"a short queue", queueLease("uid-2", "12", 2)},
		{"a Lease without a version", queueLease("uid-2", "", 300)},
	} {
		want := lease.ReadQueue(tc.ql)
		got := r.read(lock, tc.ql)
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("%s: read differs from lease.ReadQueue:\n%+v\n%+v", tc.name, want, got)
		}
		// A caller that changes what it read changes nothing kept.
		got.Waiters[0].Holder, got.Malformed[0].Why = "changed", "changed"
		if again := r.read(lock, tc.ql); !reflect.DeepEqual(want, again) {
			t.Fatalf("%s: a change to one read reached the next:\n%+v\n%+v", tc.name, want, again)
		}
	}
	if _, kept := r.last[lock]; kept {
		t.Fatal("a Lease without a resourceVersion was kept")
	}
	r.read(lock, long)
	r.forget(lock)
	if len(r.last) != 0 {
		t.Fatalf("forget kept %d queues", len(r.last))
	}
}

// Short queues are not kept: 10 000 idle locks cost the reader nothing.
func TestQueueReaderKeepsOnlyLongQueues(t *testing.T) {
	r := newQueueReader()
	for i := range 100 {
		r.read(types.NamespacedName{Namespace: "ns", Name: fmt.Sprint(i)}, queueLease("uid", "1", i%3))
	}
	if len(r.last) != 0 {
		t.Fatalf("kept %d short queues", len(r.last))
	}
}

// BenchmarkQueueRead compares a read of a kept queue of 300 pods with parsing it.
func BenchmarkQueueRead(b *testing.B) {
	ql := queueLease("uid", "1", 300)
	b.Run("parse", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			lease.ReadQueue(ql)
		}
	})
	b.Run("kept", func(b *testing.B) {
		r, lock := newQueueReader(), types.NamespacedName{Namespace: "ns", Name: "jobs"}
		b.ReportAllocs()
		for b.Loop() {
			r.read(lock, ql)
		}
	})
}
