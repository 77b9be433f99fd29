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
			reason, deadline := computeExpiry(tc.st, obs, tc.maxHold, tc.now)
			if reason != tc.wantReason || !deadline.Equal(tc.wantDeadline) {
				t.Fatalf("computeExpiry = %q, %v; want %q, %v", reason, deadline, tc.wantReason, tc.wantDeadline)
			}
		})
	}
}
