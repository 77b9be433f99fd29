package controllers

import (
	"cmp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
)

// Pods hold a lock under identity "pod/<name>/<uid>". While a pod holds it, the controller keeps
// the grant alive on the pod's behalf (no renewals: like an ephemeral znode, the grant lives as
// long as its pod). The grant ends when the pod finishes or is deleted (released), or when the pod
// has not been Ready for longer than the lease (revoked: e.g. its node is partitioned).

// podIsHolder reports whether holder names pod.
func podIsHolder(holder string, pod *corev1.Pod) bool {
	return holder == locksv1alpha1.PodHolderIdentity(pod.Name, string(pod.UID))
}

func isPodHolder(holder string) bool { return strings.HasPrefix(holder, locksv1alpha1.PodHolderPrefix) }

func gated(pod *corev1.Pod) bool {
	return slices.ContainsFunc(pod.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool {
		return g.Name == locksv1alpha1.SchedulingGate
	})
}

func podDone(pod *corev1.Pod) bool {
	return !pod.DeletionTimestamp.IsZero() || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// enqueuedAt is when a pod joined the queue: the gate's high-resolution stamp, else its creation.
func enqueuedAt(pod *corev1.Pod) time.Time {
	if t, err := time.Parse(time.RFC3339Nano, pod.Annotations[locksv1alpha1.EnqueuedAnnotation]); err == nil {
		return t
	}
	return pod.CreationTimestamp.Time
}

// computeQueue returns the pods waiting for the lock in FIFO order: gated, not being deleted, not
// the holder. Ties (same instant) break by creation time, then name, so the order is stable.
func computeQueue(pods []corev1.Pod, holder string) []*corev1.Pod {
	type waiter struct {
		pod *corev1.Pod
		at  time.Time // parsed once: a queue of a thousand pods is sorted on every reconcile
	}
	var ws []waiter
	for i := range pods {
		p := &pods[i]
		if gated(p) && p.DeletionTimestamp.IsZero() && !podIsHolder(holder, p) {
			ws = append(ws, waiter{p, enqueuedAt(p)})
		}
	}
	slices.SortStableFunc(ws, func(a, b waiter) int {
		return cmp.Or(a.at.Compare(b.at),
			a.pod.CreationTimestamp.Compare(b.pod.CreationTimestamp.Time), cmp.Compare(a.pod.Name, b.pod.Name))
	})
	q := make([]*corev1.Pod, len(ws))
	for i, w := range ws {
		q[i] = w.pod
	}
	return q
}

// findHolder returns the pod holding the lock, or nil if the holder is not one of pods.
func findHolder(pods []corev1.Pod, holder string) *corev1.Pod {
	if !isPodHolder(holder) {
		return nil
	}
	for i := range pods {
		if podIsHolder(holder, &pods[i]) {
			return &pods[i]
		}
	}
	return nil
}

// ending says how the current grant ends in a plan.
type ending int

const (
	keep ending = iota
	release
	revoke
)

// plan is what one reconcile does to a lock: at most one Lease write (end the grant, grant the
// next waiter, or both in a single compare-and-swap) and at most one pod patch (ungate the holder).
type plan struct {
	end    ending
	reason expiryReason // for revoke
	why    string       // human reason for ending
	holder *corev1.Pod  // the holder pod, if the holder is a pod that still exists
	grant  *corev1.Pod  // the waiter to grant
	ungate *corev1.Pod  // a holder pod still behind the gate (just granted, or a crash in between)
	// deadline is when the current grant expires if nothing changes; zero: no timer.
	deadline time.Time
}

func (p plan) writesLease() bool { return p.end != keep || p.grant != nil }

// computePlan decides what to do with a lock from its Lease state, what this controller observed,
// the holder pod (if the holder is a pod that still exists) and the queue.
func computePlan(st lease.State, obs observation, holderPod *corev1.Pod, queue []*corev1.Pod,
	maxHold time.Duration, now time.Time) plan {
	p := plan{holder: holderPod}
	switch {
	case !st.Held():
	case isPodHolder(st.Holder) && holderPod == nil:
		p.end, p.why = release, "the holder pod was deleted"
	case isPodHolder(st.Holder) && podDone(holderPod):
		p.end, p.why = release, "the holder pod finished ("+string(holderPod.Status.Phase)+")"
		if !holderPod.DeletionTimestamp.IsZero() {
			p.why = "the holder pod is being deleted"
		}
	default:
		var reason expiryReason
		reason, p.deadline = computeExpiry(st, obs, maxHold, now)
		if reason != expiryNone {
			p.end, p.reason = revoke, reason
		} else if holderPod != nil && gated(holderPod) {
			p.ungate = holderPod
		}
	}
	if (!st.Held() || p.end != keep) && len(queue) > 0 {
		p.grant = queue[0]
		p.deadline = time.Time{}
	}
	return p
}
