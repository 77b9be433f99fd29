package controllers

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metrics carry no per-lock labels: a cluster may hold tens of thousands of locks.
var (
	grantsTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fencedlock_grants_total",
		Help: "Grants observed (each issued a new fencing token).",
	})
	releasesTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fencedlock_releases_total",
		Help: "Grants ended by their holder releasing the lock.",
	})
	expirationsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fencedlock_expirations_total",
		Help: "Grants the controller revoked, by reason (lease: not renewed in time; max-hold: held longer than spec.maxHoldSeconds).",
	}, []string{"reason"})
	holdSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "fencedlock_hold_seconds",
		Help:    "How long grants were held, from observed grant to observed release or revocation.",
		Buckets: prometheus.ExponentialBuckets(0.01, 4, 10),
	})
	waitingPods = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "fencedlock_waiting_pods",
		Help: "Pods queued for a lock (gated, not yet granted), over all locks.",
	})
	waitSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "fencedlock_wait_seconds",
		Help:    "How long queued holders waited from entering the queue to their grant.",
		Buckets: prometheus.ExponentialBuckets(0.01, 4, 10),
	})
)

func init() {
	metrics.Registry.MustRegister(grantsTotal, releasesTotal, expirationsTotal, holdSeconds, waitSeconds, waitingPods)
}
