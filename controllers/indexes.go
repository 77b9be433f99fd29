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
	"errors"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
)

// The manager's reads of a lock's pods and waiter Leases go through indexes of the cache's
// informers, so that a reconcile touches its lock's objects only: a List by label scans every
// cached object of the namespace (20 000 Leases with 10 000 locks) and copies what it returns.
// controller-runtime's informers are client-go's shared informers; its own field indexes are
// read through a List, which copies.

const (
	// podsByLockIndex indexes the cache's pods by every lock they ask for (podLockNames), keyed
	// "<namespace>/<lock>".
	podsByLockIndex = "fencedlock.io/pods-by-lock"
	// waitersByLockIndex indexes the cache's waiter Leases by their lock, keyed
	// "<namespace>/<lock uid>".
	waitersByLockIndex = "fencedlock.io/waiters-by-lock"
)

// addIndex adds index name, keyed by keys, to the cache's informer of obj's kind, and returns
// the informer's indexer.
func addIndex(ctx context.Context, c cache.Cache, obj client.Object, name string,
	keys func(obj any) []string) (toolscache.Indexer, error) {
	inf, err := c.GetInformer(ctx, obj)
	if err != nil {
		return nil, err
	}
	sii, ok := inf.(toolscache.SharedIndexInformer)
	if !ok {
		return nil, fmt.Errorf("the cache's informer is a %T, not a client-go SharedIndexInformer", inf)
	}
	if err := sii.AddIndexers(toolscache.Indexers{name: func(obj any) ([]string, error) { return keys(obj), nil }}); err != nil {
		return nil, err
	}
	return sii.GetIndexer(), nil
}

// indexPodsByLock adds podsByLockIndex to the cache's pod informer (lockPods reads it).
func indexPodsByLock(ctx context.Context, c cache.Cache) (toolscache.Indexer, error) {
	return addIndex(ctx, c, &corev1.Pod{}, podsByLockIndex, func(obj any) []string {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return nil
		}
		names := podLockNames(pod)
		keys := make([]string, len(names))
		for i, name := range names {
			keys[i] = pod.Namespace + "/" + name
		}
		return keys
	})
}

// indexWaitersByLock adds waitersByLockIndex to the cache's Lease informer (lockWaiters reads
// it).
func indexWaitersByLock(ctx context.Context, c cache.Cache) (toolscache.Indexer, error) {
	return addIndex(ctx, c, &coordinationv1.Lease{}, waitersByLockIndex, func(obj any) []string {
		l, ok := obj.(*coordinationv1.Lease)
		if !ok || l.Labels[locksv1alpha1.RoleLabel] != locksv1alpha1.RoleWaiter || l.Labels[locksv1alpha1.LockUIDLabel] == "" {
			return nil
		}
		return []string{l.Namespace + "/" + l.Labels[locksv1alpha1.LockUIDLabel]}
	})
}

// lockWaiters returns the waiter Leases of fl as the cache holds them (copies of the objects,
// whose maps are shared with the cache: read-only).
func (r *FencedLockReconciler) lockWaiters(fl *locksv1alpha1.FencedLock) ([]coordinationv1.Lease, error) {
	if r.waiterIndex == nil {
		return nil, errors.New("FencedLockReconciler has no waiter index: set it up with SetupWithManager")
	}
	objs, err := r.waiterIndex.ByIndex(waitersByLockIndex, fl.Namespace+"/"+string(fl.UID))
	if err != nil {
		return nil, fmt.Errorf("listing waiter leases of lock %s: %w", fl.Name, err)
	}
	out := make([]coordinationv1.Lease, 0, len(objs))
	for _, o := range objs {
		if l, ok := o.(*coordinationv1.Lease); ok {
			out = append(out, *l)
		}
	}
	return out, nil
}
