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

package lease_test

import (
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/token"
	"github.com/fencedlock/fencedlock/test/conformance"
)

// The conformance table (testdata/conformance.yaml, whose header describes a case) run against
// the pure transitions: runner (a). test/integration/conformance_test.go runs the same table
// against the API server and its admission policies, and the shell client of docs/protocol.md (docs/examples/fencedlock.sh).

func loadConformance(t *testing.T) []conformance.Case {
	t.Helper()
	cases, err := conformance.Load("testdata/conformance.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return cases
}

// protocolAnnotations are the lock Lease annotations a case's outcome lists (the token aside).
var protocolAnnotations = []string{
	locksv1alpha1.TicketAnnotation, locksv1alpha1.ReservedAnnotation, locksv1alpha1.WaitingAnnotation,
	locksv1alpha1.LeftAnnotation, locksv1alpha1.RevokedTokenAnnotation,
}

var conformanceNow = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func beforeLease(c conformance.Case) *coordinationv1.Lease {
	earlier := metav1.NewMicroTime(conformanceNow.Add(-5 * time.Second))
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lock", ResourceVersion: c.Before.ResourceVersion,
			Annotations: maps.Clone(c.Before.Annotations)},
		Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To[int32](15), LeaseTransitions: ptr.To[int32](7)},
	}
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	if c.Before.Token != "" {
		l.Annotations[locksv1alpha1.TokenAnnotation] = c.Before.Token
	}
	if c.Before.Holder != "" {
		l.Spec.HolderIdentity = new(c.Before.Holder)
		l.Spec.AcquireTime, l.Spec.RenewTime = &earlier, &earlier
	}
	if c.Before.Limit > 0 {
		l.Annotations[locksv1alpha1.PermitsAnnotation] = strconv.Itoa(c.Before.Limit)
	}
	for n, p := range c.Before.Permits {
		l.Annotations[locksv1alpha1.PermitAnnotationPrefix+n] = fmt.Sprintf("%s %d %s %s %s", p.Token, p.Ticket,
			earlier.UTC().Format(metav1.RFC3339Micro), earlier.UTC().Format(metav1.RFC3339Micro), p.Holder)
	}
	return l
}

// permitAnnotations are l's permit annotations (fencedlock.io/permit-<n>).
func permitAnnotations(l *coordinationv1.Lease) map[string]string {
	out := map[string]string{}
	for k, v := range l.Annotations {
		if strings.HasPrefix(k, locksv1alpha1.PermitAnnotationPrefix) {
			out[k] = v
		}
	}
	return out
}

// permitIdentities are l's permits as "<token> <ticket> <holder>" by annotation key, times
// aside (as a raw value when it is not a permit).
func permitIdentities(l *coordinationv1.Lease) map[string]string {
	out := map[string]string{}
	for k, v := range permitAnnotations(l) {
		p, err := lease.ParsePermit(strings.TrimPrefix(k, locksv1alpha1.PermitAnnotationPrefix), v)
		if err != nil {
			out[k] = v
			continue
		}
		out[k] = fmt.Sprintf("%s %s %s", p.Token, p.Ticket, p.Holder)
	}
	return out
}

// expandAnnotations replaces "$token" by the token before.
func expandAnnotations(a map[string]string, beforeToken string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		if k == locksv1alpha1.ProtocolAnnotation {
			continue // compared on its own (conformance.WantProtocol)
		}
		out[k] = strings.ReplaceAll(v, "$token", beforeToken)
	}
	return out
}

func protocolAnnotationsOf(l *coordinationv1.Lease) map[string]string {
	out := map[string]string{}
	for _, k := range protocolAnnotations {
		if v, ok := l.Annotations[k]; ok {
			out[k] = v
		}
	}
	return out
}

