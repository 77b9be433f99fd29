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

package controllers_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/controllers"
	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/lock"
	"github.com/fencedlock/fencedlock/pkg/token"
	"github.com/fencedlock/fencedlock/test/util"
)

// poke makes the controller reconcile the lock now (an annotation change is an update event).
func poke(fl *locksv1alpha1.FencedLock) {
	cur := kit.GetLock(fl.Namespace, fl.Name)
	patch := client.MergeFrom(cur.DeepCopy())
	if cur.Annotations == nil {
		cur.Annotations = map[string]string{}
	}
	cur.Annotations["test/poke"] = fmt.Sprint(time.Now().UnixNano())
	ExpectWithOffset(1, k8sClient.Patch(ctx, cur, patch)).To(Succeed())
}

// settle waits until the controller has mirrored the current Lease into the status, i.e. it has
// observed the Lease's latest state.
func settle(fl *locksv1alpha1.FencedLock) {
	EventuallyWithOffset(1, func(g Gomega) {
		st := kit.LeaseState(fl.Namespace, fl.Name)
		cur := kit.GetLock(fl.Namespace, fl.Name)
		g.Expect(cur.Status.Holder).To(Equal(st.Holder))
		g.Expect(cur.Status.Token).To(Equal(st.Token.String()))
		if st.Held() {
			g.Expect(cur.Status.RenewTime).NotTo(BeNil())
			g.Expect(cur.Status.RenewTime.Equal(st.RenewTime)).To(BeTrue())
		}
	}).Should(Succeed())
}

// renewalSeen is settle after a renewal: a renewal alone wakes no reconcile (its event is noted as
// a sign of life, and the status mirrors it later), so the lock is poked to mirror it now.
func renewalSeen(fl *locksv1alpha1.FencedLock) {
	poke(fl)
	settle(fl)
}

func allEvents(ns string) []eventsv1.Event {
	var list eventsv1.EventList
	ExpectWithOffset(2, k8sClient.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
	return list.Items
}

func events(ns, name string) []string {
	var out []string
	for _, e := range allEvents(ns) {
		if e.Regarding.Name == name && e.Regarding.Kind == "FencedLock" {
			out = append(out, e.Reason+": "+e.Note)
		}
	}
	return out
}

var _ = BeforeEach(func() {
	SetDefaultEventuallyTimeout(20 * time.Second)
	SetDefaultEventuallyPollingInterval(20 * time.Millisecond)
})

var _ = Describe("FencedLock API validation", func() {
	It("defaults leaseDurationSeconds to 15", func() {
		fl := kit.NewLock(kit.NewNamespace(), "defaults")
		Expect(fl.Spec.LeaseDurationSeconds).To(Equal(int32(15)))
	})

	DescribeTable("refuses a bad spec with a message naming the field",
		func(spec locksv1alpha1.FencedLockSpec, want string) {
			fl := &locksv1alpha1.FencedLock{ObjectMeta: metav1.ObjectMeta{Namespace: "default", GenerateName: "bad-"}, Spec: spec}
			err := k8sClient.Create(ctx, fl)
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring(want))
		},
		Entry("lease duration below 1", locksv1alpha1.FencedLockSpec{LeaseDurationSeconds: -1}, "spec.leaseDurationSeconds"),
		Entry("lease duration above an hour", locksv1alpha1.FencedLockSpec{LeaseDurationSeconds: 3601}, "spec.leaseDurationSeconds"),
		Entry("max hold below 1", locksv1alpha1.FencedLockSpec{LeaseDurationSeconds: 1, MaxHoldSeconds: ptr.To[int32](0)}, "spec.maxHoldSeconds"),
		Entry("max hold shorter than the lease", locksv1alpha1.FencedLockSpec{LeaseDurationSeconds: 30, MaxHoldSeconds: ptr.To[int32](10)},
			"spec.maxHoldSeconds must be at least spec.leaseDurationSeconds"),
	)
})

