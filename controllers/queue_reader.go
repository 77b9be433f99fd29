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
	"slices"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
)

// keepQueueBytes is the size from which a lock's parsed queue is kept (about 20 entries): below
// it, parsing costs less than keeping, and 10 000 idle locks keep nothing.
const keepQueueBytes = 2 << 10

// queueReader reads a lock's queue Lease (lease.ReadQueue), parsing each version of a long queue
// once. Every reconcile of a lock reads its queue, and a pod handover makes two or three (its own
// writes come back as events): with a few hundred pods queued, parsing the queue's JSON again
// each time was a third of the manager's reconcile CPU. The queue as parsed is a pure function
// of the Lease's annotation, which one resourceVersion of one Lease (its UID) fixes.
type queueReader struct {
	mu   sync.Mutex
	last map[types.NamespacedName]parsedQueue // by lock
}

// parsedQueue is the queue a version of a queue Lease holds.
type parsedQueue struct {
	uid types.UID
	rv  string
	q   lease.Queue
}

func newQueueReader() *queueReader {
	return &queueReader{last: map[types.NamespacedName]parsedQueue{}}
}

// read returns the queue the queue Lease ql of lock holds. The caller owns what it gets: its
// slices are copies, so that nothing it changes reaches a later read.
func (r *queueReader) read(lock types.NamespacedName, ql *coordinationv1.Lease) lease.Queue {
	r.mu.Lock()
	p, ok := r.last[lock]
	r.mu.Unlock()
	if ok && p.uid == ql.UID && p.rv == ql.ResourceVersion && ql.ResourceVersion != "" {
		q := p.q
		q.Waiters, q.Malformed = slices.Clone(q.Waiters), slices.Clone(q.Malformed)
		return q
	}
	q := lease.ReadQueue(ql)
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(ql.Annotations[locksv1alpha1.QueueAnnotation]) < keepQueueBytes || ql.ResourceVersion == "" {
		delete(r.last, lock)
		return q
	}
	kept := q
	kept.Waiters, kept.Malformed = slices.Clone(q.Waiters), slices.Clone(q.Malformed)
	r.last[lock] = parsedQueue{uid: ql.UID, rv: ql.ResourceVersion, q: kept}
	return q
}

// forget drops a deleted lock's queue.
func (r *queueReader) forget(lock types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.last, lock)
}