// checkLease compares the lock Lease after a transition with an outcome.
func checkLease(t *testing.T, c conformance.Case, before, after *coordinationv1.Lease, want conformance.Outcome) {
	t.Helper()
	if got := ptr.Deref(after.Spec.HolderIdentity, ""); got != want.Holder {
		t.Errorf("holder = %q, want %q", got, want.Holder)
	}
	wantTok, err := conformance.OutcomeToken(want.Token, c.Before.Token, before.ResourceVersion)
	if err != nil {
		t.Fatal(err)
	}
	if got := after.Annotations[locksv1alpha1.TokenAnnotation]; got != wantTok {
		t.Errorf("token = %q, want %q (%s)", got, wantTok, want.Token)
	}
	if got, exp := protocolAnnotationsOf(after), expandAnnotations(want.Annotations, c.Before.Token); !maps.Equal(got, exp) {
		t.Errorf("annotations = %v, want %v", got, exp)
	}
	if wrote := !equality.Semantic.DeepEqual(before, after); wrote &&
		after.Annotations[locksv1alpha1.ProtocolAnnotation] != conformance.WantProtocol(&want) {
		t.Errorf("annotation %s = %q after a write, want %q", locksv1alpha1.ProtocolAnnotation,
			after.Annotations[locksv1alpha1.ProtocolAnnotation], conformance.WantProtocol(&want))
	}
	if got := after.Annotations[locksv1alpha1.PermitsAnnotation]; got != conformance.WantLimit(c, &want) {
		t.Errorf("annotation %s = %q, want %q", locksv1alpha1.PermitsAnnotation, got, conformance.WantLimit(c, &want))
	}
	if want.Semaphore(c.Before) {
		checkPermits(t, before, after, want)
		return
	}
	if len(want.Permits) > 0 {
		t.Fatal("an outcome in the lock format lists no permits")
	}
	if got := permitAnnotations(after); len(got) > 0 {
		t.Errorf("permit annotations on a Lease in the lock format: %v", got)
	}
	transitions := ptr.Deref(after.Spec.LeaseTransitions, 0) - ptr.Deref(before.Spec.LeaseTransitions, 0)
	if want.Granted {
		if transitions != 1 {
			t.Errorf("leaseTransitions moved by %d in a grant, want 1", transitions)
		}
		if after.Spec.AcquireTime == nil || !after.Spec.AcquireTime.Equal(new(metav1.NewMicroTime(conformanceNow))) ||
			after.Spec.RenewTime == nil || !after.Spec.RenewTime.Equal(after.Spec.AcquireTime) {
			t.Errorf("a grant sets acquireTime = renewTime = now; got %v, %v", after.Spec.AcquireTime, after.Spec.RenewTime)
		}
	} else if transitions != 0 {
		t.Errorf("leaseTransitions moved by %d without a grant", transitions)
	}
	beforeRenew := before.Spec.RenewTime
	if bs, err := lease.Read(before); err == nil && bs.Semaphore { // back to the lock format: the holder's permit
		if p, ok := bs.HolderOf(want.Holder); ok {
			beforeRenew = p.RenewTime
		}
	}
	renewed := !ptr.Deref(after.Spec.RenewTime, metav1.MicroTime{}).Time.Equal(ptr.Deref(beforeRenew, metav1.MicroTime{}).Time)
	if want.Renewed && !renewed {
		t.Error("renewTime did not move on")
	}
	if !want.Renewed && !want.Granted && renewed {
		t.Error("renewTime moved without a renewal or grant")
	}
}

