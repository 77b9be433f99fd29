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

package policyeval_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fencedlock/fencedlock/internal/policyeval"
)

// The policies of issue 42's threat model (docs/design.md), judged in-process: who deletes the
// Leases the protocol trusts, and the fence's marks on subresources and Bindings. The red team
// (test/integration/redteam_test.go) tries the same on a real API server.
func TestThreatModelPolicies(t *testing.T) {
	const dir = "../../config/policy"
	lock := lockLease()
	queue := edit(lock, func(l *coordinationv1.Lease) {
		l.Name = "fencedlock-queue-u1"
		l.Labels["fencedlock.io/role"] = "queue"
	})
	waiter := edit(lock, func(l *coordinationv1.Lease) {
		l.Name = "fencedlock-wait-u1-abc"
		l.Labels["fencedlock.io/role"] = "waiter"
	})
	foreign := edit(lock, func(l *coordinationv1.Lease) { l.Labels = nil })
	deployments := appsv1.SchemeGroupVersion.WithResource("deployments")
	fenced := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "d",
		Labels:      map[string]string{"fencedlock.io/fenced-by": "lock"},
		Annotations: map[string]string{"fencedlock.io/recorded-token": "5"}}}
	status := func(f func(*appsv1.Deployment)) policyeval.Request {
		after := fenced.DeepCopy()
		f(after)
		return policyeval.Request{Operation: policyeval.Update, Resource: deployments, Subresource: "status",
			Old: fenced, New: after}
	}
	binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p",
		Annotations: map[string]string{"fencedlock.io/recorded-token": "99999999999"}},
		Target: corev1.ObjectReference{Kind: "Node", Name: "n"}}
	// A release that leaves a reservation no reader can parse (the review of issue 42's change):
	// the Lease would be unreadable, the lock and everything it fences wedged.
	junkReservation := edit(lock, func(l *coordinationv1.Lease) {
		l.Spec.HolderIdentity = nil
		l.Annotations["fencedlock.io/reserved"] = "x"
	})
	check(t, []admitCase{
		{"a release reserving for ticket x", dir, policyeval.LeaseWrite(lock, junkReservation, false),
			"lease-protocol: a decimal from 1, of at most 18 digits", ""},
		// Row 1 of issue 42: the DELETE that makes room for a forged lock Lease.
		{"client deletes the lock Lease", dir, policyeval.LeaseWrite(lock, nil, false), "lease-deletion: only the fencedlock manager deletes it", ""},
		{"manager deletes the lock Lease", dir, policyeval.LeaseWrite(lock, nil, true), "", ""},
		{"client deletes the queue Lease", dir, policyeval.LeaseWrite(queue, nil, false), "lease-deletion: is a fencedlock queue Lease", ""},
		{"client deletes a waiter Lease (fairness only)", dir, policyeval.LeaseWrite(waiter, nil, false), "", ""},
		{"client deletes someone else's Lease", dir, policyeval.LeaseWrite(foreign, nil, false), "", ""},
		// Row 3: the recorded token, the label, a planted token, through /status.
		{"raise the record through /status", dir, status(func(d *appsv1.Deployment) {
			d.Annotations["fencedlock.io/recorded-token"] = "99999999999"
		}), "fenced-subresources: never through /status", ""},
		{"unfence through /status", dir, status(func(d *appsv1.Deployment) { d.Labels = nil }),
			"fenced-subresources: never through /status", ""},
		{"plant a token through /status", dir, status(func(d *appsv1.Deployment) {
			d.Annotations["fencedlock.io/token"] = "5"
		}), "fenced-subresources: never through /status", ""},
		{"status data through /status", dir, status(func(d *appsv1.Deployment) { d.Status.Replicas = 3 }), "", ""},
		// The object itself: the fence judges it, and the policy's matchCondition must not fail on it.
		{"the object itself", dir, policyeval.Request{Operation: policyeval.Update, Resource: deployments,
			Old: fenced, New: fenced}, "", ""},
		{"a Binding that stamps a record", dir, policyeval.Request{Operation: policyeval.Create,
			Resource: corev1.SchemeGroupVersion.WithResource("pods"), Subresource: "binding", New: binding},
			"pod-binding: are not among them", ""},
	})
}
