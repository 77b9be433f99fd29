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
// leaseDuration after the holder's last observed renewal (a pod holder: after it was first seen
// not Ready; a Ready pod holder has no lease deadline), or maxHold after the grant was first
// observed. A free lock never expires (zero deadline).
func computeExpiry(st lease.State, obs observation, maxHold time.Duration, now time.Time) (expiryReason, time.Time) {
	if !st.Held() {
		return expiryNone, time.Time{}
	}
	reason, deadline := expiryLease, obs.renewedAt.Add(st.Duration)
	if isPodHolder(st.Holder) {
		reason, deadline = expiryNotReady, time.Time{}
		if !obs.notReadySince.IsZero() {
			deadline = obs.notReadySince.Add(st.Duration)
		}
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
