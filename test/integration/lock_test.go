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
	"fmt"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1ac "k8s.io/client-go/applyconfigurations/coordination/v1"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/lock"
	"github.com/fencedlock/fencedlock/pkg/token"
	"github.com/fencedlock/fencedlock/test/util"
)

var _ = Describe("Go client", func() {
	It("acquires, renews and releases; a second acquirer waits and then gets a higher token", func() {
		ns := kit.NewNamespace()
		kit.NewLock(ns, "jobs", util.LeaseSeconds(15))
		a, err := kit.Locker(ns, "jobs", "a").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())

		_, err = kit.Locker(ns, "jobs", "b").TryAcquire(ctx)
		Expect(errors.Is(err, lock.ErrHeld)).To(BeTrue(), "TryAcquire on a held lock: %v", err)

		got := make(chan *lock.Grant, 1)
		go func() {
			defer GinkgoRecover()
			g, err := kit.Locker(ns, "jobs", "b").Acquire(ctx)
			Expect(err).NotTo(HaveOccurred())
			got <- g
		}()
		Consistently(got, "500ms").ShouldNot(Receive())

		Expect(a.Renew(ctx)).To(Succeed())
		Expect(a.Release(ctx)).To(Succeed())
		var b *lock.Grant
		Eventually(got, 10*time.Second).Should(Receive(&b))
		Expect(b.Token()).To(BeNumerically(">", a.Token()))

		By("the old holder can neither renew nor release any more")
		Expect(errors.Is(a.Renew(ctx), lock.ErrLost)).To(BeTrue())
		Expect(errors.Is(a.Release(ctx), lock.ErrLost)).To(BeTrue())
		Expect(b.Release(ctx)).To(Succeed())
	})

	It("keeps no managed fields on a lock's Leases: every fencedlock write drops them, and nothing else", func() {
		ns := kit.NewNamespace()
		fl := kit.NewLock(ns, "tidy", util.LeaseSeconds(15))
		Expect(kit.GetLease(ns, "tidy").ManagedFields).To(BeEmpty(), "the manager's stamp drops those its create recorded")

		By("a server-side apply starts tracking them again")
		_, err := kit.Leases.Leases(ns).Apply(ctx, coordinationv1ac.Lease("tidy", ns).
			WithAnnotations(map[string]string{"example.com/note": "kept"}),
			metav1.ApplyOptions{FieldManager: "someone", Force: true})
		Expect(err).NotTo(HaveOccurred())
		Expect(kit.GetLease(ns, "tidy").ManagedFields).NotTo(BeEmpty())

		By("a grant by the Go client drops them, and keeps the applied annotation")
		a, err := kit.Locker(ns, "tidy", "a").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		l := kit.GetLease(ns, "tidy")
		Expect(l.ManagedFields).To(BeEmpty())
		Expect(l.Annotations).To(HaveKeyWithValue("example.com/note", "kept"))

		By("so does a waiter's join, which creates its waiter Lease")
		waiting, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() { _, _ = kit.Locker(ns, "tidy", "b").Acquire(waiting) }()
		Eventually(func(g Gomega) {
			w, err := clientset.CoordinationV1().Leases(ns).Get(ctx, locksv1alpha1.WaiterLeaseName(fl.UID, "b"), metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(w.Spec.HolderIdentity).To(HaveValue(Equal("b")))
			g.Expect(w.ManagedFields).To(BeEmpty())
		}, 10*time.Second, 50*time.Millisecond).Should(Succeed())
		Expect(a.Release(ctx)).To(Succeed())
	})

	It("reports a missing lock", func() {
		_, err := kit.Locker(kit.NewNamespace(), "nope", "a").TryAcquire(ctx)
		Expect(errors.Is(err, lock.ErrNoLease)).To(BeTrue(), "%v", err)
	})

	It("waits for a lock that does not exist yet", func() {
		ns := kit.NewNamespace()
		got := make(chan *lock.Grant, 1)
		go func() {
			defer GinkgoRecover()
			g, err := kit.Locker(ns, "later", "a").Acquire(ctx)
			Expect(err).NotTo(HaveOccurred())
			got <- g
		}()
		Consistently(got, "300ms").ShouldNot(Receive())
		kit.NewLock(ns, "later", util.LeaseSeconds(15))
		Eventually(got, 10*time.Second).Should(Receive())
	})

	It("gives up waiting when the context ends", func() {
		ns := kit.NewNamespace()
		kit.NewLock(ns, "busy", util.LeaseSeconds(15))
		_, err := kit.Locker(ns, "busy", "a").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		wctx, wcancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer wcancel()
		_, err = kit.Locker(ns, "busy", "b").Acquire(wctx)
		Expect(errors.Is(err, context.DeadlineExceeded)).To(BeTrue(), "%v", err)
	})

	It("never has two holders at once among concurrent acquirers, and tokens strictly increase", func() {
		ns := kit.NewNamespace()
		kit.NewLock(ns, "contended", util.LeaseSeconds(15))
		const workers, rounds = 6, 5
		// Every state of the Lease, as a watch sees it: a holder never appears without its token,
		// and the token never goes down.
		w, err := clientset.CoordinationV1().Leases(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=contended"})
		Expect(err).NotTo(HaveOccurred())
		defer w.Stop()
		watched := make(chan error, 1)
		go func() {
			var last token.Token
			for ev := range w.ResultChan() {
				l, ok := ev.Object.(*coordinationv1.Lease)
				if !ok {
					continue
				}
				st, err := lease.Read(l)
				if err != nil {
					watched <- err
					return
				}
				if st.Held() && !st.Initialized() {
					watched <- fmt.Errorf("holder %s without a token at resourceVersion %s", st.Holder, l.ResourceVersion)
					return
				}
				if st.Token < last {
					watched <- fmt.Errorf("token went down from %s to %s", last, st.Token)
					return
				}
				last = st.Token
			}
			watched <- nil
		}()
		var (
			mu      sync.Mutex
			holding string
			tokens  []token.Token
			wg      sync.WaitGroup
		)
		for w := range workers {
			wg.Go(func() {
				defer GinkgoRecover()
				id := fmt.Sprintf("w%d", w)
				l := kit.Locker(ns, "contended", id)
				for range rounds {
					g, err := l.Acquire(ctx)
					Expect(err).NotTo(HaveOccurred())
					mu.Lock()
					Expect(holding).To(BeEmpty(), "%s acquired while %s held the lock", id, holding)
					holding = id
					tokens = append(tokens, g.Token())
					mu.Unlock()
					time.Sleep(time.Millisecond)
					mu.Lock()
					holding = ""
					mu.Unlock()
					Expect(g.Release(ctx)).To(Succeed())
				}
			})
		}
		wg.Wait()
		w.Stop()
		Eventually(watched).Should(Receive(BeNil()))
		Expect(tokens).To(HaveLen(workers * rounds))
		for i := 1; i < len(tokens); i++ {
			Expect(tokens[i]).To(BeNumerically(">", tokens[i-1]), "grant %d", i)
		}
	})

	It("loses an unrenewed grant after the lease duration; KeepAlive keeps a grant", func() {
		ns := kit.NewNamespace()
		kit.NewLock(ns, "short", util.LeaseSeconds(1))
		idle, err := kit.Locker(ns, "short", "idle").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		start := time.Now()
		Eventually(func() string {
			st := kit.LeaseState(ns, "short")
			return st.Holder
		}, 10*time.Second, 10*time.Millisecond).Should(BeEmpty())
		Expect(time.Since(start)).To(BeNumerically(">=", 900*time.Millisecond), "revoked before the lease ran out")
		Expect(errors.Is(idle.Renew(ctx), lock.ErrLost)).To(BeTrue())
		Expect(idle.Lost()).To(BeClosed())

		kept, err := kit.Locker(ns, "short", "kept").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(kept.Token()).To(BeNumerically(">", idle.Token()))
		util.KeepAlive(kept, 0)
		Consistently(kept.Lost(), "3s").ShouldNot(BeClosed())
		Expect(kept.Release(ctx)).To(Succeed())
	})
})
