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
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metrics carry no per-lock labels: a cluster may hold tens of thousands of locks. They are
// recorded only through the functions below, so each label takes only the values its Help lists.
var (
	grantsTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fencedlock_grants_total",
		Help: "Grants observed (each issued a new fencing token).",
	})
	releasesTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fencedlock_releases_total",
		Help: "Grants ended by their holder releasing the lock.",
	})
	revocationsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fencedlock_revocations_total",
		Help: fmt.Sprintf("Grants the controller revoked because they expired, by reason (%s: not renewed in time; "+
			"%s: held longer than spec.maxHoldSeconds; %s: a pod holder not Ready for longer than the lease, or than its "+
			"start-up allowance before its first Ready).",
			expiryLease, expiryMaxHold, expiryNotReady),
	}, []string{"reason"})
	holdSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "fencedlock_hold_seconds",
		Help:    "How long grants were held, from observed grant to observed release or revocation.",
		Buckets: durationBuckets,
	})
	locksHeld = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "fencedlock_locks_held",
		Help: "Locks held, as the leading manager last observed their Leases (0 on the other replicas).",
	})
	permitsHeld = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "fencedlock_permits_held",
		Help: "Permits held over all locks (a lock held counts one; a semaphore each permit held), as the leading manager last observed their Leases (0 on the other replicas).",
	})
	waitingPods = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "fencedlock_waiting_pods",
		Help: "Pods queued for a lock (gated, not yet granted), over all locks.",
	})
	podConditionWrites = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fencedlock_pod_condition_writes_total",
		Help: "Writes of a pod's lock.fencedlock.io/<lock> condition (pods/status patches): on join, grant and revocation, and bounded position refreshes.",
	})
	waitSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "fencedlock_wait_seconds",
		Help:    "How long queued holders waited from entering the queue to their grant.",
		Buckets: durationBuckets,
	})
)

// durationBuckets span 10 ms to 44 min, for holds and waits alike.
var durationBuckets = prometheus.ExponentialBuckets(0.01, 4, 10)

func init() {
	metrics.Registry.MustRegister(grantsTotal, releasesTotal, revocationsTotal, holdSeconds, waitSeconds, waitingPods, locksHeld, permitsHeld,
		podConditionWrites)
}

// countGrants counts grants made, possibly several seen at once on a busy lock.
func countGrants(n int32) { grantsTotal.Add(float64(n)) }

// countReleases counts grants their holder released.
func countReleases(n int) { releasesTotal.Add(float64(n)) }

// countRevocation counts the revocation of a grant that expired for reason, and the hold it ended.
func countRevocation(reason expiryReason, held time.Duration) {
	revocationsTotal.WithLabelValues(string(reason)).Inc()
	observeHold(held)
}

// observeHold records how long a grant was held.
func observeHold(held time.Duration) { holdSeconds.Observe(held.Seconds()) }

// observeWait records how long a queued holder (a pod or a client) waited from joining the
// queue to its grant.
func observeWait(waited time.Duration) { waitSeconds.Observe(waited.Seconds()) }

// setHeld sets the number of locks held (at least one permit) and of permits held over all locks.
func setHeld(locks, permits int) {
	locksHeld.Set(float64(locks))
	permitsHeld.Set(float64(permits))
}

// countPodConditionWrite counts a write of a pod's lock condition.
func countPodConditionWrite() { podConditionWrites.Inc() }

// setWaitingPods sets the number of pods queued over all locks.
func setWaitingPods(n int) { waitingPods.Set(float64(n)) }