// checkPermits compares the permits of a semaphore's Lease after a transition with an outcome:
// holder, token and ticket of each; a granted permit's times are now, others keep acquireTime
// and move renewTime only when renewed; leaseTransitions counts the grants.
func checkPermits(t *testing.T, before, after *coordinationv1.Lease, want conformance.Outcome) {
	t.Helper()
	exp, err := conformance.WantPermits(&want, before, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := permitIdentities(after); !maps.Equal(got, exp) {
		t.Errorf("permits = %v, want %v", got, exp)
	}
	bs, err := lease.Read(before)
	if err != nil {
		t.Fatal(err)
	}
	as, err := lease.Read(after)
	if err != nil {
		t.Fatalf("the Lease after does not read: %v", err)
	}
	grants := int32(0)
	now := metav1.NewMicroTime(conformanceNow)
	for _, p := range as.Permits {
		w := want.Permits[strconv.Itoa(p.Number)]
		if w.Granted {
			grants++
			if !p.AcquireTime.Equal(&now) || !p.RenewTime.Equal(&now) {
				t.Errorf("permit %d: a grant sets acquireTime = renewTime = now; got %v, %v", p.Number, p.AcquireTime, p.RenewTime)
			}
			continue
		}
		b, ok := bs.Permit(p.Holder, p.Token)
		if !ok {
			t.Errorf("permit %d of %q (token %s) is neither granted by the write nor held before", p.Number, p.Holder, p.Token)
			continue
		}
		if !p.AcquireTime.Equal(b.AcquireTime) {
			t.Errorf("permit %d: acquireTime moved without a grant", p.Number)
		}
		if renewed := !p.RenewTime.Equal(b.RenewTime); renewed != w.Renewed {
			t.Errorf("permit %d: renewTime moved = %v, want %v", p.Number, renewed, w.Renewed)
		}
	}
	if transitions := ptr.Deref(after.Spec.LeaseTransitions, 0) - ptr.Deref(before.Spec.LeaseTransitions, 0); transitions != grants {
		t.Errorf("leaseTransitions moved by %d, want %d (the permits granted)", transitions, grants)
	}
	if h := ptr.Deref(after.Spec.HolderIdentity, ""); h != "" {
		t.Errorf("spec.holderIdentity = %q on a semaphore's Lease, want empty", h)
	}
}

func queueLease(c conformance.Case) *coordinationv1.Lease {
	ql := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "fencedlock-queue-uid",
		ResourceVersion: "118", Annotations: map[string]string{}}}
	if c.Queue != nil {
		ql.Annotations[locksv1alpha1.QueueAnnotation] = *c.Queue
	}
	return ql
}

// waiterLeases are the case's waiter Leases, each stamped with its ticket (its join's
// resourceVersion, which the table gives).
func waiterLeases(c conformance.Case) []coordinationv1.Lease {
	ref := &metav1.OwnerReference{APIVersion: locksv1alpha1.GroupVersion.String(), Kind: locksv1alpha1.Kind, Name: "lock", UID: "uid"}
	earlier := metav1.NewMicroTime(conformanceNow.Add(-5 * time.Second))
	out := make([]coordinationv1.Lease, 0, len(c.Waiters))
	for _, w := range c.Waiters {
		l := lease.NewWaiter("ns", locksv1alpha1.WaiterLeaseName(ref.UID, w.Identity), ref)
		l.ResourceVersion = "119"
		l.Annotations = map[string]string{locksv1alpha1.JoinAnnotation: strconv.Itoa(w.JoinCount()),
			locksv1alpha1.TicketAnnotation: strconv.FormatUint(w.Ticket, 10)}
		if !w.Left {
			l.Spec.HolderIdentity = new(w.Identity)
		}
		l.Spec.RenewTime = &earlier
		out = append(out, *l)
	}
	return out
}

// waiterOf returns identity's waiter Lease among ls, nil if it has none.
func waiterOf(ls []coordinationv1.Lease, identity string) *coordinationv1.Lease {
	name := locksv1alpha1.WaiterLeaseName("uid", identity)
	for i := range ls {
		if ls[i].Name == name {
			return ls[i].DeepCopy()
		}
	}
	return nil
}

