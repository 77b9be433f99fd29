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

import "time"

// statusBudget is a token bucket for status writes: a lock may write StatusBurst changes at once,
// then one per minInterval. A lock that changes hands now and then is mirrored at once; one that
// changes hands hundreds of times a second costs about one status write per minInterval.
type statusBudget struct {
	tokens float64   // writes available at at
	at     time.Time // zero: a full bucket
}

// StatusBurst is how many status changes a lock writes at once before the minimum interval
// paces it.
const StatusBurst = 5

func (b statusBudget) refill(now time.Time, minInterval time.Duration) float64 {
	if b.at.IsZero() || minInterval <= 0 {
		return StatusBurst
	}
	return min(StatusBurst, b.tokens+float64(now.Sub(b.at))/float64(minInterval))
}

// wait returns how long a changed status must wait; zero means write now.
func (b statusBudget) wait(now time.Time, minInterval time.Duration) time.Duration {
	tokens := b.refill(now, minInterval)
	if tokens >= 1 {
		return 0
	}
	return time.Duration((1 - tokens) * float64(minInterval))
}

// spend records one write at now.
func (b statusBudget) spend(now time.Time, minInterval time.Duration) statusBudget {
	return statusBudget{tokens: b.refill(now, minInterval) - 1, at: now}
}
