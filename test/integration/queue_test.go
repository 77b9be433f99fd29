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
	"strconv"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/lock"
	"github.com/fencedlock/fencedlock/pkg/token"
	"github.com/fencedlock/fencedlock/test/util"
)

// waiterIDs is the identities status.waiters shows, in order.
func waiterIDs(ns, name string) []string {
	waiters := kit.GetLock(ns, name).Status.Waiters
	ids := make([]string, 0, len(waiters))
	for _, w := range waiters {
		ids = append(ids, w.Identity)
	}
	return ids
}

// queueOf reads the lock's queue: its queue Lease's entries and its waiter Leases that wait
// (a holder, a ticket above the lock's served one), in ticket order.
func queueOf(ns, name string) lease.Queue {
	ref := lease.LockOf(kit.GetLease(ns, name))
	ExpectWithOffset(1, ref).NotTo(BeNil())
	list, err := clientset.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{LabelSelector: lease.LockSelector(ref.UID)})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	items := make([]*coordinationv1.Lease, 0, len(list.Items))
	for i := range list.Items {
		items = append(items, &list.Items[i])
	}
	q, _ := lease.QueueFrom(items, kit.LeaseState(ns, name).Served)
	return q
}

// joinAs queues identity on lock name as a client that never beats: its waiter Lease.
func joinAs(ns, name, identity string) {
	ref := lease.LockOf(kit.GetLease(ns, name))
	ExpectWithOffset(1, ref).NotTo(BeNil())
	w := lease.NewWaiter(ns, locksv1alpha1.WaiterLeaseName(ref.UID, identity), ref)
	lease.JoinWaiter(nil, w, identity, time.Now())
	_, err := clientset.CoordinationV1().Leases(ns).Create(ctx, w, metav1.CreateOptions{})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
}

// acquireAsync starts Acquire and returns where its grant (or error) arrives.
func acquireAsync(ctx context.Context, l *lock.Locker) (<-chan *lock.Grant, <-chan error) {
	got, failed := make(chan *lock.Grant, 1), make(chan error, 1)
	go func() {
		defer GinkgoRecover()
		g, err := l.Acquire(ctx)
		if err != nil {
			failed <- err
			return
		}
		got <- g
	}()
	return got, failed
}

