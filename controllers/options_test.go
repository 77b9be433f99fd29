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
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestNewFencedLockReconciler(t *testing.T) {
	r := NewFencedLockReconciler(nil, nil, nil)
	if _, isReal := r.clock.(clock.RealClock); !isReal || r.statusMinInterval != DefaultStatusMinInterval ||
		r.maxConcurrentReconciles != DefaultMaxConcurrentReconciles || r.afterPodGrant != nil ||
		r.limiter.burst != DefaultEventBurst || r.limiter.every != DefaultEventInterval {
		t.Fatalf("defaults: %+v, limiter %+v", r, r.limiter)
	}
	if r.observer == nil || r.waiters == nil {
		t.Fatal("the constructor builds the reconciler's state")
	}

	fake := clocktesting.NewFakePassiveClock(t0)
	called := false
	r = NewFencedLockReconciler(nil, nil, nil, WithClock(fake), WithStatusMinInterval(0),
		WithEventRateLimit(0, 0), WithMaxConcurrentReconciles(1), WithAfterPodGrant(func() { called = true }))
	if r.clock != fake || r.statusMinInterval != 0 || r.maxConcurrentReconciles != 1 || r.afterPodGrant == nil {
		t.Fatalf("options not applied: %+v", r)
	}
	r.afterPodGrant()
	if !called {
		t.Fatal("WithAfterPodGrant: another hook runs")
	}
	key := types.NamespacedName{Name: "l"}
	for range 2 * DefaultEventBurst {
		if !r.limiter.allow(key, t0) {
			t.Fatal("a burst of zero leaves events unlimited")
		}
	}
}
