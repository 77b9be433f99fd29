// Package lock is the Go client of fencedlock: acquire a FencedLock, receive its fencing token,
// renew and release it, and learn when the grant is lost.
//
// The token, not this package, is what keeps data safe. A process can be paused (GC, SIGSTOP, a
// descheduled VM) at any instruction, including right after it checked that it still holds the
// lock; renewal loops pause with it. Pass Grant.Token with every write to fenced storage (a fenced
// Kubernetes object, a database row with a fence column) and let the storage refuse stale tokens.
package lock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/token"
)

// ErrNoLease means the lock's Lease does not exist (yet): the FencedLock is missing or the
// fencedlock manager has not created its Lease.
var ErrNoLease = errors.New("lock has no Lease: create the FencedLock and make sure the fencedlock manager is running")

// Locker acquires one FencedLock under one holder identity.
type Locker struct {
	leases    coordinationv1client.LeaseInterface
	writer    lease.Writer
	namespace string
	name      string
	identity  string
	clock     clock.WithTicker
	onWait    func(lease.State)

	// last is the latest Lease this Locker wrote or read. A Locker that just released can grant
	// itself again from it with a single write; a stale copy only costs a conflict.
	mu   sync.Mutex
	last *coordinationv1.Lease
}

func (l *Locker) remember(le *coordinationv1.Lease) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last = le
}

// tryLast tries to grant from the remembered Lease if it shows the lock free. It returns nil, nil
// when there is nothing to try or the copy was stale.
func (l *Locker) tryLast(ctx context.Context) (*Grant, error) {
	l.mu.Lock()
	cur := l.last
	l.mu.Unlock()
	if cur == nil {
		return nil, nil
	}
	if st, err := lease.Read(cur); err != nil || st.Held() || !st.Initialized() {
		return nil, nil
	}
	g, err := l.grant(ctx, cur)
	if apierrors.IsConflict(err) {
		return nil, nil
	}
	return g, err
}

// Option configures a Locker.
type Option func(*Locker)

// WithIdentity sets the holder identity (default: hostname, pid and a random suffix). Two
// processes must never share one.
func WithIdentity(id string) Option { return func(l *Locker) { l.identity = id } }

// WithClock sets the clock used for lease timestamps and renewal timing.
func WithClock(c clock.WithTicker) Option { return func(l *Locker) { l.clock = c } }

// WithWaitCallback sets a function Acquire calls whenever it finds the lock held by a new holder
// (or not yet initialized), e.g. to show progress.
func WithWaitCallback(f func(lease.State)) Option { return func(l *Locker) { l.onWait = f } }

// New returns a Locker for FencedLock namespace/name.
func New(leases coordinationv1client.LeasesGetter, namespace, name string, opts ...Option) *Locker {
	l := &Locker{
		leases:    leases.Leases(namespace),
		writer:    lease.TypedWriter{Leases: leases},
		namespace: namespace,
		name:      name,
		identity:  defaultIdentity(),
		clock:     clock.RealClock{},
	}
	for _, o := range opts {
		o(l)
	}
	return l
}

// NewForConfig returns a Locker talking to the API server of cfg.
func NewForConfig(cfg *rest.Config, namespace, name string, opts ...Option) (*Locker, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating client: %w", err)
	}
	return New(cs.CoordinationV1(), namespace, name, opts...), nil
}

// Identity returns the holder identity this Locker acquires under.
func (l *Locker) Identity() string { return l.identity }

func defaultIdentity() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
}

func (l *Locker) key() string { return l.namespace + "/" + l.name }

// TryAcquire acquires the lock if it is free now. It fails with an error satisfying
// lease.IsHeld if someone holds it, and wraps ErrNoLease if the lock does not exist.
func (l *Locker) TryAcquire(ctx context.Context) (*Grant, error) {
	if g, err := l.tryLast(ctx); g != nil || err != nil {
		return g, err
	}
	for {
		cur, err := l.leases.Get(ctx, l.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("lock %s: %w", l.key(), ErrNoLease)
		}
		if err != nil {
			return nil, fmt.Errorf("lock %s: reading lease: %w", l.key(), err)
		}
		g, err := l.grant(ctx, cur)
		if apierrors.IsConflict(err) {
			continue // the Lease changed under us; look again
		}
		return g, err
	}
}

