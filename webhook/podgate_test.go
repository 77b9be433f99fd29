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

package webhook

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
)

func TestGatePod(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 123456789, time.UTC)
	pod := func(lock string, gates ...string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{}}}
		if lock != "-" {
			p.Labels[locksv1alpha1.LockLabel] = lock
		}
		for _, g := range gates {
			p.Spec.SchedulingGates = append(p.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: g})
		}
		return p
	}
	cases := []struct {
		name      string
		pod       *corev1.Pod
		wantGates []string
		wantErr   bool
	}{
		{"unlabelled pod untouched", pod("-"), nil, false},
		{"gated", pod("settlement"), []string{locksv1alpha1.SchedulingGate}, false},
		{"user gates kept, ours added once", pod("settlement", "example.com/other", locksv1alpha1.SchedulingGate),
			[]string{"example.com/other", locksv1alpha1.SchedulingGate}, false},
		{"label that names no lock", pod("Bad_Name"), nil, true},
		{"empty label", pod(""), nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.pod.Annotations = map[string]string{locksv1alpha1.TokenAnnotation: "999"}
			err := gatePod(tc.pod, "team-a", now)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v", err)
			}
			if tc.wantErr || tc.wantGates == nil {
				return
			}
			var got []string
			for _, g := range tc.pod.Spec.SchedulingGates {
				got = append(got, g.Name)
			}
			if len(got) != len(tc.wantGates) || got[len(got)-1] != locksv1alpha1.SchedulingGate {
				t.Fatalf("gates = %v; want %v", got, tc.wantGates)
			}
			if _, forged := tc.pod.Annotations[locksv1alpha1.TokenAnnotation]; forged {
				t.Fatal("a token the pod brought along must be dropped")
			}
			if tc.pod.Annotations[locksv1alpha1.EnqueuedAnnotation] != "2026-01-01T00:00:00.123456789Z" {
				t.Fatalf("enqueued = %q", tc.pod.Annotations[locksv1alpha1.EnqueuedAnnotation])
			}
		})
	}
}

func TestGatePodLocksAnnotation(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pod := func(label, ann string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
			locksv1alpha1.LocksAnnotation:          ann,
			locksv1alpha1.LockTokenAnnotation("a"): "999", // forged
		}}}
		if label != "" {
			p.Labels = map[string]string{locksv1alpha1.LockLabel: label}
		}
		return p
	}
	p := pod("", "b,a")
	if err := gatePod(p, "team-a", now); err != nil {
		t.Fatal(err)
	}
	if !locksv1alpha1.HasLockGate(p) {
		t.Fatal("a pod asking through the annotation alone must be gated")
	}
	if p.Labels[locksv1alpha1.LockLabel] != "a" {
		t.Fatalf("label = %q; want the first lock, a", p.Labels[locksv1alpha1.LockLabel])
	}
	if _, forged := p.Annotations[locksv1alpha1.LockTokenAnnotation("a")]; forged {
		t.Fatal("a per-lock token the pod brought along must be dropped")
	}
	p = pod("c", "b,a")
	if err := gatePod(p, "team-a", now); err != nil || p.Labels[locksv1alpha1.LockLabel] != "c" {
		t.Fatalf("err = %v, label = %q; the pod's own label is kept", err, p.Labels[locksv1alpha1.LockLabel])
	}
	for _, ann := range []string{"", "a,,b", "a,a", "a,Bad_Name"} {
		if err := gatePod(pod("", ann), "team-a", now); err == nil {
			t.Errorf("annotation %q accepted", ann)
		}
	}
}

// A lock named as "<namespace>/<lock>" is refused with where a pod's locks live, the lock it would
// have been, and what to write instead, not with the name syntax's regular expression.
func TestGatePodCrossNamespaceLock(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, p := range []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{locksv1alpha1.LocksAnnotation: "a,ops/ledger"}}},
		{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{locksv1alpha1.LockLabel: "ops/ledger"}}},
	} {
		err := gatePod(p, "team-a", now)
		if err == nil {
			t.Fatalf("pod %v admitted", p.ObjectMeta)
		}
		for _, want := range []string{"a pod's locks live in its own namespace (team-a)", "FencedLock ops/ledger",
			`"ledger" asks for FencedLock team-a/ledger`, "create the pod in namespace ops"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
		if strings.Contains(err.Error(), "regex") || strings.Contains(err.Error(), "[a-z0-9]") {
			t.Errorf("error %q quotes the name syntax", err)
		}
	}
}
