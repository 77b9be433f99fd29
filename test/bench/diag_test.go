//go:build bench

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

package bench

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

// conflictCounter wraps a Leases client and counts the updates refused as conflicts, apart for
// lock Leases and the queue's (waiter Leases; the cycles rows show them per grant), and every
// read and update sent, with the time each took (the handover's requests per release).
type conflictCounter struct {
	coordinationv1client.LeasesGetter
	lock, queue   atomic.Int64 // updates refused as conflicts
	lockW, queueW atomic.Int64 // writes (updates and creates) that succeeded
	gets, updates atomic.Int64 // every read and every update sent
	getNs, updNs  atomic.Int64 // the time they took, in nanoseconds
}

func (c *conflictCounter) Leases(ns string) coordinationv1client.LeaseInterface {
	return countingLeases{c.LeasesGetter.Leases(ns), c}
}

type countingLeases struct {
	coordinationv1client.LeaseInterface
	c *conflictCounter
}

func (l countingLeases) Update(ctx context.Context, le *coordinationv1.Lease, o metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	l.c.updates.Add(1)
	t0 := time.Now()
	defer func() { l.c.updNs.Add(int64(time.Since(t0))) }()
	out, err := l.LeaseInterface.Update(ctx, le, o)
	switch {
	case err == nil:
		l.c.count(le, &l.c.lockW, &l.c.queueW)
	case apierrors.IsConflict(err):
		l.c.count(le, &l.c.lock, &l.c.queue)
	}
	return out, err
}

func (l countingLeases) Create(ctx context.Context, le *coordinationv1.Lease, o metav1.CreateOptions) (*coordinationv1.Lease, error) {
	out, err := l.LeaseInterface.Create(ctx, le, o)
	if err == nil {
		l.c.count(le, &l.c.lockW, &l.c.queueW)
	}
	return out, err
}

// count adds one to lock or queue, by the kind of Lease le is.
func (c *conflictCounter) count(le *coordinationv1.Lease, lock, queue *atomic.Int64) {
	if strings.HasPrefix(le.Name, "fencedlock-queue-") || strings.HasPrefix(le.Name, "fencedlock-wait-") {
		queue.Add(1)
	} else {
		lock.Add(1)
	}
}

func (l countingLeases) Get(ctx context.Context, name string, o metav1.GetOptions) (*coordinationv1.Lease, error) {
	l.c.gets.Add(1)
	t0 := time.Now()
	defer func() { l.c.getNs.Add(int64(time.Since(t0))) }()
	return l.LeaseInterface.Get(ctx, name, o)
}
