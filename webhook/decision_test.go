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
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
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

// ready is lock default/settlement with token current held by holder (empty: free), as
// lease.Read parses its Lease.
func ready(current uint64, holder string) Lock {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "settlement",
		Annotations: map[string]string{locksv1alpha1.TokenAnnotation: token.Token(current).String()}}}
	if current == 0 {
		delete(l.Annotations, locksv1alpha1.TokenAnnotation)
	}
	if holder != "" {
		l.Spec.HolderIdentity = &holder
	}
	return Lock{Key: "default/settlement", Found: true, LeaseFound: true, Lease: readLease(l)}
}

func readLease(l *coordinationv1.Lease) lease.State {
	st, err := lease.Read(l)
	if err != nil {
		panic(err)
	}
	return st
}

// held is a permit of a semaphore: its token and holder.
type held struct {
	tok    uint64
	holder string
}

// sem is semaphore default/pool admitting limit holders, whose last issued token is last and
// whose permits held now are permits, as lease.Read parses its Lease (permit annotations).
func sem(limit int, last uint64, permits ...held) Lock {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "pool",
		Annotations: map[string]string{locksv1alpha1.TokenAnnotation: token.Token(last).String(),
			locksv1alpha1.PermitsAnnotation: strconv.Itoa(limit)}}}
	at := metav1.NewMicroTime(time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC))
	for i, p := range permits {
		l.Annotations[locksv1alpha1.PermitAnnotation(i+1)] = lease.Permit{Number: i + 1, Holder: p.holder,
			Token: token.Token(p.tok), AcquireTime: &at, RenewTime: &at}.String()
	}
	st := readLease(l)
	if !st.Semaphore || len(st.Permits) != len(permits) {
		panic(fmt.Sprintf("sem: read %+v", st))
	}
	return Lock{Key: "default/pool", Found: true, LeaseFound: true, Lease: st}
}

// revokedTok records tok as the token the controller revoked last.
func revokedTok(l Lock, tok uint64) Lock { l.Lease.RevokedToken = token.Token(tok); return l }

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
	cases := []decideCase{
		// rule (a): well-formed
		{name: "create with the current token", op: create, new: obj("settlement", "34"), lock: ready(34, "b"), want: ReasonCurrent},
		{name: "missing token", op: create, new: obj("settlement", ""), lock: ready(34, "b"), want: ReasonMissingToken,
			inMessage: "must present annotation fencedlock.io/token"},
		{name: "update presenting no token inherits nothing from the stored object", op: update, old: obj("settlement", "34"),
			new: obj("settlement", ""), lock: ready(34, "b"), want: ReasonMissingToken, inMessage: "every time"},
		// Issue 46, point 6: the hint suggested "kubectl fencedlock run", which a refused
		// "run ... -- kubectl apply" had run; it names the writer that stamps, with -n.
		{name: "missing token: the shell hint pastes", op: create, new: obj("settlement", ""), lock: ready(34, "b"),
			want: ReasonMissingToken, inMessage: "kubectl fencedlock run settlement -n default -- kubectl fencedlock apply -f FILE " +
				"--lock settlement (plain kubectl sends no token, even under kubectl fencedlock run; there, pipe it: " +
				"kubectl fencedlock stamp -f FILE --lock settlement | kubectl apply -f -)"},
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
		{name: "lower than the object, which the lagging cache has not seen issued: asks for a live read", op: update,
			old: obj("settlement", "35"), new: obj("settlement", "34"), lock: ready(34, "b"), needLive: true},
		{name: "lower than the object, live lock", op: update, old: obj("settlement", "35"),
			new: obj("settlement", "34"), lock: live(ready(35, "c")), want: ReasonStaleToken,
			inMessage: "the lock was re-acquired with token 35"},
		{name: "lower than the object, the lock became a semaphore and still holds it", op: update,
			old: obj("settlement", "35"), new: obj("settlement", "34"),
			lock: live(sem(2, 35, held{34, "b"}, held{35, "c"})), want: ReasonCurrent},
		{name: "lower than the object, held per a lock view that lags behind the write", op: update,
			old: obj("settlement", "35"), new: obj("settlement", "34"), lock: live(ready(34, "b")),
			want: ReasonStaleObjectToken, inMessage: "the object was already written with token 35"},
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
			lock: live(ready(34, "b")), want: ReasonStaleObjectToken, inMessage: "already written with token 35"},
		// DELETE: the stored token must still be current
		{name: "delete by the current epoch", op: del, old: obj("settlement", "34"), lock: ready(34, "b"), want: ReasonCurrent},
		{name: "delete of an object written before the lock moved on", op: del, old: obj("settlement", "33"), lock: ready(34, "b"), needNS: true},
		{name: "stale delete refused", op: del, old: obj("settlement", "33"), lock: ready(34, "b"), nsTerm: new(false), want: ReasonStaleToken,
			inMessage: "stamp the object with the current token (a fenced update, as the lock's holder), then delete it"},
		{name: "delete without a recorded token refused", op: del, old: obj("settlement", ""), lock: ready(34, "b"), nsTerm: new(false),
			want: ReasonMissingToken, inMessage: "or stamp it first"},
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
		t.Run(tc.name, tc.run)
	}
}