var _ = Describe("FencedLock controller", func() {
	It("creates, owns and stamps the Lease, and mirrors it into the status", func() {
		ns := kit.NewNamespace()
		fl := kit.NewLock(ns, "settlement")

		l := kit.GetLease(ns, "settlement")
		Expect(metav1.IsControlledBy(l, fl)).To(BeTrue())
		Expect(l.Labels).To(HaveKeyWithValue(locksv1alpha1.ManagedByLabel, locksv1alpha1.ManagedByValue))
		Expect(*l.Spec.LeaseDurationSeconds).To(Equal(int32(15)))
		st := kit.LeaseState(ns, "settlement")
		Expect(st.Initialized()).To(BeTrue())
		Expect(st.Held()).To(BeFalse())
		Expect(fl.Status.Token).To(Equal(st.Token.String()))
		held := meta.FindStatusCondition(fl.Status.Conditions, locksv1alpha1.ConditionHeld)
		Expect(held.Status).To(Equal(metav1.ConditionFalse))
		Expect(held.Reason).To(Equal(locksv1alpha1.ReasonAvailable))
		Expect(held.ObservedGeneration).To(Equal(fl.Generation))

		By("granting, the status shows holder and token")
		g, err := kit.Locker(ns, "settlement", "worker-a").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(g.Token()).To(BeNumerically(">", st.Token))
		Eventually(func(g2 Gomega) {
			cur := kit.GetLock(ns, "settlement")
			g2.Expect(cur.Status.Holder).To(Equal("worker-a"))
			g2.Expect(cur.Status.Token).To(Equal(g.Token().String()))
			g2.Expect(cur.Status.LeaseTransitions).To(Equal(int32(1)))
			g2.Expect(meta.IsStatusConditionTrue(cur.Status.Conditions, locksv1alpha1.ConditionHeld)).To(BeTrue())
		}).Should(Succeed())

		By("releasing, the holder is cleared and the token stays")
		Expect(g.Release(ctx)).To(Succeed())
		Eventually(func(g2 Gomega) {
			cur := kit.GetLock(ns, "settlement")
			g2.Expect(cur.Status.Holder).To(BeEmpty())
			g2.Expect(cur.Status.Token).To(Equal(g.Token().String()))
			g2.Expect(meta.FindStatusCondition(cur.Status.Conditions, locksv1alpha1.ConditionHeld).Reason).To(Equal(locksv1alpha1.ReasonReleased))
		}).Should(Succeed())
		Eventually(func() []string { return events(ns, "settlement") }).Should(ContainElements(
			"Granted: Granted to worker-a with token "+g.Token().String(),
			"Released: Released by worker-a (token "+g.Token().String()+")"))
	})

	It("applies a changed leaseDurationSeconds to the Lease", func() {
		ns := kit.NewNamespace()
		kit.NewLock(ns, "resize")
		cur := kit.GetLock(ns, "resize")
		cur.Spec.LeaseDurationSeconds = 40
		Expect(k8sClient.Update(ctx, cur)).To(Succeed())
		Eventually(func() int32 { return *kit.GetLease(ns, "resize").Spec.LeaseDurationSeconds }).Should(Equal(int32(40)))
	})

	It("rewrites the status for a renewal alone at most once per --status-renewal-interval", func() {
		stopManage()
		stop, err := util.StartManager(ctx, cfg, fakeClock, testEnv, controllers.WithStatusRenewalInterval(time.Minute))
		Expect(err).NotTo(HaveOccurred())
		stopManage = stop
		DeferCleanup(func() { stopManage(); startManager() })
		ns := kit.NewNamespace()
		fl := kit.NewLock(ns, "renewals")
		g, err := kit.Locker(ns, "renewals", "steady").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		settle(fl) // the grant is written at once, its renewTime with it
		written := kit.GetLock(ns, "renewals")

		By("renewals within the interval leave the status as written, when the lock is reconciled too")
		for range 3 {
			fakeClock.Step(5 * time.Second)
			Expect(g.Renew(ctx)).To(Succeed())
		}
		poke(fl)
		Consistently(func() locksv1alpha1.FencedLockStatus { return kit.GetLock(ns, "renewals").Status }, "2s").
			Should(Equal(written.Status), "a renewal alone wrote the status")

		By("a renewal once the interval has passed is written")
		fakeClock.Step(time.Minute)
		Expect(g.Renew(ctx)).To(Succeed())
		renewalSeen(fl)

		By("any other change is written at once, with the latest renewal")
		fakeClock.Step(time.Second)
		Expect(g.Renew(ctx)).To(Succeed())
		wctx, stopWaiting := context.WithCancel(ctx)
		defer stopWaiting()
		waited := make(chan error, 1)
		go func() { _, err := kit.Locker(ns, "renewals", "next").Acquire(wctx); waited <- err }()
		Eventually(func() int32 { return kit.GetLock(ns, "renewals").Status.WaitingCount }).Should(Equal(int32(1)))
		settle(fl)
		stopWaiting()
		Eventually(waited).Should(Receive(MatchError(context.Canceled)))
		Expect(g.Release(ctx)).To(Succeed())
	})

	It("revokes a grant not renewed within the lease, judged on its own clock", func() {
		ns := kit.NewNamespace()
		fl := kit.NewLock(ns, "expiry")
		g, err := kit.Locker(ns, "expiry", "paused").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		settle(fl)

		fakeClock.Step(10 * time.Second)
		Expect(g.Renew(ctx)).To(Succeed())
		renewalSeen(fl) // the controller observed the renewal at +10s

		fakeClock.Step(14 * time.Second) // 24s after the grant, 14s after the renewal
		poke(fl)
		Consistently(func() string { return kit.LeaseState(ns, "expiry").Holder }, "300ms").Should(Equal("paused"))

		fakeClock.Step(2 * time.Second) // 16s after the renewal
		poke(fl)
		Eventually(func() string { return kit.LeaseState(ns, "expiry").Holder }).Should(BeEmpty())
		st := kit.LeaseState(ns, "expiry")
		Expect(st.Token).To(Equal(g.Token()), "revocation does not issue a token")
		Expect(st.RevokedToken).To(Equal(g.Token()))

		err = g.Renew(ctx)
		Expect(errors.Is(err, lock.ErrLost)).To(BeTrue())
		Expect(err.Error()).To(ContainSubstring("revoked"))
		Expect(g.Lost()).To(BeClosed())

		Eventually(func() string {
			return meta.FindStatusCondition(kit.GetLock(ns, "expiry").Status.Conditions, locksv1alpha1.ConditionHeld).Reason
		}).Should(Equal(locksv1alpha1.ReasonExpired))
		Eventually(func() []string { return events(ns, "expiry") }).Should(ContainElement(
			"Expired: Grant of paused (token " + g.Token().String() + ") was not renewed within 15s; revoked"))

		next, err := kit.Locker(ns, "expiry", "next").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(next.Token()).To(BeNumerically(">", g.Token()))
	})

	It("counts only the holder's new renewTime as a renewal, not a bystander's write to the Lease", func() {
		ns := kit.NewNamespace()
		fl := kit.NewLock(ns, "bystander")
		g, err := kit.Locker(ns, "bystander", "dead").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		settle(fl)
		holder := func() string { return kit.LeaseState(ns, "bystander").Holder }

		fakeClock.Step(10 * time.Second)
		By("a bystander labels and annotates the Lease of a holder that renews nothing")
		l := kit.GetLease(ns, "bystander")
		l.Labels["example.com/team"] = "payments"
		l.Annotations["example.com/note"] = "audited"
		Expect(k8sClient.Update(ctx, l)).To(Succeed())
		By("a write that sets the same renewTime again, with another annotation")
		l = kit.GetLease(ns, "bystander")
		same := *l.Spec.RenewTime
		l.Spec.RenewTime = &same
		l.Annotations["example.com/note"] = "audited twice"
		Expect(k8sClient.Update(ctx, l)).To(Succeed())
		By("a write of the same renewTime alone, a no-op at the API server")
		l = kit.GetLease(ns, "bystander")
		rv := l.ResourceVersion
		l.Spec.RenewTime = &same
		Expect(k8sClient.Update(ctx, l)).To(Succeed())
		Expect(l.ResourceVersion).To(Equal(rv))
		Consistently(holder, "300ms").Should(Equal("dead")) // the controller sees the writes at +10s

		fakeClock.Step(4 * time.Second) // 14s after the grant
		poke(fl)
		Consistently(holder, "300ms").Should(Equal("dead"))

		fakeClock.Step(2 * time.Second) // 16s after the grant, 6s after the bystander's writes
		poke(fl)
		Eventually(holder).Should(BeEmpty())
		Expect(kit.LeaseState(ns, "bystander").RevokedToken).To(Equal(g.Token()))
	})

	It("revokes at the deadline even while every status write fails", func() {
		ns := kit.NewNamespace()
		kit.NewLock(ns, "mirror", util.LeaseSeconds(1))
		denyStatusWrites(ns)
		g, err := kit.Locker(ns, "mirror", "silent").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		holder := func() string { return kit.LeaseState(ns, "mirror").Holder }
		errorsBefore := reconcileErrors()

		// Long enough for a failing reconcile's exponential backoff (5ms, doubling) to grow past
		// the time the test then allows for the revocation.
		Consistently(holder, "5500ms").Should(Equal("silent"))
		Expect(reconcileErrors()).To(BeNumerically(">", errorsBefore),
			"the failed reconciles count in controller-runtime's error metric, deadline or not")
		fakeClock.Step(2 * time.Second) // no poke: only the controller's own timer can revoke
		Eventually(holder, "2500ms").Should(BeEmpty())
		Expect(kit.LeaseState(ns, "mirror").RevokedToken).To(Equal(g.Token()))
		Expect(kit.GetLock(ns, "mirror").Status.Holder).To(BeEmpty(), "the status write was refused all along")
	})

	It("revokes a grant held longer than maxHoldSeconds even if renewed", func() {
		ns := kit.NewNamespace()
		fl := kit.NewLock(ns, "bounded", func(fl *locksv1alpha1.FencedLock) {
			fl.Spec.LeaseDurationSeconds = 15
			fl.Spec.MaxHoldSeconds = ptr.To[int32](20)
		})
		g, err := kit.Locker(ns, "bounded", "greedy").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		settle(fl)
		for _, step := range []time.Duration{10 * time.Second, 9 * time.Second} {
			fakeClock.Step(step)
			Expect(g.Renew(ctx)).To(Succeed())
			renewalSeen(fl)
		}
		fakeClock.Step(time.Second) // 20s after the grant, 1s after the last renewal
		poke(fl)
		Eventually(func() string { return kit.LeaseState(ns, "bounded").Holder }).Should(BeEmpty())
		Eventually(func() []string { return events(ns, "bounded") }).Should(ContainElement(
			ContainSubstring("exceeded spec.maxHoldSeconds=20")))
	})

	It("recreates a deleted Lease with a token above every earlier one", func() {
		ns := kit.NewNamespace()
		kit.NewLock(ns, "recreate")
		g, err := kit.Locker(ns, "recreate", "a").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		// The event is told from the grant the status showed: wait until it shows this one, or a
		// Lease deleted before the controller saw the grant ends a grant it never reported.
		Eventually(func() string { return kit.GetLock(ns, "recreate").Status.Holder }).Should(Equal("a"))

		old := kit.GetLease(ns, "recreate")
		Expect(k8sClient.Delete(ctx, old)).To(Succeed())
		Eventually(func(g2 Gomega) {
			l := &coordinationv1.Lease{}
			g2.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(old), l)).To(Succeed())
			g2.Expect(l.UID).NotTo(Equal(old.UID))
			st, err := lease.Read(l)
			g2.Expect(err).NotTo(HaveOccurred())
			g2.Expect(st.Token).To(BeNumerically(">", g.Token()))
		}).Should(Succeed())

		Expect(errors.Is(g.Renew(ctx), lock.ErrLost)).To(BeTrue(), "the old grant is gone with its Lease")
		Eventually(func() []string { return events(ns, "recreate") }).Should(ContainElement(
			MatchRegexp(`^LeaseDeleted: The Lease was deleted while a held it with token %s; recreated with token \d+`, g.Token())),
			"a deleted Lease is reported as such, not as a release")
		Expect(events(ns, "recreate")).NotTo(ContainElement(HavePrefix("Released")))
		next, err := kit.Locker(ns, "recreate", "b").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(next.Token()).To(BeNumerically(">", g.Token()))
	})

	It("keeps a grant across a controller restart and still expires it afterwards", func() {
		ns := kit.NewNamespace()
		fl := kit.NewLock(ns, "restart")
		g, err := kit.Locker(ns, "restart", "survivor").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		settle(fl)

		By("restarting the controller: observations are lost, the grant is not")
		stopManage()
		fakeClock.Step(30 * time.Second) // the lease ran out while no controller was looking
		startManager()
		poke(fl)
		Consistently(func() string { return kit.LeaseState(ns, "restart").Holder }, "300ms").Should(Equal("survivor"))
		Expect(g.Renew(ctx)).To(Succeed())
		Expect(kit.LeaseState(ns, "restart").Token).To(Equal(g.Token()), "renewals never change the token")
		renewalSeen(fl)

		fakeClock.Step(16 * time.Second)
		poke(fl)
		Eventually(func() string { return kit.LeaseState(ns, "restart").Holder }).Should(BeEmpty())

		next, err := kit.Locker(ns, "restart", "after-restart").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(next.Token()).To(BeNumerically(">", g.Token()), "tokens keep increasing across controller restarts")
	})

	It("reports a foreign Lease of the same name instead of taking it over", func() {
		ns := kit.NewNamespace()
		foreign := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: new("someone-elses-leader")}}
		Expect(k8sClient.Create(ctx, foreign)).To(Succeed())
		// Made in an earlier second than the lock (creation times have seconds): a name that
		// collides, not a squatter, which the manager would replace.
		time.Sleep(time.Until(foreign.CreationTimestamp.Add(time.Second)))
		fl := &locksv1alpha1.FencedLock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken"}}
		Expect(k8sClient.Create(ctx, fl)).To(Succeed())
		Eventually(func(g Gomega) {
			c := meta.FindStatusCondition(kit.GetLock(ns, "taken").Status.Conditions, locksv1alpha1.ConditionReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(locksv1alpha1.ReasonLeaseConflict))
			g.Expect(c.Message).To(ContainSubstring("delete that Lease or give the lock another name"))
		}).Should(Succeed())
		Expect(*kit.GetLease(ns, "taken").Spec.HolderIdentity).To(Equal("someone-elses-leader"))
	})

	It("issues strictly increasing tokens over many grants", func() {
		ns := kit.NewNamespace()
		kit.NewLock(ns, "sequence")
		var last token.Token
		for i := range 10 {
			g, err := kit.Locker(ns, "sequence", fmt.Sprintf("w%d", i)).TryAcquire(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(g.Token()).To(BeNumerically(">", last))
			Expect(strings.TrimLeft(g.Token().String(), "0123456789")).To(BeEmpty(), "decimal string")
			last = g.Token()
			Expect(g.Release(ctx)).To(Succeed())
		}
		Eventually(func() int32 { return kit.GetLock(ns, "sequence").Status.LeaseTransitions }).Should(Equal(int32(10)))
	})
})

