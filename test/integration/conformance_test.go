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

package integration

import (
	"cmp"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/test/conformance"
	"github.com/fencedlock/fencedlock/test/util"
)

// Runner (b) of the conformance table pkg/lease/testdata/conformance.yaml (its header describes a
// case): every case with a write is sent to the real API server, with config/policy installed, as
// the case's actor: an ordinary user (RBAC on Leases, nothing of fencedlock's) for a client, a
// cluster admin (allowed verb grant on fencedlocks, hence the manager for the policy) for the
// manager. The table is shared with pkg/lease/conformance_test.go (runner (a), the pure
// transitions) and protocol_example_test.go (runner (c), the shell example of docs/protocol.md).

// conformanceCases reads the table; it runs while the spec tree is built.
func conformanceCases() ([]conformance.Case, error) {
	return conformance.Load(filepath.Join(util.RepoRoot(), "pkg", "lease", "testdata", "conformance.yaml"))
}

// write is the write the case sends, and whether the API server should admit it: the admitted
// state, or the write a client skipping the protocol's check would send (refused by the policy
// when the case names the policy's refusal). Nil when the case has no write (a refusal by the
// pure function alone).
func caseWrite(c conformance.Case) (w *conformance.Outcome, admitted bool) {
	switch {
	case c.Write != nil:
		return c.Write, c.Expect.Refused == nil || c.Expect.Refused.Policy == ""
	case c.Expect.Admitted != nil:
		return c.Expect.Admitted, true
	}
	return nil, false
}

// conformanceAnnotations are the lock Lease annotations a case's outcome lists (the token aside).
var conformanceAnnotations = []string{
	locksv1alpha1.TicketAnnotation, locksv1alpha1.ReservedAnnotation, locksv1alpha1.WaitingAnnotation,
	locksv1alpha1.LeftAnnotation, locksv1alpha1.RevokedTokenAnnotation,
}

func protocolAnnotationsOf(l *coordinationv1.Lease) map[string]string {
	out := map[string]string{}
	for _, k := range conformanceAnnotations {
		if v, ok := l.Annotations[k]; ok {
			out[k] = v
		}
	}
	return out
}

// setProtocolAnnotations replaces l's protocol annotations (the token aside) by a, with "$token"
// standing for tok.
func setProtocolAnnotations(l *coordinationv1.Lease, a map[string]string, tok string) {
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	for _, k := range conformanceAnnotations {
		delete(l.Annotations, k)
	}
	for k, v := range a {
		l.Annotations[k] = strings.ReplaceAll(v, "$token", tok)
	}
}

func expandToken(a map[string]string, tok string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = strings.ReplaceAll(v, "$token", tok)
	}
	return out
}

// conformanceToken resolves an outcome's token ("same", "rv", "rv+N", or a number) against the
// installed state.
func conformanceToken(spec, installedToken, rv string) string {
	switch {
	case spec == "same":
		return installedToken
	case spec == "rv":
		return rv
	case strings.HasPrefix(spec, "rv+"):
		n, err := strconv.ParseUint(rv, 10, 64)
		Expect(err).NotTo(HaveOccurred())
		d, err := strconv.ParseUint(strings.TrimPrefix(spec, "rv+"), 10, 64)
		Expect(err).NotTo(HaveOccurred())
		return strconv.FormatUint(n+d, 10)
	}
	return spec
}

// installTickets makes a case's tickets real ones (the table's only rank them): in the order of
// the tickets the case names, it joins each of the case's waiter Leases (a create, as the manager
// may: its resourceVersion is the ticket) and takes a fresh resourceVersion (a write of a scratch
// Lease) for every other ticket. It returns the case with every ticket mapped to its real one.
func installTickets(ns, lockName string, c conformance.Case) conformance.Case {
	ref := lease.LockOf(kit.GetLease(ns, lockName))
	ExpectWithOffset(1, ref).NotTo(BeNil(), "lock %s has a FencedLock owner", lockName)
	byTicket := map[uint64]conformance.WaiterLease{}
	for _, w := range c.Waiters {
		byTicket[w.Ticket] = w
	}
	mapped := map[uint64]uint64{}
	for _, t := range c.Tickets() {
		var rv string
		if w, ok := byTicket[t]; ok {
			l := lease.NewWaiter(ns, locksv1alpha1.WaiterLeaseName(ref.UID, w.Identity), ref)
			l.Annotations = map[string]string{locksv1alpha1.JoinAnnotation: strconv.Itoa(w.JoinCount())}
			if !w.Left {
				l.Spec.HolderIdentity = new(w.Identity)
			}
			now := metav1.NewMicroTime(time.Now())
			l.Spec.RenewTime = &now
			ExpectWithOffset(1, k8sClient.Create(ctx, l)).To(Succeed())
			rv = l.ResourceVersion
		} else {
			clock := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ticket-clock-" + lockName}}
			if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(clock), clock); apierrors.IsNotFound(err) {
				ExpectWithOffset(1, k8sClient.Create(ctx, clock)).To(Succeed())
			} else {
				ExpectWithOffset(1, err).NotTo(HaveOccurred())
				clock.Spec.LeaseTransitions = new(ptr.Deref(clock.Spec.LeaseTransitions, 0) + 1)
				ExpectWithOffset(1, k8sClient.Update(ctx, clock)).To(Succeed())
			}
			rv = clock.ResourceVersion
		}
		n, err := strconv.ParseUint(rv, 10, 64)
		ExpectWithOffset(1, err).NotTo(HaveOccurred())
		mapped[t] = n
	}
	return c.MapTickets(func(t uint64) uint64 { return mapped[t] })
}

