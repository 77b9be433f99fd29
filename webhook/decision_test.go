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
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/token"
)

// obj is object metadata fenced by lock (empty: unfenced) with recorded token tok (empty: none),
// as the fence sees it after the token-record policy: for the object as written, tok is the
// token the write presented.
func obj(lock, tok string) *metav1.ObjectMeta {
	m := &metav1.ObjectMeta{Labels: map[string]string{}, Annotations: map[string]string{}}
	if lock != "" {
		m.Labels[locksv1alpha1.FencedByLabel] = lock
	}
	if tok != "" {
		m.Annotations[locksv1alpha1.RecordedTokenAnnotation] = tok
	}
	return m
}

// unrecorded is a write whose presented token the token-record policy did not move.
func unrecorded(m *metav1.ObjectMeta, tok string) *metav1.ObjectMeta {
	m.Annotations[locksv1alpha1.TokenAnnotation] = tok
	return m
}

func revoked(l Lock) Lock { l.Lease.RevokedToken = l.Lease.Token; return l }

func ready(current uint64, holder string) Lock {
	return Lock{Key: "default/settlement", Found: true, LeaseFound: true,
		Lease: lease.State{Token: token.Token(current), Holder: holder}}
}

func live(l Lock) Lock { l.Live = true; return l }

const (
	create = admissionv1.Create
	update = admissionv1.Update
	del    = admissionv1.Delete
)