// Acquire blocks until the lock is granted to this Locker or ctx ends. It waits on a watch of the
// lock's Lease, never by polling, and tries to take the lock the moment an event shows it free.
// A missing Lease is waited for as well.
func (l *Locker) Acquire(ctx context.Context) (*Grant, error) {
	if g, err := l.tryLast(ctx); g != nil || err != nil {
		return g, err
	}
	for {
		g, err := l.acquireOnce(ctx)
		if g != nil || err != nil {
			return g, err
		}
	}
}

// acquireOnce lists the Lease and follows its watch until the lock is granted, an error occurs,
// or the watch must be restarted (nil, nil).
func (l *Locker) acquireOnce(ctx context.Context) (*Grant, error) {
	sel := fields.OneTermEqualSelector("metadata.name", l.name).String()
	list, err := l.leases.List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("lock %s: listing lease: %w", l.key(), err)
	}
	var cur *coordinationv1.Lease
	if len(list.Items) > 0 {
		cur = &list.Items[0]
		// A free lock is taken before any watch is opened: one read and one write.
		if st, err := lease.Read(cur); err == nil && !st.Held() && st.Initialized() {
			if g, err := l.grant(ctx, cur); err == nil || !apierrors.IsConflict(err) {
				return g, err
			}
			cur = nil // lost the race: the winner's write arrives on the watch
		}
	}
	w, err := l.leases.Watch(ctx, metav1.ListOptions{
		FieldSelector: sel, ResourceVersion: list.ResourceVersion, AllowWatchBookmarks: true,
	})
	if err != nil {
		return nil, fmt.Errorf("lock %s: watching lease: %w", l.key(), err)
	}
	defer w.Stop()
	var seen lease.State
	for {
		if cur != nil {
			g, err := l.grant(ctx, cur)
			switch {
			case err == nil:
				return g, nil
			case apierrors.IsConflict(err):
				// someone else wrote first; its event follows
			case lease.IsHeld(err), errors.Is(err, lease.ErrNotInitialized):
				if st, _ := lease.Read(cur); l.onWait != nil && (st.Holder != seen.Holder || st.Token != seen.Token) {
					seen = st
					l.onWait(st)
				}
			default:
				return nil, err
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("lock %s: waiting for the lock: %w", l.key(), ctx.Err())
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil, nil // watch ended (timeout, API server restart): re-list
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				if obj, isLease := ev.Object.(*coordinationv1.Lease); isLease {
					cur = obj
				}
			case watch.Deleted:
				cur = nil
			case watch.Error:
				return nil, nil // e.g. 410 Gone: re-list
			default: // bookmarks
				cur = nil // the Lease did not change; nothing new to try
				continue
			}
		}
	}
}

// Attach returns the grant this Locker's identity holds with tok, e.g. to renew or release from
// another process than the one that acquired. It fails with a LostError if the lock has another
// holder or token.
func (l *Locker) Attach(ctx context.Context, tok token.Token) (*Grant, error) {
	cur, err := l.leases.Get(ctx, l.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("lock %s: %w", l.key(), ErrNoLease)
	}
	if err != nil {
		return nil, fmt.Errorf("lock %s: reading lease: %w", l.key(), err)
	}
	if err := lease.CheckHolder(cur, l.identity, tok); err != nil {
		return nil, err
	}
	return &Grant{locker: l, Token: tok, lease: cur, renewedAt: l.clock.Now(), lost: make(chan struct{})}, nil
}

// grant tries one compare-and-swap from cur. Conflicts are returned unwrapped.
func (l *Locker) grant(ctx context.Context, cur *coordinationv1.Lease) (*Grant, error) {
	var tok token.Token
	out, err := lease.CAS(ctx, l.writer, cur, func(next *coordinationv1.Lease) error {
		var err error
		tok, err = lease.Grant(next, l.identity, l.clock.Now())
		return err
	})
	if err != nil {
		if apierrors.IsConflict(err) {
			return nil, err
		}
		return nil, fmt.Errorf("lock %s: %w", l.key(), err)
	}
	l.remember(out)
	return &Grant{locker: l, Token: tok, lease: out, renewedAt: l.clock.Now(), lost: make(chan struct{})}, nil
}

