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
	"testing"
	"time"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
)

func TestComputeExpiry(t *testing.T) {
	obs := observation{renewedAt: t0.Add(10 * time.Second), acquiredAt: t0}
	cases := []struct {
		name         string
		st           lease.State
		maxHold      time.Duration
		now          time.Time
		wantReason   expiryReason
		wantDeadline time.Time
	}{
		{"free lock never expires", lease.State{Token: tokenOf(5), Duration: 15 * time.Second}, 0, t0.Add(time.Hour), expiryNone, time.Time{}},
		{"just before the lease deadline", held("a", 5), 0, t0.Add(25*time.Second - time.Nanosecond), expiryNone, t0.Add(25 * time.Second)},
		{"at the lease deadline", held("a", 5), 0, t0.Add(25 * time.Second), expiryLease, t0.Add(25 * time.Second)},
		{"max hold earlier than the lease", held("a", 5), 20 * time.Second, t0.Add(19 * time.Second), expiryNone, t0.Add(20 * time.Second)},
		{"max hold reached", held("a", 5), 20 * time.Second, t0.Add(20 * time.Second), expiryMaxHold, t0.Add(20 * time.Second)},
		{"max hold later than the lease", held("a", 5), time.Hour, t0.Add(26 * time.Second), expiryLease, t0.Add(25 * time.Second)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reason, deadline := computeExpiry(tc.st, obs, tc.maxHold, 0, tc.now)
			if reason != tc.wantReason || !deadline.Equal(tc.wantDeadline) {
				t.Fatalf("computeExpiry = %q, %v; want %q, %v", reason, deadline, tc.wantReason, tc.wantDeadline)
			}
		})
	}
}

// A pod holder is revoked for not being Ready one lease after it was first seen not Ready, except
// while it starts: then no earlier than the start-up allowance after that.
func TestComputeExpiryPodStartup(t *testing.T) {
	pod := held(locksv1alpha1.PodHolderIdentity("job-1", "uid-1"), 5)
	const startup = 300 * time.Second
	starting := observation{acquiredAt: t0, notReadySince: t0}
	running := observation{acquiredAt: t0, notReadySince: t0.Add(time.Minute), readySeen: true}
	cases := []struct {
		name         string
		obs          observation
		startup      time.Duration
		maxHold      time.Duration
		now          time.Time
		wantReason   expiryReason
		wantDeadline time.Time
	}{
		{"starting, past the lease, within the allowance", starting, startup, 0, t0.Add(time.Minute), expiryNone, t0.Add(startup)},
		{"starting, at the end of the allowance", starting, startup, 0, t0.Add(startup), expiryNotReady, t0.Add(startup)},
		{"starting without an allowance: the lease", starting, 0, 0, t0.Add(15 * time.Second), expiryNotReady, t0.Add(15 * time.Second)},
		{"Ready once, then not Ready within the allowance: the lease", running, startup, 0, t0.Add(75 * time.Second),
			expiryNotReady, t0.Add(75 * time.Second)},
		{"Ready: no readiness deadline", observation{acquiredAt: t0, readySeen: true}, startup, 0, t0.Add(time.Hour), expiryNone, time.Time{}},
		{"max hold before the end of the allowance", starting, startup, time.Minute, t0.Add(time.Minute), expiryMaxHold, t0.Add(time.Minute)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reason, deadline := computeExpiry(pod, tc.obs, tc.maxHold, tc.startup, tc.now)
			if reason != tc.wantReason || !deadline.Equal(tc.wantDeadline) {
				t.Fatalf("computeExpiry = %q, %v; want %q, %v", reason, deadline, tc.wantReason, tc.wantDeadline)
			}
		})
	}
}
