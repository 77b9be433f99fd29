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
)

func TestStatusBudget(t *testing.T) {
	const every = time.Second
	var b statusBudget
	for i := range StatusBurst {
		if w := b.wait(t0, every); w != 0 {
			t.Fatalf("write %d of a burst waits %v", i, w)
		}
		b = b.spend(t0, every)
	}
	if w := b.wait(t0, every); w != every {
		t.Fatalf("after a burst: wait %v; want %v", w, every)
	}
	if w := b.wait(t0.Add(300*time.Millisecond), every); w != 700*time.Millisecond {
		t.Fatalf("partly refilled: wait %v", w)
	}
	b = b.spend(t0.Add(time.Second), every)
	if w := b.wait(t0.Add(time.Second), every); w != every {
		t.Fatalf("busy lock: one write per interval, wait %v", w)
	}
	if w := b.wait(t0.Add(time.Hour), every); w != 0 {
		t.Fatal("a quiet lock writes at once")
	}
	if w := (statusBudget{}).spend(t0, 0).spend(t0, 0).wait(t0, 0); w != 0 {
		t.Fatal("coalescing off: never wait")
	}
}
