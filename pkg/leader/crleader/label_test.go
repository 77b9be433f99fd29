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
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
)

func TestCreateLabelsObjectsOfTheLocksNamespace(t *testing.T) {
	c := &labellingClient{Client: fake.NewClientBuilder().Build(), namespace: "ops", lock: "op"}
	ctx := context.Background()
	mine := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "a"}}
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "a"}}
	own := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "b",
		Labels: map[string]string{locksv1alpha1.FencedByLabel: "another"}}}
	for _, o := range []*corev1.ConfigMap{mine, other, own} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if got := mine.Labels[locksv1alpha1.FencedByLabel]; got != "op" {
		t.Errorf("created in the lock's namespace: label %q, want op", got)
	}
	if _, ok := other.Labels[locksv1alpha1.FencedByLabel]; ok {
		t.Errorf("created in another namespace: labelled %v", other.Labels)
	}
	if got := own.Labels[locksv1alpha1.FencedByLabel]; got != "another" {
		t.Errorf("an object's own fence label was replaced by %q", got)
	}
}
