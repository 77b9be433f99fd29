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
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/token"
)

// Reading and following a lock's queue (docs/protocol.md, "Release", step 3): all of a lock's
// Leases (its own, its queue Lease, its waiter Leases) carry label fencedlock.io/lock-uid. One
// list of that label returns the queue Lease and the waiter Leases at one revision (two reads
// would not: a pod added between them, then a client joining after it, would read as the client
// alone, served past the pod). And the API server delivers the events of one watch of one
// resource in resourceVersion order, so a watch of that label that has delivered resourceVersion
// pos has delivered every write of those Leases up to pos: the queue Lease and waiter Leases it
// delivered last are the queue as of pos, as good as a list made after the lock Lease read at any
// resourceVersion up to pos.

// LockSelector selects all of the Leases of the lock with UID uid.
func LockSelector(uid types.UID) string {
	return labels.SelectorFromSet(labels.Set{locksv1alpha1.LockUIDLabel: string(uid)}).String()
}

// QueueFrom returns a lock's queue from its Leases as one list (LockSelector) or a watch of them
// gives them: its queue Lease's pods merged with its waiter Leases that wait above served, and the
// waiter Leases that do not follow the format (Waiters). Other Leases are ignored.
func QueueFrom(leases []*coordinationv1.Lease, served Ticket) (Queue, []error) {
	q := Queue{}
	waiters := make([]coordinationv1.Lease, 0, len(leases))
	for _, l := range leases {
		if l.Labels[locksv1alpha1.ManagedByLabel] != locksv1alpha1.ManagedByValue {
			continue // no policy judged it (only the manager creates the queue Lease): not the queue
		}
		switch l.Labels[locksv1alpha1.RoleLabel] {
		case locksv1alpha1.RoleQueue:
			q = ReadQueue(l)
		case locksv1alpha1.RoleWaiter:
			waiters = append(waiters, *l)
		}
	}
	waiting, malformed := Waiters(waiters, served)
	return q.Merge(waiting), malformed
}

// FollowSelector returns the label selector of the watch that shows all of the lock's Leases
// (LockSelector of the lock whose Lease is l), or "" when l does not carry the label of its controller's
// UID (a Lease made before the label existed; the manager adds it), and the queue must be read.
func FollowSelector(l *coordinationv1.Lease) string {
	ref := metav1.GetControllerOf(l)
	if ref == nil || ref.Kind != locksv1alpha1.Kind || ref.UID == "" ||
		l.Labels[locksv1alpha1.LockUIDLabel] != string(ref.UID) {
		return ""
	}
	return LockSelector(ref.UID)
}

// Covers reports whether a watch of FollowSelector that has delivered resourceVersion pos has
// shown every write up to resourceVersion rv: its last queue Lease is then the queue as of rv or
// later. An unreadable resourceVersion covers nothing.
func Covers(pos, rv string) bool {
	p, err := token.FromResourceVersion(pos)
	if err != nil {
		return false
	}
	r, err := token.FromResourceVersion(rv)
	return err == nil && p >= r
}
