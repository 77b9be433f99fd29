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
	"time"

	"k8s.io/utils/clock"
)

// Defaults of NewFencedLockReconciler, which cmd/manager's flags show.
const (
	// DefaultStatusMinInterval paces the status writes of a busy lock: after a burst of
	// StatusBurst, one per this interval.
	DefaultStatusMinInterval = time.Second
	// DefaultStatusRenewalInterval is how often a renewal alone rewrites a held lock's status
	// (its renewTime): a status write per renewal would double what a renewal costs the API
	// server, as a Node's status per heartbeat did before node Leases.
	DefaultStatusRenewalInterval = time.Minute
	// DefaultEventBurst and DefaultEventInterval rate-limit a lock's Granted/Released events: a
	// burst of ten, then one every ten seconds. The events.k8s.io recorder filters nothing itself
	// (repeats of one reason on one object only become a series); client-go's older tools/record
	// spam filter allows 25 per object, then one every 5 minutes.
	DefaultEventBurst    = 10
	DefaultEventInterval = 10 * time.Second
	// DefaultMaxConcurrentReconciles is how many locks are reconciled at once.
	DefaultMaxConcurrentReconciles = 4
)

// Option configures a FencedLockReconciler; see NewFencedLockReconciler.
type Option func(*FencedLockReconciler)

// WithClock sets the clock expiry is judged on (default: the real clock).
func WithClock(c clock.PassiveClock) Option { return func(r *FencedLockReconciler) { r.clock = c } }

// WithStatusMinInterval coalesces the status writes of a lock that changes hands faster than d;
// zero writes every change.
func WithStatusMinInterval(d time.Duration) Option {
	return func(r *FencedLockReconciler) { r.statusMinInterval = d }
}

// WithStatusRenewalInterval sets how often a renewal alone rewrites a held lock's status
// (status.renewTime); zero rewrites it at every renewal. Any other change writes at once, fresh
// renewal times included.
func WithStatusRenewalInterval(d time.Duration) Option {
	return func(r *FencedLockReconciler) { r.statusRenewalInterval = d }
}

// WithEventRateLimit limits each lock's Granted/Released events to a burst of burst, then one per
// interval; a burst of zero leaves them unlimited. Metrics count every transition either way;
// expiry and pod events are never limited.
func WithEventRateLimit(burst int, interval time.Duration) Option {
	return func(r *FencedLockReconciler) { r.limiter = newEventLimiter(burst, interval) }
}

// WithMaxConcurrentReconciles sets how many locks are reconciled at once (at least one).
func WithMaxConcurrentReconciles(n int) Option {
	return func(r *FencedLockReconciler) { r.maxConcurrentReconciles = n }
}

// WithAfterPodGrant sets a hook run between the Lease write that grants a pod and the pod patch
// that ungates it: fault-injection tests crash or race the manager there.
func WithAfterPodGrant(f func()) Option { return func(r *FencedLockReconciler) { r.afterPodGrant = f } }
