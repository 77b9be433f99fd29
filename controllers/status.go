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
	"fmt"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
)

// computeStatus mirrors the Lease into a FencedLock status. It starts from the current status so
// that conditions keep their lastTransitionTime when they do not change.
func computeStatus(fl *locksv1alpha1.FencedLock, st lease.State, qp queuePlan, now time.Time) locksv1alpha1.FencedLockStatus {
	s := *fl.Status.DeepCopy()
	s.ObservedGeneration = fl.Generation
	s.Holder = shownIdentity(st.Holder)
	s.Token = st.Token.String()
	s.LeaseTransitions = st.Transitions
	s.AcquireTime, s.RenewTime = nil, nil
	if st.Held() {
		s.AcquireTime, s.RenewTime = st.AcquireTime, st.RenewTime
	}
	s.Holders = nil
	for _, p := range st.Permits[:min(len(st.Permits), maxHoldersShown)] {
		s.Holders = append(s.Holders, locksv1alpha1.Holder{Permit: int32(p.Number), Identity: shownIdentity(p.Holder),
			Token: p.Token.String(), AcquireTime: p.AcquireTime, RenewTime: p.RenewTime})
	}
	s.Held = fmt.Sprintf("%d/%d", len(st.Permits), fl.Spec.PermitCount())
	s.HeldBy = heldBy(st)
	s.WaitingCount = int32(len(qp.waiting))
	s.Waiters = nil
	for _, w := range qp.waiting[:min(len(qp.waiting), maxWaitersShown)] {
		shown := locksv1alpha1.Waiter{Identity: shownIdentity(w.Holder), Since: w.Since}
		if pod := qp.pods[w.Holder]; pod != nil {
			shown.Pod, shown.Since = pod.Name, metav1.NewTime(enqueuedAt(pod))
		}
		s.Waiters = append(s.Waiters, shown)
	}
	setReadyCondition(&s, fl.Generation, metav1.ConditionTrue, locksv1alpha1.ReasonLeaseReady,
		"The backing Lease exists and carries a fencing token", now)
	setHeldCondition(&s, fl.Generation, st, now)
	return s
}

// onlyRenewalTimes reports whether status after differs from before only by renewal times (of the
// holder, of each permit's holder): the change a renewal alone makes.
func onlyRenewalTimes(before, after locksv1alpha1.FencedLockStatus) bool {
	if len(before.Holders) != len(after.Holders) {
		return false
	}
	after.RenewTime = before.RenewTime
	after.Holders = slices.Clone(after.Holders)
	for i := range after.Holders {
		after.Holders[i].RenewTime = before.Holders[i].RenewTime
	}
	return equality.Semantic.DeepEqual(before, after)
}

// heldBy is status.heldBy: the holder of each permit held (a lock's holder is permit 1).
func heldBy(st lease.State) string {
	ids := make([]string, 0, len(st.Permits))
	for _, p := range st.Permits {
		ids = append(ids, p.Holder)
	}
	return locksv1alpha1.HeldBy(ids)
}

// maxWaitersShown bounds status.waiters (the API allows ten).
const maxWaitersShown = 10

// maxHoldersShown bounds status.holders (the API allows a hundred, spec.permits' bound; more are
// held only if the Lease was written by hand).
const maxHoldersShown = 100

// maxIdentityShown is the longest identity status shows (the API's bound on status.holder and
// status.waiters[].identity): a status write with a longer one would be refused, and with it
// the whole status.
const maxIdentityShown = 1024

// shownIdentity returns id as status shows it: whole, or cut to maxIdentityShown bytes (at a
// character boundary) ending in "…" so nobody mistakes it for the identity itself.
func shownIdentity(id string) string { return locksv1alpha1.Shorten(id, maxIdentityShown) }

