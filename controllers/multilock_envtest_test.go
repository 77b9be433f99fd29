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
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/token"
	"github.com/fencedlock/fencedlock/test/util"
)

// longLease keeps a lock's holder through the fake clock's steps.
var longLease = util.LeaseSeconds(3600)

var _ = Describe("Pods asking for several locks", func() {
	It("grants them in order, keeps the pod gated and unrevoked while it waits, and ungates it with every token", func() {
		ns := kit.NewNamespace()
		fa := kit.NewLock(ns, "a")
		kit.NewLock(ns, "b", longLease)                                // its holder outlives the clock steps below
		library, err := kit.Locker(ns, "b", "library").TryAcquire(ctx) // b is busy
		Expect(err).NotTo(HaveOccurred())

		pod := kit.CreatePod(util.MultiLockPod(ns, "p", "b,a"))
		id := locksv1alpha1.PodHolderIdentity(pod.Name, string(pod.UID))
		Expect(pod.Labels).To(HaveKeyWithValue(locksv1alpha1.LockLabel, "a"))
		Eventually(func() string { return kit.LeaseState(ns, "a").Holder }).Should(Equal(id), "a comes first")
		Eventually(func(g Gomega) {
			g.Expect(kit.GetLock(ns, "b").Status.Waiters).To(ContainElement(HaveField("Pod", "p")), "queued for b once it holds a")
		}).Should(Succeed())
		stillGated(ns, "p")
		Expect(util.PodTokens(kit.GetPod(ns, "p"))).To(BeEmpty(), "no token before it holds all its locks")

		By("a pod gated while it waits for b is not revoked for being not Ready")
		settle(fa)
		ta := kit.LeaseState(ns, "a").Token
		fakeClock.Step(time.Minute) // four lease durations
		poke(fa)
		Consistently(func() token.Token { return kit.LeaseState(ns, "a").Token }, "500ms").Should(Equal(ta),
			"the same grant: not revoked (and granted again)")
		stillGated(ns, "p")

		By("b's release grants the pod b and ungates it with both tokens")
		Expect(library.Release(ctx)).To(Succeed())
		Eventually(func() bool { return locksv1alpha1.HasLockGate(kit.GetPod(ns, "p")) }).Should(BeFalse())
		p := kit.GetPod(ns, "p")
		Expect(util.PodTokens(p)).To(Equal(map[string]token.Token{
			"a": kit.LeaseState(ns, "a").Token, "b": kit.LeaseState(ns, "b").Token}))
		Expect(p.Annotations).NotTo(HaveKey(locksv1alpha1.TokenAnnotation))
		Expect(kit.LeaseState(ns, "b").Holder).To(Equal(id))
		Expect(util.PodTokens(p)["b"]).To(BeNumerically(">", library.Token()))

		By("the pod ends: both locks are released")
		setPodStatus(ns, "p", corev1.PodSucceeded, false)
		Eventually(func(g Gomega) {
			g.Expect(kit.LeaseState(ns, "a").Holder).To(BeEmpty())
			g.Expect(kit.LeaseState(ns, "b").Holder).To(BeEmpty())
		}).Should(Succeed())
	})

	It("applies maxHoldSeconds to a pod waiting for its next lock, which then queues again in order", func() {
		ns := kit.NewNamespace()
		fa := kit.NewLock(ns, "a", func(fl *locksv1alpha1.FencedLock) { fl.Spec.MaxHoldSeconds = ptr.To[int32](20) })
		kit.NewLock(ns, "b", longLease)
		library, err := kit.Locker(ns, "b", "library").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())

		pod := kit.CreatePod(util.MultiLockPod(ns, "p", "a,b"))
		id := locksv1alpha1.PodHolderIdentity(pod.Name, string(pod.UID))
		Eventually(func() string { return kit.LeaseState(ns, "a").Holder }).Should(Equal(id))
		first := kit.LeaseState(ns, "a").Token
		settle(fa)

		fakeClock.Step(21 * time.Second)
		poke(fa)
		Eventually(func() []string { return podEvents(ns, "p") }).Should(ContainElement(
			MatchRegexp(`^Expired: Revoked lock a \(token \d+\): held longer than spec.maxHoldSeconds=20`)))
		Eventually(func(g Gomega) {
			st := kit.LeaseState(ns, "a")
			g.Expect(st.Holder).To(Equal(id), "the pod queues for a again and, nobody else waiting, gets it")
			g.Expect(st.Token).To(BeNumerically(">", first))
		}).Should(Succeed())
		stillGated(ns, "p")

		Expect(library.Release(ctx)).To(Succeed())
		Eventually(func() bool { return locksv1alpha1.HasLockGate(kit.GetPod(ns, "p")) }).Should(BeFalse())
		Expect(util.PodTokens(kit.GetPod(ns, "p"))).To(HaveKeyWithValue("a", kit.LeaseState(ns, "a").Token))
		Expect(k8sClient.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"}})).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(kit.LeaseState(ns, "a").Holder).To(BeEmpty())
			g.Expect(kit.LeaseState(ns, "b").Holder).To(BeEmpty())
		}).Should(Succeed())
	})

	It("makes a gated pod that lost an earlier lock give up the later ones, then grants them again in order", func() {
		ns := kit.NewNamespace()
		kit.NewLock(ns, "a")
		kit.NewLock(ns, "b", longLease)
		library, err := kit.Locker(ns, "b", "library").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		pod := kit.CreatePod(util.MultiLockPod(ns, "p", "a,b"))
		id := locksv1alpha1.PodHolderIdentity(pod.Name, string(pod.UID))
		Eventually(func(g Gomega) {
			g.Expect(kit.GetLock(ns, "b").Status.Waiters).To(ContainElement(HaveField("Pod", "p")))
		}).Should(Succeed())
		ta := kit.LeaseState(ns, "a").Token

		By("with the controller stopped, the pod is granted b (a crash before its ungate) and loses a")
		stopManage()
		restarted := false
		DeferCleanup(func() {
			if !restarted {
				startManager()
			}
		})
		Expect(library.Release(ctx)).To(Succeed())
		kept := kit.LeaseState(ns, "b").Reserved
		Expect(kept).NotTo(BeZero())
		var tb token.Token
		err = casRetrying(func() error {
			_, err := lease.CAS(ctx, lease.TypedWriter{Leases: clientset.CoordinationV1()}, kit.GetLease(ns, "b"),
				func(next *coordinationv1.Lease) error {
					h, _, err := lease.Settle(next, lease.Queue{Waiters: []lease.Waiter{{Ticket: kept, Holder: id}}}, time.Now())
					tb = h.Token
					return err
				})
			return err
		})
		Expect(err).NotTo(HaveOccurred())
		var other token.Token // a goes to another holder, so the pod cannot simply get it back
		err = casRetrying(func() error {
			_, err := lease.CAS(ctx, lease.TypedWriter{Leases: clientset.CoordinationV1()}, kit.GetLease(ns, "a"),
				func(next *coordinationv1.Lease) error {
					if _, err := lease.Revoke(next, id, ta, true, &lease.Queue{}, time.Now()); err != nil {
						return err
					}
					other, err = lease.Grant(next, "other", time.Now())
					return err
				})
			return err
		})
		Expect(err).NotTo(HaveOccurred())

		By("a restarted controller makes the pod give b up, as it lacks a, which comes first")
		startManager()
		restarted = true
		Eventually(func() []string { return podEvents(ns, "p") }).Should(ContainElement(
			MatchRegexp(`^Released: Released lock b \(token \d+\): the pod lost lock a, which comes before this one`)))
		Eventually(func() string { return kit.LeaseState(ns, "b").Holder }).Should(BeEmpty())
		stillGated(ns, "p")

		By("once a is free, the pod gets a, then b, and only then is ungated")
		err = casRetrying(func() error {
			_, err := lease.CAS(ctx, lease.TypedWriter{Leases: clientset.CoordinationV1()}, kit.GetLease(ns, "a"),
				func(next *coordinationv1.Lease) error {
					// Released as if the queue read were empty: the manager serves the queue of the
					// free lock (lease.Settle), the pod at its head.
					_, err := lease.Release(next, "other", other, &lease.Queue{}, time.Now())
					return err
				})
			return err
		})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() bool { return locksv1alpha1.HasLockGate(kit.GetPod(ns, "p")) }).Should(BeFalse())
		toks := util.PodTokens(kit.GetPod(ns, "p"))
		Expect(toks).To(Equal(map[string]token.Token{"a": kit.LeaseState(ns, "a").Token, "b": kit.LeaseState(ns, "b").Token}))
		Expect(toks["a"]).To(BeNumerically(">", ta))
		Expect(toks["b"]).To(BeNumerically(">", tb), "b was granted again after a, not kept out of order")
	})
})

// casRetrying runs one of the test's own Lease writes again on a conflict: the manager may write
// the same Lease meanwhile (a waiting mark, a settle), as any other writer may.
func casRetrying(write func() error) error { return retry.RetryOnConflict(retry.DefaultRetry, write) }
