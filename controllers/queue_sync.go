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
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
)

// One queue for every holder: clients (pkg/lock, kubectl fencedlock) join a lock's queue Lease
// themselves; the controller adds the lock's gated pods to the same queue, judges who in it is
// alive (lease.Judge: its clock, its observations), drops the rest, and serves the queue when
// nobody else will (lease.Settle, lease.Revoke).

// queueInput is what planQueue decides from.
type queueInput struct {
	q      lease.Queue
	served lease.Ticket                // the lock's last queued grant (State.Served)
	st     lease.State                 // the lock as read: its holders are not queued
	lock   string                      // the lock's name
	holds  holdsFunc                   // which other locks a pod holds (pods asking for several)
	pods   []*corev1.Pod               // the pods asking for the lock
	seen   map[lease.Ticket]lease.Seen // what the last judgment saw of the queued clients
	window time.Duration               // lease.Window of the lock
	now    time.Time
}

// queuePlan is the queue as it should be, and what it says.
type queuePlan struct {
	lease.Judgment
	// waiting are the live waiters in queue order; pods maps a pod waiter's identity to its pod.
	waiting []lease.Waiter
	pods    map[string]*corev1.Pod
}

// planQueue is the pure part of the controller's queue keeping: the judgment of the queue, with
// the gated pods not queued yet joined in the order they asked (computeQueue's order).
func planQueue(in queueInput) queuePlan {
	asking := computeQueue(in.pods, in.lock, in.st, in.holds)
	// The asking pods not queued yet, by UID: a queue of a thousand pods is judged on every
	// reconcile, and their identities are built only for those that join.
	gated := make(map[types.UID]*corev1.Pod, len(asking))
	for _, pod := range asking {
		gated[pod.UID] = pod
	}
	gatedPod := func(holder string) *corev1.Pod { // the asking pod holder names, if not queued yet
		if pod := gated[types.UID(holder[strings.LastIndexByte(holder, '/')+1:])]; pod != nil && podIsHolder(holder, pod) {
			return pod
		}
		return nil
	}
	p := queuePlan{pods: map[string]*corev1.Pod{}}
	p.Judgment = lease.Judge(in.q, in.served, in.seen, func(holder string) bool { return gatedPod(holder) != nil },
		in.window, in.now)
	for _, w := range p.Queue.Waiters {
		if w.IsPod() {
			pod := gatedPod(w.Holder)
			p.pods[w.Holder] = pod
			if pod != nil {
				delete(gated, pod.UID) // queued already
			}
		}
	}
	for _, pod := range asking {
		if gated[pod.UID] == pod {
			id := locksv1alpha1.PodHolderIdentity(pod.Name, string(pod.UID))
			p.Queue.Add(id, enqueuedAt(pod))
			p.pods[id] = pod
			p.Changed = true
		}
	}
	p.waiting = p.Queue.Waiting(in.served)
	return p
}

