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

package policyeval

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	listersv1 "k8s.io/client-go/listers/core/v1"
)

// authz answers the policies' authorization checks: allowed verb "grant" on
// fencedlocks.locks.fencedlock.io for the manager, no opinion on everything else (a principal with
// RBAC on Leases alone).
type authz struct{ manager bool }

func (a authz) Authorize(_ context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	if a.manager && attrs.IsResourceRequest() && attrs.GetVerb() == "grant" &&
		attrs.GetAPIGroup() == "locks.fencedlock.io" && attrs.GetResource() == "fencedlocks" {
		return authorizer.DecisionAllow, "the fencedlock manager", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

// namespaces is a NamespaceLister in which every namespace exists, labelled as the API server
// labels it (kubernetes.io/metadata.name): the policies' `namespaceObject` and namespace
// selectors see that much.
type namespaces struct{}

var _ listersv1.NamespaceLister = namespaces{}

func (namespaces) List(labels.Selector) ([]*corev1.Namespace, error) { return nil, nil }

func (namespaces) Get(name string) (*corev1.Namespace, error) {
	return &corev1.Namespace{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelMetadataName: name}},
		Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceActive},
	}, nil
}
