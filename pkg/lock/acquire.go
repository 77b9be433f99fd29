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
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"

	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/token"
)

// TryAcquire acquires the lock if it is free now (a semaphore: one of its free permits). It fails
// with a *HeldError (ErrHeld) if someone holds it (every permit, or this identity holds one
// already), a *ReservedError (ErrReserved) if it is free but owed to its queue, ErrNotInitialized
// if the manager has not initialized it, and wraps ErrNoLease if the lock does not exist.
// It makes one attempt: transient API errors are returned, not retried (Acquire retries them).
func (l *Locker) TryAcquire(ctx context.Context) (*Grant, error) {
	if g, err := l.tryLast(ctx, &acquisition{}); g != nil || err != nil {
		return g, err
	}
	for {
		cur, err := l.getLease(ctx)
		if err != nil {
			return nil, err
		}
		g, err := l.grant(ctx, cur, l.clock.Now())
		if apierrors.IsConflict(err) {
			continue // the Lease changed under us; look again
		}
		return g, err
	}
}

// Acquire blocks until the lock is granted to this Locker or ctx ends. It takes a free lock (a
// free permit of a semaphore) nobody is queued for at once; otherwise it joins the lock's one FIFO
// queue and waits on a watch of the lock's Lease, never by polling, until a release hands it the
// lock in the release's own write (or, if the holder went away, the manager grants it to the
// head). A missing Lease is waited for as well. An identity that holds a permit of a semaphore
// already waits, unqueued, until that one ends.
//
// A waiter watches the lock's queue with its Lease, and its grant keeps that watch until the
// grant ends or ctx does: its Release then hands the lock on in one write, without reading the
// queue. The Locker keeps the watch for a while after the Release, and an Acquire of it that
// waits then waits on that watch instead of opening one. A ctx that ends when Acquire returns
// costs that read and that watch.
//
// Acquire calls of one Locker wait one at a time: its identity queues once per lock.
//
// An API server that is restarting or overloaded does not end the wait: transient errors of its
// reads, watches and writes (connection refused or reset, timeouts, 429, 5xx) are retried with a
// jittered backoff of at most 1.5 s until ctx ends, and the error then says what failed last. A
// grant write whose response was lost is recognized on the next read (the Lease holds this
// identity with the token that write issued) and returned, rather than waited out. Errors that do
// not heal by retrying (Forbidden, Invalid, a malformed Lease) are returned at once.
func (l *Locker) Acquire(ctx context.Context) (*Grant, error) {
	select { // one Acquire of a Locker waits at a time (Locker.waitSlot); the others wait for it
	case l.waitSlot <- struct{}{}:
		defer func() { <-l.waitSlot }()
	case <-ctx.Done():
		return nil, l.waitError(ctx, &acquisition{})
	}
	a := &acquisition{}
	backoff := retryBackoff()
	g, err := l.tryLast(ctx, a)
	if g == nil && err == nil {
		a.from = l.heldLast() // a Locker that just handed the lock on queues without listing
		g, err = l.acquireOnce(ctx, a)
	}
	defer l.leave(ctx, a) // a waiter that gives up leaves the queue; a served one has nothing to do
	for g == nil {
		if ctx.Err() != nil {
			return nil, l.waitError(ctx, a)
		}
		if err != nil && !retryable(err) {
			return nil, err
		}
		if a.progress { // the API server serves again: start over quickly
			backoff, a.lastErr = retryBackoff(), nil
		}
		if err != nil {
			a.lastErr = err
		}
		// A watch that delivered events and then ended is re-listed at once; anything else waits.
		if err != nil || !a.progress {
			select {
			case <-ctx.Done():
				return nil, l.waitError(ctx, a)
			case <-l.clock.After(backoff.Step()):
			}
		}
		g, err = l.acquireOnce(ctx, a)
	}
	return g, nil
}

// waitError is Acquire's error once ctx ended, with the transient error it was retrying, if any.
func (l *Locker) waitError(ctx context.Context, a *acquisition) error {
	if a.lastErr != nil {
		return fmt.Errorf("lock %s: waiting for the lock: %w (retrying after: %v)", l.key(), ctx.Err(), a.lastErr)
	}
	return fmt.Errorf("lock %s: waiting for the lock: %w", l.key(), ctx.Err())
}

// acquisition is what one Acquire call carries across re-lists.
type acquisition struct {
	// unsure holds the tokens of grant writes whose outcome is unknown (the request failed after it
	// may have reached the API server), with the acquireTime each wrote. A Lease held by this
	// identity with one of them and that exact acquireTime (microseconds) is that write's result:
	// only a write conditioned on that resourceVersion can issue that token, and another process
	// sharing the identity (two scripts of one user on one host) writes another acquireTime.
	unsure map[token.Token]time.Time
	// seen is the last Status reported to the wait callback, if told.
	seen Status
	told bool
	// progress is true when the last round's watch delivered an event: the API server serves.
	progress bool
	// lastErr is the last transient error retried, for the error returned when ctx ends.
	lastErr error
	// ticket is this call's place in the lock's queue (its join's resourceVersion), zero while it
	// is not queued; beatDue is when its waiter Lease is next shown alive (local clock).
	ticket  lease.Ticket
	beatDue time.Time
	// last is the lock's Lease as last seen, to look at again after a beat found the entry gone.
	last *coordinationv1.Lease
	// from, if set, is where the next round starts instead of listing the Lease.
	from *coordinationv1.Lease
}