// checkWaiter compares the actor's waiter Lease after a write (before: nil when it had none) with
// an outcome.
func checkWaiter(t *testing.T, before, after *coordinationv1.Lease, want conformance.WaiterOutcome) {
	t.Helper()
	if got := ptr.Deref(after.Spec.HolderIdentity, ""); got != want.Holder {
		t.Errorf("waiter holder = %q, want %q", got, want.Holder)
	}
	if got := after.Annotations[locksv1alpha1.JoinAnnotation]; got != strconv.Itoa(want.Join) {
		t.Errorf("annotation %s = %q, want %d", locksv1alpha1.JoinAnnotation, got, want.Join)
	}
	got, carried := after.Annotations[locksv1alpha1.TicketAnnotation]
	switch want.Ticket {
	case "rv":
		if carried {
			t.Errorf("a join carries no ticket (its resourceVersion is one), got %s = %q", locksv1alpha1.TicketAnnotation, got)
		}
	case "same":
		wt, err := lease.WaiterTicket(before)
		if err != nil {
			t.Fatal(err)
		}
		if got != wt.String() {
			t.Errorf("%s = %q, want the ticket before, %s", locksv1alpha1.TicketAnnotation, got, wt)
		}
	default:
		if got != want.Ticket {
			t.Errorf("%s = %q, want %q", locksv1alpha1.TicketAnnotation, got, want.Ticket)
		}
	}
	var was *metav1.MicroTime
	if before != nil {
		was = before.Spec.RenewTime
	}
	renewed := !ptr.Deref(after.Spec.RenewTime, metav1.MicroTime{}).Time.Equal(ptr.Deref(was, metav1.MicroTime{}).Time)
	if renewed != want.Renewed {
		t.Errorf("waiter renewTime moved = %v, want %v", renewed, want.Renewed)
	}
}

// errorKind names an error of pkg/lease as the table does.
func errorKind(err error) string {
	switch {
	case err == nil:
		return ""
	case lease.IsHeld(err):
		return "HeldError"
	case lease.IsLost(err):
		return "LostError"
	case errors.Is(err, lease.ErrNotInitialized):
		return "NotInitialized"
	case errors.Is(err, lease.ErrServedWhileLeaving):
		return "ServedWhileLeaving"
	case errors.Is(err, lease.ErrNotQueued):
		return "NotQueued"
	case errors.Is(err, lease.ErrQueueNeeded):
		return "QueueNeeded"
	case lease.IsNewerProtocol(err):
		return "VersionError"
	}
	return "other: " + err.Error()
}

// lockTransition runs a transition of the lock Lease the way every driver does: without the
// queue first, and again with the queue (read after the Lease) if the function asks for it.
func lockTransition(l *coordinationv1.Lease, q lease.Queue, f func(*coordinationv1.Lease, *lease.Queue) error) (
	out *coordinationv1.Lease, queueRead bool, err error) {
	out = l.DeepCopy()
	if err = f(out, nil); errors.Is(err, lease.ErrQueueNeeded) {
		out = l.DeepCopy()
		err = f(out, &q)
		return out, true, err
	}
	return out, false, err
}

