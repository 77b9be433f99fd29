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

package controllers

import (
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// retryLimiter is the controller's rate limiter. A failed reconcile returns its error, so that
// controller-runtime counts it (controller_runtime_reconcile_errors_total) and logs it; but
// controller-runtime then ignores the Result and requeues on its per-item backoff, which grows to
// minutes and would carry a grant past its deadline. So when Reconcile has a deadline to keep it
// sets the next retry itself (retryIn), and the limiter hands that out once; every other retry
// gets controller-runtime's own default backoff.
type retryLimiter struct {
	workqueue.TypedRateLimiter[reconcile.Request]
	mu   sync.Mutex
	next map[reconcile.Request]time.Duration
}

func newRetryLimiter() *retryLimiter {
	return &retryLimiter{
		// controller-runtime's default for its priority queue (the default queue).
		TypedRateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](
			5*time.Millisecond, 1000*time.Second),
		next: map[reconcile.Request]time.Duration{},
	}
}

// retryIn sets the wait before req's next rate-limited requeue: the one controller-runtime makes
// when the reconcile now returning fails.
func (l *retryLimiter) retryIn(req reconcile.Request, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.next[req] = max(d, 0)
}

// When returns the wait set by retryIn, once, or else the default backoff.
func (l *retryLimiter) When(req reconcile.Request) time.Duration {
	l.mu.Lock()
	d, ok := l.next[req]
	delete(l.next, req)
	l.mu.Unlock()
	if ok {
		return d
	}
	return l.TypedRateLimiter.When(req)
}

// Forget drops req's backoff (controller-runtime calls it after a successful reconcile).
func (l *retryLimiter) Forget(req reconcile.Request) {
	l.mu.Lock()
	delete(l.next, req)
	l.mu.Unlock()
	l.TypedRateLimiter.Forget(req)
}