// acquireOnce lists the Lease and follows its watch until the lock is granted, an error occurs,
// or the watch must be restarted (nil, nil). The watch this Locker's last grant kept (resume)
// stands for both.
func (l *Locker) acquireOnce(ctx context.Context, a *acquisition) (*Grant, error) {
	a.progress = false
	cur, rv, ww, err := l.roundStart(ctx, a)
	if err != nil {
		return nil, err
	}
	if cur != nil {
		// A free lock is taken before any watch is opened: one read and one write.
		if g, err := l.attempt(ctx, a, cur); g != nil || err != nil {
			if ww != nil {
				g = ww.grant(g)
				ww.stop()
			}
			return g, err
		}
	}
	if ww == nil {
		if ww, err = l.watch(ctx, a, cur, rv); err != nil {
			return nil, fmt.Errorf("lock %s: watching lease: %w", l.key(), err)
		}
	}
	defer ww.stop()
	var beatTimer clock.Timer
	defer func() {
		if beatTimer != nil {
			beatTimer.Stop()
		}
	}()
	for {
		var beat <-chan time.Time
		if a.ticket != 0 { // a queued waiter shows its entry alive
			d := max(a.beatDue.Sub(l.clock.Now()), 0)
			if beatTimer == nil {
				beatTimer = l.clock.NewTimer(d)
			} else {
				beatTimer.Stop()
				beatTimer.Reset(d)
			}
			beat = beatTimer.C()
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-beat:
			if err := l.beat(ctx, a); err != nil {
				return nil, err
			}
			if a.ticket == 0 && a.last != nil { // the entry was gone: queue again
				if g, err := l.attempt(ctx, a, a.last); g != nil || err != nil {
					return ww.grant(g), err
				}
			}
		case ev, ok := <-ww.w.ResultChan():
			if !ok {
				return nil, nil // watch ended (timeout, API server restart): re-list
			}
			ev, skip, ok := ww.lockEvent(ev)
			if !ok {
				return nil, nil // an error, or the lock Lease left the selection: re-list
			}
			if skip { // the queue moved, or a bookmark
				a.progress = true
				continue
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				a.progress = true
				if cur, isLease := ev.Object.(*coordinationv1.Lease); isLease {
					if g, err := l.attempt(ctx, a, cur); g != nil || err != nil {
						return ww.grant(g), err
					}
				}
			case watch.Error:
				return nil, nil // e.g. 410 Gone: re-list
			default: // deletions, bookmarks: nothing to take
				a.progress = true
			}
		}
	}
}

// roundStart is where a waiting round starts: the lock Lease as last seen (nil: none) and the
// resourceVersion to watch from, or the watch this Locker's last grant kept (resume), which
// stands for both.
func (l *Locker) roundStart(ctx context.Context, a *acquisition) (*coordinationv1.Lease, string, *waitWatch, error) {
	if ww := l.resume(); ww != nil { // the last grant's watch, kept: its events since then follow
		cur := newer(a.from, ww.f.latestLock())
		a.from = nil
		return cur, "", ww, nil
	}
	if a.from != nil { // watch from a Lease this Locker wrote: events since then follow
		cur := a.from
		a.from = nil
		return cur, cur.ResourceVersion, nil, nil
	}
	list, err := l.leases.List(ctx, metav1.ListOptions{FieldSelector: l.byName()})
	if err != nil {
		return nil, "", nil, fmt.Errorf("lock %s: listing lease: %w", l.key(), err)
	}
	if len(list.Items) > 0 {
		return &list.Items[0], list.ResourceVersion, nil, nil
	}
	return nil, list.ResourceVersion, nil, nil
}