// syncQueue reads the lock's queue (its queue Lease, creating it if missing, and its waiter
// Leases) and brings it up to date: pods that ask join, pods that no longer wait and malformed
// entries leave (one write of the queue Lease), and each client judged dead leaves (a write of
// its waiter Lease). When the queue Lease cannot be read or written, the plan is the queue of the
// lock's pods alone (as if the queue were empty), so grants and revocations go on; err then says
// why. wait reports a write whose watch event brings a fresh look: acting now would act on a
// stale queue, or could not serve the pods just added (their tickets are that write's).
func (r *FencedLockReconciler) syncQueue(ctx context.Context, fl *locksv1alpha1.FencedLock, st lease.State,
	pods []*corev1.Pod, holds holdsFunc, now time.Time) (p queuePlan, wait bool, err error) {
	lk := client.ObjectKeyFromObject(fl)
	served := r.observer.servedFloor(lk, st)
	in := queueInput{served: served, st: st, lock: fl.Name,
		holds: holds, pods: pods, seen: r.observer.seenOf(lk),
		window: lease.Window(time.Duration(fl.Spec.LeaseDurationSeconds) * time.Second), now: now}
	waiters, err := r.lockWaiters(fl)
	if err != nil {
		return planQueue(in), false, err
	}
	waiting, malformed := lease.Waiters(waiters, served)
	var ql coordinationv1.Lease
	name := locksv1alpha1.QueueLeaseName(fl.UID)
	err = r.Get(ctx, client.ObjectKey{Namespace: fl.Namespace, Name: name}, &ql)
	switch {
	case apierrors.IsNotFound(err):
		created, err := r.createQueue(ctx, fl, name)
		in.q = lease.Queue{}.Merge(waiting)
		return planQueue(in), created, err
	case err != nil:
		in.q = lease.Queue{}.Merge(waiting)
		return planQueue(in), false, fmt.Errorf("getting queue lease: %w", err)
	}
	doc := r.queues.read(lk, &ql)
	in.q = doc.Merge(waiting)
	_, moved := ql.Annotations[locksv1alpha1.QueueUnreadableAnnotation]
	// A queue Lease made by a manager before the role or lock-uid label existed gets them now.
	unlabelled := ql.Labels[locksv1alpha1.RoleLabel] != locksv1alpha1.RoleQueue ||
		ql.Labels[locksv1alpha1.LockUIDLabel] != string(fl.UID)
	p = planQueue(in)
	r.observer.setSeen(lk, p.Seen)
	r.reportWaiterLeases(ctx, fl, malformed)
	if alive, err := r.dropDead(ctx, fl, waiters, p.Dead); err != nil || alive {
		// A waiter judged dead wrote meanwhile: the queue judged leaves out a live waiter, so
		// nothing may be served from it; its write's event brings a fresh look.
		return p, alive, err
	}
	idleDue, err := r.deleteIdle(ctx, fl, waiters, served, now)
	p.Deadline = earliest(p.Deadline, idleDue) // never lost on an error path: set before returning it
	if err != nil {
		return p, false, err
	}
	docChanged := len(p.Gone) > 0 || len(doc.Malformed) > 0 || doc.Unreadable != "" || len(p.Queue.Added) > 0
	if !docChanged && !moved && !unlabelled {
		return p, false, nil
	}
	stored := p.Queue // the pods: the judged queue without the waiter Leases' clients
	stored.Waiters = slices.DeleteFunc(slices.Clone(p.Queue.Waiters), func(w lease.Waiter) bool { return !w.IsPod() })
	stored.Malformed = nil
	// One pod added per write: its ticket is that write's resourceVersion, and tickets are unique.
	cur, added := &ql, stored.Added
	for i := 0; i == 0 || i < len(added); i++ {
		stored.Added = added[min(i, len(added)):min(i+1, len(added))]
		out, err := lease.CAS(ctx, lease.ClientWriter{Client: r.Client}, cur, func(next *coordinationv1.Lease) error {
			delete(next.Annotations, locksv1alpha1.QueueUnreadableAnnotation)
			metav1.SetMetaDataLabel(&next.ObjectMeta, locksv1alpha1.RoleLabel, locksv1alpha1.RoleQueue)
			metav1.SetMetaDataLabel(&next.ObjectMeta, locksv1alpha1.LockUIDLabel, string(fl.UID))
			return lease.WriteQueue(next, stored)
		})
		if apierrors.IsConflict(err) {
			return p, true, nil // written meanwhile; its event brings a fresh look
		}
		if err != nil {
			return p, false, fmt.Errorf("updating queue lease: %w", err)
		}
		if i == 0 {
			r.reportRepairs(ctx, fl, &ql, doc, p)
		}
		cur, stored = out, lease.ReadQueue(out) // the pod added, at its ticket
	}
	return p, len(added) > 0, nil
}

