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
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
)

func TestNextObservation(t *testing.T) {
	a := renewedAt(held("a", 10), t0)
	first := nextObservation(observation{}, a, nil, nil, true, t0)
	if !first.renewedAt.Equal(t0) || !first.acquiredAt.Equal(t0) {
		t.Fatalf("first observation %+v", first)
	}
	same := nextObservation(first, a, nil, nil, true, t0.Add(5*time.Second))
	if same != first {
		t.Fatalf("an unchanged lease must not move the observation: %+v", same)
	}
	// A bystander's write (a label, an annotation, the same renewTime written again) changes the
	// resourceVersion but not renewTime: not a renewal. Only the fields nextObservation reads are
	// in lease.State, so "same state, later" is exactly such a write.
	rewritten := nextObservation(first, renewedAt(held("a", 10), t0), nil, nil, true, t0.Add(5*time.Second))
	if rewritten != first {
		t.Fatalf("a write of the same renewTime must not renew: %+v", rewritten)
	}
	renewed := nextObservation(first, renewedAt(a, t0.Add(time.Millisecond)), nil, nil, true, t0.Add(5*time.Second))
	if !renewed.renewedAt.Equal(t0.Add(5*time.Second)) || !renewed.acquiredAt.Equal(t0) {
		t.Fatalf("a renewal moves renewedAt only, to when it was observed: %+v", renewed)
	}
	// The holder's clock is not this controller's: a renewTime far in the past still renews now.
	skewed := nextObservation(renewed, renewedAt(a, t0.Add(-time.Hour)), nil, nil, true, t0.Add(6*time.Second))
	if !skewed.renewedAt.Equal(t0.Add(6 * time.Second)) {
		t.Fatalf("a changed renewTime renews whatever its value: %+v", skewed)
	}
	regrant := nextObservation(renewed, renewedAt(held("b", 13), t0), nil, nil, true, t0.Add(7*time.Second))
	if !regrant.acquiredAt.Equal(t0.Add(7*time.Second)) || !regrant.renewedAt.Equal(t0.Add(7*time.Second)) {
		t.Fatalf("a new grant moves acquiredAt and renewedAt, even with the same renewTime: %+v", regrant)
	}
}

func TestPodObservation(t *testing.T) {
	st := held(locksv1alpha1.PodHolderIdentity("p", "uid-p"), 10)
	o := nextObservation(observation{}, st, new(false), nil, true, t0) // just granted, not Ready yet
	if !o.notReadySince.Equal(t0) || o.readySeen {
		t.Fatalf("notReadySince = %v, readySeen = %v", o.notReadySince, o.readySeen)
	}
	if w := nextObservation(o, st, nil, nil, true, t0.Add(time.Second)); !w.notReadySince.IsZero() || w.readySeen {
		t.Fatal("a pod gated for its other locks has neither a not-Ready clock nor a finished start-up")
	}
	o = nextObservation(o, st, new(false), nil, true, t0.Add(5*time.Second))
	if !o.notReadySince.Equal(t0) {
		t.Fatal("notReadySince must keep the first observation")
	}
	o = nextObservation(o, st, new(true), nil, true, t0.Add(6*time.Second))
	if !o.notReadySince.IsZero() || !o.readySeen {
		t.Fatal("a Ready pod clears notReadySince and ends its start-up")
	}
	o = nextObservation(o, st, new(false), nil, true, t0.Add(60*time.Second))
	if !o.notReadySince.Equal(t0.Add(60 * time.Second)) {
		t.Fatal("a pod that turns not Ready starts a new clock")
	}
	if !o.readySeen {
		t.Fatal("a start-up ends once: a pod Ready once gets no second allowance")
	}
	if o = nextObservation(o, held(st.Holder, 11), new(false), nil, true, t0.Add(61*time.Second)); o.readySeen {
		t.Fatal("a new grant starts a new start-up")
	}
}

func TestRetryBackoff(t *testing.T) {
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second,
		32 * time.Second, time.Minute, time.Minute}
	for i, w := range want {
		if got := retryBackoff(i + 1); got != w {
			t.Errorf("retryBackoff(%d) = %v; want %v", i+1, got, w)
		}
	}
	if retryBackoff(1000) != time.Minute {
		t.Error("no overflow past the limit")
	}
}

