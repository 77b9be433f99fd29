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

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
)

// leaseEvents wakes a lock on the events of the Leases it owns (as the builder's Owns does),
// except on a renewal alone: that is noted as the sign of life it is (observer.noteRenewals) and
// needs no reconcile, since nothing a reconcile judges by changed. Renewals are most of a held
// lock's writes, a third of its lease duration apart; the deadline the lock was requeued for
// before the renewal still comes, and finds the new observation. A lock with no such timer (its
// last reconcile ended on a write, counting on that write's event) is woken as Owns would.
type leaseEvents struct {
	handler.EventHandler // the owner's request, as Owns enqueues it
	r                    *FencedLockReconciler
}

// Update enqueues the owning lock unless the event is a renewal the observer noted.
func (h leaseEvents) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if h.noted(e.ObjectOld, e.ObjectNew) {
		return
	}
	h.EventHandler.Update(ctx, e, q)
}

func (h leaseEvents) noted(oldObj, newObj any) bool {
	old, ok := oldObj.(*coordinationv1.Lease)
	cur, ok2 := newObj.(*coordinationv1.Lease)
	if !ok || !ok2 {
		return false
	}
	owner := metav1.GetControllerOf(cur)
	if owner == nil || owner.Kind != locksv1alpha1.Kind || owner.APIVersion != locksv1alpha1.GroupVersion.String() {
		return false
	}
	st, renewed := lease.OnlyRenewed(old, cur)
	return renewed && h.r.observer.noteRenewals(types.NamespacedName{Namespace: cur.Namespace, Name: owner.Name}, st,
		cur.ResourceVersion, h.r.clock.Now())
}
