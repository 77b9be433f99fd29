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
)

// event emits a rate-limited Normal event on a lock.
func (r *FencedLockReconciler) event(fl *locksv1alpha1.FencedLock, l *coordinationv1.Lease, reason, action, note string, args ...any) {
	if !r.limiter.allow(client.ObjectKeyFromObject(fl), r.clock.Now()) {
		return
	}
	r.recorder.Eventf(fl, l, corev1.EventTypeNormal, reason, action, note, args...)
}
