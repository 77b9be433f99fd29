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

package lock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
)

// The queue protocol of a waiting Acquire (docs/protocol.md, the queue): join the lock's queue
// once, by writing this identity's waiter Lease (which nobody else writes but the manager, so
// joins do not conflict), mark the lock's Lease as waited for whenever it is not, and wait on the
// lock Lease's watch until a release (or the manager) hands this waiter the lock. A queued waiter
// never takes the lock itself, so a release wakes one waiter, not all. Every decision is a
// function of pkg/lease; this file only reads and writes.

// leaveTimeout bounds the writes of a waiter that gives up, which run after its context ended.
const leaveTimeout = 5 * time.Second

// join queues this Acquire: its ticket is the resourceVersion of the write that joins. A lock
// whose Lease has no FencedLock owner (a manager older than the queue) leaves it waiting
// unqueued, as before: every release wakes every such waiter.
func (l *Locker) join(ctx context.Context, a *acquisition, cur *coordinationv1.Lease, st lease.State) error {
	ref := lease.LockOf(cur)
	if ref == nil || l.noQueue {
		return nil
	}
	out, err := l.writeWaiter(ctx, ref, func(old, next *coordinationv1.Lease) bool {
		if secs := int32(st.Duration / time.Second); secs > 0 {
			next.Spec.LeaseDurationSeconds = &secs
		}
		lease.JoinWaiter(old, next, l.identity, l.clock.Now())
		return true
	})
	if err != nil {
		a.ticket = 0
		return fmt.Errorf("lock %s: joining the queue: %w", l.key(), err)
	}
	a.ticket, _ = lease.WaiterTicket(out)
	a.beatDue = l.clock.Now().Add(beatInterval(st))
	return nil
}

// beatInterval is when this waiter next shows it is alive: at a random point of the interval
// lease.BeatInterval allows.
func beatInterval(st lease.State) time.Duration {
	lo, hi := lease.BeatInterval(max(st.Duration, minLeaseDuration))
	return lo + time.Duration(rand.Int64N(int64(hi-lo)+1))
}

// beat shows this waiter alive: a new renewTime on its waiter Lease. A waiter Lease that no
// longer waits with this ticket (the manager judged it dead, or it was deleted) leaves the
// waiter unqueued; the caller queues it again.
func (l *Locker) beat(ctx context.Context, a *acquisition) error {
	ref := lease.LockOf(a.last)
	found := false
	if ref != nil {
		_, err := l.writeWaiter(ctx, ref, func(old, next *coordinationv1.Lease) bool {
			// Judged on each copy: a retry after a conflict may find it dropped.
			found = lease.BeatWaiter(old, next, l.identity, a.ticket, l.clock.Now()) == nil
			return found
		})
		if err != nil {
			return fmt.Errorf("lock %s: showing the waiter alive: %w", l.key(), err)
		}
	}
	if !found {
		a.ticket = 0
	}
	st := lease.State{}
	if a.last != nil {
		st, _ = lease.Read(a.last)
	}
	a.beatDue = l.clock.Now().Add(beatInterval(st))
	return nil
}

// leave takes a waiter that gave up out of the queue: it clears its waiter Lease's holder, then
// writes the lock's Lease (lease.MarkLeft), so that no handover computed from a queue read before
// the waiter left can land after it; a handover that landed first is released (and handed on).
func (l *Locker) leave(ctx context.Context, a *acquisition) {
	if a.ticket == 0 {
		return
	}
	t := a.ticket
	a.ticket = 0
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaveTimeout)
	defer cancel()
	if ref := lease.LockOf(a.last); ref != nil {
		_, err := l.writeWaiter(ctx, ref, func(old, next *coordinationv1.Lease) bool {
			return lease.LeaveWaiter(old, next, l.identity, t) == nil
		})
		if err != nil {
			// The entry may still wait: the left mark would claim otherwise. A release may still
			// serve it; the manager drops it, and revokes such a grant, once its beats stop.
			return
		}
	}
	for ctx.Err() == nil {
		cur, err := l.getLease(ctx)
		if err != nil {
			return
		}
		_, err = lease.CAS(ctx, l.writer, cur, func(next *coordinationv1.Lease) error {
			return lease.MarkLeft(next, l.identity, t)
		})
		if errors.Is(err, lease.ErrServedWhileLeaving) {
			st, _ := lease.Read(cur)
			mine, _ := st.HolderOf(l.identity) // its permit's token, not the lock's last
			_ = l.newGrant(cur, mine.Token, l.clock.Now()).Release(ctx)
			return
		}
		if !apierrors.IsConflict(err) {
			return
		}
	}
}

