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

package leader

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/clock"

	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/lock"
	"github.com/fencedlock/fencedlock/pkg/token"
)

// ErrSemaphore is returned by Campaign and Leader for a FencedLock whose spec.permits is above 1:
// a semaphore has several holders, none of them the leader.
var ErrSemaphore = errors.New("the FencedLock is a semaphore (spec.permits > 1); leader election needs a lock")

// resignTimeout bounds the release Run makes when its context ends.
const resignTimeout = 10 * time.Second

// Callbacks are Run's transitions.
type Callbacks struct {
	// OnStartedLeading runs on its own goroutine when a term starts, with the term's token and a
	// context cancelled when the term ends (lost, or Run's context ended). It must return soon
	// after: Run waits for it before it resigns, so a successor never starts while it works.
	// Required.
	OnStartedLeading func(ctx context.Context, tok token.Token)
	// OnStoppedLeading runs when Run returns, whether or not a term started. Required.
	OnStoppedLeading func()
	// OnNewLeader runs on Run's observer goroutine each time the leader changes: its identity,
	// empty when the lock is free. Optional.
	OnNewLeader func(identity string)
}

// Config configures an Elector. New validates it.
type Config struct {
	// Leases reads and writes the lock's Lease (get, list, watch, create, update on Leases of
	// Namespace; see pkg/lock).
	Leases coordinationv1client.LeasesGetter
	// Namespace and Name name the FencedLock.
	Namespace, Name string
	// Identity is this replica's holder identity; unique per replica (lock.ValidateIdentity).
	// Under spec.fence.holderBinding it must be "<the replica's username>/<anything>".
	Identity string
	// RenewInterval is how often a term is renewed; zero: a third of the lock's lease duration.
	RenewInterval time.Duration
	// Callbacks are used by Run; Campaign and Resign need none.
	Callbacks Callbacks
	// Clock is the clock of renewals (default: the real one).
	Clock clock.WithTicker
}

// Elector campaigns for one FencedLock under one identity.
type Elector struct {
	cfg    Config
	locker *lock.Locker
	leases coordinationv1client.LeaseInterface
	// token is the current term's token, zero when not leading: read on every fenced write.
	token atomic.Uint64

	// campaigning serializes Campaign calls; mu guards term alone, so that Resign and Leader
	// never wait for a campaign.
	campaigning sync.Mutex
	mu          sync.Mutex
	term        *Term
}

// New validates cfg and returns an Elector. It makes no API call.
func New(cfg Config) (*Elector, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	switch {
	case cfg.Leases == nil:
		return nil, errors.New("leader: Config.Leases is nil")
	case cfg.Namespace == "" || cfg.Name == "":
		return nil, fmt.Errorf("leader: lock %q: Config.Namespace and Config.Name must not be empty",
			cfg.Namespace+"/"+cfg.Name)
	case cfg.Identity == "":
		return nil, errors.New("leader: Config.Identity must not be empty: each replica needs its own")
	case cfg.RenewInterval < 0:
		return nil, fmt.Errorf("leader: Config.RenewInterval %v is negative", cfg.RenewInterval)
	}
	l, err := lock.New(cfg.Leases, cfg.Namespace, cfg.Name, lock.WithIdentity(cfg.Identity), lock.WithClock(cfg.Clock))
	if err != nil {
		return nil, fmt.Errorf("leader: %w", err)
	}
	return &Elector{cfg: cfg, locker: l, leases: cfg.Leases.Leases(cfg.Namespace)}, nil
}

// Identity returns the holder identity this Elector campaigns under.
func (e *Elector) Identity() string { return e.cfg.Identity }

// Token returns the current term's token, zero when this Elector does not lead. It is cleared
// before a term's end is reported, the moment this replica learns of it.
func (e *Elector) Token() token.Token { return token.Token(e.token.Load()) }

// Term is one leadership: its token is fixed for its life.
type Term struct {
	grant *lock.Grant
	ka    *lock.KeepAlive
	done  chan struct{}
	err   error
}

// Token returns the fencing token of the term: present it with every write made as leader.
func (t *Term) Token() token.Token { return t.grant.Token() }

// Done is closed when the term has ended: lost, or resigned.
func (t *Term) Done() <-chan struct{} { return t.done }

// Err returns, once Done is closed, why the term ended: nil after Resign, the *lock.LostError
// otherwise.
func (t *Term) Err() error {
	<-t.done
	return t.err
}

