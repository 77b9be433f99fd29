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
	// DefaultEventBurst and DefaultEventInterval rate-limit a lock's Granted/Released events: a
	// burst of ten, then one every ten seconds (as the Kubernetes event spam filter does).
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
