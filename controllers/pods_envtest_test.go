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
	"fmt"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/controllers"
	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/token"
	"github.com/fencedlock/fencedlock/test/util"
)

// granted waits until pod name is ungated with a token and returns the token.
func granted(ns, name string) token.Token {
	var tok token.Token
	EventuallyWithOffset(1, func(g Gomega) {
		p := kit.GetPod(ns, name)
		g.Expect(locksv1alpha1.HasLockGate(p)).To(BeFalse(), "pod %s still gated", name)
		t, err := token.Parse(p.Annotations[locksv1alpha1.TokenAnnotation])
		g.Expect(err).NotTo(HaveOccurred())
		tok = t
	}).Should(Succeed())
	return tok
}

// setPodStatus plays the kubelet: phase and Ready condition through the status subresource.
func setPodStatus(ns, name string, phase corev1.PodPhase, ready bool) {
	p := kit.GetPod(ns, name)
	ExpectWithOffset(1, k8sClient.Status().Patch(ctx, p,
		client.RawPatch(types.StrategicMergePatchType, util.PodStatusPatch(phase, &ready)))).To(Succeed())
}

func stillGated(ns string, names ...string) {
	for _, n := range names {
		ExpectWithOffset(1, locksv1alpha1.HasLockGate(kit.GetPod(ns, n))).To(BeTrue(), "pod %s must stay gated", n)
	}
}

