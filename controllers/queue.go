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
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
)

// One queue for every holder: clients (pkg/lock, kubectl fencedlock) join a lock's queue Lease
// themselves; the controller adds the lock's gated pods to the same queue, drops the entries of
// waiters that are gone (a pod deleted or no longer gated, a client whose beat stopped), and
// grants the head when the lock is free and nobody else will (a pod, a lock kept for a waiter, a
// release that did not hand over).

// beatSeen is the last beat of a client entry and when this controller first saw it.
type beatSeen struct {
	beat int64
	at   time.Time
}

// queueInput is what planQueue decides from.
type queueInput struct {
	q      lease.Queue
	served lease.Ticket // the lock's last queued grant (State.Ticket)
	holder string
	lock   string                    // the lock's name
	holds  holdsFunc                 // which other locks a pod holds (pods asking for several)
	pods   []corev1.Pod              // the pods asking for the lock
	beats  map[lease.Ticket]beatSeen // the client beats seen before
	// expiry is how long a client entry lives without a new beat: two lease durations of the lock
	// (clients beat about once per lease duration).
	expiry time.Duration
	now    time.Time
}

// queuePlan is the queue as it should be, and what it says.
type queuePlan struct {
	q       lease.Queue
	changed bool // q must be written
	// waiting are the live waiters in queue order; pods maps a pod waiter's identity to its pod.
	waiting []lease.Waiter
	pods    map[string]*corev1.Pod
	beats   map[lease.Ticket]beatSeen
	// deadline is when the first client entry expires if it does not beat; zero: none.
	deadline time.Time
	// dropped are the entries removed because their waiter is gone.
	dropped []lease.Waiter
}

// planQueue is the pure part of the controller's queue keeping.
func planQueue(in queueInput) queuePlan {
	p := queuePlan{q: in.q, pods: map[string]*corev1.Pod{}, beats: map[lease.Ticket]beatSeen{}}
	asking := computeQueue(in.pods, in.lock, in.holder, in.holds)
	gated := map[string]*corev1.Pod{}
	for _, pod := range asking {
		gated[locksv1alpha1.PodHolderIdentity(pod.Name, string(pod.UID))] = pod
	}
	p.q.Trim(in.served) // served entries go with the next write; not worth one of their own
	kept := p.q.Waiters[:0:0]
	for _, w := range p.q.Waiters {
		if w.IsPod() {
			pod, ok := gated[w.Holder]
			if !ok {
				p.dropped, p.changed = append(p.dropped, w), true
				continue
			}
			p.pods[w.Holder] = pod
			delete(gated, w.Holder) // queued already
		} else {
			seen, ok := in.beats[w.Ticket]
			if !ok || seen.beat != w.Beat {
				seen = beatSeen{beat: w.Beat, at: in.now}
			}
			expires := seen.at.Add(in.expiry)
			if !in.now.Before(expires) {
				p.dropped, p.changed = append(p.dropped, w), true
				continue
			}
			p.beats[w.Ticket] = seen
			p.deadline = earliest(p.deadline, expires)
		}
		kept = append(kept, w)
	}
	p.q.Waiters = kept
	// Gated pods not queued yet join in the order they asked (computeQueue's order).
	for _, pod := range asking {
		id := locksv1alpha1.PodHolderIdentity(pod.Name, string(pod.UID))
		if _, ok := gated[id]; ok {
			p.q.Join(id, in.served, enqueuedAt(pod))
			p.pods[id] = pod
			p.changed = true
		}
	}
	p.waiting = p.q.Waiting(in.served)
	return p
}

