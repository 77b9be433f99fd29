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
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"

	"github.com/fencedlock/fencedlock/pkg/token"
)

type fixedToken token.Token

func (f *fixedToken) Token() token.Token { return token.Token(*f) }

// recorder is the next round tripper: it keeps the headers of what was sent.
type recorder struct{ sent []http.Header }

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.sent = append(r.sent, req.Header.Clone())
	return httptest.NewRecorder().Result(), nil
}

func TestTransportPresentsTheCurrentToken(t *testing.T) {
	tok := fixedToken(0)
	next := &recorder{}
	tr := &fencingTransport{next: next, tokens: &tok, lock: "ops/op", user: "alice", groups: []string{"devs"}}
	send := func(method, path string) error {
		req := &http.Request{Method: method, URL: &url.URL{Path: path}, Header: http.Header{}}
		_, err := tr.RoundTrip(req)
		return err
	}
	if err := send(http.MethodPut, "/api/v1/namespaces/ops/configmaps/a"); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("a write without a term: %v, want ErrNotLeader", err)
	}
	if len(next.sent) != 0 {
		t.Fatalf("a refused write was sent: %v", next.sent)
	}
	if err := send(http.MethodGet, "/api/v1/namespaces/ops/configmaps/a"); err != nil {
		t.Fatalf("a read without a term: %v", err)
	}
	if err := send(http.MethodPost, "/api/v1/namespaces/ops/events"); err != nil {
		t.Fatalf("an event without a term: %v", err)
	}
	tok = 41
	if err := send(http.MethodDelete, "/api/v1/namespaces/ops/configmaps/a"); err != nil {
		t.Fatal(err)
	}
	tok = 57 // a new term: the next write presents its token
	if err := send(http.MethodPatch, "/apis/example.io/v1/namespaces/ops/things/a/status"); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"", "", "41", "57"} {
		h := next.sent[i]
		if got := h.Get("Impersonate-Extra-Fencedlock.io%2ftoken"); got != want {
			t.Errorf("request %d: token header %q, want %q (headers %v)", i, got, want, h)
		}
		if want != "" && (h.Get("Impersonate-User") != "alice" || !slices.Equal(h.Values("Impersonate-Group"), []string{"devs"})) {
			t.Errorf("request %d: impersonates %v, want alice in devs", i, h)
		}
	}
}

func TestWrites(t *testing.T) {
	for path, want := range map[string]bool{
		"/api/v1/namespaces/ops/pods":                          true,
		"/api/v1/namespaces/ops/pods/p/status":                 true,
		"/api/v1/namespaces/ops/events":                        false,
		"/api/v1/namespaces/ops/events/e":                      false,
		"/api/v1/namespaces/events/configmaps":                 true, // a namespace named events
		"/apis/events.k8s.io/v1/namespaces/ops/events":         false,
		"/apis/authorization.k8s.io/v1/subjectaccessreviews":   false,
		"/apis/authentication.k8s.io/v1/tokenreviews":          false,
		"/apis/coordination.k8s.io/v1/namespaces/ops/leases/x": true,
		"/apis/apps/v1/namespaces/ops/deployments/web/scale":   true,
	} {
		req := &http.Request{Method: http.MethodPost, URL: &url.URL{Path: path}}
		if got := writes(req); got != want {
			t.Errorf("writes(POST %s) = %v, want %v", path, got, want)
		}
	}
}

func TestImpersonationGroups(t *testing.T) {
	sa := authenticationv1.UserInfo{Username: "system:serviceaccount:ops:op",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:ops", "system:authenticated"}}
	if g := impersonationGroups(sa); g != nil {
		t.Errorf("a service account restates %v; the API server derives its groups", g)
	}
	u := authenticationv1.UserInfo{Username: "alice", Groups: []string{"devs", "system:authenticated"}}
	if g := impersonationGroups(u); !slices.Equal(g, []string{"devs"}) {
		t.Errorf("alice restates %v, want [devs]", g)
	}
}
