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

package crleader

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
)

// labellingClient labels what it creates in the lock's namespace with the lock's fence label, so
// the fence judges every later write to it. Objects elsewhere are left alone: a fence label names
// a lock of the object's own namespace.
type labellingClient struct {
	client.Client
	namespace, lock string
}

func (c *labellingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if obj.GetNamespace() == c.namespace {
		if _, ok := obj.GetLabels()[locksv1alpha1.FencedByLabel]; !ok {
			labels := obj.GetLabels()
			if labels == nil {
				labels = map[string]string{}
			}
			labels[locksv1alpha1.FencedByLabel] = c.lock
			obj.SetLabels(labels)
		}
	}
	return c.Client.Create(ctx, obj, opts...)
}
