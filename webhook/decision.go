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
	"errors"
	"fmt"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/fence"
	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/token"
)

// Reasons label decisions in metrics and events. One shared with the controller's events is
// defined in the API package, once.
const (
	ReasonCurrent              = "Current"
	ReasonUnfenced             = "Unfenced"
	ReasonNamespaceTerminating = "NamespaceTerminating"
	ReasonMissingToken         = "MissingToken"
	ReasonMalformedToken       = "MalformedToken"
	ReasonStaleToken           = "StaleToken"
	ReasonStaleObjectToken     = "StaleObjectToken"
	ReasonForgedToken          = "ForgedToken"
	ReasonLockNotFound         = locksv1alpha1.ReasonLockNotFound
	ReasonLockNotReady         = "LockNotReady"
	ReasonInvalidLabel         = "InvalidLabel"
	ReasonRelabel              = "Relabel"
	ReasonNotHolder            = "NotHolder"
	ReasonNotHeld              = "NotHeld"
	ReasonPolicyMissing        = "PolicyMissing"
	ReasonFinalizing           = "Finalizing"
	ReasonSubresource          = "Subresource"
	ReasonStatusUnfenced       = "StatusUnfenced"
	ReasonTokenMismatch        = "TokenMismatch"
)

// statusSubresource is the subresource whose writes are fenced by the lock's choice.
const statusSubresource = "status"

// podUIDExtra is the userInfo.extra key carrying the pod UID of a pod's service-account token.
const podUIDExtra = "authentication.kubernetes.io/pod-uid"

// Request is what the fence needs of an admission request.
type Request struct {
	Operation admissionv1.Operation
	// Object names the object in messages, e.g. "configmaps default/ledger".
	Object string
	// Subresource is the subresource written ("scale"), empty for the object itself. Eviction is
	// not one: it is judged as the DELETE it is.
	Subresource string
	// Old is the stored object (UPDATE, DELETE), New the object as written (CREATE, UPDATE).
	Old, New *metav1.ObjectMeta
	User     authenticationv1.UserInfo
	// Finalizing is true for an UPDATE of an object being deleted that only removes finalizers.
	Finalizing bool
	// NamespaceTerminating is nil until the handler looked it up; Decide asks for it (NeedNamespace)
	// only before refusing a DELETE.
	NamespaceTerminating *bool
}

// Lock is what the fence knows of the lock guarding the object.
type Lock struct {
	// Key is namespace/name.
	Key   string
	Found bool
	Spec  locksv1alpha1.FenceSpec
	// Lease is the lock state; LeaseFound false if its Lease is missing.
	Lease      lease.State
	LeaseFound bool
	// LeaseForeign is true when a Lease of the lock's name exists but is not the manager's Lease
	// of the FencedLock (lease.CheckLockLease); LeaseFound is then false.
	LeaseForeign bool
	// Live is true when Lease was read from etcd rather than from the cache.
	Live bool
}

// Decision is the fence's answer.
type Decision struct {
	Allowed bool
	Reason  string
	Message string
	// NeedLive asks the caller to read the Lease live and decide again: the presented token is
	// above the cached current token, which a lagging cache explains as well as a forgery, or (a
	// semaphore) a held permit's token below the object's, which only a view at least as new as
	// that write can confirm is still held.
	NeedLive bool
	// NeedNamespace asks the caller to fill Request.NamespaceTerminating and decide again.
	NeedNamespace bool
	// Presented is the token the request was judged by, zero if none.
	Presented token.Token
}

func allow(reason string) Decision { return Decision{Allowed: true, Reason: reason} }

