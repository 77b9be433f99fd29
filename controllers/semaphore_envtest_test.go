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
	corev1 "k8s.io/api/core/v1"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/test/util"
)

func setPermits(fl *locksv1alpha1.FencedLock, n int32) {
	EventuallyWithOffset(1, func() error {
		cur := kit.GetLock(fl.Namespace, fl.Name)
		cur.Spec.Permits = n
		return k8sClient.Update(ctx, cur)
	}).Should(Succeed())
}

// permitOf is the permit number a granted pod was given.
func permitOf(ns, name string) string {
	return kit.GetPod(ns, name).Annotations[locksv1alpha1.PodPermitAnnotation]
}

var _ = Describe("Semaphores", func() {
	It("runs N pods at once, keeps the (N+1)-th gated until one ends, and grants it a higher token", func() {
		ns := kit.NewNamespace()
		kit.NewLock(ns, "pool", util.Permits(2))
		for _, n := range []string{"w-1", "w-2", "w-3"} {
			kit.CreatePod(util.Pod(ns, n, "pool"))
		}
		t1, t2 := granted(ns, "w-1"), granted(ns, "w-2")
		Expect(t1).NotTo(Equal(t2))
		Expect([]string{permitOf(ns, "w-1"), permitOf(ns, "w-2")}).To(ConsistOf("1", "2"))
		Consistently(func() bool { return locksv1alpha1.HasLockGate(kit.GetPod(ns, "w-3")) }, "500ms").Should(BeTrue())
		Eventually(func(g Gomega) {
			st := kit.GetLock(ns, "pool").Status
			g.Expect(st.Held).To(Equal("2/2"))
			g.Expect(st.Holders).To(HaveLen(2))
			g.Expect(st.WaitingCount).To(Equal(int32(1)))
			g.Expect(st.Conditions).To(ContainElement(HaveField("Message", ContainSubstring("2 of 2 permits held"))))
		}).Should(Succeed())

		setPodStatus(ns, "w-1", corev1.PodSucceeded, false)
		t3 := granted(ns, "w-3")
		Expect(t3).To(BeNumerically(">", max(t1, t2)), "a permit's token is above every token the lock issued")
		Expect(permitOf(ns, "w-3")).To(Equal(permitOf(ns, "w-1")), "w-3 takes the permit w-1 freed")
		Eventually(func() []string { return events(ns, "pool") }).Should(ContainElement(
			ContainSubstring("Granted to pod/w-3/")))
	})

	It("serves the queue at once when permits are raised, and revokes nobody when they are lowered", func() {
		ns := kit.NewNamespace()
		fl := kit.NewLock(ns, "pool", util.Permits(1))
		for _, n := range []string{"a", "b", "c"} {
			kit.CreatePod(util.Pod(ns, n, "pool"))
		}
		ta := granted(ns, "a")
		stillGated(ns, "b", "c")

		setPermits(fl, 3) // the lock's Lease becomes a semaphore's, a's grant moves to permit 1
		tb, tc := granted(ns, "b"), granted(ns, "c")
		Expect(tb).To(BeNumerically(">", ta))
		Expect(tc).To(BeNumerically(">", tb))
		st := kit.LeaseState(ns, "pool")
		Expect(st.Semaphore).To(BeTrue())
		Expect(st.Holders()).To(HaveLen(3))
		a := kit.GetPod(ns, "a")
		p, ok := st.HolderOf(locksv1alpha1.PodHolderIdentity(a.Name, string(a.UID)))
		Expect(ok).To(BeTrue())
		Expect(p.Token).To(Equal(ta), "a keeps its grant and token across the change of format")

		setPermits(fl, 1)
		Eventually(func() []string { return events(ns, "pool") }).Should(ContainElement(
			ContainSubstring("spec.permits lowered to 1 while 3 permits are held: nobody is revoked")))
		kit.CreatePod(util.Pod(ns, "d", "pool"))
		Expect(kit.LeaseState(ns, "pool").Holders()).To(HaveLen(3), "lowering revokes nobody")
		setPodStatus(ns, "a", corev1.PodSucceeded, false)
		setPodStatus(ns, "b", corev1.PodSucceeded, false)
		Eventually(func() int { return len(kit.LeaseState(ns, "pool").Holders()) }).Should(Equal(1))
		Consistently(func() bool { return locksv1alpha1.HasLockGate(kit.GetPod(ns, "d")) }, "500ms").Should(BeTrue(),
			"d waits while as many permits are held as the lock admits")
		setPodStatus(ns, "c", corev1.PodSucceeded, false)
		td := granted(ns, "d")
		Expect(td).To(BeNumerically(">", tc))
		Eventually(func() bool { return kit.LeaseState(ns, "pool").Semaphore }).Should(BeFalse(),
			"a semaphore of one permit returns to the lock format once its holder's token is the last")
	})

	It("revokes a permit that is not renewed and hands it to the next waiter, keeping the other holder", func() {
		ns := kit.NewNamespace()
		kit.NewLock(ns, "pool", util.Permits(2))
		Eventually(func() bool { return kit.LeaseState(ns, "pool").Semaphore }).Should(BeTrue())
		paused, err := kit.Locker(ns, "pool", "paused").TryAcquire(ctx) // never renews
		Expect(err).NotTo(HaveOccurred())
		live, err := kit.Locker(ns, "pool", "live").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(live.Token()).To(BeNumerically(">", paused.Token()))
		kit.CreatePod(util.Pod(ns, "next", "pool"))
		Eventually(func() int32 { return kit.GetLock(ns, "pool").Status.WaitingCount }).Should(Equal(int32(1)))
		for range 3 { // the live holder renews every 5s of the controller's clock; 15s is the lease
			fakeClock.Step(5 * time.Second)
			Expect(live.Renew(ctx)).To(Succeed())
		}
		tn := granted(ns, "next")
		Expect(tn).To(BeNumerically(">", live.Token()))
		st := kit.LeaseState(ns, "pool")
		Expect(st.RevokedToken).To(Equal(paused.Token()))
		_, stillLive := st.Permit("live", live.Token())
		Expect(stillLive).To(BeTrue(), "the renewing holder keeps its permit")
		Expect(paused.Renew(ctx)).To(HaveOccurred(), "the revoked holder learns it lost its permit")
		Eventually(func() []string { return events(ns, "pool") }).Should(ContainElement(
			ContainSubstring("Grant of paused (token " + paused.Token().String() + ") was not renewed")))
	})

	It("lets pods name a semaphore among several locks: all or nothing, in the global order", func() {
		ns := kit.NewNamespace()
		kit.NewLock(ns, "pool", util.Permits(2), longLease)
		kit.NewLock(ns, "zledger", longLease)
		m1 := kit.CreatePod(util.MultiLockPod(ns, "m1", "zledger,pool")) // the order of the annotation does not matter
		Eventually(func() bool { return locksv1alpha1.HasLockGate(kit.GetPod(ns, "m1")) }).Should(BeFalse())
		Expect(util.PodTokens(kit.GetPod(ns, "m1"))).To(HaveKey("pool"))
		Expect(util.PodTokens(kit.GetPod(ns, "m1"))).To(HaveKey("zledger"))

		m2 := kit.CreatePod(util.MultiLockPod(ns, "m2", "pool,zledger"))
		m2id := locksv1alpha1.PodHolderIdentity(m2.Name, string(m2.UID))
		Eventually(func() bool { _, ok := kit.LeaseState(ns, "pool").HolderOf(m2id); return ok }).Should(BeTrue(),
			"m2 takes the second permit of pool, the first of its locks in the order")
		kit.CreatePod(util.Pod(ns, "s", "pool")) // pool is full now: s waits
		Consistently(func(g Gomega) {
			g.Expect(locksv1alpha1.HasLockGate(kit.GetPod(ns, "m2"))).To(BeTrue(), "m2 waits for zledger")
			g.Expect(util.PodTokens(kit.GetPod(ns, "m2"))).To(BeEmpty(), "no token before it holds all its locks")
			g.Expect(locksv1alpha1.HasLockGate(kit.GetPod(ns, "s"))).To(BeTrue(), "s waits for a permit")
		}, "500ms").Should(Succeed())

		setPodStatus(ns, m1.Name, corev1.PodSucceeded, false)
		Eventually(func() bool { return locksv1alpha1.HasLockGate(kit.GetPod(ns, "m2")) }).Should(BeFalse(),
			"m1's end frees zledger: m2 holds both")
		Expect(util.PodTokens(kit.GetPod(ns, "m2"))).To(HaveLen(2))
		ts := granted(ns, "s") // and the permit m1 held goes to s
		Expect(ts.String()).To(Equal(kit.LeaseState(ns, "pool").Token.String()), "s got the last permit granted")
		Expect(kit.LeaseState(ns, "pool").Holders()).To(ConsistOf(m2id, HavePrefix("pod/s/")))
	})
})
