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
