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
	"sync/atomic"
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
// docs/protocol.md, "Release"). A waiting round watches all of the lock's Leases (the lock
// Lease, its queue Lease, its waiter Leases), not the lock Lease alone, and keeps what the watch
// shows of the queue; its grant keeps that watch until the grant ends (or Acquire's context
// does): when it releases, the watch has shown the queue as of the lock Lease version the
// release is conditioned on, so the release is one write, and the grant opened no watch and read
// no list of its own. Every waiter is then sent every join and beat of its lock's queue besides
// the lock Lease's events: one event per waiter and grant, cheaper for the API server than the
// list and the watch each grant opened otherwise (docs/benchmarks.md, the grant cycles).

// followWait bounds how long a release waits for the watch to show the lock Lease version it is
// conditioned on (usually its own last write, delivered within a millisecond) before it reads the
// queue instead.
const followWait = 50 * time.Millisecond

// follower keeps the lock's queue as a list of its Leases and the watch that follows showed it:
// the queue Lease (the manager's pods) and the waiter Leases.
type follower struct {
	lock string // the lock Lease's name; its queue and waiter Leases carry the role label
	stop func() // ends the watch
	// since is the resourceVersion the watch started from, with no list before it (a waiting
	// round's watch), 0 after a list. Such a follower has seen every queue entry joined after
	// since, and none before: it answers for a queue served up to since or later (queueAsOf),
	// whose every waiting entry was joined after the served one.
	since lease.Ticket

	mu      sync.Mutex
	pos     string                           // the last resourceVersion the list or watch showed
	lockL   *coordinationv1.Lease            // the lock Lease as the watch last showed it
	ql      *coordinationv1.Lease            // the queue Lease; nil: none
	waiters map[string]*coordinationv1.Lease // the waiter Leases, by name
	ended   bool
	moved   chan struct{} // closed, and replaced, whenever pos moves or the follower ends

	// A follower on a waiting round's watch (w, opened with ctx) outlives its grant: its Locker
	// keeps it for the next Acquire (Locker.park), which waits on that watch instead of opening
	// one. parking is set from the grant's release on, so that the release's own event does not
	// end it; take hands the watch from run to the next round.
	w       watch.Interface
	ctx     context.Context
	parking atomic.Bool
	take    chan chan struct{}
	runDone chan struct{}
}

func newFollower(lock, pos string, since lease.Ticket, stop func()) *follower {
	return &follower{lock: lock, pos: pos, since: since, stop: stop, waiters: map[string]*coordinationv1.Lease{},
		moved: make(chan struct{})}
}

// waitWatch is the watch of the lock's Leases a waiting round follows.
type waitWatch struct {
	w   watch.Interface
	l   *Locker
	ctx context.Context // Acquire's: a follower started from the round's grant lives as long
	// f keeps the queue the watch shows, when it shows all of the lock's Leases; nil when it
	// shows the lock Lease alone. handed is set once the round's grant took f and the watch over.
	f      *follower
	handed bool
}

// watch opens the watch a waiting round follows from resourceVersion rv: of all of the lock's
// Leases when cur, the lock Lease as last seen, has their label (lease.FollowSelector) and the
// principal may watch them so; else of the lock Lease alone.
func (l *Locker) watch(ctx context.Context, _ *acquisition, cur *coordinationv1.Lease, rv string) (*waitWatch, error) {
	since, err := lease.ParseTicket(rv)
	if sel := followSelector(cur); sel != "" && err == nil && !l.noFollow.Load() {
		w, err := l.leases.Watch(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: rv, AllowWatchBookmarks: true})
		if err == nil {
			f := newFollower(l.name, rv, since, w.Stop)
			f.w, f.ctx, f.take = w, ctx, make(chan chan struct{})
			return &waitWatch{w: w, l: l, ctx: ctx, f: f}, nil
		}
		if !apierrors.IsForbidden(err) {
			return nil, err
		}
		l.noFollow.Store(true)
	}
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
	f := newFollower(l.name, "", 0, cancel)
	g.setFollower(f)
	go func() {
		list, err := l.leases.List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			l.noFollow.Store(l.noFollow.Load() || apierrors.IsForbidden(err))
			f.end()
			return
		}
		w, err := l.leases.Watch(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: list.ResourceVersion,
			AllowWatchBookmarks: true})
		if err != nil {
			l.noFollow.Store(l.noFollow.Load() || apierrors.IsForbidden(err))
			f.end()
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
		f.run(g, w)
	}()
}

// run keeps f from w's events until the watch ends or shows g's grant over (lost, unless its
// release parks f), then ends f; or until the next round takes the watch over (take).
func (f *follower) run(g *Grant, w watch.Interface) {
	done := f.runDone
	defer func() {
		if done != nil {
			close(done)
		}
	}()
	for {
		select {
		case ev, open := <-w.ResultChan():
			if !open {
				f.end()
				return
			}
			le, ok := f.observe(ev)
			if !ok {
				return
			}
			if le != nil && !f.parking.Load() && !g.heldIn(le) {
				f.end()
				return
			}
		case ack := <-f.take: // nil for a follower that is never taken
			close(ack)
			return
		}
	}
}

// idleKeep is how long a Locker keeps its last grant's watch for its next Acquire: a worker that
// acquires again at once waits on it, instead of opening a watch per grant.
const idleKeep = 2 * time.Second

