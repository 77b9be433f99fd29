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
)

// KeepAlive renews a grant in the background, from Grant.KeepAlive until it is stopped, its
// context ends, or the grant is released or lost.
type KeepAlive struct {
	g        *Grant
	interval time.Duration
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}

	mu  sync.Mutex
	err error
}

// KeepAlive starts renewing the grant every interval (zero: a third of the lease duration,
// following changes of the duration) until ctx ends, Stop is called, or the grant is released or
// lost. It fails with ErrKeepAliveRunning while another keep-alive of the grant runs.
//
// Transient renewal errors are retried until the lease duration has passed on this process's
// clock since the last successful renewal; then the grant is declared lost (a *LostError whose
// Err is the last renewal error), since the manager will have revoked it by then.
//
// A watchdog cannot make a paused process safe: it pauses too. The fencing token is what
// protects the data.
func (g *Grant) KeepAlive(ctx context.Context, interval time.Duration) (*KeepAlive, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.keepAlive != nil && !g.keepAlive.ended() {
		return nil, ErrKeepAliveRunning
	}
	k := &KeepAlive{g: g, interval: interval, stop: make(chan struct{}), done: make(chan struct{})}
	g.keepAlive = k
	go k.run(ctx)
	return k, nil
}

// Stop stops renewing and waits until the keep-alive has ended; it does not release the grant.
func (k *KeepAlive) Stop() {
	k.stopOnce.Do(func() { close(k.stop) })
	<-k.done
}

// Done is closed when the keep-alive has ended.
func (k *KeepAlive) Done() <-chan struct{} { return k.done }

// Err returns, once Done is closed, why the keep-alive ended: nil when stopped or the grant was
// released, the context's error, or the grant's *LostError. Before that it returns the error of
// the last renewal if it failed (a transient one, being retried), nil otherwise.
func (k *KeepAlive) Err() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.err
}

func (k *KeepAlive) ended() bool {
	select {
	case <-k.done:
		return true
	default:
		return false
	}
}

func (k *KeepAlive) setErr(err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.err = err
}

func (k *KeepAlive) run(ctx context.Context) {
	defer close(k.done)
	g, clk := k.g, k.g.locker.clock
	for {
		every := k.interval
		if every <= 0 {
			every = g.Duration() / 3 // never zero: Duration has a floor
		}
		t := clk.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			k.setErr(ctx.Err())
			return
		case <-k.stop:
			t.Stop()
			k.setErr(nil)
			return
		case <-g.lost:
			t.Stop()
			k.setErr(g.Err())
			return
		case <-t.C():
		}
		g.mu.Lock()
		released, renewedAt := g.released, g.renewedAt
		g.mu.Unlock()
		if released {
			k.setErr(nil)
			return
		}
		err := g.Renew(ctx)
		k.setErr(err)
		if err == nil || errors.Is(err, ErrLost) || ctx.Err() != nil {
			continue // the next round ends the loop if the grant was lost or ctx ended
		}
		if clk.Since(renewedAt) >= g.Duration() {
			g.markLost(&LostError{Holder: g.locker.identity, Token: g.token, Err: err})
		}
	}
}