// run applies the case's transition to copies of the lock Lease l, the queue Lease ql and the
// waiter Leases ws; it returns the Lease written: the lock's, or the actor's waiter Lease.
func run(c conformance.Case, transition string, l, ql *coordinationv1.Lease, ws []coordinationv1.Lease) (
	lockAfter, waiterAfter *coordinationv1.Lease, queueRead bool, err error) {
	st, _ := lease.Read(l)
	waiting, _ := lease.Waiters(ws, st.Served)
	q := lease.ReadQueue(ql).Merge(waiting) // as every reader merges them
	tok := st.Token
	if p, ok := st.HolderOf(c.Actor); ok && st.Semaphore {
		tok = p.Token // a semaphore's holder presents its own permit's token
	}
	revoked := st.Holder
	if c.Args.Holder != "" {
		revoked = c.Args.Holder
		if p, ok := st.HolderOf(revoked); ok {
			tok = p.Token
		}
	}
	if c.Args.Token != "" {
		if tok, err = token.Parse(c.Args.Token); err != nil {
			return nil, nil, false, err
		}
	}
	old := waiterOf(ws, c.Actor)
	waiterAfter = lease.NewWaiter("ns", locksv1alpha1.WaiterLeaseName("uid", c.Actor),
		&metav1.OwnerReference{APIVersion: locksv1alpha1.GroupVersion.String(), Kind: locksv1alpha1.Kind, Name: "lock", UID: "uid"})
	if old != nil {
		waiterAfter = old.DeepCopy()
	}
	switch transition {
	case "grant":
		lockAfter = l.DeepCopy()
		_, err = lease.Grant(lockAfter, c.Actor, conformanceNow)
	case "renew":
		lockAfter = l.DeepCopy()
		err = lease.Renew(lockAfter, c.Actor, tok, conformanceNow)
	case "release":
		lockAfter, queueRead, err = lockTransition(l, q, func(next *coordinationv1.Lease, q *lease.Queue) error {
			_, err := lease.Release(next, c.Actor, tok, q, conformanceNow)
			return err
		})
	case "revoke":
		lockAfter, queueRead, err = lockTransition(l, q, func(next *coordinationv1.Lease, q *lease.Queue) error {
			_, err := lease.Revoke(next, revoked, tok, c.Args.Revoked, q, conformanceNow)
			return err
		})
	case "settle":
		gone := map[string]bool{}
		for _, g := range c.Args.Gone {
			gone[g] = true
		}
		j := lease.Judge(q, st.Served, nil, func(h string) bool { return !gone[h] }, lease.Window(st.Duration), conformanceNow)
		lockAfter = l.DeepCopy()
		_, _, err = lease.Settle(lockAfter, j.Queue, conformanceNow)
	case "setPermits":
		lockAfter = l.DeepCopy()
		_, err = lease.SetPermits(lockAfter, c.Args.Permits)
	case "markWaiting":
		lockAfter = l.DeepCopy()
		lease.MarkWaiting(lockAfter)
	case "markLeft":
		lockAfter = l.DeepCopy()
		err = lease.MarkLeft(lockAfter, c.Actor, lease.Ticket(c.Args.Ticket))
	case "join":
		lease.JoinWaiter(old, waiterAfter, c.Actor, conformanceNow)
		return nil, waiterAfter, false, nil
	case "beat":
		err = lease.BeatWaiter(old, waiterAfter, c.Actor, lease.Ticket(c.Args.Ticket), conformanceNow)
		return nil, waiterAfter, false, err
	case "leave":
		err = lease.LeaveWaiter(old, waiterAfter, c.Actor, lease.Ticket(c.Args.Ticket))
		return nil, waiterAfter, false, err
	default:
		err = fmt.Errorf("unknown transition %q", transition)
	}
	return lockAfter, nil, queueRead, err
}

func TestConformance(t *testing.T) {
	cases := loadConformance(t)
	if len(cases) == 0 {
		t.Fatal("no cases")
	}
	names := map[string]bool{}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			if names[c.Name] {
				t.Fatalf("duplicate case name %q", c.Name)
			}
			names[c.Name] = true
			if (c.Expect.Admitted == nil) == (c.Expect.Refused == nil) {
				t.Fatal("a case expects exactly one of admitted and refused")
			}
			l, ql, ws := beforeLease(c), queueLease(c), waiterLeases(c)
			if c.Transition == "raw" {
				checkRaw(t, c, l, ql, ws)
				return
			}
			lockAfter, waiterAfter, queueRead, err := run(c, c.Transition, l, ql, ws)
			if r := c.Expect.Refused; r != nil {
				if got := errorKind(err); got != r.Error {
					t.Fatalf("refusal = %q (%v), want %q", got, err, r.Error)
				}
				if r.Error == "" {
					t.Fatal("a refused case that is not raw names the function's error")
				}
				if !strings.Contains(err.Error(), r.Message) {
					t.Errorf("error %q does not say %q", err, r.Message)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s refused: %v", c.Transition, err)
			}
			want := *c.Expect.Admitted
			if want.QueueRead != nil && *want.QueueRead != queueRead {
				t.Errorf("queue read = %v, want %v", queueRead, *want.QueueRead)
			}
			if lockAfter != nil {
				checkLease(t, c, l, lockAfter, want)
			}
			if waiterAfter != nil {
				if want.Waiter == nil {
					t.Fatal("a waiter Lease transition's outcome gives the waiter Lease after")
				}
				checkWaiter(t, waiterOf(ws, c.Actor), waiterAfter, *want.Waiter)
			}
		})
	}
}

