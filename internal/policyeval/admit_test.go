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
	"cmp"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/fencedlock/fencedlock/internal/policyeval"
)

var loaded = sync.OnceValues(func() (map[string]*policyeval.Policies, error) {
	out := map[string]*policyeval.Policies{}
	for _, dir := range []string{"../../config/policy", "testdata/policy"} {
		p, err := policyeval.Load(dir)
		if err != nil {
			return nil, err
		}
		out[dir] = p
	}
	return out, nil
})

func policies(tb testing.TB, dir string) *policyeval.Policies {
	tb.Helper()
	ps, err := loaded()
	if err != nil {
		tb.Fatal(err)
	}
	return ps[dir]
}

// lockLease is a lock Lease as the manager keeps it: held by a, token 5, read at resourceVersion 10.
func lockLease() *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lock", ResourceVersion: "10",
			Labels:      map[string]string{"app.kubernetes.io/managed-by": "fencedlock", "fencedlock.io/lock-uid": "u1"},
			Annotations: map[string]string{"fencedlock.io/token": "5"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: new("a"), LeaseDurationSeconds: new(int32(15))},
	}
}

func edit(l *coordinationv1.Lease, f func(*coordinationv1.Lease)) *coordinationv1.Lease {
	out := l.DeepCopy()
	f(out)
	return out
}

type admitCase struct {
	name    string
	dir     string
	req     policyeval.Request
	refused string              // policy name and a substring of the message, "" when admitted
	reason  metav1.StatusReason // "": Forbidden
}

func check(t *testing.T, cases []admitCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := policies(t, c.dir).Admit(c.req)
			if c.refused == "" {
				if !got.Admitted() {
					t.Fatalf("refused: %s", got)
				}
				return
			}
			policy, msg, _ := strings.Cut(c.refused, ": ")
			reason := cmp.Or(c.reason, metav1.StatusReasonForbidden)
			if got.Policy != policy || !strings.Contains(got.Message, msg) || got.Reason != reason {
				t.Fatalf("got %q (reason %s), want refused by %s (%s) with %q", got, got.Reason, policy, reason, msg)
			}
		})
	}
}

func TestLockLease(t *testing.T) {
	const dir = "../../config/policy"
	old := lockLease()
	noToken := edit(old, func(l *coordinationv1.Lease) { delete(l.Annotations, "fencedlock.io/token") })
	revoke := edit(old, func(l *coordinationv1.Lease) {
		l.Spec.HolderIdentity = nil
		l.Annotations["fencedlock.io/revoked-token"] = "5"
	})
	grabKeepingToken := edit(old, func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = new("b") })
	unlabel := edit(old, func(l *coordinationv1.Lease) { delete(l.Labels, "app.kubernetes.io/managed-by") })
	check(t, []admitCase{
		{"client create", dir, policyeval.LeaseWrite(nil, old, false), "lease-protocol: are created by the fencedlock manager", ""},
		{"manager create", dir, policyeval.LeaseWrite(nil, old, true), "", ""},
		{"client removes the token", dir, policyeval.LeaseWrite(old, noToken, false), "lease-protocol: cannot be removed", ""},
		{"manager removes the token", dir, policyeval.LeaseWrite(old, noToken, true), "lease-protocol: cannot be removed", ""},
		{"client revokes", dir, policyeval.LeaseWrite(old, revoke, false), "lease-protocol: only the fencedlock manager revokes", ""},
		{"manager revokes", dir, policyeval.LeaseWrite(old, revoke, true), "", ""},
		// The messageExpression is evaluated: it names the resourceVersion read.
		{"grant keeping the token", dir, policyeval.LeaseWrite(old, grabKeepingToken, true), "lease-protocol: conditioned on (10), not keep token 5", ""},
		// The old object matches the selector although the new one does not.
		{"client removes the label", dir, policyeval.LeaseWrite(old, unlabel, false), "lease-protocol: the duration, labels and owner", ""},
		{"manager removes the label", dir, policyeval.LeaseWrite(old, unlabel, true), "", ""},
		// A Lease outside every selector.
		{"someone else's Lease", dir, policyeval.LeaseWrite(edit(old, func(l *coordinationv1.Lease) { l.Labels = nil }),
			edit(old, func(l *coordinationv1.Lease) { l.Labels, l.Annotations = nil, nil }), false), "", ""},
	})
}

