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
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestRetryLimiterKeepsTheDeadlineOnce(t *testing.T) {
	l := newRetryLimiter()
	a := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "a"}}
	b := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "b"}}

	// Grow a's default backoff far past a deadline.
	for range 20 {
		l.When(a)
	}
	if d := l.When(a); d < time.Minute {
		t.Fatalf("default backoff after 21 failures = %v; want minutes", d)
	}
	l.retryIn(a, 700*time.Millisecond)
	if d := l.When(b); d != 5*time.Millisecond {
		t.Errorf("another lock's first retry = %v; want the default 5ms", d)
	}
	if d := l.When(a); d != 700*time.Millisecond {
		t.Errorf("retry after retryIn(700ms) = %v; want 700ms", d)
	}
	if d := l.When(a); d < time.Minute {
		t.Errorf("second retry = %v; want the default backoff again (retryIn holds once)", d)
	}

	l.retryIn(a, -time.Second)
	if d := l.When(a); d != 0 {
		t.Errorf("retry for a passed deadline = %v; want 0", d)
	}
	l.retryIn(a, time.Second)
	l.Forget(a)
	if d := l.When(a); d != 5*time.Millisecond {
		t.Errorf("retry after Forget = %v; want the default backoff from the start (5ms)", d)
	}
}
