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

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/types"
)

// eventLimiter is a token bucket per lock for its Granted/Released events: a lock changing
// hands a hundred times a second must not write a hundred Events a second. Revocations and pod
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