// park keeps f, the follower of a grant that ended, for this Locker's next Acquire (resume), for
// idleKeep at most; a follower that cannot be taken over is ended.
func (l *Locker) park(f *follower) {
	if f.take == nil || f.runDone == nil { // not a round's watch, or nobody reads it
		f.end()
		return
	}
	l.mu.Lock()
	old := l.idle
	l.idle = f
	l.mu.Unlock()
	if old != nil {
		old.end()
	}
	time.AfterFunc(idleKeep, func() { // a bound on an idle watch, not lock time: the real clock
		l.mu.Lock()
		expired := l.idle == f
		if expired {
			l.idle = nil
		}
		l.mu.Unlock()
		if expired {
			f.end()
		}
	})
}

// resume returns the round's watch from the follower this Locker kept (park), nil if none is
// kept or it ended: the round waits on it, from the lock Lease as it last showed it.
func (l *Locker) resume() *waitWatch {
	l.mu.Lock()
	f := l.idle
	l.idle = nil
	l.mu.Unlock()
	if f == nil {
		return nil
	}
	ack := make(chan struct{})
	select {
	case f.take <- ack:
		<-ack
	case <-f.runDone:
		f.end()
		return nil
	}
	f.mu.Lock()
	ended := f.ended
	f.mu.Unlock()
	if ended || f.ctx.Err() != nil {
		f.end()
		return nil
	}
	f.parking.Store(false)
	return &waitWatch{w: f.w, l: l, ctx: f.ctx, f: f}
}

// latestLock is the lock Lease as the watch last showed it, nil before any event of it.
func (f *follower) latestLock() *coordinationv1.Lease {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lockL
}

// setFollower makes f the follower g's release asks for the queue.
func (g *Grant) setFollower(f *follower) {
	g.mu.Lock()
	g.follower = f
	g.mu.Unlock()
}

// followSelector is lease.FollowSelector of cur, "" when there is no Lease yet.
func followSelector(cur *coordinationv1.Lease) string {
	if cur == nil {
		return ""
	}
	return lease.FollowSelector(cur)
}

// byName selects the lock Lease alone.
func (l *Locker) byName() string {
	return fields.OneTermEqualSelector("metadata.name", l.name).String()
}

// lockEvent sorts ev, an event of the round's watch: it returns the lock Lease's events for the
// waiter to decide on; it keeps the queue's (and bookmarks) in the round's follower, and says to
// skip them; ok is false once the watch cannot be followed (an error event, or the lock Lease gone
// from the selection): the round lists again.
func (ww *waitWatch) lockEvent(ev watch.Event) (out watch.Event, skip, ok bool) {
	if ww.f == nil {
		return ev, false, true
	}
	le, ok := ww.f.observe(ev)
	return ev, ok && le == nil, ok
}

// grant makes g, the grant the round ends with, follow the queue if others wait: on the round's
// own watch when it has shown every entry the grant's release may serve (those joined after the
// lock's served ticket, as of the grant), else on a watch of its own (followFrom).
func (ww *waitWatch) grant(g *Grant) *Grant {
	if g == nil {
		return nil
	}
	st, err := lease.Read(g.lease)
	if err != nil || !st.Waiting {
		return g
	}
	if ww.f != nil && st.Served >= ww.f.since {
		ww.handed = true
		g.setFollower(ww.f)
		ww.f.runDone = make(chan struct{})
		go ww.f.run(g, ww.w)
		return g
	}
	ww.l.followFrom(ww.ctx, g, g.lease)
	return g
}

// stop ends the watch at the end of the round, unless its grant follows the queue on it.
func (ww *waitWatch) stop() {
	if !ww.handed {
		ww.w.Stop()
	}
}

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
	case f.ended: // ended by its grant's end while an event was on its way
		f.mu.Unlock()
		return nil, false
	case ev.Type == watch.Bookmark:
	case le.Name == f.lock && ev.Type == watch.Deleted:
		f.mu.Unlock()
		f.end()
		return nil, false
	case le.Name == f.lock:
		lock, f.lockL = le, le
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
	if served < f.since { // entries joined up to since were never shown
		return nil, false
	}
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

// unfollow ends the grant's follower, if any, or, once the grant was released, keeps it for the
// Locker's next Acquire (park).
func (g *Grant) unfollow(released bool) {
	g.mu.Lock()
	f := g.follower
	g.follower = nil
	g.mu.Unlock()
	switch {
	case f == nil:
	case released:
		g.locker.park(f)
	default:
		f.end()
	}
}

// parking tells the grant's follower, if any, that the grant is being released: the release's
// own event must not end it (run). keep false takes that back (the release failed).
func (g *Grant) parking(keep bool) {
	g.mu.Lock()
	f := g.follower
	g.mu.Unlock()
	if f != nil {
		f.parking.Store(keep)
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
// follower has it as of cur with a head to serve, else one read (readQueue), which reads an empty
// queue again from etcd, as for a followed queue with no head (docs/protocol.md, Release step 3):
// a join the watch has not delivered yet would otherwise lose the waiting mark.
func (g *Grant) queueFor(ctx context.Context, cur *coordinationv1.Lease) (*lease.Queue, error) {
	g.mu.Lock()
	f := g.follower
	g.mu.Unlock()
	if f != nil {
		st, _ := lease.Read(cur) // the transition that asked for the queue has vetted cur
		if q, ok := f.queueAsOf(ctx, cur.ResourceVersion, st.Served); ok && hasHead(q, st.Served) {
			return q, nil
		}
	}
	return g.locker.readQueue(ctx, cur)
}

// newer returns whichever of a and b has the later resourceVersion (either may be nil).
func newer(a, b *coordinationv1.Lease) *coordinationv1.Lease {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case lease.Covers(a.ResourceVersion, b.ResourceVersion):
		return a
	}
	return b
}
