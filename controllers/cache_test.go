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
	"reflect"
	"testing"
	"unsafe"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
)

// compactMeta changes nothing a reader sees but the managed fields, and cached Leases share one
// label map.
func TestCompactMeta(t *testing.T) {
	lease := func(name string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "jobs", ResourceVersion: "42",
			Labels:          map[string]string{locksv1alpha1.ManagedByLabel: locksv1alpha1.ManagedByValue},
			Annotations:     map[string]string{locksv1alpha1.TokenAnnotation: "41", locksv1alpha1.WaitingAnnotation: "true"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "locks.fencedlock.io/v1alpha1", Kind: "FencedLock", Name: name, UID: "u-" + "1"}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "manager", Operation: metav1.ManagedFieldsOperationUpdate}},
		}}
	}
	a, b := lease("a"), lease("b")
	want := lease("a")
	want.ManagedFields = nil
	for _, l := range []*coordinationv1.Lease{a, b} {
		if _, err := compactMeta(l); err != nil {
			t.Fatal(err)
		}
	}
	if !equality.Semantic.DeepEqual(a, want) {
		t.Fatalf("compacted Lease differs beyond its managed fields:\n got %+v\nwant %+v", a.ObjectMeta, want.ObjectMeta)
	}
	if reflect.ValueOf(a.Labels).UnsafePointer() != reflect.ValueOf(b.Labels).UnsafePointer() {
		t.Error("two fencedlock Leases keep a label map each")
	}
	if copied := a.DeepCopy(); reflect.ValueOf(copied.Labels).UnsafePointer() == reflect.ValueOf(a.Labels).UnsafePointer() {
		t.Error("a copy for a reader shares the cached label map")
	}

	// Other label sets keep their values (a pod's may be unique) and are nobody else's.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "jobs",
		Labels: map[string]string{locksv1alpha1.LockLabel: "jobs", "statefulset.kubernetes.io/pod-name": "p"}}}
	if _, err := compactMeta(pod); err != nil {
		t.Fatal(err)
	}
	if pod.Labels["statefulset.kubernetes.io/pod-name"] != "p" || pod.Labels[locksv1alpha1.LockLabel] != "jobs" || len(pod.Labels) != 2 {
		t.Errorf("pod labels changed: %v", pod.Labels)
	}

	// A lock's Leases carry its uid as their owner's and as a label: one string holds both.
	labelled := lease("c")
	labelled.Labels = map[string]string{locksv1alpha1.ManagedByLabel: locksv1alpha1.ManagedByValue,
		locksv1alpha1.LockUIDLabel: string([]byte("u-1"))} // a string of its own, as the decoder makes
	want = labelled.DeepCopy()
	want.ManagedFields = nil
	if _, err := compactMeta(labelled); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(labelled, want) {
		t.Fatalf("compacted Lease differs beyond its managed fields:\n got %+v\nwant %+v", labelled.ObjectMeta, want.ObjectMeta)
	}
	if unsafe.StringData(labelled.Labels[locksv1alpha1.LockUIDLabel]) != unsafe.StringData(string(labelled.OwnerReferences[0].UID)) {
		t.Error("the uid label keeps a string of its own beside the owner reference's")
	}
}
