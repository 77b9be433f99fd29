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
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lock"
	"github.com/fencedlock/fencedlock/pkg/token"
	"github.com/fencedlock/fencedlock/test/util"
)

// writeWith is writeCM for ConfigMap name, presenting tok.
func writeWith(ns, name string, tok token.Token, data string) error {
	return writeCM(ns, name, tok.String(), data)
}

var _ = Describe("The fence of a semaphore", func() {
	It("admits every held permit in any order, and refuses revoked, ended and never-issued tokens", func() {
		ns := kit.NewNamespace()
		kit.NewLock(ns, "pool", util.Permits(2), util.LeaseSeconds(2))

		By("two holders take the two permits")
		a, err := kit.Locker(ns, "pool", "worker-a").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		pauseA := util.KeepAlive(a, 0).Stop // a "pauses" when it stops renewing
		b, err := kit.Locker(ns, "pool", "worker-b").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		util.KeepAlive(b, 0)
		Expect(b.Token()).To(BeNumerically(">", a.Token()))
		_, err = kit.Locker(ns, "pool", "worker-c").TryAcquire(ctx)
		Expect(errors.Is(err, lock.ErrHeld)).To(BeTrue(), "a third holder finds both permits held: %v", err)

		By("both write the same ConfigMap, in either order")
		Expect(k8sClient.Create(ctx, util.FencedConfigMap(ns, "ledger", "pool", b.Token(), "b1"))).To(Succeed())
		Expect(writeWith(ns, "ledger", a.Token(), "a1")).To(Succeed(), "the lower held token after the higher one wrote")
		Expect(writeWith(ns, "ledger", b.Token(), "b2")).To(Succeed())
		Expect(writeWith(ns, "ledger", a.Token(), "a2")).To(Succeed())
		Expect(balance(ns)).To(Equal("a2"))
		Expect(k8sClient.Create(ctx, util.FencedConfigMap(ns, "a-notes", "pool", a.Token(), "a's"))).To(Succeed())

		By("a never-issued token is refused")
		deniedWith(writeWith(ns, "ledger", b.Token()+1_000_000, "forged"),
			fmt.Sprintf("fencing token %s for semaphore %s/pool was never issued", b.Token()+1_000_000, ns))

		By("a third holder queues; holder a pauses, the manager revokes its permit and hands it to c")
		cGot := make(chan *lock.Grant, 1)
		cErr := make(chan error, 1)
		go func() {
			defer GinkgoRecover()
			actx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			g, err := kit.Locker(ns, "pool", "worker-c").Acquire(actx)
			if err != nil {
				cErr <- err
				return
			}
			cGot <- g
		}()
		pauseA()
		var c *lock.Grant
		select {
		case c = <-cGot:
		case err := <-cErr:
			Fail(fmt.Sprintf("worker c was not granted a permit: %v", err))
		case <-time.After(30 * time.Second):
			Fail("worker c was not granted a permit within 30 s")
		}
		util.KeepAlive(c, 0)
		st := kit.LeaseState(ns, "pool")
		Expect(st.RevokedToken).To(Equal(a.Token()), "the manager revoked a's permit")
		Expect(c.Token()).To(BeNumerically(">", b.Token()))

		By("the paused holder's write is refused: its permit is no longer held")
		deniedWith(writeWith(ns, "ledger", a.Token(), "a3 after the pause"), fmt.Sprintf(
			"fencing token %s of semaphore %s/pool is no longer held (revoked by the controller because its lease expired); "+
				"2 of 2 permits are held now, with tokens ", a.Token(), ns))
		Expect(balance(ns)).To(Equal("a2"))

		By("once the new holder wrote, the paused holder is refused for that too; b, still holding, is admitted")
		Expect(writeWith(ns, "ledger", c.Token(), "c1")).To(Succeed())
		deniedWith(writeWith(ns, "ledger", a.Token(), "a4"),
			fmt.Sprintf("and the object was already written with token %s", c.Token()))
		Expect(writeWith(ns, "ledger", b.Token(), "b3")).To(Succeed(), "a held token below the object's")
		Expect(balance(ns)).To(Equal("b3"))

		By("what a wrote can be deleted only after a holder stamped it with its own permit's token")
		notes := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a-notes"}}
		deniedWith(k8sClient.Delete(ctx, notes), "stamp the object with the token of a permit you hold")
		Expect(writeWith(ns, "a-notes", b.Token(), "closed by b")).To(Succeed())
		Expect(k8sClient.Delete(ctx, notes)).To(Succeed())
	})

	It("admits a just-granted holder even while the webhook's cache lags (Cached)", func() {
		ns := kit.NewNamespace()
		kit.NewLock(ns, "pool", util.Permits(3), util.LeaseSeconds(15))
		steady, err := kit.Locker(ns, "pool", "steady").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		other, err := kit.Locker(ns, "pool", "other").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		// The rounds below may outlast the lease: both holders renew, as holders do.
		util.KeepAlive(steady, 0)
		util.KeepAlive(other, 0)
		Expect(k8sClient.Create(ctx, util.FencedConfigMap(ns, "ledger", "pool", steady.Token(), "0"))).To(Succeed())

		// Each round grants the free permit and writes at once with its token, above the token the
		// webhook's cache last saw unless the grant's watch event arrived first. Such a write is
		// confirmed by a live read (the "confirm" counter) and must never be refused. The lag is
		// the real watch's: from one round in ten to one in two hundred meet it here (a round takes
		// some 30 ms), so the rounds go on until two did, for up to a minute (some 2000 rounds: the
		// chance of fewer is below one in a thousand even at the lower rate).
		confirm := func() float64 {
			return counterValue("fencedlock_fence_live_reads_total", map[string]string{"why": "confirm"})
		}
		before := confirm()
		rounds, deadline := 0, time.Now().Add(time.Minute)
		for confirm()-before < 2 && time.Now().Before(deadline) {
			rounds++
			g, err := kit.Locker(ns, "pool", fmt.Sprintf("round-%d", rounds)).TryAcquire(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(writeWith(ns, "ledger", g.Token(), fmt.Sprint(rounds))).To(Succeed(), "round %d, token %s", rounds, g.Token())
			Expect(g.Release(ctx)).To(Succeed())
		}
		lagged := confirm() - before
		GinkgoWriter.Printf("%d rounds; %v writes met a lagging cache and were confirmed live\n", rounds, lagged)
		Expect(lagged).To(BeNumerically(">=", 2), "too few writes met a lagging cache in %d rounds: the case was not exercised", rounds)
		Expect(writeWith(ns, "ledger", steady.Token(), "steady")).To(Succeed(), "the steady holder, below the object's token")
		Expect(writeWith(ns, "ledger", other.Token(), "other")).To(Succeed())
	})

	It("binds each permit's token to its holder's principal when holderBinding is on", func() {
		ns := kit.NewNamespace()
		kit.NewLock(ns, "pool", util.Permits(2), util.LeaseSeconds(15))
		setFence(ns, "pool", `{"holderBinding":true}`)
		alice, err := kit.Locker(ns, "pool", "alice/laptop-1").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		bob, err := kit.Locker(ns, "pool", "bob/laptop-1").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		write := func(user string, tok token.Token, data string) error {
			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}},"data":{"balance":%q}}`, locksv1alpha1.TokenAnnotation, tok, data)
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ledger"}}
			return as(user).Patch(ctx, cm, client.RawPatch("application/merge-patch+json", []byte(patch)))
		}

		By("bob presents alice's token: refused once the fence sees holderBinding")
		Eventually(func() error {
			return as("bob").Create(ctx, util.FencedConfigMap(ns, "ledger", "pool", alice.Token(), "bob with alice's token"))
		}).Should(MatchError(ContainSubstring(fmt.Sprintf(
			"requires writes by the holder of the permit with token %s, alice/laptop-1", alice.Token()))))

		By("each holder writes with its own token, in either order")
		Expect(as("alice").Create(ctx, util.FencedConfigMap(ns, "ledger", "pool", alice.Token(), "alice"))).To(Succeed())
		Expect(write("bob", bob.Token(), "bob")).To(Succeed())
		Expect(write("alice", alice.Token(), "alice again")).To(Succeed())
		deniedWith(write("alice", bob.Token(), "alice with bob's token"), "a token copied to another principal cannot be used")

		By("only the holder of the permit that wrote the object last deletes it; another stamps it first")
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ledger"}}
		deniedWith(as("bob").Delete(ctx, cm), "alice/laptop-1")
		Expect(write("bob", bob.Token(), "closed by bob")).To(Succeed())
		Expect(as("bob").Delete(ctx, cm)).To(Succeed())
	})
})
