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

package webhook

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// admittedReasons and deniedReasons are the reason label's values, for the Help text (a test
// checks that every Reason is one of them).
var (
	admittedReasons = []string{ReasonCurrent, ReasonUnfenced, ReasonNamespaceTerminating, ReasonFinalizing,
		ReasonStatusUnfenced}
	deniedReasons = []string{ReasonMissingToken, ReasonMalformedToken, ReasonStaleToken, ReasonStaleObjectToken,
		ReasonForgedToken, ReasonLockNotFound, ReasonLockNotReady, ReasonInvalidLabel, ReasonRelabel, ReasonNotHolder,
		ReasonNotHeld, ReasonPolicyMissing, ReasonSubresource, ReasonTokenMismatch}
)

var (
	fenceDecisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fencedlock_fence_decisions_total",
		Help: "Fenced writes the webhook admitted or denied, by decision and reason (admitted: " +
			strings.Join(admittedReasons, ", ") + "; denied: " + strings.Join(deniedReasons, ", ") + ").",
	}, []string{"decision", "reason"})
	fenceLiveReads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fencedlock_fence_live_reads_total",
		Help: "API reads the fence made instead of using its cache, by why (strict: a Strict lock; " +
			"confirm: the cached Lease could not decide, e.g. a token or an object's record above its last token; " +
			"namespace: a DELETE about to be refused).",
	}, []string{"why"})
)

func init() {
	metrics.Registry.MustRegister(fenceDecisions, fenceLiveReads)
}
