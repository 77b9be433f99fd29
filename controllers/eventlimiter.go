package controllers

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/types"
)

// eventLimiter is a token bucket per lock for its Granted/Released events: a lock changing
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