// attempt tries to take the lock from cur, the Lease as last seen. It returns nil, nil when the
// lock is not free there (after telling the wait callback) or someone else wrote first: the next
// event says more.
func (l *Locker) attempt(ctx context.Context, a *acquisition, cur *coordinationv1.Lease) (*Grant, error) {
	a.last = cur
	st, rerr := lease.Read(cur)
	if !lease.MadeByManager(cur) {
		// Someone else's Lease at the lock's name: it issues no token the fence accepts. Wait for
		// the manager, which replaces it (docs/protocol.md, which Lease is the lock's).
		l.waiting(a, lease.State{})
		return nil, nil
	}
	// This identity's permit, not the lock's last token: on a semaphore other permits may have
	// been granted since the write whose response was lost.
	mine, holds := st.HolderOf(l.identity)
	holds = holds && rerr == nil
	if sent, ok := a.unsure[mine.Token]; ok && holds && sameMicro(mine.AcquireTime, sent) {
		l.remember(cur)
		return l.newGrant(cur, mine.Token, sent), nil
	}
	if rerr == nil && a.ticket != 0 {
		if g := l.served(a, cur, st); g != nil {
			return g, nil
		}
	}
	if holds && st.Semaphore && a.ticket == 0 {
		// This identity holds a permit already (another grant of this Locker, or another process
		// under the same identity). It holds at most one, so it waits for that one to end instead
		// of queueing: the queue would serve it a second permit, and Served could not tell the two
		// apart.
		l.waiting(a, st)
		return nil, nil
	}
	sent := l.clock.Now()
	g, err := l.take(ctx, a, cur, st, sent)
	if notFree(err) {
		if err := l.queue(ctx, a, cur, st); err != nil {
			return nil, err
		}
	}
	switch {
	case err == nil:
		return g, nil
	case apierrors.IsConflict(err):
		return nil, nil // someone else wrote first; its event follows
	case notFree(err), errors.Is(err, ErrNotInitialized):
		l.waiting(a, st)
		return nil, nil
	case retryable(err):
		// A 429 was refused before it was applied: its outcome is known.
		if tok, terr := token.FromResourceVersion(cur.ResourceVersion); terr == nil && !apierrors.IsTooManyRequests(err) {
			if a.unsure == nil {
				a.unsure = map[token.Token]time.Time{}
			}
			a.unsure[tok] = sent
		}
	}
	return nil, err
}

// served returns the grant a handover made to this queued waiter, if cur shows one. A ticket the
// lock has served past without serving this waiter means its entry was dropped (judged dead, or
// malformed): it is forgotten, and the waiter queues again.
func (l *Locker) served(a *acquisition, cur *coordinationv1.Lease, st lease.State) *Grant {
	switch {
	case lease.Served(st, l.identity, a.ticket):
		a.ticket = 0
		l.remember(cur)
		mine, _ := st.HolderOf(l.identity) // its permit's token: the lock's may be a later permit's
		return l.newGrant(cur, mine.Token, l.clock.Now())
	case lease.Skipped(st, l.identity, a.ticket):
		a.ticket = 0
	}
	return nil
}

// take tries to grant the lock from cur to a caller that is not queued (lease.Grant: a free lock
// nobody waits for). A queued waiter never takes the lock: it is handed the lock by the release
// before it, or by the manager, so a free lock wakes no herd.
func (l *Locker) take(ctx context.Context, a *acquisition, cur *coordinationv1.Lease, st lease.State,
	now time.Time) (*Grant, error) {
	if a.ticket != 0 {
		return nil, heldError(st)
	}
	return l.grant(ctx, cur, now)
}

// heldError says why a queued waiter does not take the lock st shows, as TryAcquire says it to
// a newcomer: every permit is held, or the room there is goes to the queue.
func heldError(st lease.State) error {
	switch {
	case st.Full() && !st.Semaphore:
		return &HeldError{Holder: st.Holder, Token: st.Token, Permits: st.Limit}
	case st.Full():
		return &HeldError{Holders: st.Holders(), Token: st.Token, Permits: st.Limit}
	}
	return &ReservedError{Token: st.Token, Pod: st.Reserved != 0, Permits: st.Limit}
}

// queue makes sure a waiter on a lock it could not take is queued, and that the lock's holder
// knows someone waits.
func (l *Locker) queue(ctx context.Context, a *acquisition, cur *coordinationv1.Lease, st lease.State) error {
	if a.ticket == 0 {
		if err := l.join(ctx, a, cur, st); err != nil {
			return err
		}
	}
	if a.ticket != 0 && !st.Waiting {
		return l.markWaiting(ctx, cur)
	}
	return nil
}

// grant tries one compare-and-swap from cur. Conflicts are returned unwrapped.
func (l *Locker) grant(ctx context.Context, cur *coordinationv1.Lease, now time.Time) (*Grant, error) {
	return l.grantBy(ctx, cur, func(next *coordinationv1.Lease) (token.Token, error) {
		return lease.Grant(next, l.identity, now)
	})
}

// grantBy writes the grant transition makes from cur, in one compare-and-swap, and returns the
// Grant. Conflicts are returned unwrapped.
func (l *Locker) grantBy(ctx context.Context, cur *coordinationv1.Lease,
	transition func(*coordinationv1.Lease) (token.Token, error)) (*Grant, error) {
	var tok token.Token
	out, err := lease.CAS(ctx, l.writer, cur, func(next *coordinationv1.Lease) error {
		var err error
		tok, err = transition(next)
		return fromLease(err)
	})
	if err != nil {
		if apierrors.IsConflict(err) {
			return nil, err
		}
		return nil, fmt.Errorf("lock %s: %w", l.key(), err)
	}
	l.remember(out)
	return l.newGrant(out, tok, l.clock.Now()), nil
}

// sameMicro reports whether stored, a MicroTime read back from the API server, is t as written.
func sameMicro(stored *metav1.MicroTime, t time.Time) bool {
	return stored != nil && stored.UTC().Format(metav1.RFC3339Micro) == t.UTC().Format(metav1.RFC3339Micro)
}