// Grant is one holding of the lock. Its Token is fixed for its whole life.
type Grant struct {
	// Token is the fencing token to present with every write made under this grant.
	Token token.Token

	locker *Locker

	mu        sync.Mutex
	lease     *coordinationv1.Lease // last state this grant wrote or read
	renewedAt time.Time             // local time of the last successful write
	lost      chan struct{}
	lostErr   error
	released  bool
}

// Holder returns the identity the grant is held under.
func (g *Grant) Holder() string { return g.locker.identity }

// Duration returns the lease duration the grant must be renewed within.
func (g *Grant) Duration() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	st, _ := lease.Read(g.lease)
	return st.Duration
}

// Lost is closed when the grant is known to be lost: a renewal found another holder or token, or
// the KeepAlive loop could not renew within the lease duration. Err then says why.
func (g *Grant) Lost() <-chan struct{} { return g.lost }

// Err returns why the grant was lost, or nil.
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
}

// update runs one transition against the Lease with compare-and-swap, re-reading the Lease on
// conflicts (the controller may have written it, e.g. to change the lease duration).
func (g *Grant) update(ctx context.Context, mutate func(*coordinationv1.Lease) error) error {
	l := g.locker
	g.mu.Lock()
	cur := g.lease
	g.mu.Unlock()
	for {
		out, err := lease.CAS(ctx, l.writer, cur, mutate)
		if err == nil {
			g.mu.Lock()
			g.lease, g.renewedAt = out, l.clock.Now()
			g.mu.Unlock()
			l.remember(out)
			return nil
		}
		if !apierrors.IsConflict(err) {
			return err
		}
		cur, err = l.leases.Get(ctx, l.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return &lease.LostError{Holder: l.identity, Token: g.Token}
		}
		if err != nil {
			return fmt.Errorf("lock %s: reading lease: %w", l.key(), err)
		}
	}
}

// Renew extends the grant. It fails with an error satisfying lease.IsLost if the lock has another
// holder or token now; the grant is then lost for good.
func (g *Grant) Renew(ctx context.Context) error {
	l := g.locker
	err := g.update(ctx, func(next *coordinationv1.Lease) error {
		return lease.Renew(next, l.identity, g.Token, l.clock.Now())
	})
	if lease.IsLost(err) {
		g.markLost(err)
	}
	return err
}

// Release frees the lock. Releasing a grant that was lost returns the LostError.
func (g *Grant) Release(ctx context.Context) error {
	l := g.locker
	err := g.update(ctx, func(next *coordinationv1.Lease) error {
		return lease.Release(next, l.identity, g.Token)
	})
	if lease.IsLost(err) {
		g.markLost(err)
		return err
	}
	if err == nil {
		g.mu.Lock()
		g.released = true
		g.mu.Unlock()
	}
	return err
}

// KeepAlive renews the grant every interval (zero: a third of the lease duration) until ctx ends,
// the grant is released, or it is lost. It returns at once; watch Lost() for the outcome.
// Transient renewal errors are retried until the lease duration has passed on this process's
// clock since the last successful renewal; then the grant is declared lost, since the controller
// will have revoked it by then.
//
// A watchdog cannot make a paused process safe: it pauses too. The fencing token is what
// protects the data.
func (g *Grant) KeepAlive(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = g.Duration() / 3
	}
	go func() {
		t := g.locker.clock.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-g.lost:
				return
			case <-t.C():
			}
			g.mu.Lock()
			released, renewedAt := g.released, g.renewedAt
			g.mu.Unlock()
			if released {
				return
			}
			err := g.Renew(ctx)
			if err == nil || lease.IsLost(err) || ctx.Err() != nil {
				continue
			}
			if g.locker.clock.Since(renewedAt) >= g.Duration() {
				g.markLost(fmt.Errorf("grant with token %s presumed lost: could not renew within the lease duration: %w",
					g.Token, err))
			}
		}
	}()
}
