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
	"github.com/fencedlock/fencedlock/pkg/token"
)

// The queue protocol of a waiting Acquire (docs/protocol.md, "Queue"): join the lock's queue
// Lease once, mark the lock's Lease as having waiters if nobody has, and wait on the lock
// Lease's watch for a release that grants this waiter's ticket. Only the waiter whose turn it is
// ever writes when the lock is free, so a release wakes one waiter, not all.

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
		a.ticket = q.Join(l.identity, st.Ticket, l.clock.Now())
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

// beatInterval is how often a waiter shows its entry alive: once per lease duration, jittered
// down to three quarters of it so that waiters that joined together do not beat, and collide,
// together. The controller drops an entry after two lease durations without a beat: a beat is a
// write to the one queue Lease all waiters share, so a long queue must not beat often, and a dead
// waiter costs nothing until it reaches the head of the queue.
func beatInterval(st lease.State) time.Duration {
	d := max(st.Duration, minLeaseDuration)
	return d*3/4 + time.Duration(rand.Int64N(int64(d/4)+1))
}

// beat shows this waiter's entry alive. An entry that is gone (the controller dropped it, or the
// queue Lease was recreated) leaves the waiter unqueued; the caller queues it again.
func (l *Locker) beat(ctx context.Context, a *acquisition) error {
	found := false
	err := l.updateQueue(ctx, a.queue, func(q *lease.Queue) bool {
		found = q.BeatFor(a.ticket)
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

// leave takes a waiter that gave up out of the queue. If a release granted it meanwhile, the
// grant is released (and handed on), so nobody waits for a holder that is not there. A release
// that read the queue just before the entry went can still land after the first look: two more
// looks, in the background, catch it.
func (l *Locker) leave(ctx context.Context, a *acquisition) {
	if a.ticket == 0 {
		return
	}
	t := a.ticket
	a.ticket = 0
	ctx = context.WithoutCancel(ctx)
	qctx, cancel := context.WithTimeout(ctx, leaveTimeout)
	defer cancel()
	_ = l.updateQueue(qctx, a.queue, func(q *lease.Queue) bool { return q.Leave(t) })
	if l.releaseIfGranted(qctx, t) {
		return
	}
	go func() {
		for _, d := range leaveRechecks {
			<-l.clock.After(d)
			rctx, cancel := context.WithTimeout(ctx, leaveTimeout)
			found := l.releaseIfGranted(rctx, t)
			cancel()
			if found {
				return
			}
		}
	}()
}

// leaveRechecks are the pauses before a waiter that left looks again for a grant made to its
// ticket: far longer than a release takes between reading the queue and writing the handover.
var leaveRechecks = []time.Duration{250 * time.Millisecond, 750 * time.Millisecond}

// releaseIfGranted releases the grant to ticket t, if the lock holds one, and reports whether it
// found one.
func (l *Locker) releaseIfGranted(ctx context.Context, t lease.Ticket) bool {
	cur, err := l.getLease(ctx)
	if err != nil {
		return false
	}
	st, err := lease.Read(cur)
	if err != nil || st.Holder != l.identity || st.Ticket != t {
		return false
	}
	g := &Grant{locker: l, Token: st.Token, lease: cur, lost: make(chan struct{})}
	_ = g.Release(ctx)
	return true
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

// grantWaiter takes the free lock for this waiter's ticket. Conflicts are returned unwrapped.
func (l *Locker) grantWaiter(ctx context.Context, cur *coordinationv1.Lease, t lease.Ticket,
	now time.Time) (*Grant, error) {
	return l.grantBy(ctx, cur, func(next *coordinationv1.Lease) (token.Token, error) {
		return lease.GrantWaiter(next, lease.Waiter{Ticket: t, Holder: l.identity}, now)
	})
}

// queueHead returns the first waiter still waiting for the lock whose Lease is cur, nil if none
// (or the lock has no queue Lease).
func (l *Locker) queueHead(ctx context.Context, cur *coordinationv1.Lease, st lease.State) (*lease.Waiter, error) {
	name := lease.QueueOf(cur)
	if name == "" {
		return nil, nil
	}
	ql, err := l.leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lock %s: reading the queue: %w", l.key(), err)
	}
	q, err := lease.ReadQueue(ql)
	if err != nil {
		return nil, err
	}
	if w, ok := q.Head(st.Ticket); ok {
		return &w, nil
	}
	return nil, nil
}

// updateQueue applies change to the queue Lease name with compare-and-swap, re-reading on
// conflicts, and writes only if change reports a change. (Starting from the copy a release has
// just read saves a read but conflicts more often: measured, it cost more than it saved.)
func (l *Locker) updateQueue(ctx context.Context, name string, change func(*lease.Queue) bool) error {
	attempt := 0
	for {
		ql, err := l.leases.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		_, err = lease.CAS(ctx, l.writer, ql, func(next *coordinationv1.Lease) error {
			q, err := lease.ReadQueue(next)
			if err != nil {
				return err
			}
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
