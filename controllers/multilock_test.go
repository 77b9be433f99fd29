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

	corev1 "k8s.io/api/core/v1"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/token"
)

// mkMultiPod is a gated pod asking for locks through the annotation.
func mkMultiPod(name string, enqueued time.Duration, locks string) corev1.Pod {
	p := mkPod(name, enqueued, true)
	delete(p.Labels, locksv1alpha1.LockLabel)
	p.Annotations[locksv1alpha1.LocksAnnotation] = locks
	return p
}

// holding says which (pod, lock) pairs are held.
func holding(pairs ...string) holdsFunc {
	return func(pod *corev1.Pod, lock string) bool {
		for i := 0; i+1 < len(pairs); i += 2 {
			if pairs[i] == pod.Name && pairs[i+1] == lock {
				return true
			}
		}
		return false
	}
}

func TestComputeQueueQueuesAPodForItsNextLockOnly(t *testing.T) {
	pods := []corev1.Pod{
		mkMultiPod("ab", 1*time.Millisecond, "b,a"),  // holds nothing: waits for a
		mkMultiPod("ab2", 2*time.Millisecond, "a,b"), // holds a: waits for b
		mkMultiPod("abc", 3*time.Millisecond, "a,b,c"),
		mkPod("single", 4*time.Millisecond, true), // label settlement alone
	}
	pods[3].Labels[locksv1alpha1.LockLabel] = "b"
	holds := holding("ab2", "a")
	holders := map[string]string{"a": locksv1alpha1.PodHolderIdentity("ab2", "uid-ab2")}
	for lock, want := range map[string][]string{
		"a": {"ab", "abc"},     // ab2 holds a
		"b": {"ab2", "single"}, // ab and abc do not hold a yet
		"c": {},                // abc does not hold a and b yet
	} {
		var asking []*corev1.Pod // as the index lists them
		for i := range pods {
			if slices.Contains(locksv1alpha1.PodLocks(&pods[i]), lock) {
				asking = append(asking, &pods[i])
			}
		}
		var st lease.State
		if h := holders[lock]; h != "" {
			st = held(h, 1)
		}
		got := names(computeQueue(asking, lock, st, holds))
		if len(got) != len(want) {
			t.Fatalf("queue of %s = %v; want %v", lock, got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("queue of %s = %v; want %v", lock, got, want)
			}
		}
	}
}

func TestPlanQueueDropsAPodThatLostAnEarlierLock(t *testing.T) {
	pod := mkMultiPod("ab", 0, "a,b")
	id := locksv1alpha1.PodHolderIdentity(pod.Name, string(pod.UID))
	in := queueInput{q: lease.Queue{Waiters: []lease.Waiter{{Ticket: 1, Holder: id}}}, lock: "b",
		pods: []*corev1.Pod{&pod}, now: t0, window: time.Minute}
	in.holds = holding("ab", "a")
	if p := planQueue(in); p.Changed || len(p.waiting) != 1 {
		t.Fatalf("a pod holding a stays queued for b: changed %v waiting %v", p.Changed, p.waiting)
	}
	in.holds = holding()
	if p := planQueue(in); !p.Changed || len(p.waiting) != 0 || len(p.Gone) != 1 {
		t.Fatalf("a pod that lost a leaves b's queue: changed %v waiting %v dropped %v", p.Changed, p.waiting, p.Gone)
	}
	in.q.Waiters = nil
	in.holds = holding("ab", "a")
	// It joins in the queue Lease's next write, whose resourceVersion is its ticket: it waits
	// from then on.
	if p := planQueue(in); !p.Changed || len(p.Queue.Added) != 1 || p.Queue.Added[0].Holder != id {
		t.Fatalf("a pod that got a joins b's queue: changed %v added %v", p.Changed, p.Queue.Added)
	}
}

func TestPodProgress(t *testing.T) {
	pod := mkMultiPod("p", 0, "a,b,c")
	held := map[string]token.Token{"a": 7}
	holds := func(l string) (token.Token, bool) { tok, ok := held[l]; return tok, ok }
	pr := podProgress(&pod, "b", holds)
	if pr.lacks != "c" || pr.lacksEarlier || pr.tokens["a"] != 7 || len(pr.tokens) != 1 {
		t.Fatalf("holder of b with a: %+v; want it to lack c, later", pr)
	}
	pr = podProgress(&pod, "c", holds)
	if pr.lacks != "b" || !pr.lacksEarlier {
		t.Fatalf("holder of c without b: %+v; want it to lack b, earlier", pr)
	}
	held["b"] = 9
	if pr = podProgress(&pod, "c", holds); pr.lacks != "" || len(pr.tokens) != 2 {
		t.Fatalf("holder of c with a and b: %+v; want all held", pr)
	}
	single := mkPod("s", 0, true)
	if pr = podProgress(&single, "settlement", holds); pr.lacks != "" || pr.tokens != nil {
		t.Fatalf("a single-lock pod: %+v", pr)
	}
}

