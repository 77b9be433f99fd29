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

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
)

// Exported for the envtest suite (package controllers_test), which checks the ungate patch
// against the real API server.
var (
	UngatePatch = ungatePatch
	PodReplaced = podReplaced
)

// PodReaders sets up c as SetupWithManager sets up the manager's cache for pods (both indexes),
// and returns how the reconciler reads a lock's pods: from the pod informer's index (lockPods) and
// with the cache's List (its fallback), each as sorted pod names. Call it before c starts.
func PodReaders(ctx context.Context, c cache.Cache) (indexed, listed func(ns, lock string) ([]string, error), err error) {
	if err := c.IndexField(ctx, &corev1.Pod{}, podLockIndex, podLockNames); err != nil {
		return nil, nil, err
	}
	idx, err := indexPodsByLock(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	if idx == nil {
		return nil, nil, fmt.Errorf("the cache's pod informer has no indexer to read")
	}
	read := func(r *FencedLockReconciler) func(ns, lock string) ([]string, error) {
		return func(ns, lock string) ([]string, error) {
			fl := &locksv1alpha1.FencedLock{}
			fl.Namespace, fl.Name = ns, lock
			pods, err := r.lockPods(ctx, fl)
			names := make([]string, 0, len(pods))
			for _, p := range pods {
				names = append(names, p.Name)
			}
			slices.Sort(names)
			return names, err
		}
	}
	return read(&FencedLockReconciler{podIndex: idx}), read(&FencedLockReconciler{Client: listOnly{r: c}}), nil
}

// listOnly is a client that can only list, through a cache.
type listOnly struct {
	client.Client
	r client.Reader
}

func (l listOnly) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return l.r.List(ctx, list, opts...)
}
