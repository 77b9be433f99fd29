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
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/token"
)

// A held grant follows its Lease on a watch, so that its release and renewals are computed from
// the Lease as it is now. Others write the Lease while it is held (a waiter's waiting mark, the
// manager's duration change): a write computed from the grant's own last write conflicts, reads
// the Lease and writes again, three requests where one does. Under contention that is every
// handover.

// followDelay is how long a grant that came without a watch (taken at once, or from this Locker's
// last write) waits before opening one: a grant released sooner has cost no request for it.
const followDelay = 100 * time.Millisecond

// followRetry is the pause before a watch that failed is opened again.
const followRetry = time.Second

// follow starts following the grant's Lease, on w (the watch Acquire waited on, from before the
// grant's write) or, if w is nil, on a watch opened after followDelay. It ends with the grant:
// released, lost, shown gone by the Lease, or left unrenewed past its lease (an abandoned grant
// does not watch for ever).
func (g *Grant) follow(w watch.Interface) {
	ctx, cancel := context.WithCancel(context.Background())
	g.mu.Lock()
	if g.released || g.lostErr != nil || g.stopFollowing != nil { // over, or followed already
		g.mu.Unlock()
		cancel()
		if w != nil {
			w.Stop()
		}
		return
	}
	g.stopFollowing = cancel
	g.mu.Unlock()
	go g.followLease(ctx, w)
}

// unfollow stops following; g.mu is held.
func (g *Grant) unfollow() {
	if g.stopFollowing != nil {
		g.stopFollowing()
	}
}

func (g *Grant) followLease(ctx context.Context, w watch.Interface) {
	l := g.locker
	pause := followDelay
	for {
		if w == nil {
			select {
			case <-ctx.Done():
				return
			case <-l.clock.After(pause):
			}
			g.mu.Lock()
			rv := g.lease.ResourceVersion
			g.mu.Unlock()
			var err error
			w, err = l.leases.Watch(ctx, metav1.ListOptions{
				FieldSelector:   fields.OneTermEqualSelector("metadata.name", l.name).String(),
				ResourceVersion: rv, AllowWatchBookmarks: true,
			})
			if err != nil {
				w, pause = nil, followRetry // writes re-read on conflicts meanwhile
				continue
			}
		}
		more, healthy := g.followWatch(ctx, w)
		w.Stop()
		w, pause = nil, 0
		if !more {
			return
		}
		if !healthy {
			pause = followRetry
		}
	}
}

// followWatch takes w's events until it ends. more is false when following should stop; healthy
// is false when the watch ended with an error (e.g. 410 Gone), to be opened again after a pause.
func (g *Grant) followWatch(ctx context.Context, w watch.Interface) (more, healthy bool) {
	l := g.locker
	for {
		g.mu.Lock()
		st, _ := lease.Read(g.lease)
		until := g.renewedAt.Add(max(st.Duration, minLeaseDuration))
		g.mu.Unlock()
		left := until.Sub(l.clock.Now())
		if left <= 0 {
			return false, true // not renewed within its lease: the grant is over or abandoned
		}
		timer := l.clock.NewTimer(left)
		select {
		case <-ctx.Done():
			timer.Stop()
			return false, true
		case <-timer.C():
			continue // renewed meanwhile, or over: the loop tells
		case ev, ok := <-w.ResultChan():
			timer.Stop()
			if !ok {
				return true, true
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				if le, isLease := ev.Object.(*coordinationv1.Lease); isLease && !g.observe(le) {
					return false, true
				}
			case watch.Deleted:
				return false, true // the next write finds the lock gone
			case watch.Error:
				return true, false
			}
		}
	}
}

// observe takes le as the grant's Lease if it is newer than the one the grant has, and reports
// whether the grant may still be held: false once a newer Lease no longer shows it.
func (g *Grant) observe(le *coordinationv1.Lease) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !newer(le, g.lease) {
		return true // the grant's own write, or older (a watch opened before it)
	}
	g.lease = le
	g.notePermit(le)
	st, err := lease.Read(le)
	if err != nil {
		return true // malformed: the next write says what, as before
	}
	_, shown := st.Permit(g.locker.identity, g.token)
	return shown
}

// newer reports whether a is a later version of the Lease than b. Resource versions are etcd
// revisions (the fencing tokens are built on that: pkg/token); one that does not parse is never
// taken as newer, and the grant keeps the copy it wrote.
func newer(a, b *coordinationv1.Lease) bool {
	ra, errA := token.FromResourceVersion(a.ResourceVersion)
	rb, errB := token.FromResourceVersion(b.ResourceVersion)
	return errA == nil && errB == nil && ra > rb
}
