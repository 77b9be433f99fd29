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

package webhook

import (
	"context"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Subresource writes whose request object is not the object they change (a Scale, an Eviction)
// carry none of its labels, so no objectSelector can pick out fenced ones: the fence's subresource
// webhook sees all of them and reads the object's metadata to decide. Writes through subresources
// whose request object is the object itself (pods/ephemeralcontainers, pods/resize) reach the
// fence through its main webhook, and /status writes stay unfenced (docs/design.md lists each).
// +kubebuilder:webhook:path=/fence,mutating=false,failurePolicy=fail,sideEffects=None,groups=*,resources=*/scale;pods/eviction,verbs=create;update,versions=*,name=subresources.fence.locks.fencedlock.io,admissionReviewVersions=v1,timeoutSeconds=5,matchPolicy=Equivalent

// The parent objects of the subresources above that ship with Kubernetes. A custom resource with
// a scale subresource needs get on it too: aggregate it into the manager's role (config/rbac).
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets;replicasets,verbs=get
// +kubebuilder:rbac:groups="",resources=replicationcontrollers;pods,verbs=get

// parentSubresources are the subresources judged by their parent object's metadata.
var parentSubresources = map[string]bool{"scale": true, "eviction": true}

// parentRequest completes req, a write through a parent subresource, with the parent's metadata:
// a scale is an update of the object that cannot present a token, an eviction the DELETE it is.
func (f *Fence) parentRequest(ctx context.Context, ar *reviewRequest, req Request) (Request, error) {
	gvr := ar.Resource
	parent, err := f.Metadata.Resource(schema.GroupVersionResource{Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource}).Namespace(ar.Namespace).Get(ctx, ar.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		parent = nil // nothing to change or delete: the API server answers NotFound itself
	case apierrors.IsForbidden(err):
		return req, fmt.Errorf("the fence cannot read %s %s/%s to tell whether it is fenced: grant the fencedlock "+
			"manager get on %s (add a ClusterRole labelled locks.fencedlock.io/aggregate-to-manager: \"true\"): %w",
			gvr.Resource, ar.Namespace, ar.Name, schema.GroupResource{Group: gvr.Group, Resource: gvr.Resource}, err)
	case err != nil:
		return req, fmt.Errorf("reading %s %s/%s: %w", gvr.Resource, ar.Namespace, ar.Name, err)
	}
	var meta *metav1.ObjectMeta
	if parent != nil {
		meta = &parent.ObjectMeta
	}
	req.Old, req.New = meta, meta
	if ar.SubResource == "eviction" {
		req.Operation, req.New, req.Subresource = admissionv1.Delete, nil, ""
		req.Object += " (eviction)"
	}
	return req, nil
}
