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

// Package webhook holds fencedlock's admission webhooks: the fence, which refuses writes to fenced
// objects made with stale fencing tokens.
package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
)

// FencePath is where the fence is served.
const FencePath = "/fence"

// The fence matches every namespaced resource, and the subresources whose request object is the
// object itself, but only objects labelled fencedlock.io/fenced-by, so unrelated writes never reach
// it. A status write is judged when it presents a token with the request or its lock opts in
// (spec.fence.statusWrites); others are admitted (docs/design.md).
// +kubebuilder:webhook:path=/fence,mutating=false,failurePolicy=fail,sideEffects=None,groups=*,resources=*;*/status;pods/ephemeralcontainers;pods/resize,verbs=create;update;delete,versions=*,name=fence.locks.fencedlock.io,admissionReviewVersions=v1,timeoutSeconds=5,matchPolicy=Equivalent,patch=`{"objectSelector":{"matchExpressions":[{"key":"fencedlock.io/fenced-by","operator":"Exists"}]}}`

// +kubebuilder:rbac:groups=locks.fencedlock.io,resources=fencedlocks,verbs=get;list;watch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Fence admits writes to fenced objects only with a current fencing token.
type Fence struct {
	// Cache serves FencedLocks and Leases on the hot path: no API call per admission.
	Cache client.Reader
	// APIReader reads live: strict locks, confirmation of tokens above the cached one, and the
	// namespace phase before refusing a DELETE.
	APIReader client.Reader
	Recorder  events.EventRecorder
	// Metadata reads the object behind a parent subresource write (see parentRequest).
	Metadata metadata.Interface
}

// answer decides one admission request.
func (f *Fence) answer(ctx context.Context, ar *reviewRequest) admission.Response {
	req, err := requestOf(ar)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if parentSubresources[ar.SubResource] {
		if req, err = f.parentRequest(ctx, ar, req); err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
	}
	d, lk, err := f.decide(ctx, ar.Namespace, req)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	fenceDecisions.WithLabelValues(decisionLabel(d), d.Reason).Inc()
	if d.Allowed {
		return admission.Allowed("")
	}
	logf.FromContext(ctx).Info("Denied fenced write", "object", req.Object, "operation", req.Operation,
		"user", req.User.Username, "reason", d.Reason)
	if lk.Found {
		f.recordDenial(ar, req, lk, d)
	}
	return admission.Denied(d.Message)
}

// recordDenial reports a refusal on the lock, one event series per operation, presented token and
// object: a recorder folds events of the same action and related object into one series that
// keeps the first message only, so a retry loop stays one event while each token stays visible.
func (f *Fence) recordDenial(ar *reviewRequest, req Request, lk Lock, d Decision) {
	fl := &locksv1alpha1.FencedLock{ObjectMeta: metav1.ObjectMeta{Namespace: ar.Namespace, Name: lockName(lk.Key)}}
	fl.SetGroupVersionKind(locksv1alpha1.GroupVersion.WithKind(locksv1alpha1.Kind))
	related := &corev1.ObjectReference{APIVersion: schema.GroupVersion{Group: ar.Kind.Group, Version: ar.Kind.Version}.String(),
		Kind: ar.Kind.Kind, Namespace: ar.Namespace, Name: ar.Name}
	presented := "none"
	if !d.Presented.IsZero() {
		presented = d.Presented.String()
	}
	action := fmt.Sprintf("Deny%s token=%s", operationName(req.Operation), presented)
	f.Recorder.Eventf(fl, related, corev1.EventTypeWarning, d.Reason, action, "Denied %s by %s with token %s: %s",
		req.Operation, req.User.Username, presented, d.Message)
}

// operationName is "Update" for UPDATE.
func operationName(op admissionv1.Operation) string {
	s := string(op)
	if s == "" {
		return ""
	}
	return s[:1] + strings.ToLower(s[1:])
}

// decide gathers the facts Target and Decide ask for until they decide.
func (f *Fence) decide(ctx context.Context, namespace string, req Request) (Decision, Lock, error) {
	name, final := Target(req)
	var lk Lock
	var err error
	if final == nil {
		if lk, err = f.lock(ctx, namespace, name, false); err != nil {
			return Decision{}, lk, err
		}
	}
	for {
		d := Decision{}
		if final != nil {
			d = denyDelete(req, *final)
		} else {
			d = Decide(req, lk)
		}
		if !d.NeedLive && !d.NeedNamespace {
			return d, lk, nil
		}
		if d.NeedLive {
			fenceLiveReads.WithLabelValues("confirm").Inc()
			if lk, err = f.lock(ctx, namespace, name, true); err != nil {
				return d, lk, err
			}
		}
		if d.NeedNamespace {
			fenceLiveReads.WithLabelValues("namespace").Inc()
			if req.NamespaceTerminating, err = f.terminating(ctx, namespace); err != nil {
				return d, lk, err
			}
		}
	}
}