func TestDecide(t *testing.T) {
	sa := authenticationv1.UserInfo{Username: "system:serviceaccount:default:worker",
		Extra: map[string]authenticationv1.ExtraValue{podUIDExtra: {"uid-1"}}}
	bound := func(l Lock) Lock { l.Spec.HolderBinding = true; return l }
	cases := []struct {
		name      string
		op        admissionv1.Operation
		old, new  *metav1.ObjectMeta
		lock      Lock
		user      authenticationv1.UserInfo
		nsTerm    *bool
		want      string // reason; "" with needLive/needNS
		needLive  bool
		needNS    bool
		inMessage string
		// finalizing marks an update that only removes finalizers of an object being deleted.
		finalizing bool
	}{
		// rule (a): well-formed
		{name: "create with the current token", op: create, new: obj("settlement", "34"), lock: ready(34, "b"), want: ReasonCurrent},
		{name: "missing token", op: create, new: obj("settlement", ""), lock: ready(34, "b"), want: ReasonMissingToken,
			inMessage: "must present annotation fencedlock.io/token"},
		{name: "update presenting no token inherits nothing from the stored object", op: update, old: obj("settlement", "34"),
			new: obj("settlement", ""), lock: ready(34, "b"), want: ReasonMissingToken, inMessage: "every time"},
		{name: "token not recorded: the policy is missing", op: update, old: obj("settlement", "34"),
			new: unrecorded(obj("settlement", ""), "34"), lock: ready(34, "b"), want: ReasonPolicyMissing, inMessage: "install config/policy"},
		{name: "empty token", op: create, new: obj("settlement", "x"), lock: ready(34, "b"), want: ReasonMalformedToken},
		{name: "negative token", op: create, new: obj("settlement", "-34"), lock: ready(34, "b"), want: ReasonMalformedToken},
		{name: "non-decimal token", op: create, new: obj("settlement", "0x22"), lock: ready(34, "b"), want: ReasonMalformedToken},
		{name: "leading zero", op: create, new: obj("settlement", "034"), lock: ready(34, "b"), want: ReasonMalformedToken},
		{name: "whitespace", op: create, new: obj("settlement", " 34"), lock: ready(34, "b"), want: ReasonMalformedToken},
		{name: "trailing newline", op: create, new: obj("settlement", "34\n"), lock: ready(34, "b"), want: ReasonMalformedToken},
		{name: "huge", op: create, new: obj("settlement", "99999999999999999999999"), lock: ready(34, "b"), want: ReasonMalformedToken},
		// rule (c): not lower than the lock's current token
		{name: "one below the lock", op: update, old: obj("settlement", "33"), new: obj("settlement", "33"), lock: ready(34, "b"),
			want: ReasonStaleToken, inMessage: "stale fencing token 33 for lock default/settlement: the lock was re-acquired with token 34; re-acquire and retry"},
		// rule (e): held now; a free lock in the cache is confirmed live before refusing
		{name: "released lock in the cache asks for a live read", op: update, old: obj("settlement", "34"), new: obj("settlement", "34"),
			lock: ready(34, ""), needLive: true},
		{name: "released token refused", op: update, old: obj("settlement", "34"), new: obj("settlement", "34"),
			lock: live(ready(34, "")), want: ReasonNotHeld, inMessage: "is no longer held (released by its holder)"},
		{name: "revoked token refused", op: update, old: obj("settlement", "34"), new: obj("settlement", "34"),
			lock: live(revoked(ready(34, ""))), want: ReasonNotHeld, inMessage: "revoked by the controller"},
		{name: "released lock: delete refused with what to do", op: del, old: obj("settlement", "34"), nsTerm: new(false),
			lock: live(ready(34, "")), want: ReasonNotHeld, inMessage: "stamp the object with the current token"},
		// rule (d): not above any issued token, confirmed live before refusing
		{name: "one above the cached lock asks for a live read", op: update, old: obj("settlement", "34"), new: obj("settlement", "35"),
			lock: ready(34, "b"), needLive: true},
		{name: "one above the live lock is forged", op: update, old: obj("settlement", "34"), new: obj("settlement", "35"),
			lock: live(ready(34, "b")), want: ReasonForgedToken, inMessage: "was never issued"},
		{name: "cache lagged: live lock has the token", op: update, old: obj("settlement", "34"), new: obj("settlement", "35"),
			lock: live(ready(35, "c")), want: ReasonCurrent},
		// rule (b): not lower than the object's recorded token (exact even when the cache lags)
		{name: "lower than the object though equal to the lagging cache", op: update, old: obj("settlement", "35"),
			new: obj("settlement", "34"), lock: ready(34, "b"), want: ReasonStaleObjectToken,
			inMessage: "the object was already written with token 35"},
		{name: "equal to the object", op: update, old: obj("settlement", "34"), new: obj("settlement", "34"), lock: ready(34, "b"), want: ReasonCurrent},
		{name: "object token of another lock is ignored when fencing starts", op: update, old: obj("", "900"),
			new: obj("settlement", "34"), lock: ready(34, "b"), want: ReasonCurrent},
		{name: "malformed stored token does not block the holder", op: update, old: obj("settlement", "garbage"),
			new: obj("settlement", "34"), lock: ready(34, "b"), want: ReasonCurrent},
		// lock problems: fail closed
		{name: "lock missing", op: create, new: obj("settlement", "34"), lock: Lock{Key: "default/settlement"}, want: ReasonLockNotFound},
		{name: "lease missing", op: create, new: obj("settlement", "34"), lock: Lock{Key: "default/settlement", Found: true}, want: ReasonLockNotReady},
		{name: "lease not initialized", op: create, new: obj("settlement", "34"), lock: ready(0, ""), want: ReasonLockNotReady},
		{name: "lease not owned by the lock", op: create, new: obj("settlement", "34"),
			lock: Lock{Key: "default/settlement", Found: true, LeaseForeign: true}, want: ReasonLockNotReady, inMessage: "not owned"},
		// label changes
		{name: "remove the label with the current token", op: update, old: obj("settlement", "34"), new: obj("", "34"), lock: ready(34, "b"), want: ReasonCurrent},
		{name: "remove the label with a stale token", op: update, old: obj("settlement", "33"), new: obj("", "33"), lock: ready(34, "b"), want: ReasonStaleToken},
		{name: "remove the label without a token", op: update, old: obj("settlement", "34"), new: obj("", ""), lock: ready(34, "b"), want: ReasonMissingToken},
		{name: "remove the label below the object's token", op: update, old: obj("settlement", "35"), new: obj("", "34"),
			lock: ready(34, "b"), want: ReasonStaleObjectToken, inMessage: "already written with token 35"},
		// DELETE: the stored token must still be current
		{name: "delete by the current epoch", op: del, old: obj("settlement", "34"), lock: ready(34, "b"), want: ReasonCurrent},
		{name: "delete of an object written before the lock moved on", op: del, old: obj("settlement", "33"), lock: ready(34, "b"), needNS: true},
		{name: "stale delete refused", op: del, old: obj("settlement", "33"), lock: ready(34, "b"), nsTerm: new(false), want: ReasonStaleToken,
			inMessage: "stamp the object with the current token (a fenced update, as the lock's holder), then delete it"},
		{name: "delete without a recorded token refused", op: del, old: obj("settlement", ""), lock: ready(34, "b"), nsTerm: new(false),
			want: ReasonMissingToken, inMessage: "then delete it"},
		{name: "delete during namespace termination", op: del, old: obj("settlement", "33"), lock: ready(34, "b"), nsTerm: new(true),
			want: ReasonNamespaceTerminating},
		{name: "delete with the lock gone stays refused", op: del, old: obj("settlement", "33"), lock: Lock{Key: "default/settlement"},
			nsTerm: new(false), want: ReasonLockNotFound},
		{name: "delete with the lock gone in a terminating namespace", op: del, old: obj("settlement", "33"),
			lock: Lock{Key: "default/settlement"}, nsTerm: new(true), want: ReasonNamespaceTerminating},
		{name: "delete with the lease not ready in a terminating namespace", op: del, old: obj("settlement", "33"),
			lock: Lock{Key: "default/settlement", Found: true}, nsTerm: new(true), want: ReasonNamespaceTerminating},
		{name: "delete refused by holder binding in a terminating namespace", op: del, old: obj("settlement", "34"),
			lock: bound(ready(34, "alice2")), user: authenticationv1.UserInfo{Username: "mallory"}, nsTerm: new(true),
			want: ReasonNamespaceTerminating},
		{name: "finalizer removal on an object being deleted", op: update, old: obj("settlement", "33"), new: obj("settlement", ""),
			lock: ready(34, "b"), finalizing: true, want: ReasonFinalizing},
		// holder binding
		{name: "bound: pod holder writes with its own token", op: update, old: obj("settlement", "34"), new: obj("settlement", "34"),
			lock: bound(ready(34, "pod/worker-0/uid-1")), user: sa, want: ReasonCurrent},
		{name: "bound: another pod replays the token", op: update, old: obj("settlement", "34"), new: obj("settlement", "34"),
			lock: bound(ready(34, "pod/worker-1/uid-2")), user: sa, want: ReasonNotHolder, inMessage: "cannot be used"},
		{name: "bound: user holder", op: update, old: obj("settlement", "34"), new: obj("settlement", "34"),
			lock: bound(ready(34, "alice/laptop-1")), user: authenticationv1.UserInfo{Username: "alice"}, want: ReasonCurrent},
		{name: "bound: user prefix is not enough without the slash", op: update, old: obj("settlement", "34"), new: obj("settlement", "34"),
			lock: bound(ready(34, "alice2")), user: authenticationv1.UserInfo{Username: "alice"}, want: ReasonNotHolder},
		{name: "bound: released lock refuses", op: update, old: obj("settlement", "34"), new: obj("settlement", "34"),
			lock: live(bound(ready(34, ""))), user: authenticationv1.UserInfo{Username: "alice"}, want: ReasonNotHeld},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := Request{Operation: tc.op, Object: "configmaps default/ledger", Old: tc.old, New: tc.new, User: tc.user,
				NamespaceTerminating: tc.nsTerm, Finalizing: tc.finalizing}
			d := Decide(req, tc.lock)
			if d.NeedLive != tc.needLive || d.NeedNamespace != tc.needNS {
				t.Fatalf("Decide = %+v; want needLive=%v needNamespace=%v", d, tc.needLive, tc.needNS)
			}
			if tc.needLive || tc.needNS {
				return
			}
			if d.Reason != tc.want {
				t.Fatalf("Decide reason = %s (%s); want %s", d.Reason, d.Message, tc.want)
			}
			if d.Allowed != (tc.want == ReasonCurrent || tc.want == ReasonNamespaceTerminating || tc.want == ReasonFinalizing) {
				t.Fatalf("Decide allowed = %v for reason %s", d.Allowed, d.Reason)
			}
			if !d.Allowed && !strings.Contains(d.Message, tc.inMessage) {
				t.Fatalf("message %q does not contain %q", d.Message, tc.inMessage)
			}
		})
	}
}