// setHeldCondition sets Held from the Lease state.
func setHeldCondition(s *locksv1alpha1.FencedLockStatus, gen int64, st lease.State, now time.Time) {
	switch {
	case st.Held() && st.Semaphore:
		setCondition(s, gen, locksv1alpha1.ConditionHeld, metav1.ConditionTrue, locksv1alpha1.ReasonGranted,
			fmt.Sprintf("%d of %d permits held; last token %s", len(st.Permits), st.Limit, st.Token), now)
	case st.Held():
		setCondition(s, gen, locksv1alpha1.ConditionHeld, metav1.ConditionTrue, locksv1alpha1.ReasonGranted,
			fmt.Sprintf("Held by %s with token %s", shownIdentity(st.Holder), st.Token), now)
	case !st.RevokedToken.IsZero() && st.RevokedToken == st.Token:
		setCondition(s, gen, locksv1alpha1.ConditionHeld, metav1.ConditionFalse, locksv1alpha1.ReasonExpired,
			fmt.Sprintf("The grant with token %s expired and was revoked; writes need a token of at least %s",
				st.Token, st.Token), now)
	case st.Transitions > 0:
		setCondition(s, gen, locksv1alpha1.ConditionHeld, metav1.ConditionFalse, locksv1alpha1.ReasonReleased,
			fmt.Sprintf("Released by its last holder (token %s)", st.Token), now)
	default:
		setCondition(s, gen, locksv1alpha1.ConditionHeld, metav1.ConditionFalse, locksv1alpha1.ReasonAvailable,
			"Never acquired", now)
	}
}

// setReadyCondition sets Ready.
func setReadyCondition(s *locksv1alpha1.FencedLockStatus, gen int64, status metav1.ConditionStatus, reason, msg string, now time.Time) {
	setCondition(s, gen, locksv1alpha1.ConditionReady, status, reason, msg, now)
}

func setCondition(s *locksv1alpha1.FencedLockStatus, gen int64, typ string, status metav1.ConditionStatus, reason, msg string, now time.Time) {
	meta.SetStatusCondition(&s.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: msg,
		ObservedGeneration: gen, LastTransitionTime: metav1.NewTime(now),
	})
}

// transition is what changed hands between two statuses (possibly many grants when status writes
// were coalesced).
type transition struct {
	// granted is the number of grants made, counted from the Lease's transition counter.
	granted int32
	// ended is the number of grants that ended.
	ended int32
	// endedShown are the grants the previous status showed that ended, grantedShown the grants
	// held now that it did not show.
	endedShown, grantedShown []locksv1alpha1.Holder
}

// computeTransition compares the previous status with the Lease state now.
func computeTransition(prev locksv1alpha1.FencedLockStatus, st lease.State) transition {
	var t transition
	if st.Token.String() != prev.Token {
		t.granted = st.Transitions - prev.LeaseTransitions
		if t.granted < 0 { // the Lease was recreated: its counter restarted
			t.granted = st.Transitions
		}
	}
	before := shownHolders(prev)
	for _, h := range before {
		if !slices.ContainsFunc(st.Permits, func(p lease.Permit) bool { return p.Token.String() == h.Token }) {
			t.endedShown = append(t.endedShown, h)
		}
	}
	for _, p := range st.Permits {
		if !slices.ContainsFunc(before, func(h locksv1alpha1.Holder) bool { return h.Token == p.Token.String() }) {
			t.grantedShown = append(t.grantedShown, locksv1alpha1.Holder{Permit: int32(p.Number), Identity: p.Holder,
				Token: p.Token.String()})
		}
	}
	// Every grant made or held before ends unless it is held now.
	t.ended = max(t.granted+int32(len(before))-int32(len(st.Permits)), 0)
	return t
}

// shownHolders are the holders a status shows: status.holders, or the holder of a status written
// before semaphores.
func shownHolders(s locksv1alpha1.FencedLockStatus) []locksv1alpha1.Holder {
	if len(s.Holders) > 0 || s.Holder == "" {
		return s.Holders
	}
	return []locksv1alpha1.Holder{{Permit: 1, Identity: s.Holder, Token: s.Token}}
}

// leaseNeedsSync reports whether the Lease needs the lock's spec applied (its duration and
// permits), or the label of the lock's uid.
func leaseNeedsSync(l *coordinationv1.Lease, fl *locksv1alpha1.FencedLock) bool {
	if l.Spec.LeaseDurationSeconds == nil || *l.Spec.LeaseDurationSeconds != fl.Spec.LeaseDurationSeconds ||
		l.Labels[locksv1alpha1.LockUIDLabel] != string(fl.UID) { // made before the label existed
		return true
	}
	changed, err := lease.SetPermits(l.DeepCopy(), fl.Spec.PermitCount())
	return changed || err != nil
}