// checkRaw checks that a raw write the policy refuses is made by none of the transitions its
// actor may run from the state before (grant, renew, release, markWaiting; revoke and settle for
// the manager). Raw writes the policy admits are written for the API server's runner only.
func checkRaw(t *testing.T, c conformance.Case, l, ql *coordinationv1.Lease, ws []coordinationv1.Lease) {
	t.Helper()
	if c.Write == nil {
		t.Fatal("a raw case gives its write")
	}
	if c.Expect.Refused == nil {
		return
	}
	if c.Expect.Refused.Policy == "" {
		t.Fatal("a refused raw write names the policy's refusal")
	}
	if c.Write.Waiter != nil {
		checkRawWaiter(t, c, l, ql, ws)
		return
	}
	wantTok, err := conformance.OutcomeToken(c.Write.Token, c.Before.Token, l.ResourceVersion)
	if err != nil {
		t.Fatal(err)
	}
	wantPermits, err := conformance.WantPermits(c.Write, l, nil)
	if err != nil {
		t.Fatal(err)
	}
	transitions := []string{"grant", "renew", "release", "markWaiting"}
	if c.Actor == "manager" {
		transitions = append(transitions, "revoke", "settle", "setPermits")
	}
	for _, tr := range transitions {
		after, _, _, err := run(c, tr, l, ql, ws)
		if err != nil || after == nil {
			continue
		}
		if ptr.Deref(after.Spec.HolderIdentity, "") == c.Write.Holder &&
			after.Annotations[locksv1alpha1.TokenAnnotation] == wantTok &&
			maps.Equal(protocolAnnotationsOf(after), expandAnnotations(c.Write.Annotations, c.Before.Token)) &&
			maps.Equal(permitIdentities(after), wantPermits) &&
			after.Annotations[locksv1alpha1.PermitsAnnotation] == conformance.WantLimit(c, c.Write) {
			t.Errorf("%s by %s makes the write the policy refuses", tr, c.Actor)
		}
	}
}

// checkRawWaiter checks that a raw write of the actor's waiter Lease is made by none of its
// transitions (join, beat and leave, with the ticket the Lease shows).
func checkRawWaiter(t *testing.T, c conformance.Case, l, ql *coordinationv1.Lease, ws []coordinationv1.Lease) {
	t.Helper()
	before := waiterOf(ws, c.Actor)
	if before == nil {
		t.Fatal("a raw write of a waiter Lease starts from one the case gives")
	}
	wt, err := lease.WaiterTicket(before)
	if err != nil {
		t.Fatal(err)
	}
	want := *c.Write.Waiter
	if want.Ticket == "same" {
		want.Ticket = wt.String()
	}
	c.Args.Ticket = uint64(wt)
	for _, tr := range []string{"join", "beat", "leave"} {
		_, after, _, err := run(c, tr, l, ql, ws)
		if err != nil {
			continue
		}
		got, carried := after.Annotations[locksv1alpha1.TicketAnnotation]
		if ptr.Deref(after.Spec.HolderIdentity, "") == want.Holder &&
			after.Annotations[locksv1alpha1.JoinAnnotation] == strconv.Itoa(want.Join) &&
			(want.Ticket == "rv" && !carried || got == want.Ticket) {
			t.Errorf("%s by %s makes the write the policy refuses", tr, c.Actor)
		}
	}
}
