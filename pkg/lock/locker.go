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
	"fmt"
	"sync"
	"sync/atomic"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/fencedlock/fencedlock/internal/lockhook"
	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/token"
)

// Locker acquires one FencedLock under one holder identity.
type Locker struct {
	leases    coordinationv1client.LeaseInterface
	writer    lease.Writer
	namespace string
	name      string
	identity  string
	clock     clock.WithTicker
	onWait    func(Status)
	noQueue   bool
	// noFollow is set once the API server refused a watch of both of the lock's Leases
	// (follow.go): this principal may watch the lock Lease by name only.
	noFollow atomic.Bool

	// last is the latest Lease this Locker wrote or read. A Locker that just released can grant
	// itself again from it with a single write; a stale copy only costs a conflict.
	mu   sync.Mutex
	last *coordinationv1.Lease
	// mine is this identity's waiter Lease as last written: a join starts from it (one write).
	mine *coordinationv1.Lease
	// idle is the follower of this Locker's last grant, kept with its watch for the next Acquire
	// (park, resume).
	idle *follower
	// waitSlot is held by the Acquire that waits: an identity has one waiter Lease per lock, so
	// two Acquires of one Locker that both queued would take each other's place in turn.
	waitSlot chan struct{}
}

// Option configures a Locker.
type Option func(*Locker)

// WithIdentity sets the holder identity (default: hostname, pid and a random suffix). Two
// processes must never share one. New refuses an identity ValidateIdentity refuses.
func WithIdentity(id string) Option { return func(l *Locker) { l.identity = id } }

// WithClock sets the clock used for lease timestamps and renewal timing (default: the real one).
func WithClock(c clock.WithTicker) Option { return func(l *Locker) { l.clock = c } }

// WithWaitCallback sets a function Acquire calls whenever it finds the lock held by a new holder
// (a semaphore: its holders or their tokens changed), or not yet initialized, e.g. to show
// progress. It runs on Acquire's goroutine: a slow callback delays the wait.
func WithWaitCallback(f func(Status)) Option { return func(l *Locker) { l.onWait = f } }

func init() {
	lockhook.SetWithoutQueue(func() Option { return func(l *Locker) { l.noQueue = true } })
}

// New returns a Locker for FencedLock namespace/name, or the error of invalid options (see
// ValidateIdentity). It makes no API call.
func New(leases coordinationv1client.LeasesGetter, namespace, name string, opts ...Option) (*Locker, error) {
	l := &Locker{namespace: namespace, name: name, identity: defaultIdentity(), clock: clock.RealClock{},
		waitSlot: make(chan struct{}, 1)}
	for _, o := range opts {
		o(l)
	}
	switch {
	case namespace == "" || name == "":
		return nil, fmt.Errorf("lock %q: namespace and name must not be empty", l.key())
	case leases == nil:
		return nil, fmt.Errorf("lock %s: no Leases client", l.key())
	}
	if err := ValidateIdentity(l.identity); err != nil {
		return nil, fmt.Errorf("lock %s: %w", l.key(), err)
	}
	l.leases, l.writer = leases.Leases(namespace), lease.TypedWriter{Leases: leases}
	return l, nil
}

// NewForConfig returns a Locker talking to the API server of cfg, or the error of invalid options.
func NewForConfig(cfg *rest.Config, namespace, name string, opts ...Option) (*Locker, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("lock %s/%s: creating client: %w", namespace, name, err)
	}
	return New(cs.CoordinationV1(), namespace, name, opts...)
}

// Identity returns the holder identity this Locker acquires under.
func (l *Locker) Identity() string { return l.identity }

func (l *Locker) key() string { return l.namespace + "/" + l.name }

// Attach returns the grant this Locker's identity holds with tok, e.g. to renew or release from
// another process than the one that acquired. It fails with a *LostError if the lock has another
// holder or token, and wraps ErrNoLease if the lock does not exist.
func (l *Locker) Attach(ctx context.Context, tok token.Token) (*Grant, error) {
	cur, err := l.getLease(ctx)
	if err != nil {
		return nil, err
	}
	if err := lease.CheckHolder(cur, l.identity, tok); err != nil {
		return nil, fmt.Errorf("lock %s: %w", l.key(), fromLease(err))
	}
	return l.newGrant(cur, tok, l.clock.Now()), nil
}

// getLease reads the lock's Lease; a missing one is an error wrapping ErrNoLease.
func (l *Locker) getLease(ctx context.Context) (*coordinationv1.Lease, error) {
	cur, err := l.leases.Get(ctx, l.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("lock %s: %w", l.key(), ErrNoLease)
	}
	if err != nil {
		return nil, fmt.Errorf("lock %s: reading lease: %w", l.key(), err)
	}
	return cur, nil
}

func (l *Locker) remember(le *coordinationv1.Lease) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last = le
}

// tryLast tries to grant from the remembered Lease if it shows the lock free (a permit of a
// semaphore free). It returns nil, nil when there is nothing to try or the copy was stale.
func (l *Locker) tryLast(ctx context.Context, a *acquisition) (*Grant, error) {
	l.mu.Lock()
	cur := l.last
	l.mu.Unlock()
	if cur == nil {
		return nil, nil
	}
	if st, err := lease.Read(cur); err != nil || st.Full() || !st.Initialized() {
		return nil, nil
	}
	return l.attempt(ctx, a, cur)
}

// heldLast returns the remembered Lease if it shows the lock held by others (every permit of a
// semaphore, none of them by this identity), nil otherwise.
func (l *Locker) heldLast() *coordinationv1.Lease {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		return nil
	}
	st, err := lease.Read(l.last)
	if _, mine := st.HolderOf(l.identity); err != nil || !st.Full() || mine {
		return nil
	}
	return l.last
}
