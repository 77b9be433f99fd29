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

package conformance

import (
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
)

// CaseWrite is the write the case sends, and whether the API server should admit it: the admitted
// state, or the write a client skipping the protocol's check would send (refused by the policy
// when the case names the policy's refusal). Nil when the case has no write (a refusal by the
// pure function alone).
func CaseWrite(c Case) (w *Outcome, admitted bool) {
	switch {
	case c.Write != nil:
		return c.Write, c.Expect.Refused == nil || c.Expect.Refused.Policy == ""
	case c.Expect.Admitted != nil:
		return c.Expect.Admitted, true
	}
	return nil, false
}

// ProtocolAnnotations are the lock Lease annotations a case's outcome lists (the token aside).
var ProtocolAnnotations = []string{
	locksv1alpha1.TicketAnnotation, locksv1alpha1.ReservedAnnotation, locksv1alpha1.WaitingAnnotation,
	locksv1alpha1.LeftAnnotation, locksv1alpha1.RevokedTokenAnnotation,
}

// SetProtocolAnnotations replaces l's protocol annotations (the token aside) by a, with "$token"
// standing for tok. The protocol version (fencedlock.io/protocol) is a's too: a state before that
// lists none is a Lease of version 1, written before the annotation existed.
func SetProtocolAnnotations(l *coordinationv1.Lease, a map[string]string, tok string) {
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	for _, k := range ProtocolAnnotations {
		delete(l.Annotations, k)
	}
	delete(l.Annotations, locksv1alpha1.ProtocolAnnotation)
	for k, v := range a {
		l.Annotations[k] = strings.ReplaceAll(v, "$token", tok)
	}
}

// WantProtocol is the protocol version a write of the lock Lease leaves, after o: the one o lists,
// or by default the version every transition of pkg/lease writes.
func WantProtocol(o *Outcome) string {
	if v, ok := o.Annotations[locksv1alpha1.ProtocolAnnotation]; ok {
		return v
	}
	return strconv.Itoa(lease.ProtocolVersion)
}

// OutcomeToken resolves an outcome's token ("same", "rv", "rv+N", or a number) against the
// installed state.
func OutcomeToken(spec, installedToken, rv string) (string, error) {
	switch {
	case spec == Same:
		return installedToken, nil
	case spec == "rv":
		return rv, nil
	case strings.HasPrefix(spec, "rv+"):
		n, err := strconv.ParseUint(rv, 10, 64)
		if err != nil {
			return "", fmt.Errorf("token %s: resourceVersion %w", spec, err)
		}
		d, err := strconv.ParseUint(strings.TrimPrefix(spec, "rv+"), 10, 64)
		if err != nil {
			return "", fmt.Errorf("token %s: %w", spec, err)
		}
		return strconv.FormatUint(n+d, 10), nil
	}
	if _, err := strconv.ParseUint(spec, 10, 64); err != nil {
		return "", fmt.Errorf("token %q: want same, rv, rv+N or a number", spec)
	}
	return spec, nil
}

// LockWrite builds the case's write of the lock Lease from the installed state lock, at now.
func LockWrite(c Case, w *Outcome, lock *coordinationv1.Lease, now time.Time) (*coordinationv1.Lease, error) {
	out := lock.DeepCopy()
	tok := lock.Annotations[locksv1alpha1.TokenAnnotation]
	out.Spec.HolderIdentity = nil
	if w.Holder != "" {
		out.Spec.HolderIdentity = new(w.Holder)
	}
	t, err := OutcomeToken(w.Token, tok, lock.ResourceVersion)
	if err != nil {
		return nil, err
	}
	out.Annotations[locksv1alpha1.TokenAnnotation] = t
	SetProtocolAnnotations(out, w.Annotations, tok)
	out.Annotations[locksv1alpha1.ProtocolAnnotation] = WantProtocol(w)
	mnow := metav1.NewMicroTime(now)
	if w.Granted {
		out.Spec.AcquireTime, out.Spec.RenewTime = &mnow, &mnow
		out.Spec.LeaseTransitions = new(ptr.Deref(lock.Spec.LeaseTransitions, 0) + 1)
	}
	if w.Renewed {
		out.Spec.RenewTime = &mnow
	}
	st, err := lease.Read(lock)
	if err != nil && !lease.IsNewerProtocol(err) { // a newer version's Lease: written as the lock format
		return nil, err
	}
	if p, ok := st.HolderOf(w.Holder); ok && st.Semaphore && !w.Semaphore(c.Before) {
		out.Spec.AcquireTime, out.Spec.RenewTime = p.AcquireTime, p.RenewTime // back to the lock format
	}
	if limit := WantLimit(c, w); limit == "" {
		delete(out.Annotations, locksv1alpha1.PermitsAnnotation)
	} else {
		out.Annotations[locksv1alpha1.PermitsAnnotation] = limit
	}
	return out, writePermits(out, w, lock, st, mnow)
}