func TestWaiterAndQueueLeases(t *testing.T) {
	const dir = "../../config/policy"
	waiter := edit(lockLease(), func(l *coordinationv1.Lease) {
		l.Name = "fencedlock-wait-u1-abc"
		l.Labels["fencedlock.io/role"] = "waiter"
		l.Annotations = map[string]string{"fencedlock.io/join": "1"}
	})
	queue := edit(lockLease(), func(l *coordinationv1.Lease) {
		l.Name = "fencedlock-queue-u1"
		l.Labels["fencedlock.io/role"] = "queue"
		l.Spec.HolderIdentity, l.Annotations = nil, nil
	})
	queued := edit(queue, func(l *coordinationv1.Lease) { l.Annotations = map[string]string{"fencedlock.io/queue": "[]"} })
	check(t, []admitCase{
		{"client joins", dir, policyeval.LeaseWrite(nil, waiter, false), "", ""},
		{"join with a ticket", dir, policyeval.LeaseWrite(nil, edit(waiter, func(l *coordinationv1.Lease) {
			l.Annotations["fencedlock.io/ticket"] = "3"
		}), false), "waiter-lease: carries no fencedlock.io/ticket", metav1.StatusReasonForbidden},
		// The ticket a beat must carry is the resourceVersion of the join (10), the manager's too.
		{"beat with another ticket", dir, policyeval.LeaseWrite(waiter, edit(waiter, func(l *coordinationv1.Lease) {
			l.Annotations["fencedlock.io/ticket"] = "3"
		}), true), `waiter-lease: set annotation fencedlock.io/ticket to "10"`, metav1.StatusReasonForbidden},
		{"beat", dir, policyeval.LeaseWrite(waiter, edit(waiter, func(l *coordinationv1.Lease) {
			l.Annotations["fencedlock.io/ticket"] = "10"
		}), false), "", ""},
		{"client writes the queue", dir, policyeval.LeaseWrite(queue, queued, false), "queue-lease: only the manager writes it", ""},
		{"manager writes the queue", dir, policyeval.LeaseWrite(queue, queued, true), "", ""},
	})
}

// TestGeneric covers what config/policy does not use today: a DELETE (object null), an
// objectSelector and matchConditions that read oldObject, a subresource, documents of other kinds.
func TestGeneric(t *testing.T) {
	const dir = "testdata/policy"
	if got := policies(t, dir).Names(); len(got) != 2 || got[0] != "delete-guard" || got[1] != "status-guard" {
		t.Fatalf("policies %v, want [delete-guard status-guard]", got)
	}
	guarded := edit(lockLease(), func(l *coordinationv1.Lease) {
		l.Labels = map[string]string{"example.com/guarded": "true"}
		l.Annotations = map[string]string{"example.com/keep": "true"}
	})
	unkept := edit(guarded, func(l *coordinationv1.Lease) { l.Annotations = nil })
	unguarded := edit(guarded, func(l *coordinationv1.Lease) { l.Labels = nil })
	deploy := func(spec, status int32) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "d", ResourceVersion: "7"},
			Spec: appsv1.DeploymentSpec{Replicas: new(spec)}, Status: appsv1.DeploymentStatus{Replicas: status}}
	}
	deployments := appsv1.SchemeGroupVersion.WithResource("deployments")
	status := func(sub string, manager bool) policyeval.Request {
		return policyeval.Request{Operation: policyeval.Update, Resource: deployments, Subresource: sub,
			Old: deploy(1, 1), New: deploy(1, 3), Manager: manager}
	}
	check(t, []admitCase{
		{"client deletes a kept Lease", dir, policyeval.LeaseWrite(guarded, nil, false), "delete-guard: only the manager deletes kept Lease lock", ""},
		{"manager deletes a kept Lease", dir, policyeval.LeaseWrite(guarded, nil, true), "", ""},
		{"matchCondition false", dir, policyeval.LeaseWrite(unkept, nil, false), "", ""},
		{"objectSelector unmatched", dir, policyeval.LeaseWrite(unguarded, nil, false), "", ""},
		{"operation unmatched", dir, policyeval.LeaseWrite(guarded, guarded, false), "", ""},
		{"subresource", dir, status("status", true), "status-guard: status.replicas above spec.replicas", metav1.StatusReasonInvalid},
		{"main resource", dir, status("", false), "", ""},
		{"unstructured", dir, policyeval.Request{Operation: policyeval.Update, Resource: deployments, Subresource: "status",
			Old: unstructuredOf(t, deploy(1, 1)), New: unstructuredOf(t, deploy(2, 2))}, "", ""},
	})
}

func unstructuredOf(t *testing.T, o runtime.Object) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion("apps/v1")
	u.SetKind("Deployment")
	return u
}
