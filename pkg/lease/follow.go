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

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/token"
)

// Following a lock's queue (docs/protocol.md, "Release", step 3): the API server delivers the
// events of one watch of one resource in resourceVersion order, and both of a lock's Leases carry
// label fencedlock.io/lock-uid. So a watch selecting that label that has delivered resourceVersion
// pos has delivered every write of either Lease up to pos: the last queue Lease it delivered is
// the queue as of pos, which is as good as a read made after the lock Lease read at any
// resourceVersion up to pos.

// FollowSelector returns the label selector of the watch that shows both of the lock's Leases,
// the lock Lease l and its queue Lease, or "" when l does not carry the label of its controller's
// UID (a Lease made before the label existed; the manager adds it), and the queue must be read.
func FollowSelector(l *coordinationv1.Lease) string {
	ref := metav1.GetControllerOf(l)
	if ref == nil || ref.Kind != locksv1alpha1.Kind || ref.UID == "" ||
		l.Labels[locksv1alpha1.LockUIDLabel] != string(ref.UID) {
		return ""
	}
	return labels.SelectorFromSet(labels.Set{locksv1alpha1.LockUIDLabel: string(ref.UID)}).String()
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
