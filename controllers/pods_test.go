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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
)

// mkPod builds a pod of lock "settlement"; enqueued is an offset from t0 (negative: no stamp).
func mkPod(name string, enqueued time.Duration, gatedPod bool) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name),
		Labels:            map[string]string{locksv1alpha1.LockLabel: "settlement"},
		Annotations:       map[string]string{},
		CreationTimestamp: metav1.NewTime(t0.Truncate(time.Second))}}
	if enqueued >= 0 {
		p.Annotations[locksv1alpha1.EnqueuedAnnotation] = t0.Add(enqueued).Format(time.RFC3339Nano)
	}
	if gatedPod {
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: locksv1alpha1.SchedulingGate}}
	}
	return p
}

func names(q []*corev1.Pod) []string {
	out := make([]string, 0, len(q))
	for _, p := range q {
		out = append(out, p.Name)
	}
	return out
}

func TestComputeQueue(t *testing.T) {
	deleting := mkPod("deleting", 1*time.Millisecond, true)
	deleting.DeletionTimestamp = new(metav1.NewTime(t0))
	pods := []corev1.Pod{
		mkPod("c", 3*time.Millisecond, true),
		mkPod("a", 2*time.Millisecond, true),
		mkPod("z-first", 1*time.Millisecond, true), // sub-second order beats names
		mkPod("running", 0, false),                 // ungated: not waiting
		deleting,
		mkPod("holder", 0, true), // granted, not ungated yet
		mkPod("tie-b", 5*time.Millisecond, true),
		mkPod("tie-a", 5*time.Millisecond, true),
	}
	got := names(computeQueue(podPointers(pods), "ledger", held(locksv1alpha1.PodHolderIdentity("holder", "uid-holder"), 1), nil))
	want := []string{"z-first", "a", "c", "tie-a", "tie-b"}
	if len(got) != len(want) {
		t.Fatalf("queue = %v; want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("queue = %v; want %v", got, want)
		}
	}
}

// podIsHolder, which compares without building the identity, says what comparing with
// PodHolderIdentity says.
func TestPodIsHolderIsIdentityEquality(t *testing.T) {
	pods := []corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "worker-0", UID: "0b5d2a47-1f0e-4c3a-9a56-2f1e8c7d9b10"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "worker", UID: "0-0b5d"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "b"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "", UID: ""}},
	}
	holders := []string{"", "pod/", "pod//", "pod/a/b", "pod/a/b/", "pod/a//b", "pod/ab", "Pod/a/b", "alice@host", "pod/worker/0-0b5d",
		"pod/worker-0/0b5d2a47-1f0e-4c3a-9a56-2f1e8c7d9b10", "pod/worker-0/0b5d2a47-1f0e-4c3a-9a56-2f1e8c7d9b1",
		"pod/worker-0/0b5d2a47-1f0e-4c3a-9a56-2f1e8c7d9b10x", "xpod/a/b", "pod/a/bb", "pod/aa/b"}
	for i := range pods {
		for _, h := range holders {
			want := h == locksv1alpha1.PodHolderIdentity(pods[i].Name, string(pods[i].UID))
			if got := podIsHolder(h, &pods[i]); got != want {
				t.Errorf("podIsHolder(%q, pod %q uid %q) = %v, identity equality says %v", h, pods[i].Name, pods[i].UID, got, want)
			}
		}
	}
}

// podPointers points at each of pods, as lockPods returns them.
func podPointers(pods []corev1.Pod) []*corev1.Pod {
	ptrs := make([]*corev1.Pod, len(pods))
	for i := range pods {
		ptrs[i] = &pods[i]
	}
	return ptrs
}
