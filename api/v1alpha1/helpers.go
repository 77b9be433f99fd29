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
	"errors"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ValidateLockName returns why name cannot be the name of a FencedLock (which names its Lease
// too: a DNS-1123 subdomain), or nil. Labels that refer to a lock are checked with it.
func ValidateLockName(name string) error {
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// HasLockGate reports whether pod is still held back by SchedulingGate, that is, not yet granted
// its lock.
func HasLockGate(pod *corev1.Pod) bool {
	return slices.ContainsFunc(pod.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool {
		return g.Name == SchedulingGate
	})
}

// QueueLeaseName is the name of the Lease that holds the queue of the FencedLock with this UID.
// The controller creates it beside the lock's own Lease, owned by the lock; clients find the UID
// in the lock Lease's controller reference. A UID, unlike the lock's name, leaves no room for a
// clash with another lock's Lease.
func QueueLeaseName(lockUID types.UID) string { return "fencedlock-queue-" + string(lockUID) }