// decideCase is one request Decide judges, and what it must answer.
type decideCase struct {
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
	// sub is the subresource written, empty for the object itself.
	sub string
}

func (tc decideCase) run(t *testing.T) {
	req := Request{Operation: tc.op, Object: "configmaps default/ledger", Subresource: tc.sub, Old: tc.old, New: tc.new,
		User: tc.user, NamespaceTerminating: tc.nsTerm, Finalizing: tc.finalizing}
	if _, final := Target(req); final != nil {
		t.Fatalf("Target decided %+v", *final)
	}
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
	if d.Allowed != (tc.want == ReasonCurrent || tc.want == ReasonNamespaceTerminating || tc.want == ReasonFinalizing ||
		tc.want == ReasonStatusUnfenced) {
		t.Fatalf("Decide allowed = %v for reason %s", d.Allowed, d.Reason)
	}
	if !d.Allowed && !strings.Contains(d.Message, tc.inMessage) {
		t.Fatalf("message %q does not contain %q", d.Message, tc.inMessage)
	}
}

// TestDecideSemaphore is the whole-semaphore rule: the presented token must be the token of a
// permit held now. Semaphore default/pool admits 3 holders; in most cases it issued tokens up to
// 130 and permits 120 (worker a) and 130 (worker b) are held.
func TestDecideSemaphore(t *testing.T) {
	a, b := held{120, "worker-a"}, held{130, "worker-b"}
	pool := sem(3, 130, a, b)
	cases := []decideCase{
		// held permits, in any order
		{name: "create with a held permit's token", op: create, new: obj("pool", "130"), lock: pool, want: ReasonCurrent},
		{name: "the lower held token writes the object it wrote last", op: update, old: obj("pool", "120"), new: obj("pool", "120"),
			lock: pool, want: ReasonCurrent},
		{name: "lower held token after the higher one wrote asks for a live read", op: update, old: obj("pool", "130"),
			new: obj("pool", "120"), lock: pool, needLive: true},
		{name: "lower held token after the higher one wrote: live shows it held", op: update, old: obj("pool", "130"),
			new: obj("pool", "120"), lock: live(pool), want: ReasonCurrent},
		{name: "the higher held token after the lower one wrote", op: update, old: obj("pool", "120"), new: obj("pool", "130"),
			lock: pool, want: ReasonCurrent},
		// ended permits: refused at once, even from a lagging cache (a permit that ended never comes back)
		{name: "released permit refused without a live read", op: update, old: obj("pool", "110"), new: obj("pool", "110"),
			lock: pool, want: ReasonNotHeld, inMessage: "fencing token 110 of semaphore default/pool is no longer held " +
				"(its permit was released or revoked); 2 of 3 permits are held now, with tokens 120, 130: acquire a permit and write with its token"},
		{name: "revoked permit refused with why", op: update, old: obj("pool", "110"), new: obj("pool", "110"),
			lock: revokedTok(pool, 110), want: ReasonNotHeld, inMessage: "(revoked by the controller because its lease expired)"},
		{name: "the last issued token, released: no permit held", op: update, old: obj("pool", "130"), new: obj("pool", "130"),
			lock: sem(2, 130), want: ReasonNotHeld, inMessage: "none of its 2 permits is held now"},
		{name: "ended permit below the object's token", op: update, old: obj("pool", "130"), new: obj("pool", "110"),
			lock: pool, want: ReasonStaleObjectToken, inMessage: "and the object was already written with token 130"},
		{name: "token below the last issued that no permit ever had", op: create, new: obj("pool", "125"), lock: pool,
			want: ReasonNotHeld, inMessage: "no longer held"},
		// never issued: above the last issued token, confirmed live before refusing
		{name: "token above the cached last asks for a live read", op: update, old: obj("pool", "130"), new: obj("pool", "131"),
			lock: pool, needLive: true},
		{name: "token above the live last was never issued", op: update, old: obj("pool", "130"), new: obj("pool", "131"),
			lock: live(pool), want: ReasonForgedToken, inMessage: "fencing token 131 for semaphore default/pool was never issued " +
				"(the last token it issued is 130)"},
		// cache lag, both ways
		{name: "cache behind a grant: live shows the new permit", op: update, old: obj("pool", "130"), new: obj("pool", "140"),
			lock: live(sem(3, 140, a, b, held{140, "worker-c"})), want: ReasonCurrent},
		{name: "cache behind a revocation: Cached admits the holder it shows", op: update, old: obj("pool", "120"),
			new: obj("pool", "120"), lock: pool, want: ReasonCurrent},
		{name: "cache behind a revocation: the live view refuses", op: update, old: obj("pool", "120"), new: obj("pool", "120"),
			lock: live(revokedTok(sem(3, 130, b), 120)), want: ReasonNotHeld, inMessage: "revoked by the controller"},
		{name: "revoked token, newer token wrote, cache lags: asks for a live read", op: update, old: obj("pool", "140"),
			new: obj("pool", "120"), lock: pool, needLive: true},
		{name: "revoked token, newer token wrote: live refuses", op: update, old: obj("pool", "140"), new: obj("pool", "120"),
			lock: live(revokedTok(sem(3, 140, b, held{140, "worker-c"}), 120)), want: ReasonStaleObjectToken,
			inMessage: "fencing token 120 of semaphore default/pool is no longer held (revoked by the controller because its lease expired), " +
				"and the object was already written with token 140; 2 of 3 permits are held now, with tokens 130, 140"},
		// label changes
		{name: "remove the label with a held token", op: update, old: obj("pool", "130"), new: obj("", "120"), lock: live(pool),
			want: ReasonCurrent},
		{name: "remove the label with an ended token", op: update, old: obj("pool", "110"), new: obj("", "110"), lock: pool,
			want: ReasonNotHeld},
		// DELETE: the recorded token must be a held permit's
		{name: "delete of an object written with a held permit", op: del, old: obj("pool", "120"), lock: pool, want: ReasonCurrent},
		{name: "delete of an object written with an ended permit asks for the namespace", op: del, old: obj("pool", "110"),
			lock: pool, needNS: true},
		{name: "delete of an object written with an ended permit", op: del, old: obj("pool", "110"), lock: pool,
			nsTerm: new(false), want: ReasonNotHeld,
			inMessage: "stamp the object with the token of a permit you hold (a fenced update), then delete it"},
		{name: "delete of an object written with a revoked permit in a terminating namespace", op: del, old: obj("pool", "110"),
			lock: pool, nsTerm: new(true), want: ReasonNamespaceTerminating},
		{name: "delete of an object recorded above the cached last", op: del, old: obj("pool", "140"), lock: pool,
			nsTerm: new(false), needLive: true},
		{name: "delete of an object written with a just-granted permit", op: del, old: obj("pool", "140"),
			lock: live(sem(3, 140, a, held{140, "worker-c"})), want: ReasonCurrent},
	}
	for _, tc := range cases {
		t.Run(tc.name, tc.run)
	}
}

