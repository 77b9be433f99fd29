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
	"fmt"
	"maps"
	"reflect"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// Operation is an admission request's operation.
type Operation = admission.Operation

// The operations a write makes.
const (
	Create Operation = admission.Create
	Update Operation = admission.Update
	Delete Operation = admission.Delete
)

// Leases is the resource of coordination.k8s.io/v1 Leases.
var Leases = coordinationv1.SchemeGroupVersion.WithResource("leases")

// Request is a write as the API server's admission sees it.
type Request struct {
	Operation Operation
	// Resource and Subresource are what the write is to (Leases, ""); Kind is the objects' kind
	// (zero: from Old or New, by their apiVersion and kind or their Go type).
	Resource    schema.GroupVersionResource
	Subresource string
	Kind        schema.GroupVersionKind
	// Namespace and Name: "" for those of New, or else of Old.
	Namespace, Name string
	// Old is the stored object (nil for a CREATE), New the object written (nil for a DELETE):
	// typed API objects or *unstructured.Unstructured, read only. As in the API server, New of an
	// UPDATE carries the resourceVersion the write is conditioned on, Old the stored one.
	Old, New runtime.Object
	// Manager: the writer is allowed verb "grant" on fencedlocks.locks.fencedlock.io (the
	// fencedlock manager's ClusterRole); every other authorization check has no opinion.
	Manager bool
	// User is the writer's name (request.userInfo.username); "" for a default one.
	User string
	// Propagation is a DELETE's propagationPolicy (request.options); "" for the default.
	Propagation metav1.DeletionPropagation
}

// LeaseWrite is the write that turns Lease before into after: a CREATE when before is nil, a
// DELETE when after is nil, an UPDATE otherwise.
func LeaseWrite(before, after *coordinationv1.Lease, manager bool) Request {
	r := Request{Resource: Leases, Kind: coordinationv1.SchemeGroupVersion.WithKind("Lease"), Manager: manager}
	switch {
	case before == nil:
		r.Operation, r.New = Create, after
	case after == nil:
		r.Operation, r.Old = Delete, before
	default:
		r.Operation, r.Old, r.New = Update, before, after
	}
	return r
}

const (
	managerUser = "system:serviceaccount:fencedlock-system:fencedlock-controller-manager"
	clientUser  = "fencedlock-client"
)

// attributes are the request's admission attributes, with both objects as unstructured ones of
// the request's kind (so that the dispatcher converts nothing).
func (r Request) attributes() (admission.Attributes, error) {
	old, obj := present(r.Old), present(r.New)
	kind := r.Kind
	if kind.Empty() {
		k, err := kindOf(obj, old)
		if err != nil {
			return nil, err
		}
		kind = k
	}
	uOld, err := toUnstructured(old, kind)
	if err != nil {
		return nil, fmt.Errorf("policyeval: old object: %w", err)
	}
	uObj, err := toUnstructured(obj, kind)
	if err != nil {
		return nil, fmt.Errorf("policyeval: object: %w", err)
	}
	ns, name := r.Namespace, r.Name
	for _, u := range []*unstructured.Unstructured{uOld, uObj} {
		if u != nil && ns == "" {
			ns = u.GetNamespace()
		}
		if u != nil && name == "" {
			name = u.GetName()
		}
	}
	u := &user.DefaultInfo{Name: r.User, Groups: []string{user.AllAuthenticated}}
	if u.Name == "" {
		u.Name = clientUser
		if r.Manager {
			u.Name = managerUser
		}
	}
	return admission.NewAttributesRecord(asObject(uObj), asObject(uOld), kind, ns, name, r.Resource, r.Subresource,
		r.Operation, r.options(), false, u), nil
}

// present returns o, nil for a nil interface or a typed nil pointer.
func present(o runtime.Object) runtime.Object {
	if o == nil {
		return nil
	}
	if v := reflect.ValueOf(o); v.Kind() == reflect.Pointer && v.IsNil() {
		return nil
	}
	return o
}

// asObject keeps a nil object a nil interface.
func asObject(u *unstructured.Unstructured) runtime.Object {
	if u == nil {
		return nil
	}
	return u
}

func kindOf(objs ...runtime.Object) (schema.GroupVersionKind, error) {
	for _, o := range objs {
		if o == nil {
			continue
		}
		if gvk := o.GetObjectKind().GroupVersionKind(); !gvk.Empty() {
			return gvk, nil
		}
		gvks, _, err := clientgoscheme.Scheme.ObjectKinds(o)
		if err != nil {
			return schema.GroupVersionKind{}, fmt.Errorf("policyeval: the kind of %T: %w", o, err)
		}
		return gvks[0], nil
	}
	return schema.GroupVersionKind{}, fmt.Errorf("policyeval: a request with neither object names no kind")
}

// toUnstructured converts o as the API server's CEL activation does
// (admission.ConvertObjectToUnstructured), stamped with kind as admission.ConvertToGVK stamps it.
func toUnstructured(o runtime.Object, kind schema.GroupVersionKind) (*unstructured.Unstructured, error) {
	if o == nil {
		return nil, nil
	}
	var m map[string]any
	if u, ok := o.(*unstructured.Unstructured); ok {
		m = maps.Clone(u.Object) // SetGroupVersionKind below leaves the caller's map as it was
	} else {
		var err error
		if m, err = runtime.DefaultUnstructuredConverter.ToUnstructured(o); err != nil {
			return nil, err
		}
	}
	out := &unstructured.Unstructured{Object: m}
	out.SetGroupVersionKind(kind)
	return out, nil
}

// options are the operation's options as the API server's handlers pass them to admission.
func (r Request) options() runtime.Object {
	gv := metav1.SchemeGroupVersion
	switch r.Operation {
	case Create:
		return &metav1.CreateOptions{TypeMeta: metav1.TypeMeta{APIVersion: gv.String(), Kind: "CreateOptions"}}
	case Update:
		return &metav1.UpdateOptions{TypeMeta: metav1.TypeMeta{APIVersion: gv.String(), Kind: "UpdateOptions"}}
	case Delete:
		o := &metav1.DeleteOptions{TypeMeta: metav1.TypeMeta{APIVersion: gv.String(), Kind: "DeleteOptions"}}
		if r.Propagation != "" {
			o.PropagationPolicy = &r.Propagation
		}
		return o
	}
	return nil
}
