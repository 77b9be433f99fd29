package webhook

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/fence"
	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/token"
)

// Reasons label decisions in metrics and events.
const (
	ReasonCurrent              = "Current"
	ReasonUnfenced             = "Unfenced"
	ReasonNamespaceTerminating = "NamespaceTerminating"
	ReasonMissingToken         = "MissingToken"
	ReasonMalformedToken       = "MalformedToken"
	ReasonStaleToken           = "StaleToken"
	ReasonStaleObjectToken     = "StaleObjectToken"
	ReasonForgedToken          = "ForgedToken"
	ReasonLockNotFound         = "LockNotFound"
	ReasonLockNotReady         = "LockNotReady"
	ReasonInvalidLabel         = "InvalidLabel"
	ReasonRelabel              = "Relabel"
	ReasonNotHolder            = "NotHolder"
)

// podUIDExtra is the userInfo.extra key carrying the pod UID of a pod's service-account token.
const podUIDExtra = "authentication.kubernetes.io/pod-uid"

// Request is what the fence needs of an admission request.
type Request struct {
	Operation admissionv1.Operation
	// Object names the object in messages, e.g. "configmaps default/ledger".
	Object string
	// Old is the stored object (UPDATE, DELETE), New the object as written (CREATE, UPDATE).
	Old, New *metav1.ObjectMeta
	User     authenticationv1.UserInfo
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
	// Live is true when Lease was read from etcd rather than from the cache.
	Live bool
}

// Decision is the fence's answer.
type Decision struct {
	Allowed bool
	Reason  string
	Message string
	// NeedLive asks the caller to read the Lease live and decide again: the presented token is
	// above the cached current token, which a lagging cache explains as well as a forgery.
	NeedLive bool
	// NeedNamespace asks the caller to fill Request.NamespaceTerminating and decide again.
	NeedNamespace bool
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
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		d := deny(ReasonInvalidLabel, "%s: label %s=%q does not name a FencedLock: %s",
			req.Object, locksv1alpha1.FencedByLabel, name, strings.Join(errs, "; "))
		return "", &d
	}
	return name, nil
}

// Decide applies the fence to a request for an object guarded by lk. It is pure: the caller
// supplies every fact and re-decides when asked for a live Lease or the namespace phase.
func Decide(req Request, lk Lock) Decision {
	if !lk.Found {
		return deny(ReasonLockNotFound, "%s is fenced by lock %s, which does not exist: create the FencedLock "+
			"(writes, label removal and deletion of fenced objects all need one of its tokens)", req.Object, lk.Key)
	}
	if !lk.LeaseFound || !lk.Lease.Initialized() {
		return deny(ReasonLockNotReady, "lock %s is not ready yet (its Lease has no token): retry in a moment", lk.Key)
	}
	current := lk.Lease.Token

	var presented, recorded token.Token
	if req.Operation == admissionv1.Delete {
		// A delete carries no token: the object's own recorded token must still be current, so a
		// holder that lost the lock cannot delete what it (or its successor) wrote.
		presented = recordedToken(req.Old)
		if presented.IsZero() {
			return denyDelete(req, deny(ReasonMissingToken, "%s carries no valid %s annotation: write it with your "+
				"current token of lock %s (a fenced update), then delete it", req.Object, locksv1alpha1.TokenAnnotation, lk.Key))
		}
		recorded = presented
	} else {
		raw, ok := req.New.Annotations[locksv1alpha1.TokenAnnotation]
		if !ok {
			return deny(ReasonMissingToken, "writes to %s must carry annotation %s with the writer's fencing token "+
				"for lock %s (in a pod: $FENCING_TOKEN; from a shell: kubectl fencedlock run %s -- ...)",
				req.Object, locksv1alpha1.TokenAnnotation, lk.Key, lockName(lk.Key))
		}
		var err error
		if presented, err = token.Parse(raw); err != nil {
			return deny(ReasonMalformedToken, "%s: annotation %s: %v", req.Object, locksv1alpha1.TokenAnnotation, err)
		}
		if lockLabel(req.Old) == lockLabel(req.New) { // the stored token belongs to this lock
			recorded = recordedToken(req.Old)
		}
	}

	if err := fence.Check(lk.Key, presented, recorded, current); err != nil {
		var forged *fence.ForgedTokenError
		var stale *fence.StaleTokenError
		switch {
		case errors.As(err, &forged) && !lk.Live:
			return Decision{NeedLive: true}
		case errors.As(err, &forged):
			return denyDelete(req, deny(ReasonForgedToken, "%s: %v", req.Object, err))
		case errors.As(err, &stale) && stale.ByObject:
			return denyDelete(req, deny(ReasonStaleObjectToken, "%s: %v", req.Object, err))
		default:
			return denyDelete(req, deny(ReasonStaleToken, "%s: %v", req.Object, err))
		}
	}
	if lk.Spec.HolderBinding {
		if d := checkHolder(req, lk, presented); d != nil {
			return *d
		}
	}
	return allow(ReasonCurrent)
}

// denyDelete lets a DELETE through when its namespace is being deleted (nothing is left to
// protect, and a stuck namespace helps nobody); other refusals stand.
func denyDelete(req Request, d Decision) Decision {
	if req.Operation != admissionv1.Delete {
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
// the holder's token.
func checkHolder(req Request, lk Lock, presented token.Token) *Decision {
	st := lk.Lease
	if !st.Held() || presented != st.Token {
		d := deny(ReasonNotHolder, "%s: lock %s requires writes by its holder (spec.fence.holderBinding) and "+
			"token %s is not held now; acquire the lock and write with your own credentials", req.Object, lk.Key, presented)
		return &d
	}
	if uid, ok := strings.CutPrefix(st.Holder, locksv1alpha1.PodHolderPrefix); ok {
		if i := strings.LastIndex(uid, "/"); i >= 0 {
			uid = uid[i+1:]
		}
		if slices.Contains(req.User.Extra[podUIDExtra], uid) {
			return nil
		}
	} else if req.User.Username == st.Holder || strings.HasPrefix(st.Holder, req.User.Username+"/") {
		return nil
	}
	d := deny(ReasonNotHolder, "%s: lock %s requires writes by its holder %s (spec.fence.holderBinding), "+
		"but %s wrote; a token copied to another principal cannot be used", req.Object, lk.Key, st.Holder, req.User.Username)
	return &d
}

// recordedToken is the token an object was last written with, zero if none or malformed.
func recordedToken(m *metav1.ObjectMeta) token.Token {
	if m == nil {
		return 0
	}
	t, _ := token.Parse(m.Annotations[locksv1alpha1.TokenAnnotation])
	return t
}

func lockName(key string) string {
	_, name, _ := strings.Cut(key, "/")
	return name
}
