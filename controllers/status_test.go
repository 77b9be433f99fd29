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
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
)

func TestComputeTransition(t *testing.T) {
	prevHeld := locksv1alpha1.FencedLockStatus{Holder: "a", Token: "10", LeaseTransitions: 3}
	prevFree := locksv1alpha1.FencedLockStatus{Token: "10", LeaseTransitions: 3}
	revoked := lease.State{Token: tokenOf(10), RevokedToken: tokenOf(10), Transitions: 3}
	withTransitions := func(st lease.State, n int32) lease.State { st.Transitions = n; return st }
	// A semaphore of 3: permits 1 (token 10) and 2 (token 11) held, then 1 released and 3 granted.
	prevSem := locksv1alpha1.FencedLockStatus{Token: "11", LeaseTransitions: 4, Holders: []locksv1alpha1.Holder{
		{Permit: 1, Identity: "a", Token: "10"}, {Permit: 2, Identity: "b", Token: "11"}}}
	sem := lease.State{Token: tokenOf(14), Transitions: 5, Semaphore: true, Limit: 3, Permits: []lease.Permit{
		{Number: 2, Holder: "b", Token: tokenOf(11)}, {Number: 3, Holder: "c", Token: tokenOf(14)}}}
	cases := []struct {
		name                   string
		prev                   locksv1alpha1.FencedLockStatus
		st                     lease.State
		granted, ended         int32
		endedShown, grantShown []string
	}{
		{"nothing happened", prevHeld, withTransitions(held("a", 10), 3), 0, 0, nil, nil},
		{"released", prevHeld, lease.State{Token: tokenOf(10), Transitions: 3}, 0, 1, []string{"a"}, nil},
		{"revoked", prevHeld, revoked, 0, 1, []string{"a"}, nil},
		{"granted from free", prevFree, withTransitions(held("b", 12), 4), 1, 0, nil, []string{"b"}},
		{"handed over between reconciles", prevHeld, withTransitions(held("c", 20), 6), 3, 3, []string{"a"}, []string{"c"}},
		{"many grants coalesced, free now", prevHeld, lease.State{Token: tokenOf(30), Transitions: 8}, 5, 6, []string{"a"}, nil},
		{"lease recreated: counter restarted", prevFree, withTransitions(held("b", 30), 1), 1, 0, nil, []string{"b"}},
		{"semaphore: one permit released, another granted", prevSem, sem, 1, 1, []string{"a"}, []string{"c"}},
	}
	idents := func(hs []locksv1alpha1.Holder) []string {
		s := make([]string, 0, len(hs))
		for _, h := range hs {
			s = append(s, h.Identity)
		}
		return s
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := computeTransition(tc.prev, tc.st)
			if got.granted != tc.granted || got.ended != tc.ended || !slices.Equal(idents(got.endedShown), tc.endedShown) ||
				!slices.Equal(idents(got.grantedShown), tc.grantShown) {
				t.Fatalf("computeTransition = %+v; want granted %d, ended %d, ended shown %v, granted shown %v",
					got, tc.granted, tc.ended, tc.endedShown, tc.grantShown)
			}
		})
	}
}