var _ = Describe("Pods as lock holders", func() {
	It("gates pods, keeps a FIFO queue, and hands over in order with increasing tokens", func() {
		ns := kit.NewNamespace()
		kit.NewLock(ns, "jobs")
		holder, err := kit.Locker(ns, "jobs", "library").TryAcquire(ctx) // keep the lock busy while pods queue
		Expect(err).NotTo(HaveOccurred())

		for _, n := range []string{"p-c", "p-a", "p-b"} { // creation order, not name order
			kit.CreatePod(util.Pod(ns, n, "jobs"))
		}
		p := kit.GetPod(ns, "p-c")
		Expect(locksv1alpha1.HasLockGate(p)).To(BeTrue())
		Expect(p.Annotations).To(HaveKey(locksv1alpha1.EnqueuedAnnotation))
		Eventually(func(g Gomega) {
			st := kit.GetLock(ns, "jobs").Status
			g.Expect(st.WaitingCount).To(Equal(int32(3)))
			g.Expect(st.Waiters).To(HaveLen(3))
			g.Expect([]string{st.Waiters[0].Pod, st.Waiters[1].Pod, st.Waiters[2].Pod}).To(Equal([]string{"p-c", "p-a", "p-b"}))
		}).Should(Succeed())
		Consistently(func() bool { return locksv1alpha1.HasLockGate(kit.GetPod(ns, "p-c")) }, "300ms").Should(BeTrue())

		Expect(holder.Release(ctx)).To(Succeed())
		t1 := granted(ns, "p-c")
		Expect(t1).To(BeNumerically(">", holder.Token()))
		stillGated(ns, "p-a", "p-b")
		Expect(kit.LeaseState(ns, "jobs").Holder).To(HavePrefix("pod/p-c/"))

		setPodStatus(ns, "p-c", corev1.PodRunning, true)
		setPodStatus(ns, "p-c", corev1.PodSucceeded, false)
		t2 := granted(ns, "p-a")
		Expect(t2).To(BeNumerically(">", t1))
		stillGated(ns, "p-b")

		setPodStatus(ns, "p-a", corev1.PodFailed, false)
		t3 := granted(ns, "p-b")
		Expect(t3).To(BeNumerically(">", t2))
		Eventually(func() int32 { return kit.GetLock(ns, "jobs").Status.WaitingCount }).Should(BeZero())

		setPodStatus(ns, "p-b", corev1.PodSucceeded, false)
		Eventually(func() string { return kit.LeaseState(ns, "jobs").Holder }).Should(BeEmpty())
		Eventually(func() []string { return podEvents(ns, "p-a") }).Should(ContainElements(
			ContainSubstring("Waiting for lock jobs"), "Granted: Granted lock jobs with token "+t2.String(),
			ContainSubstring("Released lock jobs (token "+t2.String()+"): the holder pod finished (Failed)")))
	})

	It("refuses a pod whose lock label cannot name a lock", func() {
		err := k8sClient.Create(ctx, util.Pod("default", "bad-label", "Not_A_Lock"))
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("does not name a FencedLock"))
	})

	It("refuses a lock named across namespaces, saying that a pod's locks live in its own namespace", func() {
		ns := kit.NewNamespace()
		p := util.MultiLockPod(ns, "cross", "a,ops/ledger")
		err := k8sClient.Create(ctx, p)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(And(ContainSubstring("a pod's locks live in its own namespace ("+ns+")"),
			ContainSubstring("FencedLock ops/ledger"), ContainSubstring(`"ledger" asks for FencedLock `+ns+"/ledger"),
			Not(ContainSubstring("regex"))))

		By("a namespace written with a dot is a lock name of the pod's namespace; the pod is told where it was looked for")
		kit.CreatePod(util.Pod(ns, "dotted", "ops.ledger"))
		Eventually(func() []string { return podEvents(ns, "dotted") }).Should(ContainElement(
			"LockNotFound: FencedLock " + ns + "/ops.ledger does not exist: a pod's locks live in its own namespace (" + ns +
				"), so the lock is looked for there; the pod stays gated until it is created"))
	})

	It("drops a waiting pod that is deleted, and hands over when the holder pod is deleted", func() {
		ns := kit.NewNamespace()
		kit.NewLock(ns, "jobs")
		kit.CreatePod(util.Pod(ns, "first", "jobs"))
		granted(ns, "first")
		kit.CreatePod(util.Pod(ns, "second", "jobs"))
		kit.CreatePod(util.Pod(ns, "third", "jobs"))
		Eventually(func() int32 { return kit.GetLock(ns, "jobs").Status.WaitingCount }).Should(Equal(int32(2)))

		Expect(k8sClient.Delete(ctx, kit.GetPod(ns, "second"))).To(Succeed())
		Eventually(func() int32 { return kit.GetLock(ns, "jobs").Status.WaitingCount }).Should(Equal(int32(1)))

		Expect(k8sClient.Delete(ctx, kit.GetPod(ns, "first"))).To(Succeed())
		granted(ns, "third")
	})

	It("revokes a holder pod that is not Ready for longer than the lease", func() {
		ns := kit.NewNamespace()
		fl := kit.NewLock(ns, "jobs")
		kit.CreatePod(util.Pod(ns, "stuck", "jobs"))
		tStuck := granted(ns, "stuck")
		setPodStatus(ns, "stuck", corev1.PodRunning, true)
		kit.CreatePod(util.Pod(ns, "next", "jobs"))
		settle(fl)

		setPodStatus(ns, "stuck", corev1.PodRunning, false) // e.g. its node is partitioned
		Eventually(func() int32 { return kit.GetLock(ns, "jobs").Status.WaitingCount }).Should(Equal(int32(1)))
		fakeClock.Step(10 * time.Second)
		poke(fl)
		Consistently(func() bool { return locksv1alpha1.HasLockGate(kit.GetPod(ns, "next")) }, "300ms").Should(BeTrue())

		// The controller starts the pod's not-Ready clock when it first sees it not Ready: before
		// the 10 s step, or (on a slow run) just after it, which nothing the test can watch tells
		// apart. So past 16 s the clock moves on a second at a time until the revocation.
		fakeClock.Step(6 * time.Second)
		poke(fl)
		Eventually(func() bool {
			if locksv1alpha1.HasLockGate(kit.GetPod(ns, "next")) {
				fakeClock.Step(time.Second)
				poke(fl)
				return false
			}
			return true
		}, "20s", "250ms").Should(BeTrue(), "next is granted once stuck has been not Ready for the lease")
		tNext := granted(ns, "next")
		Expect(tNext).To(BeNumerically(">", tStuck))
		Eventually(func() []string { return events(ns, "jobs") }).Should(ContainElement(
			ContainSubstring("was not Ready for 15s; revoked")))
		Eventually(func() []string { return podEvents(ns, "stuck") }).Should(ContainElement(
			MatchRegexp(`^Expired: Revoked lock jobs \(token \d+\): not Ready for 15s`)), "the revoked pod hears of it too")
	})

	It("keeps the grant of a starting pod for its start-up allowance, then revokes it for not being Ready", func() {
		ns := kit.NewNamespace()
		fl := kit.NewLock(ns, "jobs", util.StartupSeconds(60)) // a 15 s lease
		Expect(kit.GetLock(ns, "jobs").Spec.StartupSeconds).To(HaveValue(Equal(int32(60))))
		kit.CreatePod(util.Pod(ns, "pulling", "jobs")) // never Ready: its image is still being pulled
		tPulling := granted(ns, "pulling")
		kit.CreatePod(util.Pod(ns, "next", "jobs"))
		Eventually(func() int32 { return kit.GetLock(ns, "jobs").Status.WaitingCount }).Should(Equal(int32(1)))
		settle(fl)

		By("past the lease, within the allowance: kept")
		fakeClock.Step(45 * time.Second)
		poke(fl)
		Consistently(func() token.Token { return kit.LeaseState(ns, "jobs").Token }, "500ms").Should(Equal(tPulling))
		stillGated(ns, "next")

		By("past the allowance: revoked, on the controller's own timer (no poke), and the next pod granted")
		// The allowance runs from the reconcile that first saw the grant, before the step above or
		// (on a slow run) just after it: past 61 s the clock moves on a second at a time.
		fakeClock.Step(16 * time.Second)
		Eventually(func() bool {
			if locksv1alpha1.HasLockGate(kit.GetPod(ns, "next")) {
				fakeClock.Step(time.Second)
				return false
			}
			return true
		}, "20s", "250ms").Should(BeTrue())
		Expect(granted(ns, "next")).To(BeNumerically(">", tPulling))
		Eventually(func() []string { return podEvents(ns, "pulling") }).Should(ContainElement(
			MatchRegexp(`^Expired: Revoked lock jobs \(token \d+\): not Ready within its start-up allowance of 1m0s \(spec.startupSeconds\)`)))
	})

	It("completes a grant interrupted between the Lease write and the pod patch, without granting twice", func() {
		ns := kit.NewNamespace()
		kit.NewLock(ns, "jobs")
		holder, err := kit.Locker(ns, "jobs", "library").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		kit.CreatePod(util.Pod(ns, "victim", "jobs"))
		kit.CreatePod(util.Pod(ns, "later", "jobs"))
		Eventually(func() int32 { return kit.GetLock(ns, "jobs").Status.WaitingCount }).Should(Equal(int32(2)))

		By("the controller stops right after writing the Lease for the pod")
		stopManage()
		Expect(holder.Release(ctx)).To(Succeed())
		victim := kit.GetPod(ns, "victim")
		l := kit.GetLease(ns, "jobs")
		kept := kit.LeaseState(ns, "jobs").Reserved
		Expect(kept).NotTo(BeZero(), "the library's release keeps the lock for the pod at the head of the queue")
		var tok token.Token
		_, err = lease.CAS(ctx, lease.TypedWriter{Leases: clientset.CoordinationV1()}, l, func(next *coordinationv1.Lease) error {
			h, _, err := lease.Settle(next, lease.Queue{Waiters: []lease.Waiter{{Ticket: kept,
				Holder: locksv1alpha1.PodHolderIdentity(victim.Name, string(victim.UID))}}}, time.Now())
			tok = h.Token
			return err
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(locksv1alpha1.HasLockGate(kit.GetPod(ns, "victim"))).To(BeTrue())

		By("a restarted controller ungates that pod with that token")
		startManager()
		Expect(granted(ns, "victim")).To(Equal(tok))
		st := kit.LeaseState(ns, "jobs")
		Expect(st.Token).To(Equal(tok), "no second grant")
		Expect(st.Holder).To(Equal(locksv1alpha1.PodHolderIdentity(victim.Name, string(victim.UID))))
		stillGated(ns, "later")
	})

	It("never ungates a namesake created between the grant and the ungate patch with the old pod's token", func() {
		ns := kit.NewNamespace()
		kit.NewLock(ns, "jobs")
		holder, err := kit.Locker(ns, "jobs", "library").TryAcquire(ctx) // keep the lock busy while the pod queues
		Expect(err).NotTo(HaveOccurred())
		kit.CreatePod(util.Pod(ns, "worker-0", "jobs"))
		Eventually(func() int32 { return kit.GetLock(ns, "jobs").Status.WaitingCount }).Should(Equal(int32(1)))
		first := kit.GetPod(ns, "worker-0")

		By("a controller that, right after granting worker-0, sees it deleted and recreated (a StatefulSet)")
		stopManage()
		replaced := make(chan error, 1)
		var once sync.Once
		stop, err := util.StartManager(ctx, cfg, fakeClock, testEnv, controllers.WithAfterPodGrant(func() {
			once.Do(func() { replaced <- recreatePod(ns, "worker-0", first.UID) })
		}))
		Expect(err).NotTo(HaveOccurred())
		stopManage = stop
		DeferCleanup(func() { stopManage(); startManager() })
		Expect(holder.Release(ctx)).To(Succeed())
		Eventually(replaced).Should(Receive(Succeed()))

		By("the namesake runs only with a grant of its own")
		Eventually(func(g Gomega) {
			p := kit.GetPod(ns, "worker-0")
			g.Expect(p.UID).NotTo(Equal(first.UID))
			g.Expect(locksv1alpha1.HasLockGate(p)).To(BeFalse(), "the namesake is granted in its turn")
			st := kit.LeaseState(ns, "jobs")
			g.Expect(st.Holder).To(Equal(locksv1alpha1.PodHolderIdentity(p.Name, string(p.UID))),
				"an ungated pod holds the lock under its own UID")
			g.Expect(p.Annotations).To(HaveKeyWithValue(locksv1alpha1.TokenAnnotation, st.Token.String()),
				"an ungated pod carries its own grant's token")
		}).Should(Succeed())
	})

	It("refuses the ungate patch on a namesake of the pod it was made for", func() {
		ns := kit.NewNamespace()
		kit.CreatePod(util.Pod(ns, "worker-0", "no-such-lock")) // no lock of that name: the controller leaves it gated
		old := kit.GetPod(ns, "worker-0")
		patch, err := controllers.UngatePatch(old, "no-such-lock", token.Token(42), 1, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(recreatePod(ns, "worker-0", old.UID)).To(Succeed())

		err = k8sClient.Patch(ctx, old.DeepCopy(), patch)
		Expect(err).To(HaveOccurred(), "the old pod's patch must not land on its namesake")
		Expect(controllers.PodReplaced(err)).To(BeTrue(), "refusal not recognized: %v", err)
		p := kit.GetPod(ns, "worker-0")
		Expect(locksv1alpha1.HasLockGate(p)).To(BeTrue())
		Expect(p.Annotations).NotTo(HaveKey(locksv1alpha1.TokenAnnotation))

		By("a patch made for the namesake lands")
		patch, err = controllers.UngatePatch(p, "no-such-lock", token.Token(43), 1, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(k8sClient.Patch(ctx, p.DeepCopy(), patch)).To(Succeed())
		p = kit.GetPod(ns, "worker-0")
		Expect(locksv1alpha1.HasLockGate(p)).To(BeFalse())
		Expect(p.Annotations).To(HaveKeyWithValue(locksv1alpha1.TokenAnnotation, "43"))
	})

	It("mirrors a holder pod with a 253-character name and revokes it at its expiry on its own timer", func() {
		ns := kit.NewNamespace()
		kit.NewLock(ns, "jobs", util.LeaseSeconds(1), util.StartupSeconds(0))
		// The longest pod name there is: four DNS labels, 253 characters.
		name := strings.Join([]string{strings.Repeat("a", 63), strings.Repeat("b", 63), strings.Repeat("c", 63),
			strings.Repeat("d", 61)}, ".")
		kit.CreatePod(util.Pod(ns, name, "jobs"))
		granted(ns, name)
		id := locksv1alpha1.PodHolderIdentity(name, string(kit.GetPod(ns, name).UID))
		Expect(id).To(HaveLen(294))
		Eventually(func(g Gomega) {
			st := kit.GetLock(ns, "jobs").Status
			g.Expect(st.Holder).To(Equal(id))
			g.Expect(meta.FindStatusCondition(st.Conditions, locksv1alpha1.ConditionHeld).Message).To(ContainSubstring(id))
		}).Should(Succeed())

		By("the pod never becomes Ready; no poke: the controller's own deadline brings the revocation")
		Consistently(func() string { return kit.LeaseState(ns, "jobs").Holder }, "300ms").Should(Equal(id))
		fakeClock.Step(2 * time.Second)
		Eventually(func() string { return kit.LeaseState(ns, "jobs").Holder }, "5s").Should(BeEmpty())
		Eventually(func() string { return kit.GetLock(ns, "jobs").Status.Holder }).Should(BeEmpty())
	})

	It("keeps pods gated while their lock does not exist, and grants once it does", func() {
		ns := kit.NewNamespace()
		kit.CreatePod(util.Pod(ns, "early", "not-yet"))
		Eventually(func() []string { return podEvents(ns, "early") }).Should(ContainElement(
			ContainSubstring("FencedLock " + ns + "/not-yet does not exist: a pod's locks live in its own namespace (" + ns + ")")))
		stillGated(ns, "early")

		kit.NewLock(ns, "not-yet")
		granted(ns, "early")

		By("the lock is deleted while a pod waits: it stays gated")
		kit.CreatePod(util.Pod(ns, "orphan", "not-yet"))
		kit.DeleteLock(ns, "not-yet") // held by "early": deliberately
		Consistently(func() bool { return locksv1alpha1.HasLockGate(kit.GetPod(ns, "orphan")) }, "300ms").Should(BeTrue())
	})
})

func podEvents(ns, name string) []string {
	out := []string{}
	for _, e := range allEvents(ns) {
		if e.Regarding.Kind == "Pod" && e.Regarding.Name == name {
			out = append(out, e.Reason+": "+e.Note)
		}
	}
	return out
}

// recreatePod deletes pod name (it must have UID uid) and creates a namesake, as a StatefulSet
// does. It runs inside the controller (AfterPodGrant), so it reports errors instead of failing.
func recreatePod(ns, name string, uid types.UID) error {
	old := &corev1.Pod{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, old); err != nil {
		return err
	}
	if old.UID != uid {
		return fmt.Errorf("pod %s has UID %s, want %s", name, old.UID, uid)
	}
	if err := k8sClient.Delete(ctx, old, client.GracePeriodSeconds(0)); err != nil {
		return err
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		err := k8sClient.Get(ctx, client.ObjectKeyFromObject(old), &corev1.Pod{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pod %s still exists after deletion (%v)", name, err)
		}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: old.Labels},
		Spec:       corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: old.Spec.Containers},
	}
	return k8sClient.Create(ctx, pod)
}

var _ = Describe("The pods of a lock, as the reconciler reads them", func() {
	It("come from the pod informer's index, by namespace and lock, as pods come and go", func() {
		opts := controllers.CacheOptions()
		opts.Scheme = util.Scheme()
		c, err := cache.New(cfg, opts)
		Expect(err).NotTo(HaveOccurred())
		podsOf, err := controllers.PodReader(ctx, c)
		Expect(err).NotTo(HaveOccurred())
		cctx, stop := context.WithCancel(ctx)
		defer stop()
		go func() { _ = c.Start(cctx) }()
		Expect(c.WaitForCacheSync(cctx)).To(BeTrue())

		ns, other := kit.NewNamespace(), kit.NewNamespace()
		several := util.Pod(ns, "several", "")
		several.Annotations = map[string]string{locksv1alpha1.LocksAnnotation: "x,y"}
		for _, p := range []*corev1.Pod{util.Pod(ns, "one", "x"), several, util.Pod(ns, "y-only", "y"),
			util.Pod(ns, "none", ""), util.Pod(other, "one", "x")} {
			kit.CreatePod(p)
		}
		readAs := func(lock string, want ...string) {
			GinkgoHelper()
			want = append([]string{}, want...)
			Eventually(func(g Gomega) {
				got, err := podsOf(ns, lock)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(got).To(Equal(want))
			}).Should(Succeed())
		}
		readAs("x", "one", "several")
		readAs("y", "several", "y-only")
		readAs("z")
		Expect(k8sClient.Delete(ctx, kit.GetPod(ns, "one"), client.GracePeriodSeconds(0))).To(Succeed())
		readAs("x", "several")
	})
})
