package controllers

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/token"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func held(holder string, tok uint64) lease.State {
	return lease.State{Holder: holder, Token: tokenOf(tok), Duration: 15 * time.Second, Transitions: 1}
}

func renewedAt(st lease.State, at time.Time) lease.State {
	t := metav1.NewMicroTime(at)
	st.RenewTime = &t
	return st
}

func TestNextObservation(t *testing.T) {
	a := renewedAt(held("a", 10), t0)
	first := nextObservation(observation{}, a, nil, t0)
	if !first.renewedAt.Equal(t0) || !first.acquiredAt.Equal(t0) {
		t.Fatalf("first observation %+v", first)
	}
	same := nextObservation(first, a, nil, t0.Add(5*time.Second))
	if same != first {
		t.Fatalf("an unchanged lease must not move the observation: %+v", same)
	}
	// A bystander's write (a label, an annotation, the same renewTime written again) changes the
	// resourceVersion but not renewTime: not a renewal. Only the fields nextObservation reads are
	// in lease.State, so "same state, later" is exactly such a write.
	rewritten := nextObservation(first, renewedAt(held("a", 10), t0), nil, t0.Add(5*time.Second))
	if rewritten != first {
		t.Fatalf("a write of the same renewTime must not renew: %+v", rewritten)
	}
	renewed := nextObservation(first, renewedAt(a, t0.Add(time.Millisecond)), nil, t0.Add(5*time.Second))
	if !renewed.renewedAt.Equal(t0.Add(5*time.Second)) || !renewed.acquiredAt.Equal(t0) {
		t.Fatalf("a renewal moves renewedAt only, to when it was observed: %+v", renewed)
	}
	// The holder's clock is not this controller's: a renewTime far in the past still renews now.
	skewed := nextObservation(renewed, renewedAt(a, t0.Add(-time.Hour)), nil, t0.Add(6*time.Second))
	if !skewed.renewedAt.Equal(t0.Add(6 * time.Second)) {
		t.Fatalf("a changed renewTime renews whatever its value: %+v", skewed)
	}
	regrant := nextObservation(renewed, renewedAt(held("b", 13), t0), nil, t0.Add(7*time.Second))
	if !regrant.acquiredAt.Equal(t0.Add(7*time.Second)) || !regrant.renewedAt.Equal(t0.Add(7*time.Second)) {
		t.Fatalf("a new grant moves acquiredAt and renewedAt, even with the same renewTime: %+v", regrant)
	}
}

func TestComputeExpiry(t *testing.T) {
	obs := observation{renewedAt: t0.Add(10 * time.Second), acquiredAt: t0}
	cases := []struct {
		name         string
		st           lease.State
		maxHold      time.Duration
		now          time.Time
		wantReason   expiryReason
		wantDeadline time.Time
	}{
		{"free lock never expires", lease.State{Token: tokenOf(5), Duration: 15 * time.Second}, 0, t0.Add(time.Hour), expiryNone, time.Time{}},
		{"just before the lease deadline", held("a", 5), 0, t0.Add(25*time.Second - time.Nanosecond), expiryNone, t0.Add(25 * time.Second)},
		{"at the lease deadline", held("a", 5), 0, t0.Add(25 * time.Second), expiryLease, t0.Add(25 * time.Second)},
		{"max hold earlier than the lease", held("a", 5), 20 * time.Second, t0.Add(19 * time.Second), expiryNone, t0.Add(20 * time.Second)},
		{"max hold reached", held("a", 5), 20 * time.Second, t0.Add(20 * time.Second), expiryMaxHoldS, t0.Add(20 * time.Second)},
		{"max hold later than the lease", held("a", 5), time.Hour, t0.Add(26 * time.Second), expiryLease, t0.Add(25 * time.Second)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reason, deadline := computeExpiry(tc.st, obs, tc.maxHold, tc.now)
			if reason != tc.wantReason || !deadline.Equal(tc.wantDeadline) {
				t.Fatalf("computeExpiry = %q, %v; want %q, %v", reason, deadline, tc.wantReason, tc.wantDeadline)
			}
		})
	}
}

func TestComputeTransition(t *testing.T) {
	prevHeld := locksv1alpha1.FencedLockStatus{Holder: "a", Token: "10", LeaseTransitions: 3}
	prevFree := locksv1alpha1.FencedLockStatus{Token: "10", LeaseTransitions: 3}
	revoked := lease.State{Token: tokenOf(10), RevokedToken: tokenOf(10), Transitions: 3}
	cases := []struct {
		name string
		prev locksv1alpha1.FencedLockStatus
		st   lease.State
		want transition
	}{
		{"nothing happened", prevHeld, lease.State{Holder: "a", Token: tokenOf(10), Transitions: 3}, transition{}},
		{"released", prevHeld, lease.State{Token: tokenOf(10), Transitions: 3}, transition{ended: 1}},
		{"revoked", prevHeld, revoked, transition{ended: 1, lastRevoked: true}},
		{"granted from free", prevFree, lease.State{Holder: "b", Token: tokenOf(12), Transitions: 4}, transition{granted: 1}},
		{"handed over between reconciles", prevHeld, lease.State{Holder: "c", Token: tokenOf(20), Transitions: 6},
			transition{granted: 3, ended: 3}},
		{"many grants coalesced, free now", prevHeld, lease.State{Token: tokenOf(30), Transitions: 8}, transition{granted: 5, ended: 6}},
		{"lease recreated: counter restarted", prevFree, lease.State{Holder: "b", Token: tokenOf(30), Transitions: 1}, transition{granted: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := computeTransition(tc.prev, tc.st); got != tc.want {
				t.Fatalf("computeTransition = %+v; want %+v", got, tc.want)
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
			metav1.ConditionTrue, locksv1alpha1.ReasonAcquired},
		{"never acquired", lease.State{Token: tokenOf(7)}, metav1.ConditionFalse, locksv1alpha1.ReasonAvailable},
		{"released", lease.State{Token: tokenOf(7), Transitions: 1}, metav1.ConditionFalse, locksv1alpha1.ReasonReleased},
		{"expired", lease.State{Token: tokenOf(7), RevokedToken: tokenOf(7), Transitions: 1}, metav1.ConditionFalse, locksv1alpha1.ReasonExpired},
		{"revoked earlier, released now", lease.State{Token: tokenOf(9), RevokedToken: tokenOf(7), Transitions: 2},
			metav1.ConditionFalse, locksv1alpha1.ReasonReleased},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := computeStatus(fl, tc.st, nil, t0)
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
	first := computeStatus(fl, lease.State{Token: tokenOf(7)}, nil, t0)
	fl2 := fl.DeepCopy()
	fl2.Status = first
	second := computeStatus(fl2, lease.State{Token: tokenOf(7)}, nil, t0.Add(time.Hour))
	if !second.Conditions[0].LastTransitionTime.Equal(&first.Conditions[0].LastTransitionTime) {
		t.Fatal("lastTransitionTime moved without a transition")
	}
}

func tokenOf(v uint64) token.Token { return token.Token(v) }

func TestStatusBudget(t *testing.T) {
	const every = time.Second
	var b statusBudget
	for i := range statusBurst {
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
	s := computeStatus(fl, lease.State{Holder: strings.Repeat("z", 2000), Token: tokenOf(7), Transitions: 1}, nil, t0)
	msg := meta.FindStatusCondition(s.Conditions, locksv1alpha1.ConditionHeld).Message
	if len(s.Holder) > maxIdentityShown || len(msg) > maxIdentityShown+100 {
		t.Fatalf("status holder %d bytes, Held message %d bytes", len(s.Holder), len(msg))
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
