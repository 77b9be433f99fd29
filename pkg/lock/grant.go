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
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/token"
)

// minLeaseDuration is the shortest lease a FencedLock allows (spec.leaseDurationSeconds >= 1). A
// Lease that carries no duration (the controller restores it from the FencedLock) is renewed as
// if it were this short: renewing too often costs writes, renewing too late costs the grant.
const minLeaseDuration = time.Second

// Grant is one holding of the lock (a permit of a semaphore). Its token is fixed for its life.
type Grant struct {
	locker *Locker
	token  token.Token

	mu        sync.Mutex
	lease     *coordinationv1.Lease // last state this grant wrote or read
	renewedAt time.Time             // local time of the last successful write
	lost      chan struct{}
	lostErr   error
	released  bool
	permit    int        // the permit's number as lease last showed it
	keepAlive *KeepAlive // the running keep-alive, if any
	follower  *follower  // the watch that shows the lock's queue, if the grant follows it
}

// newGrant is the one constructor of a Grant: tok held as the Lease le shows, last written or
// confirmed at renewedAt on this process's clock.
func (l *Locker) newGrant(le *coordinationv1.Lease, tok token.Token, renewedAt time.Time) *Grant {
	g := &Grant{locker: l, token: tok, lease: le, renewedAt: renewedAt, lost: make(chan struct{}), permit: 1}
	g.notePermit(le)
	return g
}

// Token returns the fencing token to present with every write made under this grant.
func (g *Grant) Token() token.Token { return g.token }

// Holder returns the identity the grant is held under.
func (g *Grant) Holder() string { return g.locker.identity }

// Permit returns the number of the permit the grant holds, from 1 to the lock's spec.permits
// (always 1 for a lock), as its Lease last showed it. Only the token identifies a grant: a
// permit's number is reused by later grants, and a semaphore turned back into a lock
// (spec.permits: 1) numbers its one holder 1.
func (g *Grant) Permit() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.permit
}

// notePermit records the grant's permit number from le, if le shows the grant; g.mu is held or
// g is not shared yet.
func (g *Grant) notePermit(le *coordinationv1.Lease) {
	st, err := lease.Read(le)
	if err != nil {
		return
	}
	if p, ok := st.Permit(g.locker.identity, g.token); ok {
		g.permit = p.Number
	}
}

// Duration returns the lease duration the grant must be renewed within, as its Lease last showed
// it; a Lease without one counts as the shortest a FencedLock allows, 1 s.
func (g *Grant) Duration() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	st, _ := lease.Read(g.lease)
	return max(st.Duration, minLeaseDuration)
}

// Lost is closed when the grant is known to be lost: a renewal found another holder or token, or
// the keep-alive could not renew within the lease duration. Err then says why.
func (g *Grant) Lost() <-chan struct{} { return g.lost }

// Err returns why the grant was lost (a *LostError), or nil.
func (g *Grant) Err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lostErr
}

func (g *Grant) markLost(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.lostErr == nil && !g.released {
		g.lostErr = err
		close(g.lost)
	}
	if f := g.follower; f != nil {
		g.follower = nil
		go f.end() // not under g.mu
	}
}

// Renew extends the grant. It fails with a *LostError if the lock has another holder or token
// now; the grant is then lost for good.
func (g *Grant) Renew(ctx context.Context) error {
	l := g.locker
	err := g.update(ctx, func(next *coordinationv1.Lease, _ *lease.Queue) error {
		return lease.Renew(next, l.identity, g.token, l.clock.Now())
	})
	if errors.Is(err, ErrLost) {
		g.markLost(err)
	}
	return err
}

// Release frees the lock, and stops the grant's keep-alive and waits for it. If waiters are
// queued, the same write grants the lock to the live head of the queue (or, for a pod, keeps it
// for the manager to grant): a handover costs one write. Releasing a grant that was lost returns
// its *LostError.
func (g *Grant) Release(ctx context.Context) error {
	l := g.locker
	g.parking(true)
	err := g.update(ctx, func(next *coordinationv1.Lease, q *lease.Queue) error {
		_, err := lease.Release(next, l.identity, g.token, q, l.clock.Now())
		return err
	})
	if errors.Is(err, ErrLost) {
		g.markLost(err)
	}
	if err != nil && g.Err() == nil {
		g.parking(false)
		return err // the grant still holds the lock: its keep-alive goes on
	}
	g.mu.Lock()
	g.released = err == nil
	ka := g.keepAlive
	g.mu.Unlock()
	g.unfollow(err == nil)
	if ka != nil {
		ka.Stop()
	}
	return err
}

// update runs one transition against the Lease with compare-and-swap, re-reading the Lease on
// conflicts (the controller may have written it, e.g. to change the lease duration) after a
// pause (conflictPause). It starts from the newest Lease it knows: the grant's own, or a later
// one its follower's watch showed (a semaphore's other permits, a waiter's mark), which the
// grant's own would only meet as a conflict and a read. A transition that needs the lock's
// queue (lease.ErrQueueNeeded) is run again with the queue, read after the Lease it is computed
// from. pkg/lease's refusals are returned as this package's errors.
func (g *Grant) update(ctx context.Context, transition func(next *coordinationv1.Lease, q *lease.Queue) error) error {
	l := g.locker
	g.mu.Lock()
	cur, f := g.lease, g.follower
	g.mu.Unlock()
	if f != nil {
		cur = newer(cur, f.latestLock())
	}
	var q *lease.Queue
	conflicts := 0
	for {
		out, err := lease.CAS(ctx, l.writer, cur, func(next *coordinationv1.Lease) error { return transition(next, q) })
		if err == nil {
			g.mu.Lock()
			g.lease, g.renewedAt = out, l.clock.Now()
			g.notePermit(out)
			g.mu.Unlock()
			l.remember(out)
			return nil
		}
		if errors.Is(err, lease.ErrQueueNeeded) && q == nil {
			if q, err = g.queueFor(ctx, cur); err != nil {
				return err
			}
			continue
		}
		if !apierrors.IsConflict(err) {
			return fromLease(err)
		}
		q = nil
		conflicts++
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(conflictPause(conflicts)): // pacing against other writers: the real clock
		}
		cur, err = l.getLease(ctx)
		if errors.Is(err, ErrNoLease) {
			return &LostError{Holder: l.identity, Token: g.token}
		}
		if err != nil {
			return err
		}
	}
}
