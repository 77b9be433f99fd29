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

package lock

import (
	"context"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
)

func leaseAt(name, rv string) *coordinationv1.Lease {
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv}}
}

// waiterAt is holder's waiter Lease at rv, joined then (no stamped ticket: rv is its ticket).
func waiterAt(holder, rv string) *coordinationv1.Lease {
	l := leaseAt("w-"+holder, rv)
	l.Labels = map[string]string{locksv1alpha1.ManagedByLabel: locksv1alpha1.ManagedByValue,
		locksv1alpha1.RoleLabel: locksv1alpha1.RoleWaiter}
	l.Spec.HolderIdentity = &holder
	return l
}

func holders(q *lease.Queue) []string {
	out := make([]string, 0, len(q.Waiters))
	for _, w := range q.Waiters {
		out = append(out, w.Holder)
	}
	return out
}

// The follower's bookkeeping, event by event: the pure part of following the queue (the watch's
// order is the API server's, pinned by the integration suite).
func TestFollowerKeepsTheQueueAsOfTheWatchPosition(t *testing.T) {
	stopped := 0
	f := &follower{lock: "l", waiters: map[string]*coordinationv1.Lease{}, moved: make(chan struct{}), stop: func() { stopped++ }}
	ctx := context.Background()
	if le, ok := f.observe(watch.Event{Type: watch.Added, Object: waiterAt("alice", "5")}); le != nil || !ok {
		t.Fatalf("a waiter event: got %v, %v", le, ok)
	}
	if le, ok := f.observe(watch.Event{Type: watch.Modified, Object: leaseAt("l", "7")}); le == nil || le.Name != "l" || !ok {
		t.Fatalf("a lock Lease event is handed on: got %v, %v", le, ok)
	}
	if le, ok := f.observe(watch.Event{Type: watch.Modified, Object: leaseAt("someone-elses", "8")}); le != nil || !ok {
		t.Fatalf("another Lease with the label is ignored: got %v, %v", le, ok)
	}
	if q, ok := f.queueAsOf(ctx, "7", 0); !ok || !slices.Equal(holders(q), []string{"alice"}) {
		t.Fatalf("as of 7: got %v, %v; want alice", q, ok)
	}

	// A release conditioned on a version the watch has not shown yet waits for it.
	go func() {
		time.Sleep(5 * time.Millisecond)
		f.observe(watch.Event{Type: watch.Added, Object: waiterAt("bob", "9")})
		f.observe(watch.Event{Type: watch.Bookmark, Object: leaseAt("", "12")})
	}()
	if q, ok := f.queueAsOf(ctx, "11", 0); !ok || !slices.Equal(holders(q), []string{"alice", "bob"}) {
		t.Fatalf("as of 11: got %v, %v; want alice, then bob, shown before the bookmark at 12", q, ok)
	}
	if q, ok := f.queueAsOf(ctx, "11", 5); !ok || !slices.Equal(holders(q), []string{"bob"}) {
		t.Fatalf("served 5: got %v, %v; want bob alone", q, ok)
	}
	start := time.Now()
	if _, ok := f.queueAsOf(ctx, "13", 0); ok || time.Since(start) < followWait {
		t.Fatalf("a version the watch never shows: answered %v after %v", ok, time.Since(start))
	}

	f.observe(watch.Event{Type: watch.Deleted, Object: waiterAt("alice", "14")})
	if q, ok := f.queueAsOf(ctx, "14", 0); !ok || !slices.Equal(holders(q), []string{"bob"}) {
		t.Fatalf("a deleted waiter Lease leaves the queue: got %v, %v", q, ok)
	}
	if _, ok := f.observe(watch.Event{Type: watch.Deleted, Object: leaseAt("l", "15")}); ok || stopped != 1 {
		t.Fatalf("the lock Lease leaving the selection ends the follower: ok %v, stopped %d", ok, stopped)
	}
	f.end()
	if stopped != 1 {
		t.Fatalf("the watch was stopped %d times", stopped)
	}
}

func TestFollowerEndsOnAWatchError(t *testing.T) {
	f := &follower{lock: "l", waiters: map[string]*coordinationv1.Lease{}, moved: make(chan struct{}), stop: func() {}}
	f.observe(watch.Event{Type: watch.Modified, Object: waiterAt("alice", "5")})
	if _, ok := f.observe(watch.Event{Type: watch.Error, Object: &metav1.Status{Code: 410}}); ok {
		t.Fatal("an error event was followed")
	}
	if _, ok := f.queueAsOf(context.Background(), "5", 0); ok {
		t.Fatal("an ended follower answered")
	}
}

// A waiting round's follower has seen the entries joined after the resourceVersion its watch
// started from, and none before: it answers only for a queue served that far.
func TestFollowerFromAWaitAnswersOnlyPastItsStart(t *testing.T) {
	f := newFollower("l", "10", 10, func() {})
	f.observe(watch.Event{Type: watch.Added, Object: waiterAt("bob", "12")})
	f.observe(watch.Event{Type: watch.Modified, Object: leaseAt("l", "13")})
	if _, ok := f.queueAsOf(context.Background(), "13", 9); ok {
		t.Fatal("served 9: a waiter joined at 10 or before, unseen, may wait; the follower answered")
	}
	if q, ok := f.queueAsOf(context.Background(), "13", 10); !ok || !slices.Equal(holders(q), []string{"bob"}) {
		t.Fatalf("served 10: got %v, %v; want bob", q, ok)
	}
}

// An event that reaches an ended follower (its grant ended while the event was on its way) is
// dropped: the follower stays ended.
func TestFollowerEndedIgnoresLateEvents(t *testing.T) {
	f := newFollower("l", "10", 0, func() {})
	f.end()
	if _, ok := f.observe(watch.Event{Type: watch.Modified, Object: leaseAt("l", "11")}); ok {
		t.Fatal("an ended follower observed an event")
	}
}