func deny(reason, format string, args ...any) Decision {
	return Decision{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

func lockLabel(m *metav1.ObjectMeta) string {
	if m == nil {
		return ""
	}
	return m.Labels[locksv1alpha1.FencedByLabel]
}

func fenced(m *metav1.ObjectMeta) bool {
	if m == nil {
		return false
	}
	_, ok := m.Labels[locksv1alpha1.FencedByLabel]
	return ok
}

// Target returns the name of the lock whose token a request must satisfy, or a final decision
// when the labels alone decide it. A write that removes the fence label needs a token of the lock
// it leaves; moving an object from one lock to another takes two writes (remove, then add).
func Target(req Request) (string, *Decision) {
	oldFenced, newFenced := fenced(req.Old), fenced(req.New)
	if req.Subresource != "" && req.Subresource != statusSubresource && (oldFenced || newFenced) && !presentsRequestToken(req) {
		// A subresource write (scale, ephemeral containers, resize) has no metadata of its own to
		// present a token in, yet changes the object: only a token carried by the request can.
		d := deny(ReasonSubresource, "%s is fenced by lock %s: a write through its /%s subresource cannot present a fencing "+
			"token in the object: present it with the request (userInfo.extra %s, by impersonating yourself), or make "+
			"the change with a fenced write to the object itself (annotation %s)",
			req.Object, lockLabel(req.Old), req.Subresource, locksv1alpha1.TokenExtra, locksv1alpha1.TokenAnnotation)
		return "", &d
	}
	var name string
	switch {
	case oldFenced && newFenced && lockLabel(req.Old) != lockLabel(req.New):
		d := deny(ReasonRelabel, "%s: moving a fenced object from lock %q to lock %q needs two writes: "+
			"remove label %s with a token of %q, then add it with a token of %q",
			req.Object, lockLabel(req.Old), lockLabel(req.New), locksv1alpha1.FencedByLabel, lockLabel(req.Old), lockLabel(req.New))
		return "", &d
	case oldFenced:
		name = lockLabel(req.Old)
	case newFenced:
		name = lockLabel(req.New)
	default:
		d := allow(ReasonUnfenced)
		return "", &d
	}
	if err := locksv1alpha1.ValidateLockName(name); err != nil {
		d := deny(ReasonInvalidLabel, "%s: label %s=%q does not name a FencedLock: %v",
			req.Object, locksv1alpha1.FencedByLabel, name, err)
		return "", &d
	}
	return name, nil
}

// Decide applies the fence to a request for an object guarded by lk. It is pure: the caller
// supplies every fact and re-decides when asked for a live Lease or the namespace phase.
//
// A write is judged only by the token it presents itself: the token-record admission policy has
// already moved a presented fencedlock.io/token into fencedlock.io/recorded-token of the object as
// written, and cleared it when none was presented. A DELETE presents nothing and is judged by the
// stored object's record.
func Decide(req Request, lk Lock) Decision {
	if req.Finalizing {
		// The deletion was admitted already; refusing the write that removes a finalizer would
		// leave the object, and its namespace, stuck forever.
		return allow(ReasonFinalizing)
	}
	if req.Subresource == statusSubresource && !presentsRequestToken(req) &&
		(!lk.Found || lk.Spec.StatusWrites != locksv1alpha1.StatusWritesFenced) {
		// Status fencing is the lock's choice: a writer that claims no token (the built-in
		// controllers writing a Deployment's status) is judged only if the lock opted in.
		return allow(ReasonStatusUnfenced)
	}
	if !lk.Found {
		return denyDelete(req, deny(ReasonLockNotFound, "%s is fenced by lock %s, which does not exist: create the FencedLock "+
			"(writes, label removal and deletion of fenced objects all need one of its tokens)", req.Object, lk.Key))
	}
	if !lk.LeaseFound || !lk.Lease.Initialized() {
		why := "its Lease has no token"
		if lk.LeaseForeign {
			why = "the Lease at its name is not owned by the FencedLock or not the manager's (see the lock's Ready condition)"
		}
		return denyDelete(req, deny(ReasonLockNotReady, "lock %s is not ready yet (%s): retry in a moment", lk.Key, why))
	}
	presented, d := presentedToken(req, lk)
	if d != nil {
		return denyDelete(req, *d)
	}
	decided := decideToken(req, lk, presented)
	decided.Presented = presented
	return decided
}

// decideToken judges a request by the token it presents.
func decideToken(req Request, lk Lock, presented token.Token) Decision {
	var recorded token.Token
	if fenced(req.Old) { // Target refused a move between locks: the stored record is of this lock
		recorded = recordedToken(req.Old)
	}
	if d := judge(req, lk, presented, recorded); d != nil {
		return denyDelete(req, *d)
	}
	if lk.Spec.HolderBinding {
		if d := checkHolder(req, lk, presented); d != nil {
			return denyDelete(req, *d)
		}
	}
	return allow(ReasonCurrent)
}

// presentsRequestToken reports whether the request carries a token of its own (TokenExtra).
func presentsRequestToken(req Request) bool {
	_, ok := req.User.Extra[locksv1alpha1.TokenExtra]
	return ok
}

// presentedToken is the token a request is judged by, or the refusal when it has none. A token
// carried by the request (TokenExtra) wins over the object's: it is the only one a DELETE or a
// subresource write can present.
func presentedToken(req Request, lk Lock) (token.Token, *Decision) {
	if presentsRequestToken(req) {
		return requestToken(req, lk)
	}
	if req.Subresource == statusSubresource {
		d := deny(ReasonMissingToken, "%s: lock %s fences status writes (spec.fence.statusWrites: Fenced): present the "+
			"writer's fencing token with the request (userInfo.extra %s, by impersonating yourself)",
			req.Object, lk.Key, locksv1alpha1.TokenExtra)
		return 0, &d
	}
	if req.Operation == admissionv1.Delete {
		// A delete carries no token: the object's own recorded token must still be held, so a
		// holder that lost the lock cannot delete what it (or its successor) wrote.
		t := recordedToken(req.Old)
		if t.IsZero() {
			d := deny(ReasonMissingToken, "%s carries no valid %s annotation: delete it presenting the current token of "+
				"lock %s with the request (userInfo.extra %s), or stamp it first (a fenced update presenting %s)",
				req.Object, locksv1alpha1.RecordedTokenAnnotation, lk.Key, locksv1alpha1.TokenExtra, locksv1alpha1.TokenAnnotation)
			return 0, &d
		}
		return t, nil
	}
	if _, ok := req.New.Annotations[locksv1alpha1.TokenAnnotation]; ok {
		// The token-record policy did not run: judging this write would let its token be stored
		// and inherited by the next write.
		d := deny(ReasonPolicyMissing, "%s: annotation %s reached the fence unrecorded: the MutatingAdmissionPolicy "+
			"that records tokens (config/policy/token_record.yaml) is not installed or not bound; install config/policy",
			req.Object, locksv1alpha1.TokenAnnotation)
		return 0, &d
	}
	raw, ok := req.New.Annotations[locksv1alpha1.RecordedTokenAnnotation]
	if !ok {
		d := deny(ReasonMissingToken, "writes to %s must present annotation %s with the writer's fencing token "+
			"for lock %s, every time (a stored object keeps no token to inherit; in a pod: $FENCING_TOKEN). %s",
			req.Object, locksv1alpha1.TokenAnnotation, lk.Key, shellRemedy(lk.Key))
		return 0, &d
	}
	t, err := token.Parse(raw)
	if err != nil {
		d := deny(ReasonMalformedToken, "%s: annotation %s: %v", req.Object, locksv1alpha1.TokenAnnotation, err)
		return 0, &d
	}
	return t, nil
}

// requestToken is the token a request carries in TokenExtra. A write of the object itself must
// also have it recorded by the token-record policy, which records it on the object for the next
// write's rule (b); a token in the annotation too must be the same.
func requestToken(req Request, lk Lock) (token.Token, *Decision) {
	vals := req.User.Extra[locksv1alpha1.TokenExtra]
	if len(vals) != 1 {
		d := deny(ReasonMalformedToken, "%s: the request presents %d values of userInfo.extra %s for lock %s; present exactly one",
			req.Object, len(vals), locksv1alpha1.TokenExtra, lk.Key)
		return 0, &d
	}
	t, err := token.Parse(vals[0])
	if err != nil {
		d := deny(ReasonMalformedToken, "%s: userInfo.extra %s: %v", req.Object, locksv1alpha1.TokenExtra, err)
		return 0, &d
	}
	if req.Operation == admissionv1.Delete || req.Subresource != "" {
		return t, nil // nothing is recorded: the object keeps the record of its last fenced write
	}
	if _, ok := req.New.Annotations[locksv1alpha1.TokenAnnotation]; ok {
		d := deny(ReasonPolicyMissing, "%s: annotation %s reached the fence unrecorded: the MutatingAdmissionPolicy "+
			"that records tokens (config/policy/token_record.yaml) is not installed or not bound; install config/policy",
			req.Object, locksv1alpha1.TokenAnnotation)
		return 0, &d
	}
	switch rec, ok := req.New.Annotations[locksv1alpha1.RecordedTokenAnnotation]; {
	case !ok:
		d := deny(ReasonPolicyMissing, "%s: the token presented with the request (userInfo.extra %s) reached the fence "+
			"unrecorded: the token-record policy (config/policy/token_record.yaml) is older than request tokens; install config/policy",
			req.Object, locksv1alpha1.TokenExtra)
		return 0, &d
	case rec != vals[0]:
		d := deny(ReasonTokenMismatch, "%s: the write presents token %s in annotation %s and %s with the request "+
			"(userInfo.extra %s); present one token", req.Object, rec, locksv1alpha1.TokenAnnotation, vals[0], locksv1alpha1.TokenExtra)
		return 0, &d
	}
	return t, nil
}

// judge applies the token rules: not below the object's record (b), not below (c) nor above (d)
// the lock's current token, and held now (e). Refusals that a lagging cache could explain ask for
// a live read first, so the current holder is never refused because of cache lag. A semaphore is
// judged by its own rule (judgePermit).
func judge(req Request, lk Lock, presented, recorded token.Token) *Decision {
	if lk.Lease.Semaphore {
		return judgePermit(req, lk, presented, recorded)
	}
	err := fence.Check(lk.Key, presented, recorded, lk.Lease.Token)
	// errors.AsType, unlike errors.As, keeps these off the heap: an admitted write allocates nothing.
	_, isForged := errors.AsType[*fence.ForgedTokenError](err)
	stale, isStale := errors.AsType[*fence.StaleTokenError](err)
	switch {
	case err == nil && !lk.Lease.Held() && !lk.Live:
		return &Decision{NeedLive: true}
	case err == nil && !lk.Lease.Held():
		how := "released by its holder"
		if lk.Lease.RevokedToken == presented {
			how = "revoked by the controller because its lease expired"
		}
		remedy := "acquire the lock and write with the new token"
		if req.Operation == admissionv1.Delete {
			remedy = deleteRemedy
		}
		d := deny(ReasonNotHeld, "%s: fencing token %s of lock %s is no longer held (%s): %s",
			req.Object, presented, lk.Key, how, remedy)
		return &d
	case err == nil:
		return nil
	case isForged && !lk.Live:
		return &Decision{NeedLive: true}
	case isForged:
		d := deny(ReasonForgedToken, "%s: %v", req.Object, err)
		return &d
	case req.Operation == admissionv1.Delete && isStale && !presentsRequestToken(req):
		d := deny(ReasonStaleToken, "%s: the object was last written with token %s, and lock %s has moved on to token %s: %s",
			req.Object, presented, lk.Key, stale.Current, deleteRemedy)
		return &d
	case isStale && stale.ByObject && !lk.Live && recorded > lk.Lease.Token:
		// The object was written with a token this view has not seen issued: the view is older
		// than that write, and the lock may have become a semaphore since (spec.permits raised),
		// whose holders write in any order. Only a view at least as new can judge.
		return &Decision{NeedLive: true}
	case isStale && stale.ByObject:
		d := deny(ReasonStaleObjectToken, "%s: %v", req.Object, err)
		return &d
	default:
		d := deny(ReasonStaleToken, "%s: %v", req.Object, err)
		return &d
	}
}

// deleteRemedy is what a refused DELETE must do: only a holder of the lock may delete.
const deleteRemedy = "stamp the object with the current token (a fenced update, as the lock's holder), then delete it; " +
	"or delete it presenting the current token with the request (userInfo.extra " + locksv1alpha1.TokenExtra + ")"

// judgePermit applies the semaphore's rule (docs/design.md, the fence of a semaphore): the presented token
// must be the token of a permit held now. Its holders write the same objects in any order, so the
// object's record does not bound the token as it does for a lock; instead a held token below the
// record is confirmed live, because only a view at least as new as the write that recorded it can
// tell that the permit was not revoked since. A token above the last issued one is confirmed live
// before it is refused (a lagging cache explains it as well as a forgery), and one at or below it
// that the view shows not held is refused at once: every later grant has a higher token, so a
// permit that ended never comes back, however old the view.
func judgePermit(req Request, lk Lock, presented, recorded token.Token) *Decision {
	st := &lk.Lease
	_, held := st.HeldToken(presented)
	err := fence.CheckPermit(lk.Key, presented, recorded, st.Token, held)
	if err == nil {
		if presented < recorded && !lk.Live {
			return &Decision{NeedLive: true}
		}
		return nil
	}
	if _, forged := err.(*fence.ForgedTokenError); forged && !lk.Live {
		return &Decision{NeedLive: true}
	}
	notHeld, ok := err.(*fence.NotHeldError)
	if !ok {
		d := deny(ReasonForgedToken, "%s: %v", req.Object, err)
		return &d
	}
	notHeld.Limit = st.Limit
	notHeld.Held = make([]token.Token, len(st.Permits))
	for i, p := range st.Permits {
		notHeld.Held[i] = p.Token
	}
	if st.RevokedToken == presented {
		notHeld.How = "revoked by the controller because its lease expired"
	}
	remedy := "acquire a permit and write with its token"
	if req.Operation == admissionv1.Delete {
		remedy = "stamp the object with the token of a permit you hold (a fenced update), then delete it"
	}
	reason := ReasonNotHeld
	if !notHeld.Written.IsZero() {
		reason = ReasonStaleObjectToken
	}
	d := deny(reason, "%s: %v: %s", req.Object, err, remedy)
	return &d
}

// denyDelete lets a DELETE through when its namespace is being deleted (nothing is left to
// protect, and a stuck namespace helps nobody); other refusals stand.
func denyDelete(req Request, d Decision) Decision {
	if req.Operation != admissionv1.Delete || d.Allowed {
		return d
	}
	switch {
	case req.NamespaceTerminating == nil:
		return Decision{NeedNamespace: true}
	case *req.NamespaceTerminating:
		return allow(ReasonNamespaceTerminating)
	}
	return d
}

// checkHolder enforces holderBinding: the writer must be the principal holding the lock, with
// the holder's token; for a semaphore, the principal holding the permit with the presented token.
func checkHolder(req Request, lk Lock, presented token.Token) *Decision {
	st := &lk.Lease
	if st.Semaphore {
		p, ok := st.HeldToken(presented)
		if !ok { // judgePermit refused it already; kept so that this check stands on its own
			d := deny(ReasonNotHolder, "%s: semaphore %s requires writes by its holders (spec.fence.holderBinding) and "+
				"token %s is not held now; acquire a permit and write with your own credentials", req.Object, lk.Key, presented)
			return &d
		}
		if isPrincipal(req.User, p.Holder) {
			return nil
		}
		d := deny(ReasonNotHolder, "%s: semaphore %s requires writes by the holder of the permit with token %s, %s "+
			"(spec.fence.holderBinding), but %s wrote; a token copied to another principal cannot be used",
			req.Object, lk.Key, presented, p.Holder, req.User.Username)
		return &d
	}
	if !st.Held() || presented != st.Token {
		d := deny(ReasonNotHolder, "%s: lock %s requires writes by its holder (spec.fence.holderBinding) and "+
			"token %s is not held now; acquire the lock and write with your own credentials", req.Object, lk.Key, presented)
		return &d
	}
	if isPrincipal(req.User, st.Holder) {
		return nil
	}
	d := deny(ReasonNotHolder, "%s: lock %s requires writes by its holder %s (spec.fence.holderBinding), "+
		"but %s wrote; a token copied to another principal cannot be used", req.Object, lk.Key, st.Holder, req.User.Username)
	return &d
}

// isPrincipal reports whether user is holder: the pod whose UID its service-account token
// claims, for a pod holder; the user named, or the user before a slash ("alice/laptop-1").
func isPrincipal(user authenticationv1.UserInfo, holder string) bool {
	if uid, ok := strings.CutPrefix(holder, locksv1alpha1.PodHolderPrefix); ok {
		if i := strings.LastIndex(uid, "/"); i >= 0 {
			uid = uid[i+1:]
		}
		return slices.Contains(user.Extra[podUIDExtra], uid)
	}
	return user.Username == holder || strings.HasPrefix(holder, user.Username+"/")
}

// recordedToken is the token the stored object was last written with, zero if none or malformed.
func recordedToken(m *metav1.ObjectMeta) token.Token {
	if m == nil {
		return 0
	}
	t, _ := token.Parse(m.Annotations[locksv1alpha1.RecordedTokenAnnotation])
	return t
}

// shellRemedy says how to write with a token from a shell, as commands that work as pasted. The
// fence cannot tell whether the refused write ran under "kubectl fencedlock run" (plain kubectl
// presents no token there either, the usual mistake), so it names the writer that stamps one.
func shellRemedy(key string) string {
	ns, name, _ := strings.Cut(key, "/")
	return fmt.Sprintf("From a shell, write through the plugin, which stamps the token: "+
		"kubectl fencedlock run %[2]s -n %[1]s -- kubectl fencedlock apply -f FILE --lock %[2]s "+
		"(plain kubectl sends no token, even under kubectl fencedlock run; there, pipe it: "+
		"kubectl fencedlock stamp -f FILE --lock %[2]s | kubectl apply -f -)", ns, name)
}

func lockName(key string) string {
	_, name, _ := strings.Cut(key, "/")
	return name
}