// Campaign blocks until this Elector leads or ctx ends, and returns the term; if it leads already
// it returns the current term. The term is renewed in the background until it is lost or
// resigned; ctx bounds the wait only.
func (e *Elector) Campaign(ctx context.Context) (*Term, error) {
	e.campaigning.Lock()
	defer e.campaigning.Unlock()
	e.mu.Lock()
	cur := e.term
	e.mu.Unlock()
	if cur != nil {
		select {
		case <-cur.done:
		default:
			return cur, nil
		}
	}
	if err := e.checkLock(ctx); err != nil {
		return nil, err
	}
	g, err := e.locker.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("leader: campaigning for %s: %w", e.key(), err)
	}
	// The keep-alive lives as long as the term, not the wait.
	ka, err := g.KeepAlive(context.Background(), e.cfg.RenewInterval)
	if err != nil {
		return nil, fmt.Errorf("leader: renewing %s: %w", e.key(), err)
	}
	t := &Term{grant: g, ka: ka, done: make(chan struct{})}
	e.mu.Lock()
	e.term = t
	e.mu.Unlock()
	e.token.Store(uint64(g.Token()))
	go e.watchTerm(t)
	return t, nil
}

// watchTerm ends t when its keep-alive ends: the grant was lost (or released by Resign).
func (e *Elector) watchTerm(t *Term) {
	<-t.ka.Done()
	e.token.CompareAndSwap(uint64(t.Token()), 0)
	if t.err = t.grant.Err(); t.err == nil {
		t.err = t.ka.Err()
	}
	close(t.done)
}

// checkLock refuses a semaphore before campaigning for one of its permits.
func (e *Elector) checkLock(ctx context.Context) error {
	cur, err := e.leases.Get(ctx, e.cfg.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil // Acquire waits for the manager to create it
	case err != nil:
		return fmt.Errorf("leader: reading %s: %w", e.key(), err)
	}
	if st, err := lease.Read(cur); err == nil && st.Semaphore {
		return fmt.Errorf("leader: %s: %w", e.key(), ErrSemaphore)
	}
	return nil
}

// Resign ends the current term, if any, and hands the lock to the next campaigner with one
// write. The token is withdrawn first, so no write leaves with it afterwards. If the release
// fails, renewals stop anyway and the manager revokes the term after its lease duration.
func (e *Elector) Resign(ctx context.Context) error {
	e.mu.Lock()
	t := e.term
	e.mu.Unlock()
	if t == nil {
		return nil
	}
	select {
	case <-t.done:
		return nil
	default:
	}
	e.token.CompareAndSwap(uint64(t.Token()), 0)
	err := t.grant.Release(ctx)
	t.ka.Stop()
	<-t.done
	if err != nil && !errors.Is(err, lock.ErrLost) {
		return fmt.Errorf("leader: resigning %s: %w", e.key(), err)
	}
	return nil
}

// Run campaigns, leads one term with cfg.Callbacks, and returns when the term ends (the
// *lock.LostError) or ctx ends (nil, after resigning). Call it again to campaign for another term.
func (e *Elector) Run(ctx context.Context) error {
	cb := e.cfg.Callbacks
	if cb.OnStartedLeading == nil || cb.OnStoppedLeading == nil {
		return errors.New("leader: Run needs Callbacks.OnStartedLeading and Callbacks.OnStoppedLeading")
	}
	defer cb.OnStoppedLeading()
	if cb.OnNewLeader != nil {
		octx, stop := context.WithCancel(ctx)
		defer stop()
		go func() {
			for l := range e.Observe(octx) {
				cb.OnNewLeader(l.Identity)
			}
		}()
	}
	t, err := e.Campaign(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	lctx, cancel := context.WithCancel(ctx)
	led := make(chan struct{})
	go func() {
		defer close(led)
		cb.OnStartedLeading(lctx, t.Token())
	}()
	select {
	case <-t.Done():
		e.token.CompareAndSwap(uint64(t.Token()), 0)
		cancel()
		<-led
		return t.Err()
	case <-ctx.Done():
		e.token.CompareAndSwap(uint64(t.Token()), 0)
		cancel()
		<-led
		rctx, rcancel := context.WithTimeout(context.Background(), resignTimeout)
		defer rcancel()
		return e.Resign(rctx)
	}
}

func (e *Elector) key() string { return e.cfg.Namespace + "/" + e.cfg.Name }
