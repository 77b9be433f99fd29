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

	"github.com/fencedlock/fencedlock/pkg/lease"
)

// The queue protocol of a waiting Acquire (docs/protocol.md, "The queue"): join the lock's queue
// Lease once, mark the lock's Lease as waited for whenever it is not, and wait on the lock
// Lease's watch until a release (or the manager) hands this waiter the lock. A queued waiter never
// takes the lock itself, so a release wakes one waiter, not all. Every decision is a function of
// pkg/lease; this file only reads and writes.

// leaveTimeout bounds the writes of a waiter that gives up, which run after its context ended.
const leaveTimeout = 5 * time.Second

// join adds this Acquire to the lock's queue. A lock without a queue Lease (a manager older
// than the queue) leaves it waiting unqueued, as before: every release wakes every such waiter.
func (l *Locker) join(ctx context.Context, a *acquisition, cur *coordinationv1.Lease, st lease.State) error {
	name := lease.QueueOf(cur)
	if name == "" || l.noQueue {
		return nil
	}
	err := l.updateQueue(ctx, name, func(q *lease.Queue) bool {
		a.ticket = q.Join(l.identity, st.Served, l.clock.Now())
		head, ok := q.Head(st.Served)
		a.head = ok && head.Ticket == a.ticket
		return true
	})
	if apierrors.IsNotFound(err) {
		a.ticket = 0
		return nil
	}
	if err != nil {
		a.ticket = 0
		return fmt.Errorf("lock %s: joining the queue: %w", l.key(), err)
	}
	a.queue, a.beatDue = name, l.clock.Now().Add(beatInterval(st))
	return nil
}

// beatInterval is when this waiter next shows its entry alive: at a random point of the
// interval lease.BeatInterval allows, so that waiters that joined together do not beat, and
// collide on the one queue Lease they share, together.
func beatInterval(st lease.State) time.Duration {
	lo, hi := lease.BeatInterval(max(st.Duration, minLeaseDuration))
	return lo + time.Duration(rand.Int64N(int64(hi-lo)+1))
}

// beat shows this waiter's entry alive. An entry that is gone (the manager judged it dead, or the
// queue Lease was recreated) leaves the waiter unqueued; the caller queues it again.
func (l *Locker) beat(ctx context.Context, a *acquisition) error {
	found := false
	err := l.updateQueue(ctx, a.queue, func(q *lease.Queue) bool {
		found = q.Beat(a.ticket, l.identity)
		return found
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("lock %s: showing the queue entry alive: %w", l.key(), err)
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

// leave takes a waiter that gave up out of the queue: it removes the entry, then writes the
// lock's Lease (lease.MarkLeft), so that no handover computed from a queue read before the entry
// went can land after it; a handover that landed first is released (and handed on).
func (l *Locker) leave(ctx context.Context, a *acquisition) {
	if a.ticket == 0 {
		return
	}
	t := a.ticket
	a.ticket = 0
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaveTimeout)
	defer cancel()
	_ = l.updateQueue(ctx, a.queue, func(q *lease.Queue) bool { return q.Leave(t, l.identity) })
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

// readQueue reads the queue of the lock whose Lease is cur; a lock without a queue Lease has an
// empty queue. The write that follows is conditioned on cur, so the queue is read as of cur or
// later (getAtLeast), from the API server's watch cache, unless known, the queue Lease as of cur
// or later that a follower kept, stands for that read. A queue with nobody to serve is read again
// from etcd: the cache can lag a join made a moment ago, and a release that serves nobody removes
// the waiting mark, which frees the lock to anyone instead of that waiter.
func (l *Locker) readQueue(ctx context.Context, cur, known *coordinationv1.Lease) (*lease.Queue, error) {
	q := &lease.Queue{}
	name := lease.QueueOf(cur)
	if name == "" {
		return q, nil
	}
	st, _ := lease.Read(cur) // the transition that asked for the queue has vetted cur
	for _, rv := range []string{cur.ResourceVersion, ""} {
		ql, err := known, error(nil)
		if known == nil || rv == "" {
			ql, err = l.getAtLeast(ctx, name, rv)
		}
		if apierrors.IsNotFound(err) {
			continue // no queue Lease: an empty queue
		}
		if err != nil {
			return nil, fmt.Errorf("lock %s: reading the queue: %w", l.key(), err)
		}
		if *q = lease.ReadQueue(ql); len(q.Waiting(st.Served)) > 0 {
			break
		}
	}
	return q, nil
}

// updateQueue applies change to the queue Lease name with compare-and-swap, re-reading on
// conflicts, and writes only if change reports a change. (Starting from the copy a release has
// just read saves a read but conflicts more often: measured, it cost more than it saved. Reading
// from the API server's watch cache, as a release does, saved nothing measurable either.)
func (l *Locker) updateQueue(ctx context.Context, name string, change func(*lease.Queue) bool) error {
	attempt := 0
	for {
		ql, err := l.leases.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		_, err = lease.CAS(ctx, l.writer, ql, func(next *coordinationv1.Lease) error {
			q := lease.ReadQueue(next)
			if !change(&q) {
				return errUnchanged
			}
			return lease.WriteQueue(next, q)
		})
		if errors.Is(err, errUnchanged) || err == nil {
			return nil
		}
		if !apierrors.IsConflict(err) {
			return err
		}
		// Waiters that arrive together all conflict but one; a jittered pause that doubles (1 ms
		// up to 0.5 s) spreads their retries instead of repeating the collision: n waiters
		// arriving at once cost about n log n writes rather than n²/2. A waiter waits anyway.
		attempt++
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-l.clock.After(wait.Jitter(time.Millisecond<<min(attempt-1, 8), 1)):
		}
	}
}

var errUnchanged = errors.New("queue unchanged")

// getAtLeast reads the Lease name as of resourceVersion rv or later: every Lease write up to rv
// is in what it returns (the API server's "not older than" read, served from its watch cache
// without a round trip to etcd). The API server answers a read that its cache cannot serve within
// 3 s with a ResourceVersionTooLarge timeout; that read is made again from etcd, which is
// always as new. An empty rv reads from etcd.
func (l *Locker) getAtLeast(ctx context.Context, name, rv string) (*coordinationv1.Lease, error) {
	le, err := l.leases.Get(ctx, name, metav1.GetOptions{ResourceVersion: rv})
	if rv != "" && apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge) {
		le, err = l.leases.Get(ctx, name, metav1.GetOptions{})
	}
	return le, err
}
