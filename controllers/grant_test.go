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
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
)

func TestPodReplaced(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	invalid := func(path ...string) error {
		return apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "worker-0",
			field.ErrorList{field.Invalid(field.NewPath(path[0], path[1:]...), "x", "field is immutable")})
	}
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"uid immutable", invalid("metadata", "uid"), true},
		{"uid precondition", apierrors.NewConflict(pods, "worker-0", errors.New("Precondition failed: UID")), true},
		{"another field invalid", invalid("metadata", "annotations"), false},
		{"not found", apierrors.NewNotFound(pods, "worker-0"), false},
		{"other", errors.New("connection refused"), false},
	}
	for _, tc := range cases {
		if got := podReplaced(tc.err); got != tc.want {
			t.Errorf("%s: podReplaced(%v) = %v; want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// recordedCalls logs, in order, the writes a reconciler makes and the Events it sends.
type recordedCalls struct{ calls []string }

func (c *recordedCalls) Eventf(regarding, _ runtime.Object, _, reason, _, _ string, _ ...any) {
	m, _ := meta.Accessor(regarding)
	c.calls = append(c.calls, "event "+reason+" on "+m.GetName())
}

// A pod handover's Events are sent after its ungate: each is a write to the API server, and sent
// before they would compete with the write the next pod waits for.
func TestApplyPlanSendsEventsAfterTheUngate(t *testing.T) {
	for _, tc := range []struct {
		end  ending
		want []string
	}{
		{release, []string{"update jobs", "patch b", "event Released on a", "event Granted on b"}},
		{revoke, []string{"update jobs", "patch b", "event Expired on jobs", "event Expired on a", "event Granted on b"}},
	} {
		if got := handOverToPod(t, tc.end); !slices.Equal(got, tc.want) {
			t.Errorf("ending %d: calls %q; want %q", tc.end, got, tc.want)
		}
	}
}

// handOverToPod applies a plan that ends pod a's grant of lock jobs and serves pod b, waiting at
// the head of its queue, and returns the writes and Events made, in order.
func handOverToPod(t *testing.T, end ending) []string {
	t.Helper()
	ctx := context.Background()
	fl := &locksv1alpha1.FencedLock{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "jobs", UID: "lock-uid"}}
	holder := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: "uid-a"},
		Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}
	head := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b", UID: "uid-b"},
		Spec: corev1.PodSpec{SchedulingGates: []corev1.PodSchedulingGate{{Name: locksv1alpha1.SchedulingGate}}}}
	rec := &recordedCalls{}
	c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).
		WithObjects(holder.DeepCopy(), head.DeepCopy()).Build(), interceptor.Funcs{
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			rec.calls = append(rec.calls, "update "+obj.GetName())
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			rec.calls = append(rec.calls, "patch "+obj.GetName())
			return c.Patch(ctx, obj, p, opts...)
		},
	})

	// The Lease, held by pod a; pod b waits at the head of the queue.
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "jobs"}}
	if err := c.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	if _, err := lease.Initialize(l); err != nil {
		t.Fatal(err)
	}
	if err := c.Update(ctx, l); err != nil {
		t.Fatal(err)
	}
	if _, err := lease.Grant(l, locksv1alpha1.PodHolderIdentity("a", "uid-a"), t0); err != nil {
		t.Fatal(err)
	}
	if err := c.Update(ctx, l); err != nil {
		t.Fatal(err)
	}
	st, err := lease.Read(l)
	if err != nil {
		t.Fatal(err)
	}
	q := lease.Queue{Waiters: []lease.Waiter{{Ticket: st.Served + 1, Holder: locksv1alpha1.PodHolderIdentity("b", "uid-b")}}}
	rec.calls = nil

	r := NewFencedLockReconciler(c, c, rec)
	p := plan{end: end, why: "the holder pod finished (Succeeded)", holder: holder, headPod: head, headUngates: true,
		grant: st.OfPermit(st.Permits[0])}
	if err := r.applyPlan(ctx, fl, l, p, q, observation{}, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	return rec.calls
}