func TestTarget(t *testing.T) {
	cases := []struct {
		name     string
		old, new *metav1.ObjectMeta
		wantLock string
		want     string // final reason, "" when a lock must be consulted
	}{
		{"unfenced", obj("", ""), obj("", ""), "", ReasonUnfenced},
		{"create fenced", nil, obj("settlement", "1"), "settlement", ""},
		{"fence label removed", obj("settlement", "1"), obj("", "1"), "settlement", ""},
		{"fence label added", obj("", ""), obj("settlement", "1"), "settlement", ""},
		{"moved to another lock", obj("a", "1"), obj("b", "1"), "", ReasonRelabel},
		{"empty label value", nil, obj("", ""), "", ReasonUnfenced},
		{"label value that is no lock name", nil, obj("Not_A_Lock", "1"), "", ReasonInvalidLabel},
		{"scale of a fenced object", obj("settlement", "1"), obj("settlement", "1"), "", ReasonSubresource},
		{"scale of an unfenced object", obj("", ""), obj("", ""), "", ReasonUnfenced},
	}
	cases[5].new.Labels[locksv1alpha1.FencedByLabel] = ""
	cases[5].want = ReasonInvalidLabel
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := Request{Object: "configmaps default/ledger", Old: tc.old, New: tc.new}
			if strings.HasPrefix(tc.name, "scale") {
				req.Subresource = "scale"
			}
			name, d := Target(req)
			if tc.want == "" {
				if d != nil || name != tc.wantLock {
					t.Fatalf("Target = %q, %+v; want lock %q", name, d, tc.wantLock)
				}
				return
			}
			if d == nil || d.Reason != tc.want {
				t.Fatalf("Target = %q, %+v; want %s", name, d, tc.want)
			}
		})
	}
}

func BenchmarkDecide(b *testing.B) {
	req := Request{Operation: update, Object: "configmaps default/ledger", Old: obj("settlement", "34"), New: obj("settlement", "34")}
	lk := ready(34, "b")
	b.ReportAllocs()
	for b.Loop() {
		if d := Decide(req, lk); !d.Allowed {
			b.Fatal(d.Message)
		}
	}
}