func TestComputeStatus(t *testing.T) {
	fl := &locksv1alpha1.FencedLock{ObjectMeta: metav1.ObjectMeta{Generation: 4}}
	renew := metav1.NewMicroTime(t0)
	cases := []struct {
		name       string
		st         lease.State
		wantHeld   metav1.ConditionStatus
		wantReason string
	}{
		{"held", lease.State{Holder: "a", Token: tokenOf(7), Transitions: 1, RenewTime: &renew, AcquireTime: &renew},
			metav1.ConditionTrue, locksv1alpha1.ReasonGranted},
		{"never acquired", lease.State{Token: tokenOf(7)}, metav1.ConditionFalse, locksv1alpha1.ReasonAvailable},
		{"released", lease.State{Token: tokenOf(7), Transitions: 1}, metav1.ConditionFalse, locksv1alpha1.ReasonReleased},
		{"expired", lease.State{Token: tokenOf(7), RevokedToken: tokenOf(7), Transitions: 1}, metav1.ConditionFalse, locksv1alpha1.ReasonExpired},
		{"revoked earlier, released now", lease.State{Token: tokenOf(9), RevokedToken: tokenOf(7), Transitions: 2},
			metav1.ConditionFalse, locksv1alpha1.ReasonReleased},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := computeStatus(fl, tc.st, queuePlan{}, t0)
			if s.Token != "7" && s.Token != "9" || s.ObservedGeneration != 4 {
				t.Fatalf("status %+v", s)
			}
			var heldCond *metav1.Condition
			for i := range s.Conditions {
				if s.Conditions[i].Type == locksv1alpha1.ConditionHeld {
					heldCond = &s.Conditions[i]
				}
			}
			if heldCond == nil || heldCond.Status != tc.wantHeld || heldCond.Reason != tc.wantReason || heldCond.ObservedGeneration != 4 {
				t.Fatalf("Held condition %+v; want %s/%s", heldCond, tc.wantHeld, tc.wantReason)
			}
			if (s.RenewTime != nil) != tc.st.Held() {
				t.Fatalf("renewTime shown for a free lock or hidden for a held one: %+v", s)
			}
		})
	}
	// An unchanged condition keeps its lastTransitionTime.
	first := computeStatus(fl, lease.State{Token: tokenOf(7)}, queuePlan{}, t0)
	fl2 := fl.DeepCopy()
	fl2.Status = first
	second := computeStatus(fl2, lease.State{Token: tokenOf(7)}, queuePlan{}, t0.Add(time.Hour))
	if !second.Conditions[0].LastTransitionTime.Equal(&first.Conditions[0].LastTransitionTime) {
		t.Fatal("lastTransitionTime moved without a transition")
	}
}

func TestShownIdentity(t *testing.T) {
	pod := locksv1alpha1.PodHolderIdentity(strings.Repeat("p", 253), "0a1b2c3d-0000-4000-8000-000000000000")
	if got := shownIdentity(pod); got != pod {
		t.Fatalf("a pod identity (%d bytes) is shown whole; got %q", len(pod), got)
	}
	exact := strings.Repeat("x", maxIdentityShown)
	if shownIdentity(exact) != exact {
		t.Fatal("an identity of exactly the bound is shown whole")
	}
	for _, long := range []string{strings.Repeat("y", 5000), strings.Repeat("é", 700)} { // 2-byte runes
		got := shownIdentity(long)
		if len(got) > maxIdentityShown || !strings.HasSuffix(got, "…") || !utf8.ValidString(got) ||
			!strings.HasPrefix(long, strings.TrimSuffix(got, "…")) {
			t.Fatalf("shownIdentity of %d bytes = %d bytes %q...", len(long), len(got), got[:20])
		}
	}
	fl := &locksv1alpha1.FencedLock{}
	s := computeStatus(fl, lease.State{Holder: strings.Repeat("z", 2000), Token: tokenOf(7), Transitions: 1}, queuePlan{}, t0)
	msg := meta.FindStatusCondition(s.Conditions, locksv1alpha1.ConditionHeld).Message
	if len(s.Holder) > maxIdentityShown || len(msg) > maxIdentityShown+100 {
		t.Fatalf("status holder %d bytes, Held message %d bytes", len(s.Holder), len(msg))
	}
}

