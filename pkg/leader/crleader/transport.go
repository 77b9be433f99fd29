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
	"fmt"
	"net/http"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/transport"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/token"
)

// NotLeaderError is a write this replica refused to send: it holds no term of the lock.
type NotLeaderError struct {
	// Lock is the FencedLock, namespace/name.
	Lock string
	// Method and Path are the refused request's.
	Method, Path string
}

func (e *NotLeaderError) Error() string {
	return fmt.Sprintf("fenced leadership: %s %s refused locally: this replica holds no term of FencedLock %s "+
		"(not elected yet, or its term ended)", e.Method, e.Path, e.Lock)
}

// Is makes a *NotLeaderError match ErrNotLeader.
func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }

// tokenSource is the current term's token, zero without one.
type tokenSource interface{ Token() token.Token }

// fencingTransport presents the current token with every write, as an impersonation of the
// client's own user with the extra fencedlock.io/token, read afresh for each request.
type fencingTransport struct {
	next   http.RoundTripper
	tokens tokenSource
	lock   string
	// user and groups are restated on every write: impersonation replaces them.
	user   string
	groups []string
}

func (t *fencingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !writes(req) {
		return t.next.RoundTrip(req)
	}
	tok := t.tokens.Token()
	if tok.IsZero() {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, &NotLeaderError{Lock: t.lock, Method: req.Method, Path: req.URL.Path}
	}
	imp := transport.ImpersonationConfig{UserName: t.user, Groups: t.groups,
		Extra: map[string][]string{locksv1alpha1.TokenExtra: {tok.String()}}}
	return transport.NewImpersonatingRoundTripper(imp, t.next).RoundTrip(req)
}

// writes reports whether req may change stored state other than Events.
func writes(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	p := req.URL.Path
	for _, g := range []string{"/apis/authentication.k8s.io/", "/apis/authorization.k8s.io/", "/apis/events.k8s.io/"} {
		if strings.HasPrefix(p, g) {
			return false
		}
	}
	if rest, ok := strings.CutPrefix(p, "/api/v1/namespaces/"); ok {
		if _, res, ok := strings.Cut(rest, "/"); ok && (res == "events" || strings.HasPrefix(res, "events/")) {
			return false
		}
	}
	return true
}

// impersonationGroups are the groups a write restates. A service account's are derived by the API
// server when none are sent, and system:authenticated is added to any user's: sending them would
// only need more impersonate rights.
func impersonationGroups(u authenticationv1.UserInfo) []string {
	if strings.HasPrefix(u.Username, "system:serviceaccount:") {
		return nil
	}
	var gs []string
	for _, g := range u.Groups {
		if g != "system:authenticated" {
			gs = append(gs, g)
		}
	}
	return gs
}
