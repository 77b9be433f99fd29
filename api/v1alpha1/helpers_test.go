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
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
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
