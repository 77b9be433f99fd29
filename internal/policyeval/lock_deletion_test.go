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

package policyeval_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fencedlock/fencedlock/internal/policyeval"
)

// Issue 46, point 8: deleting a held FencedLock succeeded silently. lock-deletion refuses it
// unless the lock is annotated fencedlock.io/allow-delete: "true"; the garbage collector is
// never refused (the namespace controller, in a terminating namespace, is tested on a real API
// server: test/integration/plugin_delete_test.go).
func TestLockDeletion(t *testing.T) {
	const dir = "../../config/policy"
	fencedlocks := schema.GroupVersionResource{Group: "locks.fencedlock.io", Version: "v1alpha1", Resource: "fencedlocks"}
	lock := func(status map[string]any, annotations map[string]any) *unstructured.Unstructured {
		meta := map[string]any{"namespace": "books", "name": "ledger"}
		if annotations != nil {
			meta["annotations"] = annotations
		}
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "locks.fencedlock.io/v1alpha1",
			"kind": "FencedLock", "metadata": meta, "spec": map[string]any{}, "status": status}}
	}
	held := map[string]any{"holder": "alice", "token": "5", "holders": []any{
		map[string]any{"permit": int64(1), "identity": "alice", "token": "5"}}}
	semaphore := map[string]any{"token": "9", "holders": []any{
		map[string]any{"permit": int64(1), "identity": "a", "token": "7"},
		map[string]any{"permit": int64(2), "identity": "b", "token": "9"}}}
	oldStatus := map[string]any{"holder": "alice", "token": "5"} // written before status.holders
	del := func(old *unstructured.Unstructured, user string) policyeval.Request {
		return policyeval.Request{Operation: policyeval.Delete, Resource: fencedlocks, Old: old, User: user}
	}
	orphan := func(r policyeval.Request) policyeval.Request {
		r.Propagation = metav1.DeletePropagationOrphan
		return r
	}
	foreground := func(r policyeval.Request) policyeval.Request {
		r.Propagation = metav1.DeletePropagationForeground
		return r
	}
	const refusal = "lock-deletion: FencedLock books/ledger is held (by alice): deleting it ends the grant without a " +
		"revocation, and refuses every later write to the objects it fences. To delete it anyway: " +
		"kubectl fencedlock delete ledger -n books --force (or annotate it fencedlock.io/allow-delete=true, then delete it)"
	check(t, []admitCase{
		{"a held lock", dir, del(lock(held, nil), ""), refusal, ""},
		{"a held lock, status before holders", dir, del(lock(oldStatus, nil), ""), refusal, ""},
		{"a held semaphore", dir, del(lock(semaphore, nil), ""), "lock-deletion: is held (by a, b)", ""},
		{"a cluster admin", dir, del(lock(held, nil), "kubernetes-admin"), "lock-deletion: is held", ""},
		{"a free lock", dir, del(lock(map[string]any{"token": "5"}, nil), ""), "", ""},
		{"a lock with no status yet", dir, del(lock(nil, nil), ""), "", ""},
		{"a held lock, annotated", dir, del(lock(held, map[string]any{"fencedlock.io/allow-delete": "true"}), ""), "", ""},
		{"a held lock, annotated otherwise", dir, del(lock(held, map[string]any{"fencedlock.io/allow-delete": "yes"}), ""),
			"lock-deletion: is held", ""},
		{"the garbage collector", dir, del(lock(held, nil), "system:serviceaccount:kube-system:generic-garbage-collector"), "", ""},
		{"the garbage collector as the controller manager", dir, del(lock(held, nil), "system:kube-controller-manager"), "", ""},
		// kubectl delete --cascade=orphan would hang: the Lease policies keep the Leases' owner.
		{"a free lock, orphaning its Leases", dir, orphan(del(lock(map[string]any{"token": "5"}, nil), "")),
			"lock-deletion: FencedLock books/ledger: its Leases cannot be orphaned", ""},
		{"a free lock, in the foreground", dir, foreground(del(lock(map[string]any{"token": "5"}, nil), "")), "", ""},
	})
}
