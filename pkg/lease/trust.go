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

package lease

import (
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
)

// CheckLockLease returns an error unless l is the lock Lease of the FencedLock whose uid is
// lockUID as only the manager makes one: labelled app.kubernetes.io/managed-by=fencedlock with no
// fencedlock.io/role (the lease-protocol policy refuses that label, on a CREATE or added later, to
// everyone but the manager, and refuses them the DELETE that would make room for another), and
// controlled by that FencedLock. A name, an owner reference or a token alone proves nothing:
// anyone who may create Leases can write them on an unlabelled Lease that no policy judges, so
// neither the fence nor the manager takes a token from such a Lease (docs/design.md, threat
// model).
func CheckLockLease(l *coordinationv1.Lease, lockUID types.UID) error {
	switch {
	case !labelledManaged(l):
		return &ForeignLeaseError{Namespace: l.Namespace, Name: l.Name,
			Why: fmt.Sprintf("it is not labelled %s=%s, so no admission policy judged its writes",
				locksv1alpha1.ManagedByLabel, locksv1alpha1.ManagedByValue)}
	case l.Labels[locksv1alpha1.RoleLabel] != "":
		return &ForeignLeaseError{Namespace: l.Namespace, Name: l.Name,
			Why: fmt.Sprintf("it is labelled %s=%s: a queue or waiter Lease, not a lock's", locksv1alpha1.RoleLabel,
				l.Labels[locksv1alpha1.RoleLabel])}
	}
	if ref := LockOf(l); ref == nil || ref.UID != lockUID {
		return &ForeignLeaseError{Namespace: l.Namespace, Name: l.Name,
			Why: fmt.Sprintf("it is not controlled by the FencedLock of uid %s", lockUID)}
	}
	return nil
}

// MadeByManager reports whether lock Lease l carries the labels only the manager may give a lock
// Lease (CheckLockLease without the owner, for a client that does not read the FencedLock): a
// client takes no lock on any other.
func MadeByManager(l *coordinationv1.Lease) bool {
	return labelledManaged(l) && l.Labels[locksv1alpha1.RoleLabel] == ""
}

func labelledManaged(l *coordinationv1.Lease) bool {
	return l.Labels[locksv1alpha1.ManagedByLabel] == locksv1alpha1.ManagedByValue
}

// ForeignLeaseError means a Lease at a lock's name is not that lock's Lease (CheckLockLease): it
// issues no token and tells nobody who holds the lock.
type ForeignLeaseError struct {
	Namespace, Name string
	// Why says what it lacks.
	Why string
}

func (e *ForeignLeaseError) Error() string {
	return fmt.Sprintf("lease %s/%s is not the fencedlock manager's lock Lease: %s", e.Namespace, e.Name, e.Why)
}