func TestObserverCountsLocksHeld(t *testing.T) {
	o := newObserver()
	a, b := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}
	check := func(want int, when string, permits ...int) {
		t.Helper()
		wantPermits := want
		if len(permits) > 0 {
			wantPermits = permits[0]
		}
		if o.held != want || testutil.ToFloat64(locksHeld) != float64(want) ||
			testutil.ToFloat64(permitsHeld) != float64(wantPermits) {
			t.Fatalf("%s: %d locks counted held, gauges %v locks, %v permits; want %d locks, %d permits", when, o.held,
				testutil.ToFloat64(locksHeld), testutil.ToFloat64(permitsHeld), want, wantPermits)
		}
	}
	none := func(lease.Permit) *bool { return nil }
	o.observe(a, lease.State{Token: 9}, "", none, t0)
	check(0, "a free lock")
	o.observe(a, held("x", 10), "", none, t0)
	o.observe(b, held("y", 11), "", none, t0)
	check(2, "two grants")
	o.observe(a, renewedAt(held("x", 10), t0.Add(time.Second)), "", none, t0.Add(time.Second))
	o.observe(a, held("z", 12), "", none, t0.Add(2*time.Second))
	check(2, "a renewal and a handover")
	o.observe(a, lease.State{Token: 12}, "", none, t0.Add(3*time.Second))
	check(1, "a release")
	sem := lease.State{Token: 20, Semaphore: true, Limit: 3, Permits: []lease.Permit{
		{Number: 1, Holder: "p", Token: 19}, {Number: 3, Holder: "q", Token: 20}}}
	o.observe(b, sem, "", none, t0.Add(4*time.Second))
	check(1, "b, now a semaphore with two permits held (a is free)", 2)
	o.forget(b)
	o.forget(a)
	check(0, "both locks deleted")
}

// A malformed waiter Lease is reported once while it stays malformed, and again once it breaks
// anew after being mended; another lock's reports are its own.
func TestMalformedWaiterLeasesAreReportedOnce(t *testing.T) {
	o := newObserver()
	a, b := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}
	steps := []struct {
		key  types.NamespacedName
		msgs []string
		want []string
	}{
		{a, []string{"x"}, []string{"x"}},
		{a, []string{"x"}, nil},
		{a, []string{"x", "y"}, []string{"y"}},
		{b, []string{"x"}, []string{"x"}},
		{a, []string{"y"}, nil},
		{a, nil, nil},
		{a, []string{"x", "y"}, []string{"x", "y"}},
	}
	for i, s := range steps {
		if got := o.newlyMalformed(s.key, s.msgs); !slices.Equal(got, s.want) {
			t.Fatalf("step %d (%s, %v): reported %v, want %v", i, s.key.Name, s.msgs, got, s.want)
		}
	}
	o.forget(a)
	o.forget(b)
	if len(o.malformed) != 0 {
		t.Fatalf("forgotten locks keep %d sets", len(o.malformed))
	}
}

// After a forged ticket (lease.State.ForgedTicket, read as nothing served), the queue is read
// above the highest honest ticket this controller saw, so that clients served long ago, whose
// waiter Leases still name them, are not served again by the repair.
func TestServedFloorAfterAForgedTicket(t *testing.T) {
	o := newObserver()
	key := types.NamespacedName{Namespace: "ns", Name: "lock"}
	if got := o.servedFloor(key, lease.State{Served: 40}); got != 40 {
		t.Fatalf("honest ticket: floor %d, want 40", got)
	}
	if got := o.servedFloor(key, lease.State{Served: 30}); got != 30 { // a recreated Lease's, lower
		t.Fatalf("honest ticket: floor %d, want 30 (the Lease's own)", got)
	}
	if got := o.servedFloor(key, lease.State{ForgedTicket: 999999999999999999}); got != 40 {
		t.Fatalf("forged ticket: floor %d, want the highest honest one, 40", got)
	}
}