// denyStatusWrites makes the API server refuse every FencedLock status write in namespace ns (a
// ValidatingAdmissionPolicy), until the spec ends.
func denyStatusWrites(ns string) {
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-status-" + ns},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
						Rule: admissionregistrationv1.Rule{APIGroups: []string{locksv1alpha1.GroupVersion.Group},
							APIVersions: []string{"*"}, Resources: []string{"fencedlocks/status"}},
					}}},
			},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: "status writes refused by the test"}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy.Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}
	// The probe must be Ready before the policy can refuse the status write that makes it so.
	kit.NewLock(ns, "probe")
	ExpectWithOffset(1, k8sClient.Create(ctx, policy)).To(Succeed())
	ExpectWithOffset(1, k8sClient.Create(ctx, binding)).To(Succeed())
	DeferCleanup(func() {
		Expect(k8sClient.Delete(ctx, binding)).To(Succeed())
		Expect(k8sClient.Delete(ctx, policy)).To(Succeed())
	})
	// The policy takes effect asynchronously: probe with a lock of its own until it refuses.
	EventuallyWithOffset(1, func() error {
		return k8sClient.Status().Patch(ctx, kit.GetLock(ns, "probe"), client.RawPatch(types.MergePatchType,
			[]byte(fmt.Sprintf(`{"status":{"waitingCount":%d}}`, time.Now().UnixNano()%1000+1))))
	}).Should(MatchError(ContainSubstring("status writes refused by the test")))
}

// reconcileErrors is controller-runtime's controller_runtime_reconcile_errors_total of the
// FencedLock controller.
func reconcileErrors() float64 {
	families, err := crmetrics.Registry.Gather()
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_errors_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "controller" && lp.GetValue() == "fencedlock" {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
