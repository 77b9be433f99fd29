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
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
)

// Actions of the controller's events (events.k8s.io action: what the controller did). Their
// reasons are the locksv1alpha1.Reason constants.
const (
	actionGrant   = "Grant"
	actionRelease = "Release"
	actionRevoke  = "Revoke"
	actionQueue   = "Queue"
	// actionReplace: a Lease at a lock's name that is not the manager's was deleted.
	actionReplace = "Replace"
)

// event emits a rate-limited Normal event on a lock.
func (r *FencedLockReconciler) event(fl *locksv1alpha1.FencedLock, l *coordinationv1.Lease, reason, action, note string, args ...any) {
	if !r.limiter.allow(client.ObjectKeyFromObject(fl), r.clock.Now()) {
		return
	}
	r.recorder.Eventf(fl, l, corev1.EventTypeNormal, reason, action, note, args...)
}