// Issue 46, point 7: kubectl get flock's HOLDER column (status.heldBy) names a semaphore's
// holders too, not only a lock's.
func TestHeldBy(t *testing.T) {
	fl := &locksv1alpha1.FencedLock{Spec: locksv1alpha1.FencedLockSpec{Permits: 3}}
	sem := lease.State{Semaphore: true, Token: tokenOf(9), Permits: []lease.Permit{{Number: 1, Holder: "a", Token: tokenOf(7)},
		{Number: 3, Holder: "c", Token: tokenOf(9)}}}
	if got := computeStatus(fl, sem, queuePlan{}, t0).HeldBy; got != "a, c" {
		t.Errorf("a semaphore's heldBy = %q, want %q", got, "a, c")
	}
	lock := lease.State{Holder: "a", Token: tokenOf(7), Permits: []lease.Permit{{Number: 1, Holder: "a", Token: tokenOf(7)}}}
	if got := computeStatus(&locksv1alpha1.FencedLock{}, lock, queuePlan{}, t0).HeldBy; got != "a" {
		t.Errorf("a lock's heldBy = %q, want %q", got, "a")
	}
	if got := computeStatus(fl, lease.State{Semaphore: true, Token: tokenOf(9)}, queuePlan{}, t0).HeldBy; got != "" {
		t.Errorf("a free semaphore's heldBy = %q, want empty", got)
	}
	many := sem
	many.Permits = nil
	for i := 1; i <= 3; i++ {
		many.Permits = append(many.Permits, lease.Permit{Number: i, Holder: strings.Repeat("h", 600), Token: tokenOf(7)})
	}
	if got := computeStatus(fl, many, queuePlan{}, t0).HeldBy; len(got) > locksv1alpha1.MaxHeldByLength || !strings.HasSuffix(got, "…") {
		t.Errorf("heldBy of three 600-byte identities is %d bytes, ending %q", len(got), got[len(got)-5:])
	}
}

func TestOnlyRenewalTimes(t *testing.T) {
	at := func(s int) *metav1.MicroTime { m := metav1.NewMicroTime(time.Unix(int64(s), 0)); return &m }
	lock := locksv1alpha1.FencedLockStatus{Holder: "a", Token: "10", AcquireTime: at(1), RenewTime: at(1), Held: "1/1",
		Holders: []locksv1alpha1.Holder{{Permit: 1, Identity: "a", Token: "10", AcquireTime: at(1), RenewTime: at(1)}}}
	change := func(f func(s *locksv1alpha1.FencedLockStatus)) locksv1alpha1.FencedLockStatus {
		s := *lock.DeepCopy()
		f(&s)
		return s
	}
	cases := []struct {
		name  string
		after locksv1alpha1.FencedLockStatus
		want  bool
	}{
		{"unchanged", lock, true},
		{"the holder renewed", change(func(s *locksv1alpha1.FencedLockStatus) {
			s.RenewTime, s.Holders[0].RenewTime = at(5), at(5)
		}), true},
		{"a permit renewed", change(func(s *locksv1alpha1.FencedLockStatus) { s.Holders[0].RenewTime = at(5) }), true},
		{"renewed and a waiter came", change(func(s *locksv1alpha1.FencedLockStatus) {
			s.RenewTime, s.WaitingCount = at(5), 1
		}), false},
		{"granted anew", change(func(s *locksv1alpha1.FencedLockStatus) {
			s.Token, s.Holders[0].Token, s.RenewTime = "12", "12", at(5)
		}), false},
		{"released", change(func(s *locksv1alpha1.FencedLockStatus) {
			s.Holder, s.AcquireTime, s.RenewTime, s.Holders, s.Held = "", nil, nil, nil, "0/1"
		}), false},
		{"another permit granted", change(func(s *locksv1alpha1.FencedLockStatus) {
			s.Holders = append(s.Holders, locksv1alpha1.Holder{Permit: 2, Identity: "b", Token: "11"})
		}), false},
	}
	for _, tc := range cases {
		before := *lock.DeepCopy()
		if got := onlyRenewalTimes(before, tc.after); got != tc.want {
			t.Errorf("%s: onlyRenewalTimes = %v, want %v", tc.name, got, tc.want)
		}
		if !equality.Semantic.DeepEqual(before, lock) {
			t.Errorf("%s: onlyRenewalTimes changed its input", tc.name)
		}
	}
}
