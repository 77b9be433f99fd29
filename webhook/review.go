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
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// The fence reads an AdmissionReview's metadata only. A generic decoder materialises both objects
// (a ConfigMap's data, a custom resource's spec: 2.5 ms for 64 KiB) though Decide looks at labels
// and annotations; here the bodies are only scanned past. The full objects are decoded in the one
// case that needs them: an update of an object being deleted (onlyFinalizersRemoved).

// maxReviewBytes bounds a request body, as controller-runtime's webhook does.
const maxReviewBytes = 7 * 1024 * 1024

type admissionReview struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Request    *reviewRequest `json:"request"`
}

// reviewRequest is the part of admission.k8s.io/v1 AdmissionRequest the fence reads.
type reviewRequest struct {
	UID         types.UID                   `json:"uid"`
	Kind        metav1.GroupVersionKind     `json:"kind"`
	Resource    metav1.GroupVersionResource `json:"resource"`
	SubResource string                      `json:"subResource"`
	Name        string                      `json:"name"`
	Namespace   string                      `json:"namespace"`
	Operation   admissionv1.Operation       `json:"operation"`
	UserInfo    authenticationv1.UserInfo   `json:"userInfo"`
	Object      objectOnly                  `json:"object"`
	OldObject   objectOnly                  `json:"oldObject"`
	// finalizing is set when the write only removes finalizers of an object being deleted.
	finalizing bool
}

// objectOnly decodes an object's metadata and skips the rest.
type objectOnly struct {
	Metadata *struct {
		GenerateName      string            `json:"generateName"`
		Labels            map[string]string `json:"labels"`
		Annotations       map[string]string `json:"annotations"`
		DeletionTimestamp *metav1.Time      `json:"deletionTimestamp"`
	} `json:"metadata"`
}

func (o objectOnly) objectMeta() *metav1.ObjectMeta {
	if o.Metadata == nil {
		return nil
	}
	return &metav1.ObjectMeta{GenerateName: o.Metadata.GenerateName, Labels: o.Metadata.Labels,
		Annotations: o.Metadata.Annotations, DeletionTimestamp: o.Metadata.DeletionTimestamp}
}

// ServeHTTP answers the API server's AdmissionReviews (admission.k8s.io/v1).
func (f *Fence) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ar, err := readReview(r)
	if err != nil {
		logf.FromContext(r.Context()).Error(err, "Unreadable admission review")
		writeReview(w, "", admission.Errored(http.StatusBadRequest, err))
		return
	}
	ctx := logf.IntoContext(r.Context(), logf.FromContext(r.Context()).WithValues("webhook", FencePath, "uid", ar.UID))
	writeReview(w, ar.UID, f.answer(ctx, ar))
}

func readReview(r *http.Request) (*reviewRequest, error) {
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		return nil, fmt.Errorf("content type %q, expected application/json", ct)
	}
	if r.ContentLength > maxReviewBytes {
		return nil, fmt.Errorf("request body of %d bytes, larger than %d", r.ContentLength, maxReviewBytes)
	}
	var body []byte
	var err error
	if r.ContentLength > 0 { // the API server sends it: read into one buffer of the right size
		body = make([]byte, r.ContentLength)
		_, err = io.ReadFull(r.Body, body)
	} else {
		body, err = io.ReadAll(io.LimitReader(r.Body, maxReviewBytes+1))
	}
	if err != nil {
		return nil, fmt.Errorf("reading the request body: %w", err)
	}
	if len(body) > maxReviewBytes {
		return nil, fmt.Errorf("request body larger than %d bytes", maxReviewBytes)
	}
	var rv admissionReview
	if err := json.Unmarshal(body, &rv); err != nil {
		return nil, fmt.Errorf("decoding the admission review: %w", err)
	}
	if rv.APIVersion != admissionv1.SchemeGroupVersion.String() || rv.Kind != "AdmissionReview" || rv.Request == nil {
		return nil, errors.New("expected an admission.k8s.io/v1 AdmissionReview with a request")
	}
	ar := rv.Request
	if ar.Operation == admissionv1.Update && ar.OldObject.Metadata != nil && ar.OldObject.Metadata.DeletionTimestamp != nil {
		var raw struct {
			Request struct {
				Object, OldObject json.RawMessage
			}
		}
		if err := json.Unmarshal(body, &raw); err != nil {
			return nil, fmt.Errorf("decoding the admission review: %w", err)
		}
		if ar.finalizing, err = onlyFinalizersRemoved(raw.Request.OldObject, raw.Request.Object); err != nil {
			return nil, err
		}
	}
	return ar, nil
}

// writeReview writes the response, nothing but what the API server reads.
func writeReview(w http.ResponseWriter, uid types.UID, res admission.Response) {
	res.UID = uid
	out := admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(),
		Kind: "AdmissionReview"}, Response: &res.AdmissionResponse}
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(out); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(buf.Bytes())
}
