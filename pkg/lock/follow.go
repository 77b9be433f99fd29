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
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
)

// A holder that follows its lock's queue releases without reading it (lease.FollowSelector,
// docs/protocol.md, "Release"). A waiter that is the head of the queue when it joins watches both
// of the lock's Leases instead of the lock Lease alone, and keeps that watch once served, until
// its grant ends (or Acquire's context does): when it releases, the watch has shown the queue as
// of the lock Lease version the release is conditioned on, so the release is one write. Only the
// head follows: every waiter that followed would be sent every join and beat of the queue.

// followWait bounds how long a release waits for the watch to show the lock Lease version it is
// conditioned on (usually its own last write, delivered within a millisecond) before it reads the
// queue instead.
const followWait = 50 * time.Millisecond

// follower keeps the lock's queue as a list of its Leases and the watch that follows showed it:
// the queue Lease (the manager's pods) and the waiter Leases.
type follower struct {
	lock string // the lock Lease's name; its queue and waiter Leases carry the role label
	stop func() // ends the watch

	mu      sync.Mutex
	pos     string                           // the last resourceVersion the list or watch showed
	ql      *coordinationv1.Lease            // the queue Lease; nil: none
	waiters map[string]*coordinationv1.Lease // the waiter Leases, by name
	ended   bool
	moved   chan struct{} // closed, and replaced, whenever pos moves or the follower ends
}

// waitWatch is the watch of the lock Lease a waiting round follows.
type waitWatch struct {
	w   watch.Interface
	l   *Locker
	ctx context.Context // Acquire's: a follower started from the round's grant lives as long
}

// watch opens the watch a waiting round follows from resourceVersion rv: of the lock Lease alone.
func (l *Locker) watch(ctx context.Context, _ *acquisition, _ *coordinationv1.Lease, rv string) (*waitWatch, error) {
	w, err := l.leases.Watch(ctx, metav1.ListOptions{
		FieldSelector: l.byName(), ResourceVersion: rv, AllowWatchBookmarks: true,
	})
	if err != nil {
		return nil, err
	}
	return &waitWatch{w: w, l: l, ctx: ctx}, nil
}

// followFrom makes g, granted from the queue on Lease cur that others wait for, follow the
// lock's queue until g ends or ctx (Acquire's) does: it lists the lock's Leases and watches them
// from that list, in the background, so that its release needs no read (queueFor). A principal
// that may not list or watch them that way reads at release, as does one whose follower is not
// ready by then.
func (l *Locker) followFrom(ctx context.Context, g *Grant, cur *coordinationv1.Lease) {
	sel := lease.FollowSelector(cur)
	if sel == "" || l.noFollow.Load() {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	f := &follower{lock: l.name, waiters: map[string]*coordinationv1.Lease{}, moved: make(chan struct{}), stop: cancel}
	g.mu.Lock()
	g.follower = f
	g.mu.Unlock()
	go func() {
		defer f.end()
		list, err := l.leases.List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			l.noFollow.Store(l.noFollow.Load() || apierrors.IsForbidden(err))
			return
		}
		w, err := l.leases.Watch(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: list.ResourceVersion,
			AllowWatchBookmarks: true})
		if err != nil {
			l.noFollow.Store(l.noFollow.Load() || apierrors.IsForbidden(err))
			return
		}
		defer w.Stop()
		f.mu.Lock()
		for i := range list.Items {
			f.keep(&list.Items[i], watch.Added)
		}
		f.pos = list.ResourceVersion
		close(f.moved)
		f.moved = make(chan struct{})
		f.mu.Unlock()
		for ev := range w.ResultChan() {
			le, ok := f.observe(ev)
			if !ok || (le != nil && !g.heldIn(le)) {
				return
			}
		}
	}()
}

// byName selects the lock Lease alone.
func (l *Locker) byName() string {
	return fields.OneTermEqualSelector("metadata.name", l.name).String()
}

// lockEvent returns the event the waiter decides on: the watch is of the lock Lease alone.
func (ww *waitWatch) lockEvent(ev watch.Event) (watch.Event, bool) { return ev, true }

// grant makes g, the grant the round ends with, follow the queue if others wait (followFrom).
func (ww *waitWatch) grant(g *Grant) *Grant {
	if g != nil {
		if st, err := lease.Read(g.lease); err == nil && st.Waiting {
			ww.l.followFrom(ww.ctx, g, g.lease)
		}
	}
	return g
}

