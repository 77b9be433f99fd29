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

package lock

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
)

func TestValidateIdentity(t *testing.T) {
	for id, want := range map[string]string{
		"":                        "holder identity must not be empty",
		"pod/x":                   `identity "pod/x" is reserved for pods queued by the controller; choose another identity`,
		"pod/worker-0/uid":        "reserved for pods",
		strings.Repeat("a", 1025): "1025 bytes long",
		"me":                      "",
		"team/pod/x":              "",
		"pods/x":                  "",
		strings.Repeat("a", 1024): "",
	} {
		err := ValidateIdentity(id)
		switch {
		case want == "" && err != nil:
			t.Errorf("ValidateIdentity(%.20q) = %v; want nil", id, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, ErrInvalidIdentity)):
			t.Errorf("ValidateIdentity(%.20q) = %v; want an ErrInvalidIdentity saying %q", id, err, want)
		}
	}
}

// New refuses an invalid identity, before any API call.
func TestInvalidIdentityMakesNoAPICall(t *testing.T) {
	cs := fake.NewClientset()
	if l, err := New(cs.CoordinationV1(), "ns", "lock", WithIdentity("pod/x")); l != nil || !errors.Is(err, ErrInvalidIdentity) {
		t.Errorf("New = %v, %v; want an ErrInvalidIdentity", l, err)
	}
	if _, err := New(cs.CoordinationV1(), "ns", ""); err == nil {
		t.Error("New accepted an empty lock name")
	}
	if a := cs.Actions(); len(a) > 0 {
		t.Errorf("API calls made: %v", a)
	}
	if l, err := New(cs.CoordinationV1(), "ns", "lock"); err != nil || l.Identity() == "" {
		t.Errorf("default identity refused: %v", err)
	}
}

// newLocker is New in namespace ns for a test, which fails on its error.
func newLocker(t *testing.T, cs *fake.Clientset, name string, opts ...Option) *Locker {
	t.Helper()
	l, err := New(cs.CoordinationV1(), "ns", name, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestRetryable(t *testing.T) {
	leases := schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
	wrap := func(err error) error { return fmt.Errorf("lock ns/x: listing lease: %w", err) }
	for _, c := range []struct {
		err  error
		want bool
	}{
		{apierrors.NewServiceUnavailable("shutting down"), true},
		{apierrors.NewTooManyRequests("slow down", 1), true},
		{apierrors.NewServerTimeout(leases, "list", 1), true},
		{apierrors.NewTimeoutError("timeout", 1), true},
		{apierrors.NewInternalError(errors.New("etcd leader changed")), true},
		{apierrors.NewGenericServerResponse(502, "get", leases, "x", "bad gateway", 0, true), true},
		{&url.Error{Op: "Get", URL: "https://api:6443", Err: refused}, true},
		{&url.Error{Op: "Get", URL: "https://api:6443", Err: io.EOF}, true},
		{&url.Error{Op: "Get", URL: "https://api:6443", Err: errors.New("read: connection reset by peer")}, true},
		{&url.Error{Op: "Get", URL: "https://api:6443", Err: context.DeadlineExceeded}, true},

		{apierrors.NewForbidden(leases, "x", errors.New("RBAC")), false},
		{apierrors.NewInvalid(schema.GroupKind{Group: "coordination.k8s.io", Kind: "Lease"}, "x", nil), false},
		{apierrors.NewBadRequest("bad selector"), false},
		{apierrors.NewUnauthorized("expired token"), false},
		{apierrors.NewNotFound(leases, "x"), false},
		{&url.Error{Op: "Get", URL: "https://api:6443", Err: x509.UnknownAuthorityError{}}, false},
		{&HeldError{Holder: "b", Token: 3}, false},
		{&ReservedError{Token: 3}, false},
		{&LostError{Holder: "me", Token: 3}, false},
		{ErrNotInitialized, false},
		{errors.New("refusing to grant token 5: not above the lock's current token 7"), false},
	} {
		if got := retryable(wrap(c.err)); got != c.want {
			t.Errorf("retryable(%v) = %v; want %v", c.err, got, c.want)
		}
	}
}

// A missing Lease is ErrNoLease to TryAcquire and Attach, and a lost grant to a renewal that
// re-reads it after a conflict.
func TestMissingLease(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	l := newLocker(t, cs, "lock", WithIdentity("me"))
	if _, err := l.TryAcquire(ctx); !errors.Is(err, ErrNoLease) {
		t.Errorf("TryAcquire: %v", err)
	}
	if _, err := l.Attach(ctx, 5); !errors.Is(err, ErrNoLease) {
		t.Errorf("Attach: %v", err)
	}

	held := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lock", ResourceVersion: "5",
		Annotations: map[string]string{locksv1alpha1.TokenAnnotation: "5"}}}
	held.Spec.HolderIdentity = new("me")
	cs.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "leases"}, "lock", errors.New("changed"))
	})
	g := l.newGrant(held, 5, time.Now())
	if err := g.Renew(ctx); !errors.Is(err, ErrLost) || !errors.Is(g.Err(), ErrLost) {
		t.Errorf("Renew of a grant whose Lease is gone: %v (grant: %v)", err, g.Err())
	}
}
