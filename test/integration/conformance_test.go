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
	"fmt"
	"path/filepath"
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
// transitions), protocol_example_test.go (runner (c), the shell example of docs/protocol.md) and
// internal/policyeval (runner (d), the same writes built by test/conformance in memory and
// evaluated in-process).

// conformanceCases reads the table; it runs while the spec tree is built.
func conformanceCases() ([]conformance.Case, error) {
	return conformance.Load(filepath.Join(util.RepoRoot(), "pkg", "lease", "testdata", "conformance.yaml"))
}

// store is the conformance namespace ns on the API server, written as a cluster admin (the
// manager, for the policies).
type store string

func (s store) Get(name string) (*coordinationv1.Lease, error) {
	l := &coordinationv1.Lease{}
	return l, k8sClient.Get(ctx, client.ObjectKey{Namespace: string(s), Name: name}, l)
}

func (s store) Create(l *coordinationv1.Lease) error {
	l.Namespace = string(s)
	return k8sClient.Create(ctx, l)
}

func (s store) Update(l *coordinationv1.Lease) error { return k8sClient.Update(ctx, l) }

func protocolAnnotationsOf(l *coordinationv1.Lease) map[string]string {
	out := map[string]string{}
	for _, k := range conformance.ProtocolAnnotations {
		if v, ok := l.Annotations[k]; ok {
			out[k] = v
		}
	}
	return out
}

func expandToken(a map[string]string, tok string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		if k == locksv1alpha1.ProtocolAnnotation {
			continue // compared on its own (conformance.WantProtocol)
		}
		out[k] = strings.ReplaceAll(v, "$token", tok)
	}
	return out
}

// conformanceToken is conformance.OutcomeToken, which must not fail.
func conformanceToken(spec, installedToken, rv string) string {
	t, err := conformance.OutcomeToken(spec, installedToken, rv)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return t
}

// installTickets is conformance.InstallTickets on the API server.
func installTickets(ns, lockName string, c conformance.Case) conformance.Case {
	c, err := conformance.InstallTickets(store(ns), lockName, c)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return c
}

// waiterOf returns identity's waiter Lease of the lock, nil if it has none.
func waiterOf(ns, lockName, identity string) *coordinationv1.Lease {
	l, err := conformance.Waiter(store(ns), lockName, identity)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return l
}

// installConformance is conformance.Install on the API server.
func installConformance(ns, name string, c conformance.Case) *coordinationv1.Lease {
	l, err := conformance.Install(store(ns), name, c)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return l
}

// wantPermits is conformance.WantPermits, which must not fail.
func wantPermits(w *conformance.Outcome, installed *coordinationv1.Lease) map[string]string {
	out, err := conformance.WantPermits(w, installed, nil)
	ExpectWithOffset(2, err).NotTo(HaveOccurred())
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

// permitIdentities are l's permits as "<token> <ticket> <holder>" by annotation key, times
// aside (as a raw value when it is not a permit).
func permitIdentities(l *coordinationv1.Lease) map[string]string {
	out := map[string]string{}
	for k, v := range conformance.PermitAnnotations(l) {
		p, err := lease.ParsePermit(strings.TrimPrefix(k, locksv1alpha1.PermitAnnotationPrefix), v)
		if err != nil {
			out[k] = v
			continue
		}
		out[k] = fmt.Sprintf("%s %s %s", p.Token, p.Ticket, p.Holder)
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
	if got.ResourceVersion != installed.ResourceVersion { // written: by the version the outcome says
		ExpectWithOffset(1, got.Annotations[locksv1alpha1.ProtocolAnnotation]).To(Equal(conformance.WantProtocol(w)),
			"annotation fencedlock.io/protocol")
	}
	ExpectWithOffset(1, got.Annotations[locksv1alpha1.PermitsAnnotation]).To(Equal(conformance.WantLimit(c, w)), "annotation fencedlock.io/permits")
	ExpectWithOffset(1, permitIdentities(got)).To(Equal(wantPermits(w, installed)), "permits")
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
			if w, _ := conformance.CaseWrite(c); w == nil {
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
		w, admitted := conformance.CaseWrite(c)
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
			w, _ := conformance.CaseWrite(c)
			if c.WritesWaiter() {
				before := waiterOf(ns, name, c.Actor)
				sent, err := conformance.WaiterWrite(kit.GetLease(ns, name), c, before, *w.Waiter, time.Now())
				Expect(err).NotTo(HaveOccurred())
				if before == nil {
					err = writer.Create(ctx, sent)
				} else {
					err = writer.Update(ctx, sent)
				}
				if !admitted {
					policyDenied(err, "fencedlock-waiter-lease", c.Expect.Refused.Policy)
					Expect(apierrors.IsForbidden(err)).To(BeTrue(), "every refusal is 403 Forbidden: %v", err)
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
				sent, err = conformance.LockWrite(c, w, lock, time.Now())
				Expect(err).NotTo(HaveOccurred())
				if err = writer.Update(ctx, sent); !apierrors.IsConflict(err) || attempt == 5 {
					break
				}
			}
			if !admitted {
				policyDenied(err, "fencedlock-lease-protocol", c.Expect.Refused.Policy)
				Expect(apierrors.IsForbidden(err)).To(BeTrue(), "every refusal is 403 Forbidden: %v", err)
				return
			}
			Expect(err).NotTo(HaveOccurred(), "the write of the case was refused")

			expectConformanceLease(ns, name, c, lock, w)
		})
	}
})