// lock gathers what the fence knows of lock namespace/name: from the cache, or live (a quorum
// read) when live is set or the lock is Strict.
func (f *Fence) lock(ctx context.Context, namespace, name string, live bool) (Lock, error) {
	lk := Lock{Key: namespace + "/" + name}
	key := client.ObjectKey{Namespace: namespace, Name: name}
	var fl locksv1alpha1.FencedLock
	if err := f.Cache.Get(ctx, key, &fl); err != nil {
		if apierrors.IsNotFound(err) {
			return lk, nil
		}
		return lk, fmt.Errorf("reading FencedLock %s: %w", lk.Key, err)
	}
	lk.Found, lk.Spec = true, fl.Spec.Fence
	reader := f.Cache
	if live || fl.Spec.Fence.Mode == locksv1alpha1.FenceModeStrict {
		if !live {
			fenceLiveReads.WithLabelValues("strict").Inc()
		}
		reader, lk.Live = f.APIReader, true
	}
	var l coordinationv1.Lease
	if err := reader.Get(ctx, key, &l); err != nil {
		if apierrors.IsNotFound(err) {
			return lk, nil
		}
		return lk, fmt.Errorf("reading Lease %s: %w", lk.Key, err)
	}
	if lease.CheckLockLease(&l, fl.UID) != nil {
		// A Lease of the lock's name that is not the manager's Lease of this FencedLock (a
		// predecessor's, or one anybody made without the policies' labels) issues no tokens for
		// it; the controller reports LeaseConflict and adopts or replaces it.
		lk.LeaseForeign = true
		return lk, nil
	}
	st, err := lease.Read(&l)
	if err != nil {
		return lk, nil // an unreadable token: LeaseFound stays false, so the fence refuses
	}
	lk.Lease, lk.LeaseFound = st, true
	return lk, nil
}

func (f *Fence) terminating(ctx context.Context, namespace string) (*bool, error) {
	var ns corev1.Namespace
	if err := f.APIReader.Get(ctx, client.ObjectKey{Name: namespace}, &ns); err != nil {
		if apierrors.IsNotFound(err) {
			return new(true), nil
		}
		return nil, fmt.Errorf("reading namespace %s: %w", namespace, err)
	}
	return new(!ns.DeletionTimestamp.IsZero() || ns.Status.Phase == corev1.NamespaceTerminating), nil
}

// requestOf is the fence's view of an admission request.
func requestOf(ar *reviewRequest) (Request, error) {
	req := Request{
		Operation:   ar.Operation,
		Object:      fmt.Sprintf("%s %s/%s", ar.Resource.Resource, ar.Namespace, ar.Name),
		Subresource: ar.SubResource,
		User:        ar.UserInfo,
		Finalizing:  ar.finalizing,
	}
	if parentSubresources[ar.SubResource] {
		return req, nil // the request object is not the object written: see parentRequest
	}
	req.Old = ar.OldObject.objectMeta()
	if ar.Operation != admissionv1.Delete {
		if req.New = ar.Object.objectMeta(); req.New == nil {
			return req, fmt.Errorf("%s request without an object", ar.Operation)
		}
		if ar.Name == "" { // generateName: the name is not known yet
			req.Object = fmt.Sprintf("%s %s/%s*", ar.Resource.Resource, ar.Namespace, req.New.GenerateName)
		}
	}
	return req, nil
}

// onlyFinalizersRemoved reports whether the write from oldRaw to newRaw removes finalizers and
// changes nothing else but bookkeeping (resourceVersion, managedFields, the token record).
func onlyFinalizersRemoved(oldRaw, newRaw []byte) (bool, error) {
	var o, n map[string]any
	if err := json.Unmarshal(oldRaw, &o); err != nil {
		return false, fmt.Errorf("decoding oldObject: %w", err)
	}
	if err := json.Unmarshal(newRaw, &n); err != nil {
		return false, fmt.Errorf("decoding object: %w", err)
	}
	of, nf := stripBookkeeping(o), stripBookkeeping(n)
	if len(nf) >= len(of) || !reflect.DeepEqual(o, n) {
		return false, nil
	}
	for _, f := range nf {
		if !slices.Contains(of, f) {
			return false, nil
		}
	}
	return true, nil
}

// stripBookkeeping removes from obj what a finalizer-removing write may change, and returns its
// finalizers.
func stripBookkeeping(obj map[string]any) []any {
	meta, _ := obj["metadata"].(map[string]any)
	if meta == nil {
		return nil
	}
	finalizers, _ := meta["finalizers"].([]any)
	for _, k := range []string{"finalizers", "resourceVersion", "managedFields", "generation"} {
		delete(meta, k)
	}
	if ann, ok := meta["annotations"].(map[string]any); ok {
		delete(ann, locksv1alpha1.RecordedTokenAnnotation)
		delete(ann, locksv1alpha1.TokenAnnotation)
		if len(ann) == 0 {
			delete(meta, "annotations")
		}
	}
	return finalizers
}

func decisionLabel(d Decision) string {
	if d.Allowed {
		return "admitted"
	}
	return "denied"
}