var _ = Describe("One queue for every holder", func() {
	It("serves Go clients and pods in the order they asked, and shows them all as waiters", func() {
		ns := kit.NewNamespace()
		kit.NewLock(ns, "ledger", util.LeaseSeconds(15))
		first, err := kit.Locker(ns, "ledger", "first").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())

		gotA, _ := acquireAsync(ctx, kit.Locker(ns, "ledger", "client-a"))
		Eventually(func() []string { return waiterIDs(ns, "ledger") }, 10*time.Second, 20*time.Millisecond).
			Should(Equal([]string{"client-a"}))
		pod := kit.CreatePod(util.Pod(ns, "pod-p", "ledger"))
		podID := locksv1alpha1.PodHolderIdentity(pod.Name, string(pod.UID))
		Eventually(func() []string { return waiterIDs(ns, "ledger") }, 10*time.Second, 20*time.Millisecond).
			Should(Equal([]string{"client-a", podID}))
		gotB, _ := acquireAsync(ctx, kit.Locker(ns, "ledger", "client-b"))
		Eventually(func() []string { return waiterIDs(ns, "ledger") }, 10*time.Second, 20*time.Millisecond).
			Should(Equal([]string{"client-a", podID, "client-b"}))
		Expect(kit.GetLock(ns, "ledger").Status.WaitingCount).To(Equal(int32(3)))

		By("TryAcquire never queues: it is refused and the queue is unchanged")
		_, err = kit.Locker(ns, "ledger", "impatient").TryAcquire(ctx)
		Expect(errors.Is(err, lock.ErrHeld)).To(BeTrue(), "%v", err)
		Expect(queueOf(ns, "ledger").Waiting(kit.LeaseState(ns, "ledger").Served)).To(HaveLen(3))

		By("the release grants client-a in the same write")
		before := kit.GetLease(ns, "ledger").ResourceVersion
		Expect(first.Release(ctx)).To(Succeed())
		var a *lock.Grant
		Eventually(gotA, 10*time.Second).Should(Receive(&a))
		st := kit.LeaseState(ns, "ledger")
		Expect(st.Holder).To(Equal("client-a"))
		Expect(a.Token().String()).To(Equal(before), "the releasing write granted it: the token is the resourceVersion it was conditioned on")

		By("client-a's release keeps the lock for the pod, which the controller grants; client-b keeps waiting")
		Expect(a.Release(ctx)).To(Succeed())
		Eventually(func() string { return kit.GetPod(ns, "pod-p").Annotations[locksv1alpha1.TokenAnnotation] },
			10*time.Second, 20*time.Millisecond).ShouldNot(BeEmpty())
		Expect(kit.LeaseState(ns, "ledger").Holder).To(Equal(podID))
		podTok, err := token.Parse(kit.GetPod(ns, "pod-p").Annotations[locksv1alpha1.TokenAnnotation])
		Expect(err).NotTo(HaveOccurred())
		Expect(podTok).To(BeNumerically(">", a.Token()))
		Consistently(gotB, 300*time.Millisecond).ShouldNot(Receive())

		By("the pod finishes: the controller's release grants client-b")
		Expect(k8sClient.Status().Patch(ctx, pod, client.RawPatch(types.StrategicMergePatchType,
			util.PodStatusPatch(corev1.PodSucceeded, nil)))).To(Succeed())
		var b *lock.Grant
		Eventually(gotB, 10*time.Second).Should(Receive(&b))
		Expect(b.Token()).To(BeNumerically(">", podTok))
		Expect(b.Release(ctx)).To(Succeed())
		Eventually(func() int32 { return kit.GetLock(ns, "ledger").Status.WaitingCount }, 10*time.Second).Should(BeZero())
	})

	It("queues pods that ask together one by one, each at a ticket of its own", func() {
		ns := kit.NewNamespace()
		kit.NewLock(ns, "batch", util.LeaseSeconds(15))
		holder, err := kit.Locker(ns, "batch", "holder").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		util.KeepAlive(holder, 0)

		By("eight pods ask at once: a reconcile finds several of them together")
		want := make([]string, 8)
		var wg sync.WaitGroup
		for i := range want {
			wg.Go(func() {
				defer GinkgoRecover()
				pod := kit.CreatePod(util.Pod(ns, fmt.Sprintf("worker-%d", i), "batch"))
				want[i] = locksv1alpha1.PodHolderIdentity(pod.Name, string(pod.UID))
			})
		}
		wg.Wait()
		Eventually(func() []string {
			got := make([]string, 0, len(want))
			for _, w := range queueOf(ns, "batch").Waiters {
				got = append(got, w.Holder)
			}
			return got
		}, 10*time.Second, 20*time.Millisecond).Should(ConsistOf(want))
		Expect(queueOf(ns, "batch").Malformed).To(BeEmpty())
		Expect(repairNotes(ns, "batch")).To(BeEmpty(), "no entry was written malformed")
		Expect(holder.Release(ctx)).To(Succeed())
	})

	It("takes a waiter that gives up out of the queue, and drops one that stopped beating", func() {
		ns := kit.NewNamespace()
		kit.NewLock(ns, "stream", util.LeaseSeconds(2))
		holder, err := kit.Locker(ns, "stream", "holder").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		util.KeepAlive(holder, 0)

		By("a waiter whose context ends leaves")
		wctx, cancel := context.WithCancel(ctx)
		_, failed := acquireAsync(wctx, kit.Locker(ns, "stream", "gives-up"))
		Eventually(func() []string { return waiterIDs(ns, "stream") }, 10*time.Second, 20*time.Millisecond).
			Should(Equal([]string{"gives-up"}))
		cancel()
		Eventually(failed, 10*time.Second).Should(Receive(MatchError(context.Canceled)))
		Expect(queueOf(ns, "stream").Waiters).To(BeEmpty(), "it removed its own entry")

		By("a waiter that died (its entry is there, nobody beats it) is dropped after the lease duration")
		joinAs(ns, "stream", "dead")
		gotLive, _ := acquireAsync(ctx, kit.Locker(ns, "stream", "alive"))
		Eventually(func() []string { return waiterIDs(ns, "stream") }, 10*time.Second, 20*time.Millisecond).
			Should(Equal([]string{"dead", "alive"}))
		Eventually(func() []string { return waiterIDs(ns, "stream") }, 10*time.Second, 50*time.Millisecond).
			Should(Equal([]string{"alive"}), "the dead entry is dropped; the live one, beating, stays")
		Consistently(func() []string { return waiterIDs(ns, "stream") }, 3*time.Second, 200*time.Millisecond).
			Should(Equal([]string{"alive"}), "a live waiter outlives the lease duration in the queue")

		By("the next release goes to the live waiter")
		Expect(holder.Release(ctx)).To(Succeed())
		var g *lock.Grant
		Eventually(gotLive, 10*time.Second).Should(Receive(&g))
		Expect(g.Release(ctx)).To(Succeed())
	})

	It("never hands the lock to a waiter that gave up, even from a queue read before it left", func() {
		ns := kit.NewNamespace()
		kit.NewLock(ns, "late", util.LeaseSeconds(15))
		holder, err := kit.Locker(ns, "late", "holder").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		wctx, cancel := context.WithCancel(ctx)
		_, failed := acquireAsync(wctx, kit.Locker(ns, "late", "gives-up"))
		Eventually(func() []lease.Waiter { return queueOf(ns, "late").Waiters }, 10*time.Second, 20*time.Millisecond).
			Should(HaveLen(1))
		Eventually(func() bool { return kit.LeaseState(ns, "late").Waiting }, 10*time.Second, 20*time.Millisecond).Should(BeTrue())
		staleLease, staleQueue := kit.GetLease(ns, "late"), queueOf(ns, "late")

		By("the waiter leaves: its entry goes, and its write to the lock's Lease (fencedlock.io/left) follows")
		cancel()
		Eventually(failed, 10*time.Second).Should(Receive())
		Expect(queueOf(ns, "late").Waiters).To(BeEmpty())
		Expect(kit.GetLease(ns, "late").Annotations).To(HaveKey(locksv1alpha1.LeftAnnotation))

		By("a release computed from the Lease and queue read before it left fails its compare-and-swap")
		_, err = lease.CAS(ctx, lease.TypedWriter{Leases: clientset.CoordinationV1()}, staleLease, func(next *coordinationv1.Lease) error {
			h, err := lease.Release(next, "holder", holder.Token(), &staleQueue, time.Now())
			Expect(h.To).NotTo(BeNil(), "the stale queue still names the waiter")
			return err
		})
		Expect(apierrors.IsConflict(err)).To(BeTrue(), "%v", err)

		By("the holder's own release re-reads both: a plain release, and the waiting mark goes")
		Expect(holder.Release(ctx)).To(Succeed())
		st := kit.LeaseState(ns, "late")
		Expect(st.Held()).To(BeFalse())
		Expect(st.Waiting).To(BeFalse(), "the release read an empty queue")
	})

	It("never grants a dead head: the live waiter is served at the release, or within the detection window", func() {
		ns := kit.NewNamespace()
		kit.NewLock(ns, "dead", util.LeaseSeconds(2)) // lease.Window(2 s): a waiter unseen for 2 s is dead
		holder, err := kit.Locker(ns, "dead", "holder").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		util.KeepAlive(holder, 0)
		injectWaiter := func(id string) { joinAs(ns, "dead", id) }

		By("a waiter that died long before the release is dropped, and the release skips it")
		injectWaiter("died-early")
		gotLive, _ := acquireAsync(ctx, kit.Locker(ns, "dead", "alive"))
		Eventually(func() []string { return waiterIDs(ns, "dead") }, 10*time.Second, 20*time.Millisecond).
			Should(Equal([]string{"died-early", "alive"}))
		Eventually(func() []string { return waiterIDs(ns, "dead") }, 10*time.Second, 50*time.Millisecond).
			Should(Equal([]string{"alive"}))
		Expect(lockEventReasons(ns, "dead")).To(ContainElement(locksv1alpha1.ReasonWaiterDead))
		before := kit.GetLease(ns, "dead").ResourceVersion
		Expect(holder.Release(ctx)).To(Succeed())
		var g *lock.Grant
		Eventually(gotLive, 10*time.Second).Should(Receive(&g))
		Expect(g.Token().String()).To(Equal(before), "granted in the release write: the dead waiter was never granted")

		By("a waiter that dies just before the release is granted, and revoked within the detection window")
		injectWaiter("died-late") // the manager sees it now: judged dead 2 s from now
		died := time.Now()
		gotNext, _ := acquireAsync(ctx, kit.Locker(ns, "dead", "next"))
		Eventually(func() []string { return waiterIDs(ns, "dead") }, 10*time.Second, 20*time.Millisecond).
			Should(Equal([]string{"died-late", "next"}))
		time.Sleep(time.Until(died.Add(1200 * time.Millisecond)))
		released := time.Now()
		Expect(g.Release(ctx)).To(Succeed())
		Expect(kit.LeaseState(ns, "dead").Holder).To(Equal("died-late"), "not judged dead yet: the release hands it the lock")
		var n *lock.Grant
		Eventually(gotNext, 10*time.Second).Should(Receive(&n))
		waited := time.Since(released)
		GinkgoWriter.Printf("next live waiter served %s after the release (detection window 2s)\n", waited.Round(time.Millisecond))
		// Its grant is judged from its last sign of life (when the manager first saw the entry),
		// not from the grant: it ends when the window that started before the release does.
		Expect(waited).To(BeNumerically("<", died.Add(2*time.Second+600*time.Millisecond).Sub(released)),
			"at most what was left of the dead waiter's window at the release (plus the manager's reaction)")
		Expect(kit.LeaseState(ns, "dead").RevokedToken).NotTo(BeZero(), "the dead waiter's grant was revoked")
		Expect(n.Release(ctx)).To(Succeed())
	})

	It("survives a malformed entry and an unreadable queue: nobody is blocked, the manager repairs and says so", func() {
		ns := kit.NewNamespace()
		kit.NewLock(ns, "poison", util.LeaseSeconds(15))
		// Only the manager writes the queue Lease (its pods): an administrator's write stands for a
		// bug or a hand edit. Clients queue on waiter Leases.
		eve := clientset
		holder, err := kit.Locker(ns, "poison", "holder").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		name := lease.QueueOf(kit.GetLease(ns, "poison"))
		poison := func(value string) {
			_, err := eve.CoordinationV1().Leases(ns).Patch(ctx, name, types.MergePatchType,
				fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, locksv1alpha1.QueueAnnotation, value), metav1.PatchOptions{})
			Expect(err).NotTo(HaveOccurred())
		}

		By("an entry whose beat is a string: skipped by the client, dropped by the manager with an event")
		poison(`{"waiters":[{"ticket":4,"holder":"pod/mallory/uid","beat":"soon"}]}`)
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		gotA, failedA := acquireAsync(wctx, kit.Locker(ns, "poison", "a"))
		Eventually(func() []string { return waiterIDs(ns, "poison") }, 10*time.Second, 20*time.Millisecond).
			Should(Equal([]string{"a"}))
		Consistently(failedA, 200*time.Millisecond).ShouldNot(Receive())
		Eventually(func() []string { return repairNotes(ns, "poison") },
			10*time.Second, 50*time.Millisecond).Should(ContainElement(ContainSubstring(`"holder":"pod/mallory/uid"`)))
		Expect(queueOf(ns, "poison").Malformed).To(BeEmpty(), "the manager dropped it")

		By("a client entry of the earlier format (clients now queue on waiter Leases): skipped, dropped with an event")
		poison(`{"next":5,"waiters":[{"ticket":4,"holder":"old-client","since":"2026-01-01T00:00:00Z","beat":2}]}`)
		Eventually(func() []string { return repairNotes(ns, "poison") },
			10*time.Second, 50*time.Millisecond).Should(ContainElement(ContainSubstring(`"holder":"old-client"`)))
		Expect(queueOf(ns, "poison").Malformed).To(BeEmpty(), "the manager dropped it")
		Expect(waiterIDs(ns, "poison")).To(Equal([]string{"a"}))

		By("a queue annotation that is not a queue at all: a client still joins, the manager says it started afresh")
		poison("{garbage")
		gotB, failedB := acquireAsync(wctx, kit.Locker(ns, "poison", "b"))
		Eventually(func() []string { return repairNotes(ns, "poison") },
			10*time.Second, 50*time.Millisecond).Should(ContainElement(ContainSubstring("{garbage")))
		Eventually(func() []string { return waiterIDs(ns, "poison") }, 10*time.Second, 20*time.Millisecond).
			Should(ContainElement("b"))
		Consistently(failedB, 200*time.Millisecond).ShouldNot(Receive())
		Expect(kit.GetLease(ns, name).Annotations).NotTo(HaveKey(locksv1alpha1.QueueUnreadableAnnotation))

		By("both are served in turn: a (who joins again at its next beat if its entry went) and b")
		Expect(holder.Release(ctx)).To(Succeed())
		for range 2 {
			var g *lock.Grant
			select {
			case g = <-gotA:
			case g = <-gotB:
			case err := <-failedA:
				Fail(err.Error())
			case err := <-failedB:
				Fail(err.Error())
			case <-wctx.Done():
				Fail("a waiter was not served within 20 s")
			}
			Expect(g.Release(ctx)).To(Succeed())
		}
		Eventually(func() bool { return kit.LeaseState(ns, "poison").Waiting }, 10*time.Second, 20*time.Millisecond).
			Should(BeFalse(), "the queue is empty: the waiting mark is gone, releases read no queue")
	})

	It("serves its live waiters, not entries already served, after its Lease is deleted and recreated", func() {
		ns := kit.NewNamespace()
		kit.NewLock(ns, "gone", util.LeaseSeconds(15))
		holder, err := kit.Locker(ns, "gone", "holder").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		got1, _ := acquireAsync(ctx, kit.Locker(ns, "gone", "w1"))
		Eventually(func() []string { return waiterIDs(ns, "gone") }, 10*time.Second, 20*time.Millisecond).Should(Equal([]string{"w1"}))
		got2, _ := acquireAsync(ctx, kit.Locker(ns, "gone", "w2"))
		Eventually(func() []string { return waiterIDs(ns, "gone") }, 10*time.Second, 20*time.Millisecond).
			Should(Equal([]string{"w1", "w2"}))
		Expect(holder.Release(ctx)).To(Succeed())
		Eventually(got1, 10*time.Second).Should(Receive())
		Expect(queueOf(ns, "gone").Waiters).To(ConsistOf(HaveField("Holder", "w2")), "w1, served, no longer waits")

		By("the Lease is deleted while w1 holds it; the controller recreates it")
		Expect(clientset.CoordinationV1().Leases(ns).Delete(ctx, "gone", metav1.DeleteOptions{})).To(Succeed())
		var g *lock.Grant
		Eventually(got2, 5*time.Second).Should(Receive(&g), "w2 is served well within the 15 s lease, not after a grant to w1's stale entry expires")
		Expect(kit.LeaseState(ns, "gone").Holder).To(Equal("w2"))
		Expect(g.Release(ctx)).To(Succeed())
	})

	// A release reads the queue as of the lock Lease it writes over: pkg/lock asks the API server
	// for the queue Lease "not older than" that Lease's resourceVersion. This pins what that relies
	// on: the answer holds every write of any Lease up to that resourceVersion, and one the API
	// server cannot reach is refused with the cause pkg/lock falls back on.
	It("reads a Lease as of another Lease's resourceVersion, and names a resourceVersion it cannot reach", func() {
		ns := kit.NewNamespace()
		leases := clientset.CoordinationV1().Leases(ns)
		a, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		b, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "b"}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		for i := range 50 { // as a leave: one Lease written, then the other; then read the first as of the second
			a.Spec.HolderIdentity = new(fmt.Sprint(i))
			a, err = leases.Update(ctx, a, metav1.UpdateOptions{})
			Expect(err).NotTo(HaveOccurred())
			b.Spec.HolderIdentity = new(fmt.Sprint(i))
			b, err = leases.Update(ctx, b, metav1.UpdateOptions{})
			Expect(err).NotTo(HaveOccurred())
			got, err := leases.Get(ctx, "a", metav1.GetOptions{ResourceVersion: b.ResourceVersion})
			Expect(err).NotTo(HaveOccurred())
			Expect(*got.Spec.HolderIdentity).To(Equal(fmt.Sprint(i)), "read as of resourceVersion %s", b.ResourceVersion)
		}
		rv, err := strconv.ParseInt(b.ResourceVersion, 10, 64)
		Expect(err).NotTo(HaveOccurred())
		far := strconv.FormatInt(rv+1_000_000, 10)
		_, err = leases.Get(ctx, "a", metav1.GetOptions{ResourceVersion: far})
		Expect(apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge)).To(BeTrue(), "%v", err)
	})
})

// repairNotes returns the notes of the QueueRepaired events on FencedLock name.
func repairNotes(ns, name string) []string {
	list, err := clientset.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	Expect(err).NotTo(HaveOccurred())
	var notes []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "FencedLock" && e.Regarding.Name == name && e.Reason == locksv1alpha1.ReasonQueueRepaired {
			notes = append(notes, e.Note)
		}
	}
	return notes
}

// lockEventReasons returns the reasons of the events on FencedLock name.
func lockEventReasons(ns, name string) []string {
	list, err := clientset.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	Expect(err).NotTo(HaveOccurred())
	var reasons []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "FencedLock" && e.Regarding.Name == name {
			reasons = append(reasons, e.Reason)
		}
	}
	return reasons
}
