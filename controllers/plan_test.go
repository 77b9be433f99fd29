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

	corev1 "k8s.io/api/core/v1"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
)

func TestComputePlan(t *testing.T) {
	holderID := locksv1alpha1.PodHolderIdentity("holder", "uid-holder")
	holder := mkPod("holder", 0, false)
	holder.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	succeeded := holder
	succeeded.Status.Phase = corev1.PodSucceeded
	stillGated := mkPod("holder", 0, true)
	next := mkPod("next", time.Second, true)
	queue := []lease.Waiter{{Ticket: 3, Holder: locksv1alpha1.PodHolderIdentity(next.Name, string(next.UID))}}
	free := lease.State{Token: tokenOf(10), Duration: 15 * time.Second}
	podHeld := held(holderID, 10)
	client := held("library", 10)
	readyObs := observation{renewedAt: t0, acquiredAt: t0}
	notReadyObs := observation{renewedAt: t0, acquiredAt: t0, notReadySince: t0}

	cases := []struct {
		name      string
		st        lease.State
		obs       observation
		holderPod *corev1.Pod
		queue     []lease.Waiter
		now       time.Time
		wantEnd   ending
		wantGrant string
		wantUngat bool
		wantDead  time.Time
	}{
		{name: "free, nobody waits", st: free},
		{name: "free: grant the first waiter", st: free, queue: queue, wantGrant: "next"},
		{name: "held by a Ready pod: nothing to do, no timer", st: podHeld, obs: readyObs, holderPod: &holder, queue: queue, now: t0.Add(time.Hour)},
		{name: "holder pod succeeded: hand over in one write", st: podHeld, obs: readyObs, holderPod: &succeeded, queue: queue,
			wantEnd: release, wantGrant: "next"},
		{name: "holder pod deleted, nobody waits", st: podHeld, obs: readyObs, wantEnd: release},
		{name: "holder pod not Ready within the lease: not yet", st: podHeld, obs: notReadyObs, holderPod: &stillGated, queue: queue,
			now: t0.Add(14 * time.Second), wantUngat: true, wantDead: t0.Add(15 * time.Second)},
		{name: "holder pod not Ready past the lease: revoke and hand over", st: podHeld, obs: notReadyObs, holderPod: &holder, queue: queue,
			now: t0.Add(15 * time.Second), wantEnd: revoke, wantGrant: "next"},
		{name: "library holder: waiters wait until its lease", st: client, obs: readyObs, queue: queue, now: t0.Add(time.Second),
			wantDead: t0.Add(15 * time.Second)},
		{name: "library holder expired: revoke and grant the waiter", st: client, obs: readyObs, queue: queue, now: t0.Add(15 * time.Second),
			wantEnd: revoke, wantGrant: "next"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var headPod *corev1.Pod
			if len(tc.queue) > 0 {
				headPod = &next
			}
			p := computePlan(planInput{st: tc.st, obs: tc.obs, holderPod: tc.holderPod, waiting: tc.queue, headPod: headPod, now: tc.now})
			gotGrant := ""
			if p.headPod != nil {
				gotGrant = p.headPod.Name
			}
			if p.end != tc.wantEnd || gotGrant != tc.wantGrant || (p.ungate != nil) != tc.wantUngat || !p.deadline.Equal(tc.wantDead) {
				t.Fatalf("plan = end %v grant %q ungate %v deadline %v; want end %v grant %q ungate %v deadline %v",
					p.end, gotGrant, p.ungate != nil, p.deadline, tc.wantEnd, tc.wantGrant, tc.wantUngat, tc.wantDead)
			}
		})
	}
}