// writePermits replaces out's permits by those of the outcome, granted ones stamped now, kept
// ones with their times, and counts the grants in leaseTransitions.
func writePermits(out *coordinationv1.Lease, w *Outcome, lock *coordinationv1.Lease, st lease.State, now metav1.MicroTime) error {
	for k := range PermitAnnotations(out) {
		delete(out.Annotations, k)
	}
	stamp := now.UTC().Format(metav1.RFC3339Micro)
	grants := int32(0)
	permits, err := WantPermits(w, lock, func(p Permit, tok string) string {
		if p.Granted {
			grants++
			return stamp + " " + stamp
		}
		acquire, renew := stamp, stamp
		if b, ok := st.HolderOf(p.Holder); ok && b.Token.String() == tok { // kept: its times, renewed or not
			acquire, renew = b.AcquireTime.UTC().Format(metav1.RFC3339Micro), b.RenewTime.UTC().Format(metav1.RFC3339Micro)
		}
		if p.Renewed {
			renew = stamp
		}
		return acquire + " " + renew
	})
	if err != nil {
		return err
	}
	maps.Copy(out.Annotations, permits)
	if grants > 0 {
		out.Spec.LeaseTransitions = new(ptr.Deref(lock.Spec.LeaseTransitions, 0) + grants)
	}
	return nil
}

// WantPermits are an outcome's permits by annotation key, tokens resolved against the installed
// Lease, as "<token> <ticket> <holder>" (timesOf non-nil: as annotation values, with the times
// timesOf gives).
func WantPermits(w *Outcome, installed *coordinationv1.Lease, timesOf func(Permit, string) string) (map[string]string, error) {
	st, err := lease.Read(installed)
	if err != nil && !lease.IsNewerProtocol(err) { // a newer version's Lease: no permits read
		return nil, err
	}
	beforeTok := map[string]string{}
	for _, p := range st.Permits {
		beforeTok[strconv.Itoa(p.Number)] = p.Token.String()
	}
	out := map[string]string{}
	for n, p := range w.Permits {
		if p.Raw != "" {
			out[locksv1alpha1.PermitAnnotationPrefix+n] = p.Raw
			continue
		}
		tok, err := Token(p.Token, beforeTok[n], st.Token.String(), installed.ResourceVersion)
		if err != nil {
			return nil, fmt.Errorf("permit %s: %w", n, err)
		}
		times := " "
		if timesOf != nil {
			times = " " + timesOf(p, tok) + " "
		}
		out[locksv1alpha1.PermitAnnotationPrefix+n] = fmt.Sprintf("%s %d%s%s", tok, p.Ticket, times, p.Holder)
	}
	return out, nil
}

// WantLimit is annotation fencedlock.io/permits after an outcome ("" for the lock format).
func WantLimit(c Case, w *Outcome) string {
	n := c.Before.Limit
	if w.Limit != nil {
		n = *w.Limit
	}
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

// WaiterWrite is the write of the actor's waiter Lease (before: nil for a create) an outcome gives,
// at now; lock is the lock Lease, whose owner the waiter Lease names.
func WaiterWrite(lock *coordinationv1.Lease, c Case, before *coordinationv1.Lease, w WaiterOutcome, now time.Time) (*coordinationv1.Lease, error) {
	var out *coordinationv1.Lease
	if before == nil {
		ref := lease.LockOf(lock)
		if ref == nil {
			return nil, fmt.Errorf("lock %s has no FencedLock owner", lock.Name)
		}
		out = lease.NewWaiter(lock.Namespace, locksv1alpha1.WaiterLeaseName(ref.UID, c.Actor), ref)
		out.Annotations = map[string]string{}
	} else {
		out = before.DeepCopy()
		out.ManagedFields = lease.ResetManagedFields()
	}
	out.Spec.HolderIdentity = nil
	if w.Holder != "" {
		out.Spec.HolderIdentity = new(w.Holder)
	}
	out.Annotations[locksv1alpha1.JoinAnnotation] = strconv.Itoa(w.Join)
	switch w.Ticket {
	case "rv":
		delete(out.Annotations, locksv1alpha1.TicketAnnotation)
	case "same":
		t, err := lease.WaiterTicket(before)
		if err != nil {
			return nil, err
		}
		out.Annotations[locksv1alpha1.TicketAnnotation] = t.String()
	default:
		out.Annotations[locksv1alpha1.TicketAnnotation] = w.Ticket
	}
	if w.Renewed {
		mnow := metav1.NewMicroTime(now)
		out.Spec.RenewTime = &mnow
	}
	return out, nil
}
