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

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestWaiterLogAnnounce(t *testing.T) {
	w := newWaiterLog()
	a, b, c := mkPod("a", 1, true), mkPod("b", 2, true), mkPod("c", 3, true)
	jobs, other := types.NamespacedName{Namespace: "ns", Name: "jobs"}, types.NamespacedName{Namespace: "ns", Name: "other"}
	announce := func(key types.NamespacedName, queue ...*corev1.Pod) []string {
		var told []string
		w.announce(key, queue, func(i int, pod *corev1.Pod) {
			if queue[i] != pod {
				t.Fatalf("position %d is %s, not %s", i, queue[i].Name, pod.Name)
			}
			told = append(told, pod.Name)
		})
		return told
	}
	steps := []struct {
		key       types.NamespacedName
		queue     []*corev1.Pod
		wantTold  []string
		wantTotal int
	}{
		{jobs, []*corev1.Pod{&a, &b}, []string{"a", "b"}, 2},
		{jobs, []*corev1.Pod{&a, &b, &c}, []string{"c"}, 3}, // each pod is told once
		{other, []*corev1.Pod{&a}, []string{"a"}, 4},        // per lock
		{jobs, []*corev1.Pod{&c}, nil, 2},                   // a and b left the queue
		{jobs, []*corev1.Pod{&a, &c}, []string{"a"}, 3},     // a pod that queues again is told again
		{jobs, nil, nil, 1},
	}
	for i, s := range steps {
		told := announce(s.key, s.queue...)
		if !slices.Equal(told, s.wantTold) {
			t.Fatalf("step %d: told %v; want %v", i, told, s.wantTold)
		}
		if w.total != s.wantTotal {
			t.Fatalf("step %d: %d pods waiting; want %d", i, w.total, s.wantTotal)
		}
	}
	if _, kept := w.seen[jobs]; kept {
		t.Fatal("an empty queue is forgotten")
	}
}
