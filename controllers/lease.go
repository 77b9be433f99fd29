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
	"fmt"
	"slices"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
)

// leaseProblem explains why a lock has no usable Lease.
type leaseProblem struct{ reason, message string }

// ensureLease returns the lock's initialized Lease. It returns a nil Lease when it has just
// written the Lease (the write's watch event brings the next reconcile) or when the Lease cannot
// be used; the latter comes with a problem to report in the Ready condition.
func (r *FencedLockReconciler) ensureLease(ctx context.Context, fl *locksv1alpha1.FencedLock) (*coordinationv1.Lease, *leaseProblem, error) {
	var l coordinationv1.Lease
	err := r.Get(ctx, client.ObjectKeyFromObject(fl), &l)
	if apierrors.IsNotFound(err) {
		problem, err := r.createLease(ctx, fl)
		return nil, problem, err
	}
	if err != nil {
		return nil, nil, fmt.Errorf("getting lease: %w", err)
	}
	controlled := metav1.IsControlledBy(&l, fl)
	if !controlled && !ownedByPredecessor(&l, fl) {
		return nil, conflict(fl), nil
	}
	st, err := lease.Read(&l)
	if lease.IsNewerProtocol(err) {
		return nil, &leaseProblem{reason: locksv1alpha1.ReasonLeaseConflict, message: fmt.Sprintf(
			"%v; this manager leaves the Lease as it is", err)}, nil
	}
	if err != nil {
		return nil, &leaseProblem{reason: locksv1alpha1.ReasonLeaseConflict, message: fmt.Sprintf(
			"The backing Lease carries an invalid annotation (%v); restore it or delete the Lease", err)}, nil
	}
	if controlled && st.Initialized() && !leaseNeedsSync(&l, fl) {
		return &l, nil, nil
	}
	var served lease.Ticket
	if !st.Initialized() {
		// Every join before this write has a lower ticket (its resourceVersion): a recreated
		// Lease skips them all, and those still waiting join again.
		served, _ = lease.ParseTicket(l.ResourceVersion)
	}
	_, err = lease.CAS(ctx, lease.ClientWriter{Client: r.Client}, &l, func(next *coordinationv1.Lease) error {
		if !controlled {
			// The lock was deleted and recreated before the garbage collector removed its
			// Lease: adopt it. Its token only grows, so fencing is unaffected.
			next.OwnerReferences = nil
		}
		if _, err := lease.Initialize(next); err != nil {
			return err
		}
		lease.ServeIssued(next, served)
		next.Spec.LeaseDurationSeconds = &fl.Spec.LeaseDurationSeconds
		metav1.SetMetaDataLabel(&next.ObjectMeta, locksv1alpha1.LockUIDLabel, string(fl.UID))
		if _, err := lease.SetPermits(next, fl.Spec.PermitCount()); err != nil {
			return err
		}
		return controllerutil.SetControllerReference(fl, next, r.Scheme())
	})
	if err != nil && !apierrors.IsConflict(err) {
		return nil, nil, err
	}
	if err == nil && !st.Initialized() {
		logf.FromContext(ctx).Info("Initialized lease", "token", l.ResourceVersion)
	}
	if limit := fl.Spec.PermitCount(); err == nil && limit != st.Limit {
		r.reportPermits(ctx, fl, &l, st, limit)
	}
	return nil, nil, nil
}

// reportPermits tells of a change of spec.permits written to the Lease: lowering it below the
// permits held revokes nobody, so say what happens instead.
func (r *FencedLockReconciler) reportPermits(ctx context.Context, fl *locksv1alpha1.FencedLock, l *coordinationv1.Lease,
	st lease.State, limit int) {
	logf.FromContext(ctx).Info("Changed the number of permits", "from", st.Limit, "to", limit, "held", len(st.Permits))
	if len(st.Permits) <= limit {
		return
	}
	r.recorder.Eventf(fl, l, corev1.EventTypeNormal, locksv1alpha1.ReasonPermitsLowered, actionGrant,
		"spec.permits lowered to %d while %d permits are held: nobody is revoked; new grants wait until fewer than %d are held",
		limit, len(st.Permits), limit)
}

