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
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The writer writes the latest condition wanted per pod and lock, once, and shows it as the pod's
// until written.
func TestConditionWriter(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	written := make(chan conditionWrite)
	release := make(chan struct{})
	var w *conditionWriter
	w = newConditionWriter(func(_ context.Context, c conditionWrite) error {
		if got := w.pendingFor(c.uid, c.lock); got == nil || got.Reason != c.cond.Reason {
			t.Errorf("while written, pendingFor = %v; want the condition being written", got)
		}
		written <- c
		<-release
		return nil
	})
	want := func(uid, reason string) conditionWrite {
		return conditionWrite{lock: "jobs", uid: types.UID(uid), cond: corev1.PodCondition{Reason: reason}}
	}
	w.enqueue(want("a", "Waiting"))
	w.enqueue(want("b", "Waiting"))
	w.enqueue(want("a", "Granted")) // supersedes a's Waiting, keeps a's turn
	if got := w.pendingFor("a", "jobs"); got == nil || got.Reason != "Granted" {
		t.Fatalf("pendingFor(a) = %v; want the latest, Granted", got)
	}
	go func() { _ = w.Start(ctx) }()
	for i, wantReason := range []struct{ uid, reason string }{{"a", "Granted"}, {"b", "Waiting"}} {
		select {
		case c := <-written:
			if string(c.uid) != wantReason.uid || c.cond.Reason != wantReason.reason {
				t.Fatalf("write %d = %s %s; want %s %s", i, c.uid, c.cond.Reason, wantReason.uid, wantReason.reason)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("write %d never came", i)
		}
		release <- struct{}{}
	}
	select {
	case c := <-written:
		t.Fatalf("a superseded condition was written too: %+v", c)
	case <-time.After(100 * time.Millisecond):
	}
	if got := w.pendingFor("a", "jobs"); got != nil {
		t.Fatalf("pendingFor after the write = %v; want nil", got)
	}
}