// waiterOf returns identity's waiter Lease of the lock, nil if it has none.
func waiterOf(ns, lockName, identity string) *coordinationv1.Lease {
	ref := lease.LockOf(kit.GetLease(ns, lockName))
	ExpectWithOffset(1, ref).NotTo(BeNil())
	l, err := clientset.CoordinationV1().Leases(ns).Get(ctx, locksv1alpha1.WaiterLeaseName(ref.UID, identity), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return l
}

// waiterWrite is the write of the actor's waiter Lease (before: nil for a create) an outcome
// gives.
func waiterWrite(ns, lockName string, c conformance.Case, before *coordinationv1.Lease, w conformance.WaiterOutcome) *coordinationv1.Lease {
	var out *coordinationv1.Lease
	if before == nil {
		ref := lease.LockOf(kit.GetLease(ns, lockName))
		out = lease.NewWaiter(ns, locksv1alpha1.WaiterLeaseName(ref.UID, c.Actor), ref)
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
		ExpectWithOffset(1, err).NotTo(HaveOccurred())
		out.Annotations[locksv1alpha1.TicketAnnotation] = t.String()
	default:
		out.Annotations[locksv1alpha1.TicketAnnotation] = w.Ticket
	}
	if w.Renewed {
		now := metav1.NewMicroTime(time.Now())
		out.Spec.RenewTime = &now
	}
	return out
}

// expectConformanceWaiter checks the actor's waiter Lease (before: as installed, nil if none)
// against an outcome.
func expectConformanceWaiter(ns, lockName string, c conformance.Case, before *coordinationv1.Lease, w conformance.WaiterOutcome) {
	got := waiterOf(ns, lockName, c.Actor)
	ExpectWithOffset(1, got).NotTo(BeNil(), "the waiter Lease of %s", c.Actor)
	ExpectWithOffset(1, ptr.Deref(got.Spec.HolderIdentity, "")).To(Equal(w.Holder), "waiter holder")
	ExpectWithOffset(1, got.Annotations[locksv1alpha1.JoinAnnotation]).To(Equal(strconv.Itoa(w.Join)), "annotation fencedlock.io/join")
	ticket, err := lease.WaiterTicket(got)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	switch w.Ticket {
	case "rv":
		ExpectWithOffset(1, got.Annotations).NotTo(HaveKey(locksv1alpha1.TicketAnnotation), "a join carries no ticket")
		ExpectWithOffset(1, ticket.String()).To(Equal(got.ResourceVersion))
	case "same":
		was, err := lease.WaiterTicket(before)
		ExpectWithOffset(1, err).NotTo(HaveOccurred())
		ExpectWithOffset(1, ticket).To(Equal(was), "the ticket is carried")
	default:
		ExpectWithOffset(1, ticket.String()).To(Equal(w.Ticket))
	}
	var was *metav1.MicroTime
	if before != nil {
		was = before.Spec.RenewTime
	}
	renewed := !ptr.Deref(got.Spec.RenewTime, metav1.MicroTime{}).Time.Equal(ptr.Deref(was, metav1.MicroTime{}).Time)
	ExpectWithOffset(1, renewed).To(Equal(w.Renewed), "waiter renewTime moved")
}

// installConformance installs a case's state before, as the manager would write it (a cluster
// admin): the queue Lease's queue annotation, then the lock Lease's holder and annotations. A
// holder is installed by a grant, so the installed token is the resourceVersion of that write,
// whatever the table's number. It returns the lock Lease as installed.
func installConformance(ns, name string, c conformance.Case) *coordinationv1.Lease {
	cur := kit.GetLease(ns, name)
	queue := kit.GetLease(ns, lease.QueueOf(cur))
	if queue.Annotations == nil {
		queue.Annotations = map[string]string{}
	}
	delete(queue.Annotations, locksv1alpha1.QueueUnreadableAnnotation)
	if c.Queue != nil {
		queue.Annotations[locksv1alpha1.QueueAnnotation] = *c.Queue
	} else {
		delete(queue.Annotations, locksv1alpha1.QueueAnnotation)
	}
	ExpectWithOffset(1, k8sClient.Update(ctx, queue)).To(Succeed())

	if c.Before.Limit > 0 {
		return installSemaphore(c, cur)
	}
	lock := cur.DeepCopy()
	delete(lock.Annotations, locksv1alpha1.PermitsAnnotation)
	for k := range permitAnnotations(lock) {
		delete(lock.Annotations, k)
	}
	setProtocolAnnotations(lock, c.Before.Annotations, "")
	if c.Before.Holder != ptr.Deref(cur.Spec.HolderIdentity, "") {
		if c.Before.Holder == "" {
			lock.Spec.HolderIdentity = nil
		} else {
			t := metav1.NewMicroTime(time.Now())
			lock.Spec.HolderIdentity = new(c.Before.Holder)
			lock.Spec.AcquireTime, lock.Spec.RenewTime = &t, &t
			lock.Spec.LeaseTransitions = new(ptr.Deref(cur.Spec.LeaseTransitions, 0) + 1)
			lock.Annotations[locksv1alpha1.TokenAnnotation] = cur.ResourceVersion
		}
	}
	ExpectWithOffset(1, k8sClient.Update(ctx, lock)).To(Succeed())
	return lock
}

// installSemaphore installs a semaphore's state before, as the manager would write it: the
// semaphore format with no permit held, then one grant per permit in the order of the table's
// tokens, each with the resourceVersion of its write as token (one write grants one permit).
func installSemaphore(c conformance.Case, cur *coordinationv1.Lease) *coordinationv1.Lease {
	lock := cur.DeepCopy()
	lock.Spec.HolderIdentity = nil
	for k := range permitAnnotations(lock) {
		delete(lock.Annotations, k)
	}
	setProtocolAnnotations(lock, c.Before.Annotations, "")
	lock.Annotations[locksv1alpha1.PermitsAnnotation] = strconv.Itoa(c.Before.Limit)
	ExpectWithOffset(2, k8sClient.Update(ctx, lock)).To(Succeed())
	numbers, err := conformance.PermitNumbers(c.Before.Permits)
	ExpectWithOffset(2, err).NotTo(HaveOccurred())
	slices.SortFunc(numbers, func(a, b int) int {
		x, _ := strconv.ParseUint(c.Before.Permits[strconv.Itoa(a)].Token, 10, 64)
		y, _ := strconv.ParseUint(c.Before.Permits[strconv.Itoa(b)].Token, 10, 64)
		return cmp.Compare(x, y)
	})
	for _, n := range numbers {
		p := c.Before.Permits[strconv.Itoa(n)]
		now := time.Now().UTC().Format(metav1.RFC3339Micro)
		lock.Annotations[locksv1alpha1.PermitAnnotation(n)] = fmt.Sprintf("%s %d %s %s %s", lock.ResourceVersion, p.Ticket, now, now, p.Holder)
		lock.Annotations[locksv1alpha1.TokenAnnotation] = lock.ResourceVersion
		lock.Spec.LeaseTransitions = new(ptr.Deref(lock.Spec.LeaseTransitions, 0) + 1)
		ExpectWithOffset(2, k8sClient.Update(ctx, lock)).To(Succeed())
	}
	return lock
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

// wantPermits are an outcome's permits by annotation key, tokens resolved against the installed
// Lease, as permitIdentities gives them (withTimes: as annotation values, the times by timesOf).
func wantPermits(w *conformance.Outcome, installed *coordinationv1.Lease, timesOf func(conformance.Permit, string) string) map[string]string {
	st, err := lease.Read(installed)
	ExpectWithOffset(2, err).NotTo(HaveOccurred())
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
		tok, err := conformance.Token(p.Token, beforeTok[n], st.Token.String(), installed.ResourceVersion)
		ExpectWithOffset(2, err).NotTo(HaveOccurred(), "permit %s", n)
		times := " "
		if timesOf != nil {
			times = " " + timesOf(p, tok) + " "
		}
		out[locksv1alpha1.PermitAnnotationPrefix+n] = fmt.Sprintf("%s %d%s%s", tok, p.Ticket, times, p.Holder)
	}
	return out
}

// wantLimit is annotation fencedlock.io/permits after an outcome ("" for the lock format).
func wantLimit(c conformance.Case, w *conformance.Outcome) string {
	n := c.Before.Limit
	if w.Limit != nil {
		n = *w.Limit
	}
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

// conformanceWrite builds the case's write from the installed state.
func conformanceWrite(c conformance.Case, w *conformance.Outcome, lock *coordinationv1.Lease) *coordinationv1.Lease {
	out := lock.DeepCopy()
	tok := lock.Annotations[locksv1alpha1.TokenAnnotation]
	out.Spec.HolderIdentity = nil
	if w.Holder != "" {
		out.Spec.HolderIdentity = new(w.Holder)
	}
	out.Annotations[locksv1alpha1.TokenAnnotation] = conformanceToken(w.Token, tok, lock.ResourceVersion)
	setProtocolAnnotations(out, w.Annotations, tok)
	now := metav1.NewMicroTime(time.Now())
	if w.Granted {
		out.Spec.AcquireTime, out.Spec.RenewTime = &now, &now
		out.Spec.LeaseTransitions = new(ptr.Deref(lock.Spec.LeaseTransitions, 0) + 1)
	}
	if w.Renewed {
		out.Spec.RenewTime = &now
	}
	st, err := lease.Read(lock)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	if p, ok := st.HolderOf(w.Holder); ok && st.Semaphore && !w.Semaphore(c.Before) {
		out.Spec.AcquireTime, out.Spec.RenewTime = p.AcquireTime, p.RenewTime // back to the lock format
	}
	if limit := wantLimit(c, w); limit == "" {
		delete(out.Annotations, locksv1alpha1.PermitsAnnotation)
	} else {
		out.Annotations[locksv1alpha1.PermitsAnnotation] = limit
	}
	for k := range permitAnnotations(out) {
		delete(out.Annotations, k)
	}
	stamp := now.UTC().Format(metav1.RFC3339Micro)
	grants := int32(0)
	maps.Copy(out.Annotations, wantPermits(w, lock, func(p conformance.Permit, tok string) string {
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
	}))
	if grants > 0 {
		out.Spec.LeaseTransitions = new(ptr.Deref(lock.Spec.LeaseTransitions, 0) + grants)
	}
	return out
}

// expectConformanceLease checks the lock Lease against an outcome, the lock having been
// installed as installed.
func expectConformanceLease(ns, name string, c conformance.Case, installed *coordinationv1.Lease, w *conformance.Outcome) {
	got := kit.GetLease(ns, name)
	tok := installed.Annotations[locksv1alpha1.TokenAnnotation]
	ExpectWithOffset(1, ptr.Deref(got.Spec.HolderIdentity, "")).To(Equal(w.Holder), "holder")
	ExpectWithOffset(1, got.Annotations[locksv1alpha1.TokenAnnotation]).
		To(Equal(conformanceToken(w.Token, tok, installed.ResourceVersion)), "token (%s)", w.Token)
	ExpectWithOffset(1, protocolAnnotationsOf(got)).To(Equal(expandToken(w.Annotations, tok)), "annotations")
	ExpectWithOffset(1, got.Annotations[locksv1alpha1.PermitsAnnotation]).To(Equal(wantLimit(c, w)), "annotation fencedlock.io/permits")
	ExpectWithOffset(1, permitIdentities(got)).To(Equal(wantPermits(w, installed, nil)), "permits")
	st, err := lease.Read(installed)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	transitions := ptr.Deref(got.Spec.LeaseTransitions, 0) - ptr.Deref(installed.Spec.LeaseTransitions, 0)
	if w.Semaphore(c.Before) {
		after, err := lease.Read(got)
		ExpectWithOffset(1, err).NotTo(HaveOccurred())
		grants := int32(0)
		for _, p := range after.Permits {
			if w.Permits[strconv.Itoa(p.Number)].Granted {
				grants++
				ExpectWithOffset(1, p.RenewTime.Equal(p.AcquireTime)).To(BeTrue(), "a grant sets acquireTime = renewTime (permit %d)", p.Number)
				continue
			}
			b, ok := st.Permit(p.Holder, p.Token)
			ExpectWithOffset(1, ok).To(BeTrue(), "permit %d is neither granted by the write nor held before", p.Number)
			ExpectWithOffset(1, p.AcquireTime.Equal(b.AcquireTime)).To(BeTrue(), "permit %d: acquireTime moves only in a grant", p.Number)
			ExpectWithOffset(1, !p.RenewTime.Equal(b.RenewTime)).To(Equal(w.Permits[strconv.Itoa(p.Number)].Renewed),
				"permit %d: renewTime moves in a renewal only", p.Number)
		}
		ExpectWithOffset(1, transitions).To(Equal(grants), "leaseTransitions counts the permits granted")
		return
	}
	if w.Granted {
		ExpectWithOffset(1, transitions).To(Equal(int32(1)), "a grant moves leaseTransitions on by one")
		ExpectWithOffset(1, got.Spec.AcquireTime).NotTo(BeNil())
		ExpectWithOffset(1, got.Spec.RenewTime).To(Equal(got.Spec.AcquireTime), "a grant sets acquireTime = renewTime")
	} else {
		ExpectWithOffset(1, transitions).To(BeZero(), "leaseTransitions moves only in a grant")
	}
	beforeRenew := installed.Spec.RenewTime
	if p, ok := st.HolderOf(w.Holder); ok && st.Semaphore { // back to the lock format: the holder's permit
		beforeRenew = p.RenewTime
	}
	renewed := !ptr.Deref(got.Spec.RenewTime, metav1.MicroTime{}).Time.Equal(ptr.Deref(beforeRenew, metav1.MicroTime{}).Time)
	ExpectWithOffset(1, renewed).To(Equal(w.Renewed || w.Granted), "renewTime moves in a renewal or a grant only")
}

var _ = Describe("The conformance table against the API server", Ordered, ContinueOnFailure, func() {
	cases, loadErr := conformanceCases()
	var (
		ns     string
		client client.Client
		names  = map[string]string{}
	)

	BeforeAll(func() {
		Expect(loadErr).NotTo(HaveOccurred())
		ns = kit.NewNamespace()
		client, _ = ordinaryUser(ns, "conformance-client")
		for i, c := range cases {
			if w, _ := caseWrite(c); w == nil {
				continue
			}
			names[c.Name] = fmt.Sprintf("case-%02d", i)
			kit.NewLock(ns, names[c.Name], util.LeaseSeconds(15))
		}
		for _, name := range names {
			Eventually(func() error {
				_, err := clientset.CoordinationV1().Leases(ns).Get(ctx, lease.QueueOf(kit.GetLease(ns, name)), metav1.GetOptions{})
				return err
			}, 10*time.Second, 20*time.Millisecond).Should(Succeed(), "the manager creates the queue Lease of %s", name)
		}
		By("stopping the manager, so that nothing but the case writes the installed state")
		stopManager()
		DeferCleanup(startManager)
	})

	for _, c := range cases {
		w, admitted := caseWrite(c)
		if w == nil {
			continue
		}
		It(c.Name, func() {
			name := names[c.Name]
			writer := client
			if c.Actor == "manager" {
				writer = k8sClient
			}
			c := installTickets(ns, name, c)
			w, _ := caseWrite(c)
			if c.WritesWaiter() {
				before := waiterOf(ns, name, c.Actor)
				sent := waiterWrite(ns, name, c, before, *w.Waiter)
				var err error
				if before == nil {
					err = writer.Create(ctx, sent)
				} else {
					err = writer.Update(ctx, sent)
				}
				if !admitted {
					policyDenied(err, "fencedlock-waiter-lease", c.Expect.Refused.Policy)
					Expect(apierrors.IsInvalid(err) || apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
					return
				}
				Expect(err).NotTo(HaveOccurred(), "the write of the case was refused")
				expectConformanceWaiter(ns, name, c, before, *w.Waiter)
				return
			}
			var (
				lock, sent *coordinationv1.Lease
				err        error
			)
			for attempt := 0; ; attempt++ {
				lock = installConformance(ns, name, c)
				sent = conformanceWrite(c, w, lock)
				if err = writer.Update(ctx, sent); !apierrors.IsConflict(err) || attempt == 5 {
					break
				}
			}
			if !admitted {
				policyDenied(err, "fencedlock-lease-protocol", c.Expect.Refused.Policy)
				Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
				return
			}
			Expect(err).NotTo(HaveOccurred(), "the write of the case was refused")

			expectConformanceLease(ns, name, c, lock, w)
		})
	}
})
