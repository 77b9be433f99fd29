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
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
)

// ClientWriter writes Leases through a controller-runtime client.
type ClientWriter struct{ Client client.Writer }

// Update implements Writer.
func (w ClientWriter) Update(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	if err := w.Client.Update(ctx, l); err != nil {
		return nil, err
	}
	return l, nil
}

// TypedWriter writes Leases through a client-go typed client.
type TypedWriter struct {
	Leases coordinationv1client.LeasesGetter
}

// Update implements Writer.
func (w TypedWriter) Update(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	return w.Leases.Leases(l.Namespace).Update(ctx, l, metav1.UpdateOptions{})
}

// Selector selects the Leases that back FencedLocks; managers cache only those.
func Selector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{locksv1alpha1.ManagedByLabel: locksv1alpha1.ManagedByValue})
}
