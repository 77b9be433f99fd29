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
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
)

// CacheOptions is the manager's cache configuration: see CacheByObject. Managed fields are
// dropped from cached objects (nothing here reads them; with 10 000 locks they are a third of the
// memory). Writes of such objects keep the stored managed fields: nil means "unchanged".
func CacheOptions() cache.Options {
	return cache.Options{ByObject: CacheByObject(), DefaultTransform: cache.TransformStripManagedFields()}
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
