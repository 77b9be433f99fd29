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
