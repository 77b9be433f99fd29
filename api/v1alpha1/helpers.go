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
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

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

// WaiterLeaseName is the name of identity's waiter Lease on the lock with UID lockUID: a hash of
// the identity (at most 1024 bytes, any characters) makes a valid name of fixed length; the Lease's
// holderIdentity says whose it is.
func WaiterLeaseName(lockUID types.UID, identity string) string {
	sum := sha256.Sum256([]byte(identity))
	return "fencedlock-wait-" + string(lockUID) + "-" + hex.EncodeToString(sum[:8])
}

// maxPodLockName bounds the names a pod may ask for: a lock's name is also the name part of the
// pod's token annotation (LockTokenAnnotation) and may become the pod's LockLabel value, both at
// most 63 characters.
const maxPodLockName = validation.LabelValueMaxLength

// ParsePodLocks returns the locks pod asks for (LockLabel and LocksAnnotation together), sorted
// and deduplicated, or why they cannot be: a name that cannot name a lock, an empty entry, a name
// listed twice in the annotation, or a name longer than 63 characters. The label's lock may be
// listed in the annotation too: the union counts. Errors name the pod's namespace as
// pod.Namespace has it; see ParsePodLocksIn.
func ParsePodLocks(pod *corev1.Pod) ([]string, error) { return ParsePodLocksIn(pod, pod.Namespace) }

// ParsePodLocksIn is ParsePodLocks for a pod of namespace ns (a pod being created may not carry
// its namespace yet: the admission request does). A name that looks like "<namespace>/<lock>" is
// refused with a message that says where a pod's locks live, instead of the name syntax's.
func ParsePodLocksIn(pod *corev1.Pod, ns string) ([]string, error) {
	var locks []string
	if name, ok := pod.Labels[LockLabel]; ok {
		if other, lock, cut := strings.Cut(name, "/"); cut {
			return nil, fmt.Errorf("label %s=%q names a lock of another namespace: %s", LockLabel, name,
				CrossNamespaceHint(ns, other, lock))
		}
		if err := ValidateLockName(name); err != nil {
			return nil, fmt.Errorf("label %s=%q does not name a FencedLock: %w", LockLabel, name, err)
		}
		locks = append(locks, name)
	}
	if v, ok := pod.Annotations[LocksAnnotation]; ok {
		seen := map[string]bool{}
		for entry := range strings.SplitSeq(v, ",") {
			name := strings.TrimSpace(entry)
			switch {
			case name == "":
				return nil, fmt.Errorf("annotation %s=%q has an empty lock name: list lock names separated by commas, as in \"a,b\"",
					LocksAnnotation, v)
			case seen[name]:
				return nil, fmt.Errorf("annotation %s=%q lists lock %q twice", LocksAnnotation, v, name)
			}
			if other, lock, cut := strings.Cut(name, "/"); cut {
				return nil, fmt.Errorf("annotation %s=%q: %q names a lock of another namespace: %s",
					LocksAnnotation, v, name, CrossNamespaceHint(ns, other, lock))
			}
			if err := ValidateLockName(name); err != nil {
				return nil, fmt.Errorf("annotation %s=%q: %q does not name a FencedLock: %w", LocksAnnotation, v, name, err)
			}
			if len(name) > maxPodLockName {
				return nil, fmt.Errorf("annotation %s=%q: lock name %q is longer than %d characters, which the token annotation %s<name> cannot carry",
					LocksAnnotation, v, name, maxPodLockName, LockTokenAnnotationPrefix)
			}
			seen[name] = true
			locks = append(locks, name)
		}
	}
	slices.Sort(locks)
	return slices.Compact(locks), nil
}

// LocksLiveInPodNamespace is the rule every message about a pod's lock names states.
const LocksLiveInPodNamespace = "a pod's locks live in its own namespace"

// CrossNamespaceHint says, for a pod of namespace ns ("" when not known) that asked for lock of
// namespace other, where its locks are looked for and what to do instead.
func CrossNamespaceHint(ns, other, lock string) string {
	if ns == "" {
		return fmt.Sprintf("%s, so it cannot ask for FencedLock %s/%s: name a lock of the pod's namespace "+
			"(%q asks for FencedLock %s there), or create the pod in namespace %s", LocksLiveInPodNamespace, other, lock,
			lock, lock, other)
	}
	return fmt.Sprintf("%s (%s), so it cannot ask for FencedLock %s/%s: name a lock of namespace %s "+
		"(%q asks for FencedLock %s/%s), or create the pod in namespace %s", LocksLiveInPodNamespace, ns, other, lock,
		ns, lock, ns, lock, other)
}

// PodLocks returns the locks pod asks for, sorted and deduplicated: the order in which it is
// granted them. A pod whose request is invalid (the pod gate refuses such pods) asks for its
// label's lock alone, or for none.
func PodLocks(pod *corev1.Pod) []string {
	locks, err := ParsePodLocks(pod)
	if err != nil {
		if name := pod.Labels[LockLabel]; ValidateLockName(name) == nil {
			return []string{name}
		}
		return nil
	}
	return locks
}

// DefaultStartupSeconds is spec.startupSeconds when unset; the CRD's default marker says the same
// (a test asserts they agree).
const DefaultStartupSeconds = 300

// StartupAllowance returns spec.startupSeconds as a duration, DefaultStartupSeconds when unset (an
// object built without the API server's defaulting).
func (s FencedLockSpec) StartupAllowance() time.Duration {
	if s.StartupSeconds == nil {
		return DefaultStartupSeconds * time.Second
	}
	return time.Duration(*s.StartupSeconds) * time.Second
}

// PermitCount returns spec.permits, 1 when unset (an object built without the API server's
// defaulting).
func (s FencedLockSpec) PermitCount() int {
	if s.Permits < 1 {
		return 1
	}
	return int(s.Permits)
}

// MaxHeldByLength bounds status.heldBy, as its schema does.
const MaxHeldByLength = 1024

// HeldBy returns status.heldBy for the holders' identities, in permit order: joined by ", ",
// cut to MaxHeldByLength bytes.
func HeldBy(identities []string) string {
	return Shorten(strings.Join(identities, ", "), MaxHeldByLength)
}

// Shorten returns s whole if it fits in n bytes, else cut at a character boundary to n bytes
// ending in "…", so that nobody mistakes it for the whole.
func Shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const marker = "…"
	cut := n - len(marker)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + marker
}
