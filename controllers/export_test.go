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
	"slices"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
)

// Exported for the envtest suite (package controllers_test), which checks the ungate patch
// against the real API server.
var (
	UngatePatch = ungatePatch
	PodReplaced = podReplaced
)

// PodConditionWrites is how many pod lock conditions this process's controllers wrote.
func PodConditionWrites() float64 { return testutil.ToFloat64(podConditionWrites) }

// PodConditionLead is how many pods at the head of a queue see their position at once.
const PodConditionLead = podConditionLead

// PodReader sets up c as SetupWithManager sets up the manager's cache for pods, and returns how
// the reconciler reads a lock's pods (lockPods), as sorted pod names. Call it before c starts.
func PodReader(ctx context.Context, c cache.Cache) (func(ns, lock string) ([]string, error), error) {
	idx, err := indexPodsByLock(ctx, c)
	if err != nil {
		return nil, err
	}
	r := &FencedLockReconciler{podIndex: idx}
	return func(ns, lock string) ([]string, error) {
		fl := &locksv1alpha1.FencedLock{}
		fl.Namespace, fl.Name = ns, lock
		pods, err := r.lockPods(fl)
		names := make([]string, 0, len(pods))
		for _, p := range pods {
			names = append(names, p.Name)
		}
		slices.Sort(names)
		return names, err
	}, nil
}
