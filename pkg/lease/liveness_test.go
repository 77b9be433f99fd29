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

package lease

import (
	"testing"
	"time"
)

func TestPodReadyDeadline(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const lease, startup = 15 * time.Second, 300 * time.Second
	cases := []struct {
		name          string
		notReadySince time.Time
		starting      bool
		startup       time.Duration
		want          time.Time
	}{
		{"Ready: no deadline", time.Time{}, true, startup, time.Time{}},
		{"starting: the allowance, longer than the lease", t0, true, startup, t0.Add(startup)},
		{"starting with no allowance: the lease", t0, true, 0, t0.Add(lease)},
		{"starting with an allowance shorter than the lease: the lease", t0, true, 5 * time.Second, t0.Add(lease)},
		{"Ready once since the grant: the lease, whatever the allowance", t0, false, startup, t0.Add(lease)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := PodReadyDeadline(tc.notReadySince, tc.starting, lease, tc.startup); !got.Equal(tc.want) {
				t.Fatalf("PodReadyDeadline = %v; want %v", got, tc.want)
			}
		})
	}
}