// TestDecideSemaphoreHolderBinding: with holderBinding, the writer must be the holder of the
// permit whose token it presents, not merely some holder of the semaphore.
func TestDecideSemaphoreHolderBinding(t *testing.T) {
	pod0 := authenticationv1.UserInfo{Username: "system:serviceaccount:default:worker",
		Extra: map[string]authenticationv1.ExtraValue{podUIDExtra: {"uid-0"}}}
	alice := authenticationv1.UserInfo{Username: "alice"}
	bound := func(l Lock) Lock { l.Spec.HolderBinding = true; return l }
	pool := bound(sem(3, 130, held{110, "pod/worker-0/uid-0"}, held{120, "pod/worker-1/uid-1"}, held{130, "alice/laptop-1"}))
	cases := []decideCase{
		{name: "pod writes with its own permit's token", op: update, old: obj("pool", "130"), new: obj("pool", "110"),
			lock: live(pool), user: pod0, want: ReasonCurrent},
		{name: "pod presents another pod's permit token", op: update, old: obj("pool", "110"), new: obj("pool", "120"),
			lock: pool, user: pod0, want: ReasonNotHolder,
			inMessage: "requires writes by the holder of the permit with token 120, pod/worker-1/uid-1"},
		{name: "user writes with her own permit's token", op: update, old: obj("pool", "110"), new: obj("pool", "130"),
			lock: pool, user: alice, want: ReasonCurrent},
		{name: "user presents a pod's permit token", op: update, old: obj("pool", "110"), new: obj("pool", "110"),
			lock: pool, user: alice, want: ReasonNotHolder, inMessage: "a token copied to another principal cannot be used"},
		{name: "ended permit refused before holder binding", op: update, old: obj("pool", "100"), new: obj("pool", "100"),
			lock: pool, user: alice, want: ReasonNotHeld},
		{name: "delete by the holder of the recorded permit", op: del, old: obj("pool", "130"), lock: pool, user: alice,
			want: ReasonCurrent},
		{name: "delete by another holder of the semaphore", op: del, old: obj("pool", "120"), lock: pool, user: alice,
			nsTerm: new(false), want: ReasonNotHolder},
	}
	for _, tc := range cases {
		t.Run(tc.name, tc.run)
	}
}