// dropDead takes each client judged dead out of the queue: its waiter Lease loses its holder. A
// conflict means the waiter wrote meanwhile, alive after all: alive reports it, and the next look
// judges it again.
func (r *FencedLockReconciler) dropDead(ctx context.Context, fl *locksv1alpha1.FencedLock,
	leases []coordinationv1.Lease, dead []lease.Waiter) (alive bool, err error) {
	for _, w := range dead {
		for i := range leases {
			l := &leases[i]
			if !lease.Waits(l, w.Holder, w.Ticket) {
				continue
			}
			// The manager takes it out as the waiter would leave.
			_, err := lease.CAS(ctx, lease.ClientWriter{Client: r.Client}, l, func(next *coordinationv1.Lease) error {
				return lease.LeaveWaiter(l, next, w.Holder, w.Ticket)
			})
			if apierrors.IsConflict(err) {
				alive = true
				continue
			}
			if apierrors.IsNotFound(err) {
				continue // deleted: it waits no more
			}
			if err != nil {
				return alive, fmt.Errorf("dropping dead waiter %s: %w", w.Holder, err)
			}
			window := lease.Window(time.Duration(fl.Spec.LeaseDurationSeconds) * time.Second)
			logf.FromContext(ctx).Info("Dropped a dead waiter from the queue", "waiter", w.Holder, "ticket", w.Ticket.String(),
				"window", window.String())
			r.recorder.Eventf(fl, l, corev1.EventTypeNormal, locksv1alpha1.ReasonWaiterDead, actionQueue,
				"Dropped waiter %s (ticket %s) from the queue: its beat did not change for %s", w.Holder, w.Ticket, window)
		}
	}
	return alive, nil
}

// reportWaiterLeases reports waiter Leases that do not follow the format, in a Warning Event each,
// once while they stay so (observer.newlyMalformed).
func (r *FencedLockReconciler) reportWaiterLeases(ctx context.Context, fl *locksv1alpha1.FencedLock, malformed []error) {
	msgs := make([]string, len(malformed))
	for i, err := range malformed {
		msgs[i] = err.Error()
	}
	for _, msg := range r.observer.newlyMalformed(client.ObjectKeyFromObject(fl), msgs) {
		logf.FromContext(ctx).Info("Skipped a malformed waiter lease", "why", msg)
		r.recorder.Eventf(fl, nil, corev1.EventTypeWarning, locksv1alpha1.ReasonQueueRepaired, actionQueue,
			"Skipped %s (see docs/protocol.md, the queue format)", msg)
	}
}

// reportRepairs tells what a queue write dropped: a pod that no longer waits in a log line,
// malformed entries and an unreadable queue in a Warning event each, naming what was dropped.
func (r *FencedLockReconciler) reportRepairs(ctx context.Context, fl *locksv1alpha1.FencedLock, ql *coordinationv1.Lease,
	read lease.Queue, p queuePlan) {
	log := logf.FromContext(ctx)
	for _, w := range p.Gone {
		log.Info("Dropped a pod that no longer waits from the queue", "waiter", w.Holder, "ticket", w.Ticket.String())
	}
	for _, m := range read.Malformed {
		log.Info("Dropped a malformed queue entry", "entry", truncate(string(m.Raw)), "why", m.Why)
		r.recorder.Eventf(fl, ql, corev1.EventTypeWarning, locksv1alpha1.ReasonQueueRepaired, actionQueue,
			"Dropped queue entry %s: %s (see docs/protocol.md, the queue format)", truncate(string(m.Raw)), m.Why)
	}
	unreadable := read.Unreadable
	if unreadable == "" {
		unreadable = ql.Annotations[locksv1alpha1.QueueUnreadableAnnotation]
	}
	if unreadable != "" {
		log.Info("Started an unreadable queue afresh", "was", truncate(unreadable))
		r.recorder.Eventf(fl, ql, corev1.EventTypeWarning, locksv1alpha1.ReasonQueueRepaired, actionQueue,
			"Queue annotation %s was not a queue (%s); started it afresh: the gated pods are queued again, "+
				"and clients, queued on waiter Leases, keep their places",
			locksv1alpha1.QueueAnnotation, truncate(unreadable))
	}
}

// truncate shortens a value quoted in an event.
func truncate(s string) string {
	const limit = 120
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "…"
}

