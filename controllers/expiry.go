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

	"github.com/fencedlock/fencedlock/pkg/lease"
)

// expiryReason says why a grant ends without its holder releasing it.
type expiryReason string

const (
	expiryNone     expiryReason = ""
	expiryLease    expiryReason = "lease"
	expiryMaxHold  expiryReason = "max-hold"
	expiryNotReady expiryReason = "not-ready"
)

// computeExpiry decides whether the current grant has expired at now and, if not, when it will:
// leaseDuration after the holder's last observed renewal (a pod holder: lease.PodReadyDeadline,
// from when it was first seen not Ready, with the start-up allowance startup while it has not been
// Ready; a Ready pod holder has no lease deadline), or maxHold after the grant was first observed.
// A free lock never expires (zero deadline).
func computeExpiry(st lease.State, obs observation, maxHold, startup time.Duration, now time.Time) (expiryReason, time.Time) {
	if !st.Held() {
		return expiryNone, time.Time{}
	}
	reason, deadline := expiryLease, obs.renewedAt.Add(st.Duration)
	if isPodHolder(st.Holder) {
		reason, deadline = expiryNotReady, lease.PodReadyDeadline(obs.notReadySince, !obs.readySeen, st.Duration, startup)
	}
	if maxHold > 0 {
		if d := obs.acquiredAt.Add(maxHold); deadline.IsZero() || d.Before(deadline) {
			reason, deadline = expiryMaxHold, d
		}
	}
	if deadline.IsZero() || now.Before(deadline) {
		return expiryNone, deadline
	}
	return reason, deadline
}
