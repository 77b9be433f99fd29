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
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/lock"
	"github.com/fencedlock/fencedlock/pkg/token"
)

// observeRetry is the pause before Observe reads the Lease again after an error.
const observeRetry = time.Second

// Leader is a term as observers see it.
type Leader struct {
	// Identity is the leader's holder identity, empty when nobody leads.
	Identity string
	// Token is the leader's token; when nobody leads, the last term's.
	Token token.Token
}

// Leader returns the current leader, as the lock's Lease shows it now. It wraps lock.ErrNoLease
// when the lock has no Lease yet, and ErrSemaphore for a semaphore.
func (e *Elector) Leader(ctx context.Context) (Leader, error) {
	cur, err := e.leases.Get(ctx, e.cfg.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Leader{}, fmt.Errorf("leader: %s: %w", e.key(), lock.ErrNoLease)
	}
	if err != nil {
		return Leader{}, fmt.Errorf("leader: reading %s: %w", e.key(), err)
	}
	return leaderOf(e.key(), cur)
}

func leaderOf(key string, l *coordinationv1.Lease) (Leader, error) {
	st, err := lease.Read(l)
	switch {
	case err != nil:
		return Leader{}, fmt.Errorf("leader: %s: %w", key, err)
	case st.Semaphore:
		return Leader{}, fmt.Errorf("leader: %s: %w", key, ErrSemaphore)
	}
	return Leader{Identity: st.Holder, Token: st.Token}, nil
}

// Observe reports the leader on the returned channel: the current one first, then each change
// (a new identity or a new term), until ctx ends; then it closes the channel. It watches the
// lock's Lease and reads it again after errors, so a missed change is reported late, never
// lost; a Lease that cannot be read is reported as nobody leading.
func (e *Elector) Observe(ctx context.Context) <-chan Leader {
	out := make(chan Leader)
	go func() {
		defer close(out)
		last, first := Leader{}, true
		report := func(l Leader) bool {
			if !first && l == last {
				return true
			}
			first, last = false, l
			select {
			case out <- l:
				return true
			case <-ctx.Done():
				return false
			}
		}
		for ctx.Err() == nil {
			if !e.observeOnce(ctx, report) {
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(observeRetry):
			}
		}
	}()
	return out
}

// observeOnce reads the Lease and watches it until the watch ends; false when ctx ended.
func (e *Elector) observeOnce(ctx context.Context, report func(Leader) bool) bool {
	cur, err := e.leases.Get(ctx, e.cfg.Name, metav1.GetOptions{})
	if err != nil {
		return ctx.Err() == nil && report(Leader{})
	}
	l, _ := leaderOf(e.key(), cur)
	if !report(l) {
		return false
	}
	w, err := e.leases.Watch(ctx, metav1.ListOptions{ResourceVersion: cur.ResourceVersion,
		FieldSelector: fields.OneTermEqualSelector("metadata.name", e.cfg.Name).String()})
	if err != nil {
		return ctx.Err() == nil
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Added, watch.Modified:
			if le, ok := ev.Object.(*coordinationv1.Lease); ok {
				l, _ := leaderOf(e.key(), le)
				if !report(l) {
					return false
				}
			}
		case watch.Deleted:
			if !report(Leader{}) {
				return false
			}
		default:
			return ctx.Err() == nil // an error event: read again
		}
	}
	return ctx.Err() == nil
}