// createQueue creates the lock's queue Lease, and reports whether it did.
func (r *FencedLockReconciler) createQueue(ctx context.Context, fl *locksv1alpha1.FencedLock, name string) (created bool, err error) {
	ql := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
		Name:      name,
		Namespace: fl.Namespace,
		Labels: map[string]string{locksv1alpha1.ManagedByLabel: locksv1alpha1.ManagedByValue,
			locksv1alpha1.RoleLabel: locksv1alpha1.RoleQueue, locksv1alpha1.LockUIDLabel: string(fl.UID)},
	}}
	if err := lease.WriteQueue(ql, lease.Queue{}); err != nil {
		return false, err
	}
	if err := controllerutil.SetControllerReference(fl, ql, r.Scheme()); err != nil {
		return false, err
	}
	err = r.Create(ctx, ql.DeepCopy())
	if apierrors.IsAlreadyExists(err) {
		// Ours, and the cache is behind; or a Lease someone else made at a name that carries the
		// lock's uid, which the label-selected cache never shows: replaced.
		other, removed, rerr := r.removeSquatter(ctx, fl, name, func(*coordinationv1.Lease) bool { return true })
		if rerr != nil || (!removed && other != nil) {
			return false, rerr
		}
		err = r.Create(ctx, ql)
	}
	if err != nil {
		return false, fmt.Errorf("creating queue lease: %w", err)
	}
	logf.FromContext(ctx).Info("Created queue lease", "lease", name)
	return true, nil
}

// idleWaiterLeaseDurations is how many lease durations a waiter Lease may go unused (not waiting,
// unchanged) before the manager deletes it: long enough that a client that acquires the lock over
// and over keeps its Lease (a join is then one update, not a create).
const idleWaiterLeaseDurations = 10

// idleMark is when the manager first saw a waiter Lease, at one version, not waiting.
type idleMark struct {
	rv string
	at time.Time
}

// idleWaiters is the pure part of the waiter Lease cleanup: of leases, the lock's waiter Leases,
// those not waiting (no holder, or a ticket at or below served) are marked when first seen at a
// version, on the manager's clock; a mark older than keep is due. It returns the due Leases, the
// marks to remember, and when the next one falls due (zero if none).
func idleWaiters(leases []coordinationv1.Lease, served lease.Ticket, marks map[string]idleMark, keep time.Duration,
	now time.Time) (due []*coordinationv1.Lease, next map[string]idleMark, deadline time.Time) {
	next = map[string]idleMark{}
	for i := range leases {
		l := &leases[i]
		t, err := lease.WaiterTicket(l)
		waiting := err == nil && t > served && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != ""
		if waiting {
			continue
		}
		m, ok := marks[l.Name]
		if !ok || m.rv != l.ResourceVersion {
			m = idleMark{rv: l.ResourceVersion, at: now}
		}
		if at := m.at.Add(keep); !now.Before(at) {
			due = append(due, l)
			continue
		} else if deadline.IsZero() || at.Before(deadline) {
			deadline = at
		}
		next[l.Name] = m
	}
	return due, next, deadline
}

// deleteIdle deletes the lock's waiter Leases that idleWaiters found due, each only at the
// version judged (a waiter that joined again meanwhile keeps its Lease), and returns when the
// next one falls due.
func (r *FencedLockReconciler) deleteIdle(ctx context.Context, fl *locksv1alpha1.FencedLock, leases []coordinationv1.Lease,
	served lease.Ticket, now time.Time) (time.Time, error) {
	lk := client.ObjectKeyFromObject(fl)
	keep := idleWaiterLeaseDurations * time.Duration(fl.Spec.LeaseDurationSeconds) * time.Second
	due, marks, deadline := idleWaiters(leases, served, r.observer.idleOf(lk), keep, now)
	r.observer.setIdle(lk, marks)
	for _, l := range due {
		uid, rv := l.UID, l.ResourceVersion
		err := r.Delete(ctx, l, client.Preconditions{UID: &uid, ResourceVersion: &rv})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return deadline, fmt.Errorf("deleting unused waiter lease %s: %w", l.Name, err)
		}
		if err == nil {
			logf.FromContext(ctx).V(1).Info("Deleted an unused waiter lease", "lease", l.Name, "unusedFor", keep.String())
		}
	}
	return deadline, nil
}