// TestDecideAdmitsWithoutAllocating: the fence answers every fenced write; admitting one with the
// lock's token, or a held permit's token of a semaphore, allocates nothing.
func TestDecideAdmitsWithoutAllocating(t *testing.T) {
	for name, c := range map[string]struct {
		req Request
		lk  Lock
	}{
		"lock": {Request{Operation: update, Object: "configmaps default/ledger", Old: obj("settlement", "34"),
			New: obj("settlement", "34")}, ready(34, "b")},
		"semaphore": {Request{Operation: update, Object: "configmaps default/ledger", Old: obj("pool", "120"),
			New: obj("pool", "130")}, sem(3, 130, held{120, "worker-a"}, held{130, "worker-b"})},
	} {
		if n := testing.AllocsPerRun(100, func() {
			if d := Decide(c.req, c.lk); !d.Allowed {
				t.Fatal(d.Message)
			}
		}); n != 0 {
			t.Errorf("%s: Decide allocates %v times per admitted write; want 0", name, n)
		}
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

func BenchmarkDecideSemaphore(b *testing.B) {
	req := Request{Operation: update, Object: "configmaps default/ledger", Old: obj("pool", "130"), New: obj("pool", "131")}
	lk := sem(3, 131, held{120, "worker-a"}, held{130, "worker-b"}, held{131, "worker-c"})
	b.ReportAllocs()
	for b.Loop() {
		if d := Decide(req, lk); !d.Allowed {
			b.Fatal(d.Message)
		}
	}
}
