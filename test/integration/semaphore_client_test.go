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
	"context"
	"errors"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/lock"
	"github.com/fencedlock/fencedlock/pkg/token"
)

// newSemaphore creates a FencedLock with spec.permits and waits until the manager has written
// its Lease in the semaphore format (lease.SetPermits).
func newSemaphore(ns, name string, permits, leaseSeconds int32) {
	fl := &locksv1alpha1.FencedLock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: locksv1alpha1.FencedLockSpec{LeaseDurationSeconds: leaseSeconds, Permits: permits}}
	ExpectWithOffset(1, k8sClient.Create(ctx, fl)).To(Succeed())
	EventuallyWithOffset(1, func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(fl), fl)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(fl.Status.Conditions, locksv1alpha1.ConditionReady)).To(BeTrue())
		st, err := lease.Read(getLease(ns, name))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(st.Semaphore).To(BeTrue(), "the manager writes spec.permits to the Lease")
		g.Expect(st.Limit).To(Equal(int(permits)))
	}, 20*time.Second, 20*time.Millisecond).Should(Succeed())
}

var _ = Describe("Semaphore, Go client", func() {
	It("holds two permits at once with fresh tokens; a third queues and is handed the freed permit in the release", func() {
		ns := newNamespace()
		newSemaphore(ns, "pool", 2, 15)
		earlier := leaseState(ns, "pool").Token

		a, err := locker(ns, "pool", "a").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		b, err := locker(ns, "pool", "b").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect([]int{a.Permit(), b.Permit()}).To(Equal([]int{1, 2}))
		Expect(a.Token()).To(BeNumerically(">", earlier))
		Expect(b.Token()).To(BeNumerically(">", a.Token()), "every permit's token is above every earlier token of the lock")
		st := leaseState(ns, "pool")
		Expect(st.Holders()).To(Equal([]string{"a", "b"}))
		Expect(st.Token).To(Equal(b.Token()))

		By("a third is refused by TryAcquire, and a second permit for one identity too")
		_, err = locker(ns, "pool", "c").TryAcquire(ctx)
		Expect(errors.Is(err, lock.ErrHeld)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("all 2 permits"))
		_, err = locker(ns, "pool", "a").TryAcquire(ctx)
		Expect(errors.Is(err, lock.ErrHeld)).To(BeTrue(), "%v", err)

		By("Acquire queues; both holders renew independently")
		gotC, failedC := acquireAsync(ctx, locker(ns, "pool", "c"))
		Eventually(func() []string { return waiterIDs(ns, "pool") }, 10*time.Second, 20*time.Millisecond).
			Should(Equal([]string{"c"}))
		Eventually(func() bool { return leaseState(ns, "pool").Waiting }, 10*time.Second, 20*time.Millisecond).
			Should(BeTrue(), "the waiter marks the lock waited for, so a release reads the queue")
		Expect(a.Renew(ctx)).To(Succeed())
		Expect(b.Renew(ctx)).To(Succeed())
		Consistently(gotC, 300*time.Millisecond).ShouldNot(Receive())

		By("b's release grants c permit 2 in the same write")
		before := getLease(ns, "pool").ResourceVersion
		Expect(b.Release(ctx)).To(Succeed())
		st = leaseState(ns, "pool")
		served, ok := st.HolderOf("c")
		Expect(ok).To(BeTrue(), "the release wrote c's grant: %+v", st.Permits)
		Expect(served.Number).To(Equal(2))
		Expect(served.Token.String()).To(Equal(before), "the token is the resourceVersion the release was conditioned on")
		Expect(served.Ticket).NotTo(BeZero())
		var c *lock.Grant
		Eventually(gotC, 10*time.Second).Should(Receive(&c))
		Consistently(failedC).ShouldNot(Receive())
		Expect(c.Token()).To(Equal(served.Token))
		Expect(c.Permit()).To(Equal(2))
		Expect(c.Token()).To(BeNumerically(">", b.Token()))

		By("b's grant is gone; a's and c's go on")
		Expect(errors.Is(b.Renew(ctx), lock.ErrLost)).To(BeTrue())
		Expect(a.Renew(ctx)).To(Succeed())
		Expect(c.Renew(ctx)).To(Succeed())
		Expect(a.Release(ctx)).To(Succeed())
		Expect(c.Release(ctx)).To(Succeed())
		Expect(leaseState(ns, "pool").Permits).To(BeEmpty())
	})

	It("serves its queue in FIFO order across permits", func() {
		ns := newNamespace()
		newSemaphore(ns, "fifo", 3, 15)
		h1, err := locker(ns, "fifo", "h1").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		h2, err := locker(ns, "fifo", "h2").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		h3, err := locker(ns, "fifo", "h3").TryAcquire(ctx) // holds permit 3 throughout
		Expect(err).NotTo(HaveOccurred())
		order := make([]string, 0, 3)
		gots := make([]<-chan *lock.Grant, 0, 3)
		for _, id := range []string{"w1", "w2", "w3"} {
			got, _ := acquireAsync(ctx, locker(ns, "fifo", id))
			gots = append(gots, got)
			order = append(order, id)
			Eventually(func() []string { return waiterIDs(ns, "fifo") }, 10*time.Second, 20*time.Millisecond).
				Should(Equal(order), "each waiter joins behind the ones before it")
		}
		Eventually(func() bool { return leaseState(ns, "fifo").Waiting }, 10*time.Second, 20*time.Millisecond).Should(BeTrue())

		var w1, w2, w3 *lock.Grant
		Expect(h2.Release(ctx)).To(Succeed()) // permit 2 goes to w1
		Eventually(gots[0], 10*time.Second).Should(Receive(&w1))
		Expect(w1.Permit()).To(Equal(2))
		Consistently(gots[1], 200*time.Millisecond).ShouldNot(Receive())
		Expect(h1.Release(ctx)).To(Succeed()) // permit 1 goes to w2, not w3
		Eventually(gots[1], 10*time.Second).Should(Receive(&w2))
		Expect(w2.Permit()).To(Equal(1))
		Consistently(gots[2], 200*time.Millisecond).ShouldNot(Receive())
		Expect(w1.Release(ctx)).To(Succeed())
		Eventually(gots[2], 10*time.Second).Should(Receive(&w3))
		Expect(w3.Permit()).To(Equal(2))
		tokens := []token.Token{h1.Token(), h2.Token(), h3.Token(), w1.Token(), w2.Token(), w3.Token()}
		for i := 1; i < len(tokens); i++ {
			Expect(tokens[i]).To(BeNumerically(">", tokens[i-1]), "grants in queue order, each token above the last: %v", tokens)
		}
		Expect(w2.Release(ctx)).To(Succeed())
		Expect(w3.Release(ctx)).To(Succeed())
		Expect(h3.Release(ctx)).To(Succeed())
	})

	It("revokes a permit whose holder stops renewing: its KeepAlive sees the loss, the other permit is kept", func() {
		ns := newNamespace()
		newSemaphore(ns, "short", 2, 1)
		idle, err := locker(ns, "short", "idle").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		kept, err := locker(ns, "short", "kept").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		kctx, kcancel := context.WithCancel(ctx)
		defer kcancel()
		Expect(kept.KeepAlive(kctx, 0)).NotTo(BeNil())
		// idle renews far too late (every 4 s on a 1 s lease): the manager revokes its permit first,
		// and its first renewal finds it gone.
		Expect(idle.KeepAlive(kctx, 4*time.Second)).NotTo(BeNil())
		start := time.Now()
		Eventually(func() []string { return leaseState(ns, "short").Holders() }, 10*time.Second, 10*time.Millisecond).
			Should(Equal([]string{"kept"}))
		Expect(time.Since(start)).To(BeNumerically(">=", 900*time.Millisecond), "revoked before the lease ran out")
		Eventually(idle.Lost(), 10*time.Second).Should(BeClosed())
		lost, ok := errors.AsType[*lock.LostError](idle.Err())
		Expect(ok).To(BeTrue(), "%v", idle.Err())
		Expect(lost.Revoked).To(BeTrue(), "the manager recorded the revoked token: %v", lost)
		Expect(kept.Lost()).NotTo(BeClosed())
		Consistently(kept.Lost(), "2s").ShouldNot(BeClosed())
		Expect(kept.Renew(ctx)).To(Succeed())
		Expect(kept.Release(ctx)).To(Succeed())
	})
})
