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
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/token"
	"github.com/fencedlock/fencedlock/test/util"
)

func running(p *corev1.Pod) bool {
	return !locksv1alpha1.HasLockGate(p) && p.Status.Phase != corev1.PodSucceeded && p.DeletionTimestamp.IsZero()
}

// lockSnapshot says who holds each lock and which pods run, read while no pod finishes.
func lockSnapshot(ns string, locks ...string) (pods []corev1.Pod, holders map[string]string) {
	var list corev1.PodList
	Expect(k8sClient.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
	holders = map[string]string{}
	for _, l := range locks {
		holders[l] = kit.LeaseState(ns, l).Holder
	}
	return list.Items, holders
}

// describeLocks reports the pods and Leases, for a round that did not finish.
func describeLocks(ns string, locks ...string) string {
	pods, holders := lockSnapshot(ns, locks...)
	var b strings.Builder
	fmt.Fprintf(&b, "holders %v; queues:", holders)
	for _, l := range locks {
		fmt.Fprintf(&b, " %s=%v", l, waiterIDs(ns, l))
	}
	for _, p := range pods {
		fmt.Fprintf(&b, "; pod %s/%s gated=%v phase=%q tokens=%v", p.Name, p.UID, locksv1alpha1.HasLockGate(&p),
			p.Status.Phase, util.PodTokens(&p))
	}
	return b.String()
}

var _ = Describe("Pods asking for several locks", func() {
	It("never deadlocks nor overlaps: pods asking for {a,b} and {b,a} (and one for b alone) at once, 20 rounds", func() {
		ns := kit.NewNamespace()
		kit.NewLock(ns, "a", util.LeaseSeconds(600)) // envtest pods are never Ready: no not-Ready revocation during the test
		kit.NewLock(ns, "b", util.LeaseSeconds(600))

		// The checker reads pods and Leases while holding mu; the driver finishes pods under mu, so
		// no grant ends during a read: a running pod must hold every lock it asked for, and no lock
		// may be asked for by two running pods.
		var mu sync.Mutex
		var violations []string
		stop := make(chan struct{})
		checked := make(chan struct{})
		snapshots := 0
		go func() {
			defer GinkgoRecover()
			defer close(checked)
			for {
				select {
				case <-stop:
					return
				case <-time.After(10 * time.Millisecond):
				}
				mu.Lock()
				pods, holders := lockSnapshot(ns, "a", "b")
				snapshots++
				runningFor := map[string][]string{}
				for i := range pods {
					p := &pods[i]
					if !running(p) {
						continue
					}
					id := locksv1alpha1.PodHolderIdentity(p.Name, string(p.UID))
					for _, l := range locksv1alpha1.PodLocks(p) {
						runningFor[l] = append(runningFor[l], p.Name)
						if holders[l] != id {
							violations = append(violations, fmt.Sprintf("pod %s runs but lock %s is held by %q", p.Name, l, holders[l]))
						}
					}
				}
				for l, ps := range runningFor {
					if len(ps) > 1 {
						violations = append(violations, fmt.Sprintf("pods %v run at once with lock %s", ps, l))
					}
				}
				mu.Unlock()
			}
		}()

		// Stopped before the assertions below, and by the cleanup when the spec fails earlier.
		stopChecker := sync.OnceFunc(func() { close(stop); <-checked })
		DeferCleanup(stopChecker)

		const rounds = 20
		last := map[string]token.Token{}
		durations := make([]time.Duration, 0, rounds)
		for round := range rounds {
			start := time.Now()
			// One pod asks through the annotation alone, the other beside the label; a third asks
			// for b alone, contending for b while a multi-lock pod holds a.
			beside := util.MultiLockPod(ns, fmt.Sprintf("ba-%d", round), "b,a")
			beside.Labels = map[string]string{locksv1alpha1.LockLabel: "b"}
			pods := []*corev1.Pod{
				util.MultiLockPod(ns, fmt.Sprintf("ab-%d", round), "a,b"),
				beside,
				util.Pod(ns, fmt.Sprintf("b-%d", round), "b"),
			}
			var wg sync.WaitGroup
			for _, p := range pods {
				wg.Go(func() {
					defer GinkgoRecover()
					Expect(k8sClient.Create(ctx, p)).To(Succeed())
				})
			}
			wg.Wait()
			for _, p := range pods {
				Expect(locksv1alpha1.HasLockGate(p)).To(BeTrue(), "pod %s is gated at creation", p.Name)
			}

			// Envtest has no kubelet: a pod ungated "runs", and the driver finishes it.
			done := map[string]bool{}
			deadline := time.Now().Add(30 * time.Second)
			for len(done) < len(pods) {
				if time.Now().After(deadline) {
					Fail(fmt.Sprintf("round %d did not finish within 30s (deadlock?): %s", round, describeLocks(ns, "a", "b")))
				}
				for _, p := range pods {
					if done[p.Name] {
						continue
					}
					cur := kit.GetPod(ns, p.Name)
					if locksv1alpha1.HasLockGate(cur) {
						continue
					}
					toks := util.PodTokens(cur)
					locks := locksv1alpha1.PodLocks(cur)
					Expect(toks).To(HaveLen(len(locks)), "pod %s is ungated with a token for each lock: %v", p.Name, cur.Annotations)
					if len(locks) > 1 {
						Expect(cur.Annotations).NotTo(HaveKey(locksv1alpha1.TokenAnnotation), "no single token for a multi-lock pod")
					} else {
						Expect(cur.Annotations).To(HaveKeyWithValue(locksv1alpha1.TokenAnnotation, toks["b"].String()))
					}
					for _, l := range locks {
						Expect(toks[l]).To(BeNumerically(">", last[l]), "lock %s's tokens grow", l)
						last[l] = toks[l]
					}
					mu.Lock()
					err := k8sClient.Status().Patch(ctx, cur, client.RawPatch(types.StrategicMergePatchType,
						util.PodStatusPatch(corev1.PodSucceeded, nil)))
					mu.Unlock()
					Expect(err).NotTo(HaveOccurred())
					done[p.Name] = true
				}
				time.Sleep(10 * time.Millisecond)
			}
			durations = append(durations, time.Since(start))
		}
		stopChecker()
		Expect(violations).To(BeEmpty())
		Expect(snapshots).To(BeNumerically(">", 0))
		var total, worst time.Duration
		for _, d := range durations {
			total += d
			worst = max(worst, d)
		}
		AddReportEntry("multi-lock rounds", fmt.Sprintf("%d rounds, 0 deadlocks, 0 overlaps in %d snapshots; round mean %s, max %s",
			rounds, snapshots, (total/rounds).Round(time.Millisecond), worst.Round(time.Millisecond)))
		By("the last pods' releases free both locks")
		Eventually(func(g Gomega) {
			_, holders := lockSnapshot(ns, "a", "b")
			g.Expect(holders).To(HaveKeyWithValue("a", ""))
			g.Expect(holders).To(HaveKeyWithValue("b", ""))
		}, 10*time.Second, 20*time.Millisecond).Should(Succeed())
	})

	It("gives each token its own fence: a write with a's token is judged by a, with b's token by b", func() {
		ns := kit.NewNamespace()
		kit.NewLock(ns, "a", util.LeaseSeconds(600))
		kit.NewLock(ns, "b", util.LeaseSeconds(600))
		p := util.MultiLockPod(ns, "both", "b,a")
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		Expect(p.Labels).To(HaveKeyWithValue(locksv1alpha1.LockLabel, "a"), "the gate labels the pod with its first lock")
		var toks map[string]token.Token
		Eventually(func(g Gomega) {
			cur := &corev1.Pod{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), cur)).To(Succeed())
			g.Expect(locksv1alpha1.HasLockGate(cur)).To(BeFalse())
			toks = util.PodTokens(cur)
		}, 20*time.Second, 20*time.Millisecond).Should(Succeed())
		Expect(toks).To(HaveLen(2))
		Expect(toks["a"]).To(Equal(kit.LeaseState(ns, "a").Token))
		Expect(toks["b"]).To(Equal(kit.LeaseState(ns, "b").Token))

		Expect(k8sClient.Create(ctx, util.FencedConfigMap(ns, "ledger-a", "a", toks["a"], "1"))).To(Succeed())
		Expect(k8sClient.Create(ctx, util.FencedConfigMap(ns, "ledger-b", "b", toks["b"], "1"))).To(Succeed())
		Expect(writeCM(ns, "ledger-a", toks["a"].String(), "2")).To(Succeed())
		Expect(writeCM(ns, "ledger-b", toks["b"].String(), "2")).To(Succeed())
		By("lock b's token on an object fenced by a is judged by a's rules")
		err := writeCM(ns, "ledger-a", toks["b"].String(), "3")
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring(`admission webhook "fence.locks.fencedlock.io" denied the request`))
		Expect(err.Error()).To(Or(ContainSubstring("lock a"), ContainSubstring("lock "+ns+"/a")), "judged by lock a: %v", err)

		By("the pod ends: both locks are freed")
		Expect(k8sClient.Delete(ctx, kit.GetPod(ns, p.Name))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(kit.LeaseState(ns, "a").Holder).To(BeEmpty())
			g.Expect(kit.LeaseState(ns, "b").Holder).To(BeEmpty())
		}, 10*time.Second, 20*time.Millisecond).Should(Succeed())
		deniedWith(writeCM(ns, "ledger-a", toks["a"].String(), "4"), "no longer held")
	})

	It("refuses a list of locks that cannot be served", func() {
		ns := kit.NewNamespace()
		for ann, want := range map[string]string{
			"":           "empty lock name",
			"a,,b":       "empty lock name",
			"a,b,a":      `lists lock "a" twice`,
			"a,Bad_Name": "does not name a FencedLock",
		} {
			err := k8sClient.Create(ctx, util.MultiLockPod(ns, "bad", ann))
			Expect(err).To(HaveOccurred(), "annotation %q", ann)
			Expect(err.Error()).To(ContainSubstring(want))
		}
	})
})
