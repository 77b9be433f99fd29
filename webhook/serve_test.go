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
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
)

// fenceOver returns the fence's HTTP handler over an in-memory lock "ledger" held with token 34.
// A unit test of the handler's decoding and answering; the real API server is exercised by
// test/integration.
func fenceOver(tb testing.TB) http.Handler {
	tb.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		tb.Fatal(err)
	}
	if err := locksv1alpha1.AddToScheme(scheme); err != nil {
		tb.Fatal(err)
	}
	fl := &locksv1alpha1.FencedLock{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "ledger", UID: "lock-uid"}}
	ctrl := true
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "ledger",
		Labels:          map[string]string{locksv1alpha1.ManagedByLabel: locksv1alpha1.ManagedByValue},
		Annotations:     map[string]string{locksv1alpha1.TokenAnnotation: "34"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: locksv1alpha1.GroupVersion.String(), Kind: "FencedLock", Name: "ledger", UID: "lock-uid", Controller: &ctrl}}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: new("worker-b")}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(fl, l).Build()
	return fenceHandler(&Fence{Cache: c, APIReader: c, Recorder: events.NewFakeRecorder(100)})
}

// review is an AdmissionReview for an UPDATE of ConfigMap default/ledger, fenced by "ledger",
// presenting token presented over a stored object recorded with token 34; dataBytes of data.
func review(tb testing.TB, presented string, dataBytes int) []byte {
	tb.Helper()
	cm := func(tok string) []byte {
		o := corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "ledger", ResourceVersion: "77",
				Labels:      map[string]string{locksv1alpha1.FencedByLabel: "ledger", "app": "books"},
				Annotations: map[string]string{locksv1alpha1.RecordedTokenAnnotation: tok, "note": "kept"}},
			Data: map[string]string{"balance": strings.Repeat("1", dataBytes)}}
		raw, err := json.Marshal(o)
		if err != nil {
			tb.Fatal(err)
		}
		return raw
	}
	ar := admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "req-1", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"},
			Name:     "ledger", Namespace: "default", Operation: admissionv1.Update,
			Object: runtime.RawExtension{Raw: cm(presented)}, OldObject: runtime.RawExtension{Raw: cm("34")}}}
	body, err := json.Marshal(ar)
	if err != nil {
		tb.Fatal(err)
	}
	return body
}

func serve(tb testing.TB, h http.Handler, body []byte) admissionv1.AdmissionReview {
	tb.Helper()
	r := httptest.NewRequest(http.MethodPost, FencePath, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		tb.Fatalf("response %q: %v", w.Body.String(), err)
	}
	return out
}

func TestServeHTTP(t *testing.T) {
	h := fenceOver(t)
	ok := serve(t, h, review(t, "34", 10))
	if ok.Response == nil || !ok.Response.Allowed || ok.Response.UID != "req-1" || ok.APIVersion != "admission.k8s.io/v1" ||
		ok.Kind != "AdmissionReview" {
		t.Fatalf("current token: %+v", ok)
	}
	r := httptest.NewRequest(http.MethodPost, FencePath, strings.NewReader("{}"))
	r.Header.Set("Content-Type", "text/plain")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var bad admissionv1.AdmissionReview
	if err := json.Unmarshal(w.Body.Bytes(), &bad); err != nil || bad.Response == nil || bad.Response.Allowed ||
		bad.Response.Result.Code != http.StatusBadRequest {
		t.Fatalf("wrong content type: %s", w.Body.String())
	}
	stale := serve(t, h, review(t, "33", 10))
	if stale.Response == nil || stale.Response.Allowed || stale.Response.Result == nil ||
		stale.Response.Result.Code != http.StatusForbidden ||
		!strings.Contains(stale.Response.Result.Message, "stale fencing token 33 for lock default/ledger") {
		t.Fatalf("stale token: %+v", stale.Response)
	}
}

// BenchmarkServeHTTP is the fence's handler time per admission (decode, decide, answer) for a
// ConfigMap of 100 bytes and of 64 KiB.
func BenchmarkServeHTTP(b *testing.B) {
	h := fenceOver(b)
	for _, size := range []struct {
		name  string
		bytes int
	}{{"100B", 100}, {"64KiB", 64 << 10}} {
		body := review(b, "34", size.bytes)
		b.Run(size.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, FencePath, bytes.NewReader(body))
				r.Header.Set("Content-Type", "application/json")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != http.StatusOK {
					b.Fatal(w.Body.String())
				}
			}
		})
	}
}
