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
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
)

func TestConditionDue(t *testing.T) {
	fl := &locksv1alpha1.FencedLock{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "jobs"}}
	st := held("pod/w0/uid-0", 7)
	shown := func(c podCondition, at time.Time) *corev1.PodCondition {
		pc := newPodCondition(&corev1.Pod{}, "jobs", nil, c, at)
		return &pc
	}
	at5 := waitingCondition(fl, st, 5, 9, t0)
	cases := []struct {
		name    string
		cur     *corev1.PodCondition
		want    podCondition
		pos     int
		now     time.Time
		write   bool
		wantDue time.Time
	}{
		{"nothing shown: written", nil, at5, 5, t0, true, time.Time{}},
		{"the same, later, with another count: not written", shown(at5, t0), waitingCondition(fl, st, 5, 12, t0.Add(time.Hour)),
			5, t0.Add(time.Hour), false, time.Time{}},
		{"moved up, within the lead: written", shown(at5, t0), waitingCondition(fl, st, podConditionLead, 9, t0.Add(time.Second)),
			podConditionLead, t0.Add(time.Second), true, time.Time{}},
		{"moved up, behind the lead: due at the refresh", shown(at5, t0), waitingCondition(fl, st, 4, 9, t0.Add(time.Second)),
			4, t0.Add(time.Second), false, t0.Add(podConditionRefresh)},
		{"moved up, behind the lead, refresh due: written", shown(at5, t0), waitingCondition(fl, st, 4, 9, t0.Add(podConditionRefresh)),
			4, t0.Add(podConditionRefresh), true, time.Time{}},
		{"a new holder, behind the lead: due at the refresh", shown(at5, t0), waitingCondition(fl, held("other", 8), 5, 9, t0.Add(time.Second)),
			5, t0.Add(time.Second), false, t0.Add(podConditionRefresh)},
		{"granted: written at once", shown(at5, t0), grantedCondition(fl, 9, 1), 0, t0.Add(time.Second), true, time.Time{}},
		{"granted, shown: not written", shown(grantedCondition(fl, 9, 1), t0), grantedCondition(fl, 9, 1), 0, t0.Add(time.Hour),
			false, time.Time{}},
		{"revoked: written at once", shown(grantedCondition(fl, 9, 1), t0), revokedCondition(fl, 9, "not Ready for 15s"), 0,
			t0.Add(time.Second), true, time.Time{}},
		{"a forged condition of ours is put right", &corev1.PodCondition{Type: locksv1alpha1.PodConditionType("jobs"),
			Status: corev1.ConditionTrue, Reason: locksv1alpha1.ReasonGranted, Message: "Granted FencedLock team-a/jobs with token 99"},
			at5, 5, t0, true, time.Time{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			write, due := conditionDue(tc.cur, tc.want, tc.pos, tc.now)
			if write != tc.write || !due.Equal(tc.wantDue) {
				t.Fatalf("conditionDue = %v, %v; want %v, %v", write, due, tc.write, tc.wantDue)
			}
		})
	}
}

func TestPodConditionMessages(t *testing.T) {
	fl := &locksv1alpha1.FencedLock{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "jobs"}}
	w := waitingCondition(fl, held("pod/w0/uid-0", 7), 2, 9, t0).message()
	for _, want := range []string{"FencedLock team-a/jobs", "position 2", "held by pod/w0/uid-0 (token 7)", "9 waiting",
		"as of 2026-01-01T00:00:00Z"} {
		if !strings.Contains(w, want) {
			t.Errorf("waiting message %q does not say %q", w, want)
		}
	}
	if w := waitingCondition(fl, lease.State{Token: 7}, 1, 1, t0).message(); !strings.Contains(w, "the lock is free") {
		t.Errorf("waiting message of a free lock: %q", w)
	}
	sem := fl.DeepCopy()
	sem.Spec.Permits = 5
	st := lease.State{Token: 20, Limit: 5, Permits: []lease.Permit{{Number: 1, Holder: "a", Token: 11}, {Number: 2, Holder: "b", Token: 12},
		{Number: 3, Holder: "c", Token: 13}, {Number: 4, Holder: "d", Token: 14}}}
	if w := waitingCondition(sem, st, 1, 1, t0).message(); !strings.Contains(w, "4 of 5 permits held: a (token 11), b (token 12), c (token 13) and 1 more") {
		t.Errorf("waiting message of a semaphore: %q", w)
	}
	r := revokedCondition(fl, 7, "not Ready for 15s")
	if r.status != corev1.ConditionFalse || r.reason != locksv1alpha1.ReasonRevoked ||
		!strings.Contains(r.message(), "Token 7 of FencedLock team-a/jobs is dead") || !strings.Contains(r.message(), "not Ready for 15s") {
		t.Errorf("revoked condition: %+v", r)
	}
	g := newPodCondition(&corev1.Pod{}, "jobs", &corev1.PodCondition{Status: corev1.ConditionFalse,
		LastTransitionTime: metav1.NewTime(t0)}, grantedCondition(fl, 9, 1), t0.Add(time.Minute))
	if g.Type != "lock.fencedlock.io/jobs" || !g.LastTransitionTime.Time.Equal(t0.Add(time.Minute)) {
		t.Errorf("a changed status moves the transition time: %+v", g)
	}
	k := newPodCondition(&corev1.Pod{}, "jobs", &corev1.PodCondition{Status: corev1.ConditionFalse,
		LastTransitionTime: metav1.NewTime(t0)}, waitingCondition(fl, held("x", 1), 1, 1, t0), t0.Add(time.Minute))
	if !k.LastTransitionTime.Time.Equal(t0) {
		t.Errorf("the same status keeps the transition time: %+v", k)
	}
}