// writeWaiter writes this identity's waiter Lease on the lock ref names: change makes next from
// old (nil when the Lease does not exist: next is then created) and reports whether to write. It
// starts from the copy this Locker wrote last, so a join is one write; a conflict (the manager
// wrote it) reads it again. It returns the Lease as written, or as read when change declined.
func (l *Locker) writeWaiter(ctx context.Context, ref *metav1.OwnerReference,
	change func(old, next *coordinationv1.Lease) bool) (*coordinationv1.Lease, error) {
	name := locksv1alpha1.WaiterLeaseName(ref.UID, l.identity)
	l.mu.Lock()
	old := l.mine
	l.mu.Unlock()
	if old != nil && old.Name != name {
		old = nil
	}
	read := old == nil
	for attempt := 0; ; attempt++ {
		if read {
			got, err := l.leases.Get(ctx, name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				old = nil
			case err != nil:
				return nil, err
			default:
				if err := lease.CheckWaiterLease(got, ref.UID); err != nil {
					if !l.removeSquatter(ctx, got) {
						return nil, err
					}
					got = nil
				}
				old = got
			}
		}
		var next *coordinationv1.Lease
		if old == nil {
			next = lease.NewWaiter(l.namespace, name, ref)
		} else {
			next = old.DeepCopy()
			next.ManagedFields = lease.ResetManagedFields()
		}
		if !change(old, next) {
			return old, nil
		}
		var out *coordinationv1.Lease
		var err error
		if old == nil {
			out, err = l.leases.Create(ctx, next, metav1.CreateOptions{})
		} else {
			out, err = l.leases.Update(ctx, next, metav1.UpdateOptions{})
		}
		if err == nil {
			l.mu.Lock()
			l.mine = out
			l.mu.Unlock()
			return out, nil
		}
		// A conflict (the manager wrote it), a create that finds it, an update that finds it gone:
		// read it again.
		retry := apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || (old != nil && apierrors.IsNotFound(err))
		if !retry {
			return nil, err
		}
		read = true
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-l.clock.After(wait.Jitter(time.Millisecond<<min(attempt, 8), 1)):
		}
	}
}

// removeSquatter deletes w, a Lease at this identity's waiter Lease name that is not labelled as
// a waiter Lease: anyone who may create Leases can make one, and no reader would see us queued on
// it. Deleting it costs nobody a place (no reader counts it), so it is deleted as read (its uid
// and resourceVersion as preconditions) and the join goes on. It reports whether w is gone; a
// principal without verb delete on Leases cannot, and the join fails saying so.
func (l *Locker) removeSquatter(ctx context.Context, w *coordinationv1.Lease) bool {
	uid, rv := w.UID, w.ResourceVersion
	pre := &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}
	err := l.leases.Delete(ctx, w.Name, metav1.DeleteOptions{Preconditions: pre})
	return err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err)
}

// markWaiting tells the lock's holder that waiters are queued, so its release reads the queue.
// A conflict is no failure: the next event shows the Lease again.
func (l *Locker) markWaiting(ctx context.Context, cur *coordinationv1.Lease) error {
	_, err := lease.CAS(ctx, l.writer, cur, func(next *coordinationv1.Lease) error {
		lease.MarkWaiting(next)
		return nil
	})
	if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
		return fmt.Errorf("lock %s: marking the lock as waited for: %w", l.key(), err)
	}
	return nil
}

// readQueue reads the queue of the lock whose Lease is cur: one list of the lock's Leases (its
// queue Lease, the manager's pods, and its waiter Leases, at one revision), as of cur or later
// (the write that follows is conditioned on cur), from the API server's watch cache. A queue with
// nobody to serve is listed again from etcd: the cache can lag a join made a moment ago, and a
// release that serves nobody removes the waiting mark, which frees the lock to anyone instead of
// that waiter.
func (l *Locker) readQueue(ctx context.Context, cur *coordinationv1.Lease) (*lease.Queue, error) {
	q := &lease.Queue{}
	ref := lease.LockOf(cur)
	if ref == nil {
		return q, nil
	}
	st, _ := lease.Read(cur) // the transition that asked for the queue has vetted cur
	for _, rv := range []string{cur.ResourceVersion, ""} {
		list, err := l.listAtLeast(ctx, lease.LockSelector(ref.UID), rv)
		if err != nil {
			return nil, fmt.Errorf("lock %s: reading the queue: %w", l.key(), err)
		}
		items := make([]*coordinationv1.Lease, 0, len(list.Items))
		for i := range list.Items {
			items = append(items, &list.Items[i])
		}
		// A malformed waiter Lease is the manager's to report.
		if *q, _ = lease.QueueFrom(items, st.Served); hasHead(q, st.Served) {
			break
		}
	}
	return q, nil
}

// listAtLeast lists the Leases sel selects as of resourceVersion rv or later: every Lease write
// up to rv is in what it returns (the API server's "not older than" list, served from its watch
// cache without a round trip to etcd). The API server answers a list that its cache cannot serve
// within 3 s with a ResourceVersionTooLarge timeout; that list is made again from etcd, which is
// always as new. An empty rv lists from etcd.
func (l *Locker) listAtLeast(ctx context.Context, sel, rv string) (*coordinationv1.LeaseList, error) {
	opts := metav1.ListOptions{LabelSelector: sel}
	if rv != "" {
		opts.ResourceVersion, opts.ResourceVersionMatch = rv, metav1.ResourceVersionMatchNotOlderThan
	}
	list, err := l.leases.List(ctx, opts)
	if rv != "" && apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge) {
		list, err = l.leases.List(ctx, metav1.ListOptions{LabelSelector: sel})
	}
	return list, err
}

// hasHead reports whether q has someone to serve above served (lease.Queue.Head): a queue read
// without one is read again from etcd, whether it was listed or followed.
func hasHead(q *lease.Queue, served lease.Ticket) bool {
	_, ok := q.Head(served)
	return ok
}