func TestComputePlanSeveralLocks(t *testing.T) {
	pod := mkMultiPod("p", 0, "a,b")
	id := locksv1alpha1.PodHolderIdentity(pod.Name, string(pod.UID))
	st := held(id, 10)
	notReady := observation{renewedAt: t0, acquiredAt: t0, notReadySince: t0}
	ready := observation{renewedAt: t0, acquiredAt: t0}
	free := lease.State{Token: tokenOf(10), Duration: 15 * time.Second}
	queue := []lease.Waiter{{Ticket: 3, Holder: id}}

	// Holds a, waits for b: kept, not ungated, no not-Ready revocation (the caller passes it as
	// Ready while gated), maxHold still applies.
	p := computePlan(planInput{st: st, obs: ready, holderPod: &pod, holderProgress: progress{lacks: "b"},
		now: t0.Add(time.Hour)})
	if p.end != keep || p.ungate != nil {
		t.Fatalf("holder of a waiting for b: end %v ungate %v", p.end, p.ungate != nil)
	}
	p = computePlan(planInput{st: st, obs: ready, holderPod: &pod, holderProgress: progress{lacks: "b"},
		maxHold: time.Minute, now: t0.Add(time.Minute)})
	if p.end != revoke || p.reason != expiryMaxHold {
		t.Fatalf("maxHold applies while the pod waits: end %v reason %v", p.end, p.reason)
	}
	// Holds b but lost a: give b up.
	p = computePlan(planInput{st: st, obs: ready, holderPod: &pod, holderProgress: progress{lacks: "a", lacksEarlier: true},
		now: t0})
	if p.end != release {
		t.Fatalf("holder of b that lost a: end %v", p.end)
	}
	// Holds both: ungated with the other token.
	p = computePlan(planInput{st: st, obs: notReady, holderPod: &pod,
		holderProgress: progress{tokens: map[string]token.Token{"a": 7}}, now: t0})
	if p.ungate == nil || p.ungateTokens["a"] != 7 {
		t.Fatalf("holder of both: ungate %v tokens %v", p.ungate != nil, p.ungateTokens)
	}
	// Granting: ungate only the pod that holds its other locks.
	p = computePlan(planInput{st: free, waiting: queue, headPod: &pod, headProgress: progress{lacks: "b"}, now: t0})
	if p.headPod == nil || p.headUngates {
		t.Fatalf("grant of a to a pod that waits for b: grant %v ungates %v", p.headPod != nil, p.headUngates)
	}
	p = computePlan(planInput{st: free, waiting: queue, headPod: &pod,
		headProgress: progress{tokens: map[string]token.Token{"a": 7}}, now: t0})
	if p.headPod == nil || !p.headUngates || p.headTokens["a"] != 7 {
		t.Fatalf("grant of b to a pod holding a: grant %v ungates %v tokens %v", p.headPod != nil, p.headUngates, p.headTokens)
	}
}

func TestUngatePatchTokens(t *testing.T) {
	pod := mkMultiPod("p", 0, "a,b")
	patch, err := ungatePatch(&pod, "b", 9, 1, map[string]token.Token{"a": 7})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := patch.Data(nil)
	for _, want := range []string{`"token.fencedlock.io/a":"7"`, `"token.fencedlock.io/b":"9"`} {
		if !strings.Contains(string(data), want) {
			t.Fatalf("patch %s lacks %s", data, want)
		}
	}
	if strings.Contains(string(data), `"fencedlock.io/token"`) {
		t.Fatalf("a multi-lock pod gets no single token: %s", data)
	}
	single := mkPod("s", 0, true)
	patch, _ = ungatePatch(&single, "settlement", 5, 2, nil)
	data, _ = patch.Data(nil)
	if !strings.Contains(string(data), `"fencedlock.io/permit":"2"`) {
		t.Fatalf("a single-lock pod gets its permit's number: %s", data)
	}
	if !strings.Contains(string(data), `"fencedlock.io/token":"5"`) || !strings.Contains(string(data), `"token.fencedlock.io/settlement":"5"`) {
		t.Fatalf("a single-lock pod keeps fencedlock.io/token: %s", data)
	}
}
