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
	"k8s.io/utils/ptr"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/token"
)

// newMultiLockPod creates a pod asking for locks through the annotation alone.
func newMultiLockPod(ns, name, locks string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Annotations: map[string]string{locksv1alpha1.LocksAnnotation: locks}},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "work", Image: "example.com/worker:1"}}},
	}
	ExpectWithOffset(1, k8sClient.Create(ctx, pod)).To(Succeed())
	return pod
}

func lockTokens(p *corev1.Pod) map[string]string {
	out := map[string]string{}
	for _, l := range locksv1alpha1.PodLocks(p) {
		if v, ok := p.Annotations[locksv1alpha1.LockTokenAnnotation(l)]; ok {
			out[l] = v
		}
	}
	return out
}

func longLease(fl *locksv1alpha1.FencedLock) { fl.Spec.LeaseDurationSeconds = 3600 }

var _ = Describe("Pods asking for several locks", func() {
	It("grants them in order, keeps the pod gated and unrevoked while it waits, and ungates it with every token", func() {
		ns := newNamespace()
		fa := newLock(ns, "a", nil)
		fb := newLock(ns, "b", longLease)                     // its holder outlives the clock steps below
		library, err := locker(fb, "library").TryAcquire(ctx) // b is busy
		Expect(err).NotTo(HaveOccurred())

		pod := newMultiLockPod(ns, "p", "b,a")
		id := locksv1alpha1.PodHolderIdentity(pod.Name, string(pod.UID))
		Expect(pod.Labels).To(HaveKeyWithValue(locksv1alpha1.LockLabel, "a"))
		Eventually(func() string { return leaseState(ns, "a").Holder }).Should(Equal(id), "a comes first")
		Eventually(func(g Gomega) {
			g.Expect(getLock(fb).Status.Waiters).To(ContainElement(HaveField("Pod", "p")), "queued for b once it holds a")
		}).Should(Succeed())
		stillGated(ns, "p")
		Expect(lockTokens(getPod(ns, "p"))).To(BeEmpty(), "no token before it holds all its locks")

		By("a pod gated while it waits for b is not revoked for being not Ready")
		settle(fa)
		ta := leaseState(ns, "a").Token
		fakeClock.Step(time.Minute) // four lease durations
		poke(fa)
		Consistently(func() token.Token { return leaseState(ns, "a").Token }, "500ms").Should(Equal(ta),
			"the same grant: not revoked (and granted again)")
		stillGated(ns, "p")

		By("b's release grants the pod b and ungates it with both tokens")
		Expect(library.Release(ctx)).To(Succeed())
		Eventually(func() bool { return locksv1alpha1.HasLockGate(getPod(ns, "p")) }).Should(BeFalse())
		p := getPod(ns, "p")
		Expect(lockTokens(p)).To(Equal(map[string]string{
			"a": leaseState(ns, "a").Token.String(), "b": leaseState(ns, "b").Token.String()}))
		Expect(p.Annotations).NotTo(HaveKey(locksv1alpha1.TokenAnnotation))
		Expect(leaseState(ns, "b").Holder).To(Equal(id))
		tb, err := token.Parse(lockTokens(p)["b"])
		Expect(err).NotTo(HaveOccurred())
		Expect(tb).To(BeNumerically(">", library.Token()))

		By("the pod ends: both locks are released")
		setPodStatus(ns, "p", corev1.PodSucceeded, false)
		Eventually(func(g Gomega) {
			g.Expect(leaseState(ns, "a").Holder).To(BeEmpty())
			g.Expect(leaseState(ns, "b").Holder).To(BeEmpty())
		}).Should(Succeed())
	})

	It("applies maxHoldSeconds to a pod waiting for its next lock, which then queues again in order", func() {
		ns := newNamespace()
		fa := newLock(ns, "a", func(fl *locksv1alpha1.FencedLock) { fl.Spec.MaxHoldSeconds = ptr.To[int32](20) })
		fb := newLock(ns, "b", longLease)
		library, err := locker(fb, "library").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())

		pod := newMultiLockPod(ns, "p", "a,b")
		id := locksv1alpha1.PodHolderIdentity(pod.Name, string(pod.UID))
		Eventually(func() string { return leaseState(ns, "a").Holder }).Should(Equal(id))
		first := leaseState(ns, "a").Token
		settle(fa)

		fakeClock.Step(21 * time.Second)
		poke(fa)
		Eventually(func() []string { return podEvents(ns, "p") }).Should(ContainElement(
			MatchRegexp(`^Expired: Revoked lock a \(token \d+\): held longer than spec.maxHoldSeconds=20`)))
		Eventually(func(g Gomega) {
			st := leaseState(ns, "a")
			g.Expect(st.Holder).To(Equal(id), "the pod queues for a again and, nobody else waiting, gets it")
			g.Expect(st.Token).To(BeNumerically(">", first))
		}).Should(Succeed())
		stillGated(ns, "p")

		Expect(library.Release(ctx)).To(Succeed())
		Eventually(func() bool { return locksv1alpha1.HasLockGate(getPod(ns, "p")) }).Should(BeFalse())
		Expect(lockTokens(getPod(ns, "p"))).To(HaveKeyWithValue("a", leaseState(ns, "a").Token.String()))
		Expect(k8sClient.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"}})).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(leaseState(ns, "a").Holder).To(BeEmpty())
			g.Expect(leaseState(ns, "b").Holder).To(BeEmpty())
		}).Should(Succeed())
	})

	It("makes a gated pod that lost an earlier lock give up the later ones, then grants them again in order", func() {
		ns := newNamespace()
		newLock(ns, "a", nil)
		fb := newLock(ns, "b", longLease)
		library, err := locker(fb, "library").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		pod := newMultiLockPod(ns, "p", "a,b")
		id := locksv1alpha1.PodHolderIdentity(pod.Name, string(pod.UID))
		Eventually(func(g Gomega) {
			g.Expect(getLock(fb).Status.Waiters).To(ContainElement(HaveField("Pod", "p")))
		}).Should(Succeed())
		ta := leaseState(ns, "a").Token

		By("with the controller stopped, the pod is granted b (a crash before its ungate) and loses a")
		stopManage()
		restarted := false
		DeferCleanup(func() {
			if !restarted {
				startManager()
			}
		})
		Expect(library.Release(ctx)).To(Succeed())
		kept := leaseState(ns, "b").Reserved
		Expect(kept).NotTo(BeZero())
		var tb token.Token
		_, err = lease.CAS(ctx, lease.TypedWriter{Leases: clientset.CoordinationV1()}, getLease(ns, "b"),
			func(next *coordinationv1.Lease) error {
				h, _, err := lease.Settle(next, lease.Queue{Waiters: []lease.Waiter{{Ticket: kept, Holder: id}}}, time.Now())
				tb = h.Token
				return err
			})
		Expect(err).NotTo(HaveOccurred())
		var other token.Token // a goes to another holder, so the pod cannot simply get it back
		_, err = lease.CAS(ctx, lease.TypedWriter{Leases: clientset.CoordinationV1()}, getLease(ns, "a"),
			func(next *coordinationv1.Lease) error {
				if _, err := lease.Revoke(next, id, ta, true, &lease.Queue{}, time.Now()); err != nil {
					return err
				}
				other, err = lease.Grant(next, "other", time.Now())
				return err
			})
		Expect(err).NotTo(HaveOccurred())

		By("a restarted controller makes the pod give b up, as it lacks a, which comes first")
		startManager()
		restarted = true
		Eventually(func() []string { return podEvents(ns, "p") }).Should(ContainElement(
			MatchRegexp(`^Released: Released lock b \(token \d+\): the pod lost lock a, which comes before this one`)))
		Eventually(func() string { return leaseState(ns, "b").Holder }).Should(BeEmpty())
		stillGated(ns, "p")

		By("once a is free, the pod gets a, then b, and only then is ungated")
		_, err = lease.CAS(ctx, lease.TypedWriter{Leases: clientset.CoordinationV1()}, getLease(ns, "a"),
			func(next *coordinationv1.Lease) error {
				// Released as if the queue read were empty: the manager serves the queue of the
				// free lock (lease.Settle), the pod at its head.
				_, err := lease.Release(next, "other", other, &lease.Queue{}, time.Now())
				return err
			})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() bool { return locksv1alpha1.HasLockGate(getPod(ns, "p")) }).Should(BeFalse())
		toks := lockTokens(getPod(ns, "p"))
		Expect(toks).To(Equal(map[string]string{
			"a": leaseState(ns, "a").Token.String(), "b": leaseState(ns, "b").Token.String()}))
		newA, err := token.Parse(toks["a"])
		Expect(err).NotTo(HaveOccurred())
		newB, err := token.Parse(toks["b"])
		Expect(err).NotTo(HaveOccurred())
		Expect(newA).To(BeNumerically(">", ta))
		Expect(newB).To(BeNumerically(">", tb), "b was granted again after a, not kept out of order")
	})
})
