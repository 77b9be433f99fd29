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
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A waiter Lease is deleted once it has gone unused (not waiting, unchanged) for the time kept,
// on the manager's clock; one that waits, or changes, is not.
func TestIdleWaitersAreDueAfterTheTimeKept(t *testing.T) {
	waiter := func(name, holder, rv string) coordinationv1.Lease {
		l := coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv}}
		if holder != "" {
			l.Spec.HolderIdentity = &holder
		}
		return l
	}
	keep := time.Minute
	leases := []coordinationv1.Lease{
		waiter("served", "alice", "20"), // ticket 20 <= served 25
		waiter("left", "", "30"),        // no holder
		waiter("waiting", "carol", "40"),
	}
	due, marks, deadline := idleWaiters(leases, 25, nil, keep, t0)
	if len(due) != 0 || len(marks) != 2 || !deadline.Equal(t0.Add(keep)) {
		t.Fatalf("first look: due %d, marks %v, deadline %v; want none due, two marked, due at %v", len(due), marks, deadline, t0.Add(keep))
	}
	leases[1] = waiter("left", "", "31") // written since: marked afresh
	due, marks, deadline = idleWaiters(leases, 25, marks, keep, t0.Add(keep))
	if len(due) != 1 || due[0].Name != "served" || len(marks) != 1 || !deadline.Equal(t0.Add(2*keep)) {
		t.Fatalf("a minute on: due %v, marks %v, deadline %v; want served due, left marked anew", due, marks, deadline)
	}
}
