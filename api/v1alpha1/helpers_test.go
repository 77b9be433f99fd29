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

package v1alpha1

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

func TestValidateLockName(t *testing.T) {
	for _, name := range []string{"settlement", "ledger.eu-1", strings.Repeat("a", 253)} {
		if err := ValidateLockName(name); err != nil {
			t.Errorf("ValidateLockName(%q) = %v", name, err)
		}
	}
	for _, name := range []string{"", "Bad_Name", "-x", strings.Repeat("a", 254)} {
		if ValidateLockName(name) == nil {
			t.Errorf("ValidateLockName(%q) accepted", name)
		}
	}
}

func TestHasLockGate(t *testing.T) {
	pod := func(gates ...string) *corev1.Pod {
		p := &corev1.Pod{}
		for _, g := range gates {
			p.Spec.SchedulingGates = append(p.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: g})
		}
		return p
	}
	if HasLockGate(pod()) || HasLockGate(pod("example.com/other")) {
		t.Fatal("a pod without our gate")
	}
	if !HasLockGate(pod("example.com/other", SchedulingGate)) {
		t.Fatal("a pod behind our gate among others")
	}
}

func TestParsePodLocks(t *testing.T) {
	pod := func(label, ann string) *corev1.Pod {
		p := &corev1.Pod{}
		p.Labels, p.Annotations = map[string]string{}, map[string]string{}
		if label != "-" {
			p.Labels[LockLabel] = label
		}
		if ann != "-" {
			p.Annotations[LocksAnnotation] = ann
		}
		return p
	}
	ok := []struct {
		label, ann string
		want       []string
	}{
		{"-", "-", nil},
		{"ledger", "-", []string{"ledger"}},
		{"-", "b,a", []string{"a", "b"}},
		{"-", " b , a ", []string{"a", "b"}},
		{"c", "b,a", []string{"a", "b", "c"}},
		{"a", "b,a", []string{"a", "b"}}, // the union counts
		{"-", "solo", []string{"solo"}},
	}
	for _, tc := range ok {
		got, err := ParsePodLocks(pod(tc.label, tc.ann))
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ParsePodLocks(%q, %q) = %v, %v; want %v", tc.label, tc.ann, got, err, tc.want)
		}
		if got := PodLocks(pod(tc.label, tc.ann)); !slices.Equal(got, tc.want) {
			t.Errorf("PodLocks(%q, %q) = %v; want %v", tc.label, tc.ann, got, tc.want)
		}
	}
	bad := []struct{ label, ann, want string }{
		{"-", "", "empty lock name"},
		{"-", "a,,b", "empty lock name"},
		{"-", "a,", "empty lock name"},
		{"-", "a,b,a", `lists lock "a" twice`},
		{"-", "a,Bad_Name", "does not name a FencedLock"},
		{"-", "a," + strings.Repeat("x", 64), "longer than 63"},
		{"Bad_Name", "a", "label"},
	}
	for _, tc := range bad {
		_, err := ParsePodLocks(pod(tc.label, tc.ann))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParsePodLocks(%q, %q) = %v; want an error with %q", tc.label, tc.ann, err, tc.want)
		}
	}
	if got := PodLocks(pod("x", "a,,b")); !slices.Equal(got, []string{"x"}) {
		t.Errorf("PodLocks of an invalid annotation = %v; want the label's lock alone", got)
	}
	if LockTokenAnnotation("a") != "token.fencedlock.io/a" {
		t.Error(LockTokenAnnotation("a"))
	}
}

// DefaultStartupSeconds stands in for the CRD's default of spec.startupSeconds on objects built
// without the API server: the two must agree.
func TestDefaultStartupSecondsIsTheCRDs(t *testing.T) {
	raw, err := os.ReadFile("../../config/crd/bases/locks.fencedlock.io_fencedlocks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema struct {
						Properties map[string]struct {
							Properties map[string]struct {
								Default any `json:"default"`
							} `json:"properties"`
						} `json:"properties"`
					} `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &crd); err != nil || len(crd.Spec.Versions) != 1 {
		t.Fatalf("reading the CRD: %v (%d versions)", err, len(crd.Spec.Versions))
	}
	def := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["startupSeconds"].Default
	if n, ok := def.(float64); !ok || n != DefaultStartupSeconds {
		t.Fatalf("CRD default of spec.startupSeconds = %v; DefaultStartupSeconds = %d", def, DefaultStartupSeconds)
	}
	if got := (FencedLockSpec{}).StartupAllowance(); got != DefaultStartupSeconds*time.Second {
		t.Fatalf("StartupAllowance of an unset field = %v", got)
	}
	if got := (FencedLockSpec{StartupSeconds: new(int32(0))}).StartupAllowance(); got != 0 {
		t.Fatalf("StartupAllowance of 0 = %v", got)
	}
}
