package controllers

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
)

// eventLimiter is a token bucket per lock for its Acquired/Released events: a lock changing
// hands a hundred times a second must not write a hundred Events a second. Expiries and pod
// events are never limited.
type eventLimiter struct {
	mu       sync.Mutex
	burst    int
	every    time.Duration
	limiters map[types.NamespacedName]*rate.Limiter
}

func newEventLimiter(burst int, every time.Duration) *eventLimiter {
	return &eventLimiter{burst: burst, every: every, limiters: map[types.NamespacedName]*rate.Limiter{}}
}

func (e *eventLimiter) allow(key types.NamespacedName, now time.Time) bool {
	if e.burst <= 0 {
		return true
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	l, ok := e.limiters[key]
	if !ok {
		l = rate.NewLimiter(rate.Every(e.every), e.burst)
		e.limiters[key] = l
	}
	return l.AllowN(now, 1)
}

func (e *eventLimiter) forget(key types.NamespacedName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.limiters, key)
}

// event emits a rate-limited Normal event on a lock.
func (r *FencedLockReconciler) event(fl *locksv1alpha1.FencedLock, l *coordinationv1.Lease, reason, action, note string, args ...any) {
	if !r.limiter.allow(types.NamespacedName{Namespace: fl.Namespace, Name: fl.Name}, r.Clock.Now()) {
		return
	}
	r.Recorder.Eventf(fl, l, corev1.EventTypeNormal, reason, action, note, args...)
}
