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

package main

import (
	"bytes"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
)

func TestExplainLock(t *testing.T) {
	pod := func(gated bool, ann map[string]string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "p", UID: "u1", Annotations: ann}}
		if gated {
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: locksv1alpha1.SchedulingGate}}
		}
		return p
	}
	me := locksv1alpha1.PodHolderIdentity("p", "u1")
	heldByOther := lease.State{Token: 40, Limit: 1, Holder: "other", Served: 10}
	queued := lease.Queue{Waiters: []lease.Waiter{{Ticket: 11, Holder: "c"}, {Ticket: 12, Holder: me}}}
	cases := []struct {
		name    string
		pod     *corev1.Pod
		view    lockView
		lacking string
		want    string
		holds   bool
	}{
		{"missing lock", pod(true, nil), lockView{name: "ops.ledger"}, "",
			"FencedLock team-a/ops.ledger does not exist: a pod's locks live in its own namespace (team-a)", false},
		{"holds it", pod(false, nil), lockView{name: "jobs", found: true, leased: true,
			st: lease.State{Token: 41, Limit: 1, Holder: me}}, "", "holds it with token 41", true},
		{"waits", pod(true, nil), lockView{name: "jobs", found: true, leased: true, st: heldByOther, queue: queued}, "",
			"waiting at position 2 of 2; held by other (token 40)", false},
		{"revoked", pod(false, map[string]string{locksv1alpha1.LockTokenAnnotation("jobs"): "39"}), lockView{name: "jobs",
			found: true, leased: true, st: lease.State{Token: 40, Limit: 1, Holder: "other", RevokedToken: 39}}, "",
			"its token 39 is dead, revoked by the manager", false},
		{"needs an earlier lock first", pod(true, nil), lockView{name: "jobs", found: true, leased: true, st: heldByOther}, "a",
			"not queued yet: the pod first needs lock a", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, holds := explainLock(tc.pod, tc.view, tc.lacking)
			if !strings.Contains(got, tc.want) || holds != tc.holds {
				t.Fatalf("explainLock = %q, %v; want %q, %v", got, holds, tc.want, tc.holds)
			}
		})
	}
	var out bytes.Buffer
	p := pod(true, nil)
	p.Status.Conditions = []corev1.PodCondition{{Type: locksv1alpha1.PodConditionType("jobs"), Status: corev1.ConditionFalse,
		Reason: locksv1alpha1.ReasonWaiting, Message: "Waiting for FencedLock team-a/jobs at position 2"}}
	if err := writeWhy(&out, p, []lockView{{name: "jobs", found: true, leased: true, st: heldByOther, queue: queued}}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Pod team-a/p: gated", "  jobs: waiting at position 2 of 2",
		"    condition lock.fencedlock.io/jobs=False, Waiting: Waiting for FencedLock team-a/jobs at position 2"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("why printed %q; want a line with %q", out.String(), want)
		}
	}
}