// createLease creates the lock's Lease; it is stamped with its token by the next reconcile, which
// its watch event brings.
func (r *FencedLockReconciler) createLease(ctx context.Context, fl *locksv1alpha1.FencedLock) (*leaseProblem, error) {
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fl.Name,
			Namespace: fl.Namespace,
			Labels: map[string]string{locksv1alpha1.ManagedByLabel: locksv1alpha1.ManagedByValue,
				locksv1alpha1.LockUIDLabel: string(fl.UID)},
		},
		Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: &fl.Spec.LeaseDurationSeconds},
	}
	if err := controllerutil.SetControllerReference(fl, l, r.Scheme()); err != nil {
		return nil, err
	}
	err := r.Create(ctx, l.DeepCopy())
	if apierrors.IsAlreadyExists(err) {
		other, removed, err := r.removeSquatter(ctx, fl, fl.Name, func(l *coordinationv1.Lease) bool {
			return claimsLock(l, fl)
		})
		switch {
		case err != nil:
			return conflict(fl), err
		case !removed && other != nil && lease.CheckLockLease(other, fl.UID) == nil:
			return nil, nil // ours after all: the cache catches up
		case !removed && other != nil:
			// Made by the manager or an admin for another lock, or someone's Lease that merely
			// has the name (a leader election's): theirs to remove, not ours.
			return conflict(fl), nil
		}
		if err := r.Create(ctx, l); apierrors.IsAlreadyExists(err) {
			// Made again at once: no event of an unlabelled Lease reaches the cache, so retry.
			return conflict(fl), fmt.Errorf("lease %s/%s was created again by someone else: %w", l.Namespace, l.Name, err)
		} else if err != nil {
			return nil, fmt.Errorf("creating lease: %w", err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("creating lease: %w", err)
	}
	logf.FromContext(ctx).Info("Created lease")
	// No status write for the moment until it is stamped (next reconcile, milliseconds later):
	// it would cost every new lock a fifth of its writes.
	return nil, nil
}

// removeSquatter reads the Lease at name around the cache, which sees only Leases labelled as
// fencedlock's, and deletes it if it lacks that label and poses as the lock's (poses): made by
// someone the policies never judged (anyone who may create Leases), it issues no token (the fence
// refuses it, lease.CheckLockLease) and stands where the lock's must. The deletion is conditioned
// on what was read and told in an Event with what it carried. It returns the Lease read (nil if
// there is none) and whether it was deleted.
func (r *FencedLockReconciler) removeSquatter(ctx context.Context, fl *locksv1alpha1.FencedLock, name string,
	poses func(*coordinationv1.Lease) bool) (other *coordinationv1.Lease, removed bool, err error) {
	other = &coordinationv1.Lease{}
	if err := r.apiReader.Get(ctx, client.ObjectKey{Namespace: fl.Namespace, Name: name}, other); err != nil {
		return nil, false, client.IgnoreNotFound(err)
	}
	if other.Labels[locksv1alpha1.ManagedByLabel] == locksv1alpha1.ManagedByValue || !poses(other) {
		return other, false, nil
	}
	uid, rv := other.UID, other.ResourceVersion
	if err := r.Delete(ctx, other, client.Preconditions{UID: &uid, ResourceVersion: &rv}); err != nil && !apierrors.IsNotFound(err) {
		return other, false, fmt.Errorf("deleting foreign lease %s: %w", name, err)
	}
	// Both chosen by whoever made it: cut short, so that the Event stays within its size.
	holder, tok := "", truncate(other.Annotations[locksv1alpha1.TokenAnnotation])
	if other.Spec.HolderIdentity != nil {
		holder = truncate(*other.Spec.HolderIdentity)
	}
	logf.FromContext(ctx).Info("Deleted a foreign Lease at a name of the lock", "lease", name, "holder", holder,
		"token", tok)
	r.recorder.Eventf(fl, nil, corev1.EventTypeWarning, locksv1alpha1.ReasonLeaseConflict, actionReplace,
		"Deleted Lease %s/%s, made without fencedlock's labels (holder %q, token %q): no token of it was ever "+
			"admitted; the lock's own Lease is created in its place", other.Namespace, other.Name, holder, tok)
	return other, true, nil
}

// claimsLock reports whether Lease l, made without fencedlock's labels, poses as the Lease of lock
// fl: it was made once the lock existed (in the second the lock was created, or later; a
// squatter that watches FencedLocks is that quick), or it carries a fencedlock.io/ annotation or
// names a FencedLock as its owner. Such a Lease is a squatter or a forgery; only one made before
// the lock, without those marks, is a name that happens to collide (someone's leader election).
func claimsLock(l *coordinationv1.Lease, fl *locksv1alpha1.FencedLock) bool {
	if !l.CreationTimestamp.Before(&fl.CreationTimestamp) {
		return true
	}
	for k := range l.Annotations {
		if strings.HasPrefix(k, "fencedlock.io/") {
			return true
		}
	}
	return slices.ContainsFunc(l.OwnerReferences, func(r metav1.OwnerReference) bool {
		return r.Kind == locksv1alpha1.Kind && strings.HasPrefix(r.APIVersion, locksv1alpha1.GroupVersion.Group+"/")
	})
}

func conflict(fl *locksv1alpha1.FencedLock) *leaseProblem {
	return &leaseProblem{reason: locksv1alpha1.ReasonLeaseConflict, message: fmt.Sprintf(
		"Lease %s/%s exists and is not owned by this FencedLock; delete that Lease or give the lock another name",
		fl.Namespace, fl.Name)}
}

// ownedByPredecessor reports whether l is controlled by an earlier FencedLock of the same name.
func ownedByPredecessor(l *coordinationv1.Lease, fl *locksv1alpha1.FencedLock) bool {
	ref := metav1.GetControllerOf(l)
	return ref != nil && ref.Kind == locksv1alpha1.Kind && ref.Name == fl.Name && ref.UID != fl.UID &&
		l.Labels[locksv1alpha1.ManagedByLabel] == locksv1alpha1.ManagedByValue
}
