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
	"unique"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
)

// CacheOptions is the manager's cache configuration: see CacheByObject. Cached objects are
// compacted (compactMeta): the manager's memory is its cache, a FencedLock and two Leases per lock.
func CacheOptions() cache.Options {
	return cache.Options{ByObject: CacheByObject(), DefaultTransform: compactMeta}
}

// compactMeta drops an object's managed fields (nothing here reads them; with 10 000 locks they
// were a third of the memory; a write of such an object keeps the stored ones: nil means
// "unchanged") and shares the metadata strings and label sets that thousands of cached objects
// repeat (namespace, label and annotation keys, owner kind and version), which the decoder
// allocates afresh for each. Cached objects are never written in place: readers get copies.
var compactMeta toolscache.TransformFunc = func(in any) (any, error) {
	obj, err := meta.Accessor(in)
	if err != nil {
		return in, nil
	}
	if obj.GetManagedFields() != nil { // nil-checked: kubernetes/kubernetes#124337
		obj.SetManagedFields(nil)
	}
	obj.SetNamespace(intern(obj.GetNamespace()))
	refs := obj.GetOwnerReferences()
	if l := obj.GetLabels(); len(l) > 0 {
		l = sharedLabels(l)
		// A lock's Leases carry its uid twice, as their owner's and as a label: keep one string.
		if v, ok := l[locksv1alpha1.LockUIDLabel]; ok && len(refs) > 0 && v == string(refs[0].UID) {
			l[locksv1alpha1.LockUIDLabel] = string(refs[0].UID)
		}
		obj.SetLabels(l)
	}
	if a := obj.GetAnnotations(); len(a) > 0 {
		interned := make(map[string]string, len(a))
		for k, v := range a {
			interned[intern(k)] = v
		}
		obj.SetAnnotations(interned)
	}
	if len(refs) > 0 {
		for i := range refs {
			refs[i].APIVersion, refs[i].Kind = intern(refs[i].APIVersion), intern(refs[i].Kind)
			if refs[i].Name == obj.GetName() { // a lock's Leases are named after it
				refs[i].Name = obj.GetName()
			}
		}
		obj.SetOwnerReferences(refs)
	}
	return in, nil
}

func intern(s string) string { return unique.Make(s).Value() }

// managedBy is the label set of every fencedlock Lease, shared by all of them in the cache.
var managedBy = map[string]string{locksv1alpha1.ManagedByLabel: locksv1alpha1.ManagedByValue}

// sharedLabels returns l with its keys shared, or the one managedBy map if l is that set. (Other
// label values are left alone: a pod's may be unique, and interning them would only grow.)
func sharedLabels(l map[string]string) map[string]string {
	if len(l) == 1 && l[locksv1alpha1.ManagedByLabel] == locksv1alpha1.ManagedByValue {
		return managedBy
	}
	out := make(map[string]string, len(l))
	for k, v := range l {
		out[intern(k)] = v
	}
	return out
}

// CacheByObject restricts the manager's cache to what fencedlock needs: its own Leases (not every
// node heartbeat and leader election of the cluster) and pods that ask for a lock (not every pod).
func CacheByObject() map[client.Object]cache.ByObject {
	wantsLock, err := labels.NewRequirement(locksv1alpha1.LockLabel, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant key: cannot fail
	}
	return map[client.Object]cache.ByObject{
		&coordinationv1.Lease{}: {Label: lease.Selector()},
		&corev1.Pod{}:           {Label: labels.NewSelector().Add(*wantsLock)},
	}
}
