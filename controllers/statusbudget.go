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