// stop ends the watch at the end of the round.
func (ww *waitWatch) stop() { ww.w.Stop() }

// observe records ev. It returns the lock Lease the event carries, if any, and false once the
// watch cannot be followed: an error event, or the lock Lease gone from the selection (deleted,
// or its label removed).
func (f *follower) observe(ev watch.Event) (*coordinationv1.Lease, bool) {
	le, isLease := ev.Object.(*coordinationv1.Lease)
	if ev.Type == watch.Error || !isLease {
		f.end()
		return nil, false
	}
	var lock *coordinationv1.Lease
	f.mu.Lock()
	switch {
	case ev.Type == watch.Bookmark:
	case le.Name == f.lock && ev.Type == watch.Deleted:
		f.mu.Unlock()
		f.end()
		return nil, false
	case le.Name == f.lock:
		lock = le
	default:
		f.keep(le, ev.Type)
	}
	if le.ResourceVersion != "" {
		f.pos = le.ResourceVersion
	}
	close(f.moved)
	f.moved = make(chan struct{})
	f.mu.Unlock()
	return lock, true
}

// keep records le, one of the lock's queue Leases, as an event of type t shows it (f.mu held, or
// f not shared yet).
func (f *follower) keep(le *coordinationv1.Lease, t watch.EventType) {
	switch le.Labels[locksv1alpha1.RoleLabel] {
	case locksv1alpha1.RoleQueue:
		if f.ql = le; t == watch.Deleted {
			f.ql = nil // a recreated queue Lease is shown afresh
		}
	case locksv1alpha1.RoleWaiter:
		if f.waiters[le.Name] = le; t == watch.Deleted {
			delete(f.waiters, le.Name)
		}
	}
}

// end stops the watch; the follower then answers nothing.
func (f *follower) end() {
	f.mu.Lock()
	if f.ended {
		f.mu.Unlock()
		return
	}
	f.ended = true
	close(f.moved)
	f.mu.Unlock()
	f.stop()
}

// queueAsOf returns the queue as of resourceVersion rv or later (lease.Covers) for a lock whose
// last queued grant is served, waiting up to followWait for the watch to get there. It returns
// false when it cannot say: the watch lags, or ended; the queue is then read.
func (f *follower) queueAsOf(ctx context.Context, rv string, served lease.Ticket) (*lease.Queue, bool) {
	timer := time.NewTimer(followWait) // a bound on a network wait, not lock time: the real clock
	defer timer.Stop()
	for {
		f.mu.Lock()
		pos, ended, moved := f.pos, f.ended, f.moved
		if !ended && lease.Covers(pos, rv) {
			items := make([]*coordinationv1.Lease, 0, len(f.waiters)+1)
			if f.ql != nil {
				items = append(items, f.ql)
			}
			for _, w := range f.waiters {
				items = append(items, w)
			}
			f.mu.Unlock()
			q, _ := lease.QueueFrom(items, served)
			return &q, true
		}
		f.mu.Unlock()
		if ended {
			return nil, false
		}
		select {
		case <-moved:
		case <-timer.C:
			return nil, false
		case <-ctx.Done():
			return nil, false
		}
	}
}

// unfollow ends the grant's follower, if any.
func (g *Grant) unfollow() {
	g.mu.Lock()
	f := g.follower
	g.follower = nil
	g.mu.Unlock()
	if f != nil {
		f.end()
	}
}

// heldIn reports whether le shows this grant: its holder with its token.
func (g *Grant) heldIn(le *coordinationv1.Lease) bool {
	st, err := lease.Read(le)
	if err != nil {
		return false
	}
	mine, ok := st.HolderOf(g.locker.identity)
	return ok && mine.Token == g.token
}

// queueFor returns the queue a release computed from cur serves: the followed one when the
// follower has it as of cur, else one read (readQueue).
func (g *Grant) queueFor(ctx context.Context, cur *coordinationv1.Lease) (*lease.Queue, error) {
	g.mu.Lock()
	f := g.follower
	g.mu.Unlock()
	if f != nil {
		st, _ := lease.Read(cur) // the transition that asked for the queue has vetted cur
		if q, ok := f.queueAsOf(ctx, cur.ResourceVersion, st.Served); ok {
			return q, nil
		}
	}
	return g.locker.readQueue(ctx, cur)
}
