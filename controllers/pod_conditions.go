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
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/token"
)

// Pods explain themselves: each pod carries, per lock it asks for, condition
// lock.fencedlock.io/<lock> (locksv1alpha1.PodConditionType), written by the lock's reconcile
// through pods/status. It is output only: no decision reads it back (the manager's own memory of
// what it wrote, or failing that the pod's condition, only decides whether a write would change
// anything).
//
// Its cost is bounded, so that a long queue's drain does not rewrite every waiting pod on every
// grant (O(n²) writes): a pod's condition is written when it joins the queue, when it is granted
// and when its grant is revoked; on a grant only the first podConditionLead waiting pods, whose
// position and holder the grant changed, are rewritten at once; every other waiting pod at most
// once per podConditionRefresh, its message saying as of when it was true. So a drain costs about
// 2 + podConditionLead condition writes per grant, plus one per waiting pod per
// podConditionRefresh; conditionWriter makes them off the reconciles' path, and skips those
// superseded before their turn.
const (
	// podConditionLead is how many pods at the head of a queue see their position at once.
	podConditionLead = 3
	// podConditionRefresh is how stale the position of a pod further back may grow.
	podConditionRefresh = 5 * time.Minute
)

// podCondition is the condition a pod should show for one lock. A Waiting one is the same
// condition as another with the same key whatever its tail (how many wait, and as of when).
type podCondition struct {
	status corev1.ConditionStatus
	reason string
	key    string
	tail   string
}

func (c podCondition) message() string {
	if c.tail == "" {
		return c.key
	}
	return c.key + "; " + c.tail
}

// sameAs reports whether cur shows c, tail aside.
func (c podCondition) sameAs(cur *corev1.PodCondition) bool {
	if cur == nil || cur.Status != c.status || cur.Reason != c.reason {
		return false
	}
	return cur.Message == c.key || strings.HasPrefix(cur.Message, c.key+"; ")
}

// waitingCondition is the condition of a pod at position pos (from 1) of the n waiting for fl,
// whose Lease reads st.
func waitingCondition(fl *locksv1alpha1.FencedLock, st lease.State, pos, n int, now time.Time) podCondition {
	return podCondition{status: corev1.ConditionFalse, reason: locksv1alpha1.ReasonWaiting,
		key: fmt.Sprintf("Waiting for FencedLock %s/%s at position %d, %s", fl.Namespace, fl.Name, pos, st.HoldersText()),
		tail: fmt.Sprintf("%d waiting, as of %s (kubectl fencedlock why shows it live)", n,
			now.UTC().Format(time.RFC3339))}
}

// grantedCondition is the condition of a pod granted fl with tok.
func grantedCondition(fl *locksv1alpha1.FencedLock, tok token.Token, permit int) podCondition {
	return podCondition{status: corev1.ConditionTrue, reason: locksv1alpha1.ReasonGranted,
		key: fmt.Sprintf("Granted FencedLock %s/%s with token %s%s", fl.Namespace, fl.Name, tok, permitNote(fl, permit))}
}

// revokedCondition is the condition of a pod whose grant of fl with tok the manager revoked, why.
func revokedCondition(fl *locksv1alpha1.FencedLock, tok token.Token, why string) podCondition {
	return podCondition{status: corev1.ConditionFalse, reason: locksv1alpha1.ReasonRevoked,
		key: fmt.Sprintf("Token %s of FencedLock %s/%s is dead: the grant was revoked (%s); the fence refuses writes "+
			"made with it, and the pod no longer holds the lock", tok, fl.Namespace, fl.Name, why)}
}

// lockNotFoundCondition is the condition of a pod waiting for a lock that does not exist.
func lockNotFoundCondition(key types.NamespacedName) podCondition {
	return podCondition{status: corev1.ConditionFalse, reason: locksv1alpha1.ReasonLockNotFound, key: lockNotFoundMessage(key)}
}

// conditionDue decides whether a pod showing cur (nil: nothing) for a lock is to be written want,
// the condition true now: a change of status or reason always is, a Waiting pod's new position or
// holder only within the first podConditionLead positions (pos) or once what it shows is
// podConditionRefresh old. It also returns when a change not written now falls due (zero: none).
func conditionDue(cur *corev1.PodCondition, want podCondition, pos int, now time.Time) (bool, time.Time) {
	switch {
	case want.sameAs(cur):
		return false, time.Time{}
	case cur == nil || cur.Status != want.status || cur.Reason != want.reason || want.reason != locksv1alpha1.ReasonWaiting:
		return true, time.Time{}
	case pos <= podConditionLead:
		return true, time.Time{}
	}
	due := cur.LastProbeTime.Add(podConditionRefresh)
	if !now.Before(due) {
		return true, time.Time{}
	}
	return false, due
}

// podConditionFor returns the pod's condition for lock, nil if it has none.
func podConditionFor(pod *corev1.Pod, lock string) *corev1.PodCondition {
	t := locksv1alpha1.PodConditionType(lock)
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// newPodCondition is want as written on pod at now: its transition time kept from cur while the
// status stays.
func newPodCondition(pod *corev1.Pod, lock string, cur *corev1.PodCondition, want podCondition, now time.Time) corev1.PodCondition {
	c := corev1.PodCondition{Type: locksv1alpha1.PodConditionType(lock), Status: want.status, Reason: want.reason,
		Message: want.message(), ObservedGeneration: pod.Generation}
	c.LastProbeTime.Time = now.UTC().Truncate(time.Second)
	c.LastTransitionTime = c.LastProbeTime
	if cur != nil && cur.Status == want.status && !cur.LastTransitionTime.IsZero() {
		c.LastTransitionTime = cur.LastTransitionTime
	}
	return c
}
