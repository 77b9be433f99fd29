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
	"time"

	corev1 "k8s.io/api/core/v1"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/token"
)

// ending says how the current grant ends in a plan.
type ending int

const (
	keep ending = iota
	release
	revoke
)

// plan is what one reconcile does to a lock: at most one Lease write (end the grant and serve the
// queue in a single compare-and-swap, or settle a lock nobody else will serve; the transitions are
// pkg/lease's) and at most one pod patch (ungate the holder, or the pod the write granted).
type plan struct {
	end    ending
	reason expiryReason // for revoke
	why    string       // human reason for ending
	holder *corev1.Pod  // the holder pod, if the holder is a pod that still exists
	// settle: the lock is not ended but lease.Settle changes it (serves the queue on a free lock,
	// sets the waiting mark on a held lock, clears it on a free one).
	settle bool
	// headPod is the live head of the queue when it is a pod: the write that serves the queue
	// grants it. headUngates: it holds all its other locks (or asks for this one alone), so it
	// is ungated right after the grant, with headTokens for its other locks.
	headPod     *corev1.Pod
	headUngates bool
	headTokens  map[string]token.Token
	ungate      *corev1.Pod // a holder pod still behind the gate (just granted, or a crash in between)
	// ungateTokens are the ungated holder pod's tokens for its other locks (several locks).
	ungateTokens map[string]token.Token
	// grant is the lock as seen by the grant this plan is about (lease.State.OfPermit): the one
	// it ends, or whose pod it ungates.
	grant lease.State
	// ungates are the holder pods of a lock's permits still behind the gate (planLock).
	ungates []plan
	// deadline is when the current grant expires if nothing changes; zero: no timer.
	deadline time.Time
}

func (p plan) writesLease() bool { return p.end != keep || p.settle }

// planInput is what computePlan decides from: one reconcile's view of a lock.
type planInput struct {
	st  lease.State // the Lease as read
	obs observation // what this controller observed of it, on its own clock
	// holderPod is the holder pod, nil if the holder is not a pod or its pod no longer exists.
	holderPod *corev1.Pod
	// waiting are the live waiters in queue order (planQueue); headPod is the first one's pod
	// when it is a pod.
	waiting []lease.Waiter
	headPod *corev1.Pod
	// settles: lease.Settle would change the Lease as read (see plan.settle).
	settles bool
	// holderProgress and headProgress are how far the holder pod and the head pod are through
	// their other locks (zero for a pod asking for this lock alone).
	holderProgress, headProgress progress
	maxHold                      time.Duration // spec.maxHoldSeconds; zero: no bound
	startup                      time.Duration // spec.startupSeconds: a pod holder's start-up allowance
	now                          time.Time
}

// computePlan decides what to do with a lock.
func computePlan(in planInput) plan {
	st, holderPod := in.st, in.holderPod
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
		reason, p.deadline = computeExpiry(st, in.obs, in.maxHold, in.startup, in.now)
		gated := holderPod != nil && locksv1alpha1.HasLockGate(holderPod)
		switch {
		case reason != expiryNone:
			p.end, p.reason = revoke, reason
		case gated && in.holderProgress.lacksEarlier:
			// Holding this lock while queueing again for an earlier one could close a cycle.
			p.end, p.why = release, "the pod lost lock "+in.holderProgress.lacks+
				", which comes before this one in the order, before it held all its locks"
		case gated && in.holderProgress.lacks == "":
			p.ungate, p.ungateTokens = holderPod, in.holderProgress.tokens
		}
	}
	p.settle = p.end == keep && in.settles
	if (!st.Held() || p.end != keep) && len(in.waiting) > 0 {
		// The write serves the head: no deadline until its event shows the new grant.
		p.deadline = time.Time{}
		if in.headPod != nil {
			p.headPod = in.headPod
			if in.headProgress.lacks == "" {
				p.headUngates, p.headTokens = true, in.headProgress.tokens
			}
		}
	}
	return p
}

// planLock is the plan of a whole lock: each held permit is planned as a grant of its own
// (computePlan of the permit's view) and room, if the lock has any, as a free lock (computePlan
// of a view without a holder, which serves the queue). The first grant that ends makes the
// lock's one Lease write, and serves the queue onto the permit it frees; the others wait for the
// reconcile that write brings. Otherwise the lock settles (serves the queue onto a free permit,
// or keeps its waiting mark true), and every holder pod still gated is ungated.
func planLock(st lease.State, grants []planInput, room planInput) plan {
	plans := make([]plan, len(grants))
	for i, g := range grants {
		plans[i] = computePlan(g)
		plans[i].grant = g.st
		if plans[i].end != keep {
			return plans[i]
		}
	}
	var p plan
	if !st.Full() {
		p = computePlan(room)
	} else {
		p.settle = room.settles // a full lock gets its waiting mark set when a waiter lacks it
	}
	for _, g := range plans {
		p.deadline = earliest(p.deadline, g.deadline)
		if g.ungate != nil {
			p.ungates = append(p.ungates, g)
		}
	}
	return p
}
