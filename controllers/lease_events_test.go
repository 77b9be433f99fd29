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
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
)

// A renewal alone is noted on its event, without a reconcile, while the lock has a timer to wake
// it; every other write wakes the lock; and a reconcile that read the Lease from before a noted
// renewal does not take it back.
func TestLeaseEventsNoteRenewals(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	r := &FencedLockReconciler{observer: newObserver(), clock: clk}
	woken := 0
	h := leaseEvents{r: r, EventHandler: handler.Funcs{UpdateFunc: func(context.Context, event.UpdateEvent,
		workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		woken++
	}}}
	key := types.NamespacedName{Namespace: "ns", Name: "lk"}
	granted := func(holder string) *coordinationv1.Lease {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lk", UID: "u", ResourceVersion: "10",
			Annotations: map[string]string{locksv1alpha1.TokenAnnotation: "9"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: locksv1alpha1.GroupVersion.String(), Kind: "FencedLock",
				Name: "lk", UID: "fl", Controller: new(true)}}},
			Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To[int32](15)}}
		if _, err := lease.Grant(l, holder, t0); err != nil {
			t.Fatal(err)
		}
		l.ResourceVersion = "11"
		return l
	}
	renew := func(l *coordinationv1.Lease, rv string) *coordinationv1.Lease {
		n := l.DeepCopy()
		if err := lease.Renew(n, *l.Spec.HolderIdentity, 10, clk.Now()); err != nil {
			t.Fatal(err)
		}
		n.ResourceVersion = rv
		return n
	}
	update := func(old, cur *coordinationv1.Lease) (wokeUp bool) {
		before := woken
		h.Update(context.Background(), event.UpdateEvent{ObjectOld: old, ObjectNew: cur}, nil)
		return woken > before
	}
	stateOf := func(l *coordinationv1.Lease) lease.State {
		st, err := lease.Read(l)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	none := func(lease.Permit) *bool { return nil }

	g := granted("a")
	clk.Step(time.Second)
	if !update(g, renew(g, "12")) {
		t.Fatal("a renewal of a grant not observed yet (a fresh start) must wake the lock")
	}
	r.observer.observe(key, stateOf(g), g.ResourceVersion, none, t0)

	// A reconcile that ended on a write (a revocation that conflicted with this very renewal) set
	// no timer: its write's event was to bring the next look. Noting the renewal would leave the
	// lock with no reconcile to come, and a holder that died after it with its grant for good.
	r.observer.setTimer(key, false)
	clk.Step(time.Second)
	if !update(g, renew(g, "12")) {
		t.Fatal("a renewal of a lock with no timer set must wake the lock")
	}
	r.observer.setTimer(key, true) // the reconcile it woke requeued at the grant's deadline

	clk.Step(3 * time.Second) // t0+5s
	r1 := renew(g, "12")
	if update(g, r1) {
		t.Fatal("a renewal alone woke the lock")
	}
	if o := r.observer.obs[key].grants[1]; !o.renewedAt.Equal(t0.Add(5*time.Second)) || !lease.SameTime(o.renewTime, r1.Spec.RenewTime) {
		t.Fatalf("the renewal was not noted when its event came: %+v", o)
	}

	// A reconcile that read the grant's version from the cache before the renewal came.
	r.observer.observe(key, stateOf(g), g.ResourceVersion, none, t0.Add(6*time.Second))
	if o := r.observer.obs[key].grants[1]; !o.renewedAt.Equal(t0.Add(5*time.Second)) || !lease.SameTime(o.renewTime, r1.Spec.RenewTime) {
		t.Fatalf("a reconcile of an older Lease took the noted renewal back: %+v", o)
	}
	// One that read the renewed Lease sees nothing new.
	r.observer.observe(key, stateOf(r1), r1.ResourceVersion, none, t0.Add(7*time.Second))
	if o := r.observer.obs[key].grants[1]; !o.renewedAt.Equal(t0.Add(5 * time.Second)) {
		t.Fatalf("the renewal was observed twice: %+v", o)
	}

	marked := renew(r1, "13")
	marked.Annotations[locksv1alpha1.WaitingAnnotation] = "true"
	if !update(r1, marked) {
		t.Fatal("a renewal together with the waiting mark must wake the lock")
	}
	if !update(r1, r1.DeepCopy()) {
		t.Fatal("an update that renews nothing (a resync) must be handled as Owns handles it")
	}

	pod := granted(locksv1alpha1.PodHolderPrefix + "p/uid")
	r.observer.observe(key, stateOf(pod), pod.ResourceVersion, func(lease.Permit) *bool { return new(true) }, clk.Now())
	if !update(pod, renew(pod, "12")) {
		t.Fatal("a pod's grant is judged by its pod: its renewal must wake the lock")
	}

	foreign := renew(g, "12")
	foreign.OwnerReferences = nil
	if !update(g, foreign) {
		t.Fatal("a Lease no FencedLock controls must be handled as Owns handles it")
	}
}
