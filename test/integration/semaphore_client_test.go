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
	"errors"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/fencedlock/fencedlock/pkg/lock"
	"github.com/fencedlock/fencedlock/pkg/token"
	"github.com/fencedlock/fencedlock/test/util"
)

var _ = Describe("Semaphore, Go client", func() {
	It("holds two permits at once with fresh tokens; a third queues and is handed the freed permit in the release", func() {
		ns := kit.NewNamespace()
		kit.NewLock(ns, "pool", util.Permits(2), util.LeaseSeconds(15))
		earlier := kit.LeaseState(ns, "pool").Token

		a, err := kit.Locker(ns, "pool", "a").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		b, err := kit.Locker(ns, "pool", "b").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect([]int{a.Permit(), b.Permit()}).To(Equal([]int{1, 2}))
		Expect(a.Token()).To(BeNumerically(">", earlier))
		Expect(b.Token()).To(BeNumerically(">", a.Token()), "every permit's token is above every earlier token of the lock")
		st := kit.LeaseState(ns, "pool")
		Expect(st.Holders()).To(Equal([]string{"a", "b"}))
		Expect(st.Token).To(Equal(b.Token()))

		By("a third is refused by TryAcquire, and a second permit for one identity too")
		_, err = kit.Locker(ns, "pool", "c").TryAcquire(ctx)
		Expect(errors.Is(err, lock.ErrHeld)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("all 2 permits"))
		_, err = kit.Locker(ns, "pool", "a").TryAcquire(ctx)
		Expect(errors.Is(err, lock.ErrHeld)).To(BeTrue(), "%v", err)

		By("Acquire queues; both holders renew independently")
		gotC, failedC := acquireAsync(ctx, kit.Locker(ns, "pool", "c"))
		Eventually(func() []string { return waiterIDs(ns, "pool") }, 10*time.Second, 20*time.Millisecond).
			Should(Equal([]string{"c"}))
		Eventually(func() bool { return kit.LeaseState(ns, "pool").Waiting }, 10*time.Second, 20*time.Millisecond).
			Should(BeTrue(), "the waiter marks the lock waited for, so a release reads the queue")
		Expect(a.Renew(ctx)).To(Succeed())
		Expect(b.Renew(ctx)).To(Succeed())
		Consistently(gotC, 300*time.Millisecond).ShouldNot(Receive())

		By("b's release grants c permit 2 in the same write")
		before := kit.GetLease(ns, "pool").ResourceVersion
		Expect(b.Release(ctx)).To(Succeed())
		st = kit.LeaseState(ns, "pool")
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
		Expect(kit.LeaseState(ns, "pool").Permits).To(BeEmpty())
	})

	It("serves its queue in FIFO order across permits", func() {
		ns := kit.NewNamespace()
		kit.NewLock(ns, "fifo", util.Permits(3), util.LeaseSeconds(15))
		h1, err := kit.Locker(ns, "fifo", "h1").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		h2, err := kit.Locker(ns, "fifo", "h2").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		h3, err := kit.Locker(ns, "fifo", "h3").TryAcquire(ctx) // holds permit 3 throughout
		Expect(err).NotTo(HaveOccurred())
		order := make([]string, 0, 3)
		gots := make([]<-chan *lock.Grant, 0, 3)
		for _, id := range []string{"w1", "w2", "w3"} {
			got, _ := acquireAsync(ctx, kit.Locker(ns, "fifo", id))
			gots = append(gots, got)
			order = append(order, id)
			Eventually(func() []string { return waiterIDs(ns, "fifo") }, 10*time.Second, 20*time.Millisecond).
				Should(Equal(order), "each waiter joins behind the ones before it")
		}
		Eventually(func() bool { return kit.LeaseState(ns, "fifo").Waiting }, 10*time.Second, 20*time.Millisecond).Should(BeTrue())

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
		ns := kit.NewNamespace()
		kit.NewLock(ns, "short", util.Permits(2), util.LeaseSeconds(1))
		idle, err := kit.Locker(ns, "short", "idle").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		kept, err := kit.Locker(ns, "short", "kept").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		util.KeepAlive(kept, 0)
		// idle renews far too late (every 4 s on a 1 s lease): the manager revokes its permit first,
		// and its first renewal finds it gone.
		util.KeepAlive(idle, 4*time.Second)
		start := time.Now()
		Eventually(func() []string { return kit.LeaseState(ns, "short").Holders() }, 10*time.Second, 10*time.Millisecond).
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