// syncQueue reads the lock's queue Lease, creating it if missing, and brings it up to date. When
// the queue Lease cannot be read or written, the plan is the queue of the lock's pods alone (as
// if the queue were empty), so grants and revocations go on; err then says why. wait reports a
// write whose watch event brings a fresh look: acting now would act on a stale queue.
func (r *FencedLockReconciler) syncQueue(ctx context.Context, fl *locksv1alpha1.FencedLock, st lease.State,
	pods []corev1.Pod, holds holdsFunc, now time.Time) (p queuePlan, wait bool, err error) {
	lk := client.ObjectKeyFromObject(fl)
	in := queueInput{q: lease.Queue{Next: st.Ticket + 1}, served: st.Ticket, holder: st.Holder, lock: fl.Name,
		holds: holds, pods: pods,
		beats: r.observer.beatsOf(lk), expiry: 2 * time.Duration(fl.Spec.LeaseDurationSeconds) * time.Second, now: now}
	var ql coordinationv1.Lease
	name := locksv1alpha1.QueueLeaseName(fl.UID)
	err = r.Get(ctx, client.ObjectKey{Namespace: fl.Namespace, Name: name}, &ql)
	switch {
	case apierrors.IsNotFound(err):
		created, err := r.createQueue(ctx, fl, name, st)
		return planQueue(in), created, err
	case err != nil:
		return planQueue(in), false, fmt.Errorf("getting queue lease: %w", err)
	}
	if q, err := lease.ReadQueue(&ql); err != nil {
		// Unreadable: start over, keeping the tickets growing. Waiters find their entries gone
		// at their next beat and join again; pods are queued again below.
		logf.FromContext(ctx).Error(err, "Resetting an unreadable queue")
		in.q.Next = max(in.q.Next, q.Next)
	} else {
		in.q = q
	}
	p = planQueue(in)
	r.observer.setBeats(lk, p.beats)
	if !p.changed {
		return p, false, nil
	}
	_, err = lease.CAS(ctx, lease.ClientWriter{Client: r.Client}, &ql, func(next *coordinationv1.Lease) error {
		return lease.WriteQueue(next, p.q)
	})
	if apierrors.IsConflict(err) {
		return p, true, nil // a waiter joined meanwhile; its event brings a fresh look
	}
	if err != nil {
		return p, false, fmt.Errorf("updating queue lease: %w", err)
	}
	for _, w := range p.dropped {
		logf.FromContext(ctx).Info("Dropped a waiter that is gone from the queue", "waiter", w.Holder, "ticket", w.Ticket.String())
	}
	return p, false, nil
}

// createQueue creates the lock's queue Lease, its tickets starting above the lock's last queued
// grant, and reports whether it did.
func (r *FencedLockReconciler) createQueue(ctx context.Context, fl *locksv1alpha1.FencedLock, name string,
	st lease.State) (created bool, err error) {
	ql := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
		Name:      name,
		Namespace: fl.Namespace,
		Labels:    map[string]string{locksv1alpha1.ManagedByLabel: locksv1alpha1.ManagedByValue},
	}}
	if err := lease.WriteQueue(ql, lease.Queue{Next: st.Ticket + 1}); err != nil {
		return false, err
	}
	if err := controllerutil.SetControllerReference(fl, ql, r.Scheme()); err != nil {
		return false, err
	}
	err = r.Create(ctx, ql)
	switch {
	case apierrors.IsAlreadyExists(err):
		// Ours, and the cache is behind; or someone else's Lease of that name, which the
		// label-selected cache never shows: the lock then serves its pods without the queue.
		return false, nil
	case err != nil:
		return false, fmt.Errorf("creating queue lease: %w", err)
	}
	logf.FromContext(ctx).Info("Created queue lease", "lease", name)
	return true, nil
}

// queueIssued returns the last ticket the lock's queue has issued, zero if it has no queue yet.
func (r *FencedLockReconciler) queueIssued(ctx context.Context, fl *locksv1alpha1.FencedLock) lease.Ticket {
	var ql coordinationv1.Lease
	if err := r.Get(ctx, client.ObjectKey{Namespace: fl.Namespace, Name: locksv1alpha1.QueueLeaseName(fl.UID)}, &ql); err != nil {
		return 0
	}
	q, err := lease.ReadQueue(&ql)
	if err != nil || q.Next == 0 {
		return 0
	}
	return q.Next - 1
}
