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
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fencedlock/fencedlock/internal/policyeval"
)

// BenchmarkAdmit times Admit on config/policy: a grant (every validation of lease-protocol
// evaluated, admitted), a refused grant (a messageExpression evaluated too), a plain renewal (the
// matchCondition skips the validations) and a semaphore's permit grant (the permit rules too).
func BenchmarkAdmit(b *testing.B) {
	p := policies(b, "../../config/policy")
	free := edit(lockLease(), func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = nil })
	now := metav1.NewMicroTime(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	sem := edit(free, func(l *coordinationv1.Lease) {
		l.Annotations["fencedlock.io/permits"] = "3"
		l.Annotations["fencedlock.io/permit-1"] = "5 0 2026-01-01T11:59:00.000000Z 2026-01-01T11:59:00.000000Z a"
	})
	for _, bc := range []struct {
		name string
		req  policyeval.Request
	}{
		{"grant", policyeval.LeaseWrite(free, edit(free, func(l *coordinationv1.Lease) {
			l.Spec.HolderIdentity, l.Spec.AcquireTime, l.Spec.RenewTime = new("b"), &now, &now
			l.Annotations["fencedlock.io/token"] = "10"
		}), false)},
		{"refused", policyeval.LeaseWrite(free, edit(free, func(l *coordinationv1.Lease) {
			l.Spec.HolderIdentity = new("b")
		}), false)},
		{"renewal", policyeval.LeaseWrite(lockLease(), edit(lockLease(), func(l *coordinationv1.Lease) { l.Spec.RenewTime = &now }), false)},
		{"permit", policyeval.LeaseWrite(sem, edit(sem, func(l *coordinationv1.Lease) {
			l.Annotations["fencedlock.io/permit-2"] = "10 0 2026-01-01T12:00:00.000000Z 2026-01-01T12:00:00.000000Z b"
			l.Annotations["fencedlock.io/token"] = "10"
		}), false)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			if got := p.Admit(bc.req); got.Admitted() == (bc.name == "refused") {
				b.Fatalf("unexpected answer %q", got)
			}
			b.ReportAllocs()
			for b.Loop() {
				p.Admit(bc.req)
			}
		})
	}
}
