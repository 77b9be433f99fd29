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
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/controllers"
	"github.com/fencedlock/fencedlock/test/util"
)

// lockCondition returns pod name's condition for lock, as the API server stores it.
func lockCondition(g Gomega, ns, name, lock string) corev1.PodCondition {
	for _, c := range kit.GetPod(ns, name).Status.Conditions {
		if c.Type == locksv1alpha1.PodConditionType(lock) {
			return c
		}
	}
	g.Expect(fmt.Errorf("pod %s has no condition %s", name, locksv1alpha1.PodConditionType(lock))).NotTo(HaveOccurred())
	return corev1.PodCondition{}
}

var _ = Describe("Pods that explain themselves", func() {
	It("say which lock they wait for, at what position, who holds it, and once revoked that their token is dead", func() {
		ns := kit.NewNamespace()
		fl := kit.NewLock(ns, "jobs", util.StartupSeconds(0))
		holder, err := kit.Locker(ns, "jobs", "library").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		kit.CreatePod(util.Pod(ns, "first", "jobs"))
		Eventually(func() int32 { return kit.GetLock(ns, "jobs").Status.WaitingCount }).Should(Equal(int32(1)))
		kit.CreatePod(util.Pod(ns, "second", "jobs"))

		By("a waiting pod: the lock's namespace and name, its position, the holder's identity and token, as of when")
		Eventually(func(g Gomega) {
			c := lockCondition(g, ns, "first", "jobs")
			g.Expect(c.Status).To(Equal(corev1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(locksv1alpha1.ReasonWaiting))
			g.Expect(c.Message).To(HavePrefix(fmt.Sprintf("Waiting for FencedLock %s/jobs at position 1, held by library (token %s); ",
				ns, holder.Token())))
			g.Expect(c.Message).To(ContainSubstring("as of 2026-"))
			g.Expect(lockCondition(g, ns, "second", "jobs").Message).To(ContainSubstring("at position 2, held by library"))
		}).Should(Succeed())

		By("the grant: the granted pod shows its token, the next one its new position and holder")
		Expect(holder.Release(ctx)).To(Succeed())
		t1 := granted(ns, "first")
		first := kit.GetPod(ns, "first")
		Eventually(func(g Gomega) {
			c := lockCondition(g, ns, "first", "jobs")
			g.Expect(c.Status).To(Equal(corev1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(locksv1alpha1.ReasonGranted))
			g.Expect(c.Message).To(Equal(fmt.Sprintf("Granted FencedLock %s/jobs with token %s", ns, t1)))
			g.Expect(lockCondition(g, ns, "second", "jobs").Message).To(ContainSubstring(fmt.Sprintf(
				"at position 1, held by %s (token %s)", locksv1alpha1.PodHolderIdentity("first", string(first.UID)), t1)))
		}).Should(Succeed())

		By("a forged condition changes no decision, and is put right")
		forged := kit.GetPod(ns, "second")
		forged.Status.Conditions = append(forged.Status.Conditions, corev1.PodCondition{Type: locksv1alpha1.PodConditionType("jobs"),
			Status: corev1.ConditionTrue, Reason: locksv1alpha1.ReasonGranted, Message: "Granted FencedLock " + ns + "/jobs with token 1"})
		forged.Status.Conditions = dedupConditions(forged.Status.Conditions)
		Expect(k8sClient.Status().Update(ctx, forged)).To(Succeed())
		poke(fl)
		Eventually(func(g Gomega) {
			g.Expect(lockCondition(g, ns, "second", "jobs").Reason).To(Equal(locksv1alpha1.ReasonWaiting))
		}).Should(Succeed())
		stillGated(ns, "second")

		By("the revocation: the revoked pod, still running, says its token is dead and why")
		setPodStatus(ns, "first", corev1.PodRunning, false)
		settle(fl)
		fakeClock.Step(16 * time.Second)
		poke(fl)
		Eventually(func(g Gomega) {
			if locksv1alpha1.HasLockGate(kit.GetPod(ns, "second")) {
				fakeClock.Step(time.Second)
				poke(fl)
			}
			c := lockCondition(g, ns, "first", "jobs")
			g.Expect(c.Status).To(Equal(corev1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(locksv1alpha1.ReasonRevoked))
			g.Expect(c.Message).To(HavePrefix(fmt.Sprintf("Token %s of FencedLock %s/jobs is dead: the grant was revoked (not Ready for 15s)",
				t1, ns)))
		}, "20s", "250ms").Should(Succeed())
		Expect(kit.GetPod(ns, "first").Annotations).To(HaveKeyWithValue(locksv1alpha1.TokenAnnotation, t1.String()),
			"the token stays on the pod: the condition is what says it is dead")
		Eventually(func(g Gomega) {
			g.Expect(lockCondition(g, ns, "second", "jobs").Reason).To(Equal(locksv1alpha1.ReasonGranted))
		}).Should(Succeed())
	})

	It("say where a lock that does not exist was looked for", func() {
		ns := kit.NewNamespace()
		kit.CreatePod(util.Pod(ns, "lost", "ops.ledger"))
		Eventually(func(g Gomega) {
			c := lockCondition(g, ns, "lost", "ops.ledger")
			g.Expect(c.Reason).To(Equal(locksv1alpha1.ReasonLockNotFound))
			g.Expect(c.Message).To(HavePrefix("FencedLock " + ns + "/ops.ledger does not exist: a pod's locks live in its own namespace"))
		}).Should(Succeed())
	})

	It("cost a bounded number of writes per grant on a drain, not one per waiting pod", func() {
		const n = 30
		ns := kit.NewNamespace()
		kit.NewLock(ns, "drain")
		holder, err := kit.Locker(ns, "drain", "filler").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		before := controllers.PodConditionWrites()
		for i := range n {
			kit.CreatePod(util.Pod(ns, fmt.Sprintf("d-%02d", i), "drain"))
		}
		Eventually(func() int32 { return kit.GetLock(ns, "drain").Status.WaitingCount }, "30s").Should(Equal(int32(n)))
		Expect(holder.Release(ctx)).To(Succeed())
		done := map[types.UID]bool{}
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(k8sClient.List(ctx, &pods, client.InNamespace(ns))).To(Succeed())
			for i := range pods.Items {
				p := &pods.Items[i]
				if done[p.UID] || locksv1alpha1.HasLockGate(p) || p.Annotations[locksv1alpha1.TokenAnnotation] == "" {
					continue
				}
				// The kubelet: done as soon as it runs.
				g.Expect(k8sClient.Status().Patch(ctx, p, client.RawPatch(types.StrategicMergePatchType,
					util.PodStatusPatch(corev1.PodSucceeded, nil)))).To(Succeed())
				done[p.UID] = true
			}
			g.Expect(done).To(HaveLen(n))
		}, "60s", "50ms").Should(Succeed())
		Eventually(func() string { return kit.LeaseState(ns, "drain").Holder }, "10s").Should(BeEmpty())
		var writes float64
		Eventually(func() float64 { // written off the reconciles' path: the last ones come after the drain
			w := controllers.PodConditionWrites() - before
			defer func() { writes = w }()
			return w - writes
		}, "10s", "500ms").Should(BeZero())
		GinkgoWriter.Printf("pod condition writes while %d pods queued and drained: %.0f (%.2f per grant)\n", n, writes, writes/n)
		// Per pod: its join and its grant, and on each grant the next PodConditionLead pods'
		// positions; two more cover positions written while the lock passes between holders (free
		// and kept for the head, or granted before the cache shows it). Rewriting every waiting pod
		// on every grant would be n(n-1)/2 = 435 writes.
		Expect(writes).To(BeNumerically("<=", (4+controllers.PodConditionLead)*n))
	})
})

// dedupConditions keeps the last condition of each type (a status update must not repeat one).
func dedupConditions(cs []corev1.PodCondition) []corev1.PodCondition {
	seen := map[corev1.PodConditionType]int{}
	var out []corev1.PodCondition
	for _, c := range cs {
		if i, ok := seen[c.Type]; ok {
			out[i] = c
			continue
		}
		seen[c.Type] = len(out)
		out = append(out, c)
	}
	return out
}
