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
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/lock"
	"github.com/fencedlock/fencedlock/test/util"
)

// Waiter Leases written by others (docs/protocol.md, the queue format): a principal with ordinary
// RBAC on Leases writes whatever the admission policies let through, and honest clients and the
// manager must neither fail nor hang nor loop because of it.
var _ = Describe("Waiter Leases written by others", func() {
	// forged is a waiter Lease of lock fl as a client creates it, named after nameOf, waiting for
	// holder.
	forged := func(fl *locksv1alpha1.FencedLock, nameOf, holder string) *coordinationv1.Lease {
		ref := &metav1.OwnerReference{APIVersion: locksv1alpha1.GroupVersion.String(), Kind: locksv1alpha1.Kind,
			Name: fl.Name, UID: fl.UID}
		w := lease.NewWaiter(fl.Namespace, locksv1alpha1.WaiterLeaseName(fl.UID, nameOf), ref)
		lease.JoinWaiter(nil, w, holder, time.Now())
		return w
	}
	// honest is a Go client of lock ns/name under identity id whose principal has ordinary RBAC,
	// as the RBAC section of docs/protocol.md asks (kit.Locker's is a cluster admin, whom the
	// policies take for the manager).
	ordinary := func(ns, id string) (client.Client, *kubernetes.Clientset) {
		c, cs := ordinaryUser(ns, id)
		Eventually(func() error { // the authorizer sees a new Role a moment later
			_, err := cs.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
			return err
		}, 10*time.Second, 20*time.Millisecond).Should(Succeed())
		return c, cs
	}
	honest := func(ns, name, id string) *lock.Locker {
		_, cs := ordinary(ns, id)
		return util.NewLocker(cs.CoordinationV1(), ns, name, lock.WithIdentity(id))
	}

	It("do not stop a holder's release when one names the holder itself", func() {
		ns := kit.NewNamespace()
		fl := kit.NewLock(ns, "ledger", util.LeaseSeconds(3))
		mallory, _ := ordinary(ns, "mallory")
		holder, err := honest(ns, "ledger", "holder").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		util.KeepAlive(holder, 0)
		// Named after another identity (the name's hash is not the holder's), holder "holder".
		Expect(mallory.Create(ctx, forged(fl, "not-the-holder", "holder"))).To(Succeed())
		got, _ := acquireAsync(ctx, honest(ns, "ledger", "bob"))
		Eventually(func() []string { return waiterIDs(ns, "ledger") }, 10*time.Second, 20*time.Millisecond).
			Should(ContainElement("bob"))

		Expect(holder.Release(ctx)).To(Succeed(), "the holder's release is refused because of someone else's Lease")
		var g *lock.Grant
		// The forged entry is served first (by the manager: a release cannot hand the lock to its
		// own holder), and, since nobody renews for it, revoked a lease duration after it was seen.
		Eventually(got, 10*time.Second).Should(Receive(&g), "bob, the one waiting, is served")
		Expect(g.Release(ctx)).To(Succeed())
	})

	It("do not stop the release of a Locker that holds the lock and Acquires it again", func() {
		ns := kit.NewNamespace()
		kit.NewLock(ns, "ledger", util.LeaseSeconds(15))
		l := honest(ns, "ledger", "again")
		first, err := l.TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		got, failed := acquireAsync(ctx, l) // a second Acquire of the same Locker, e.g. another goroutine
		Eventually(func() []string { return waiterIDs(ns, "ledger") }, 10*time.Second, 20*time.Millisecond).
			Should(Equal([]string{"again"}))

		Expect(first.Release(ctx)).To(Succeed(), "releasing the first grant")
		var g *lock.Grant
		Eventually(got, 10*time.Second).Should(Receive(&g), "the second Acquire is served")
		Consistently(failed).ShouldNot(Receive())
		Expect(g.Token()).To(BeNumerically(">", first.Token()))
		Expect(g.Release(ctx)).To(Succeed())
	})

	It("are read only if the waiter policy judged them: an unlabelled one cannot pick its place", func() {
		ns := kit.NewNamespace()
		fl := kit.NewLock(ns, "ledger", util.LeaseSeconds(15))
		mallory, _ := ordinary(ns, "mallory")
		holder, err := honest(ns, "ledger", "holder").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())

		By("without the managed-by label no policy judges it: it picks the highest ticket there is")
		w := forged(fl, "mallory", "mallory")
		delete(w.Labels, locksv1alpha1.ManagedByLabel)
		metav1.SetMetaDataAnnotation(&w.ObjectMeta, locksv1alpha1.TicketAnnotation, lease.MaxTicket.String())
		Expect(mallory.Create(ctx, w)).To(Succeed())
		Expect(mallory.Patch(ctx, kit.GetLease(ns, "ledger"), mergePatch(`{"metadata":{"annotations":{%q:"true"}}}`,
			locksv1alpha1.WaitingAnnotation))).To(Succeed())

		Expect(holder.Release(ctx)).To(Succeed())
		st := kit.LeaseState(ns, "ledger")
		Expect(st.Holder).NotTo(Equal("mallory"), "the release served a Lease no policy judged")
		Expect(st.Served).NotTo(Equal(lease.MaxTicket), "served past every ticket the queue will ever issue")

		By("the queue still serves its waiters in order")
		nextLocker := honest(ns, "ledger", "next")
		var next *lock.Grant
		Eventually(func() error { next, err = nextLocker.TryAcquire(ctx); return err },
			30*time.Second, 100*time.Millisecond).Should(Succeed())
		got, _ := acquireAsync(ctx, honest(ns, "ledger", "bob"))
		Eventually(func() []string { return waiterIDs(ns, "ledger") }, 10*time.Second, 20*time.Millisecond).
			Should(Equal([]string{"bob"}))
		Expect(next.Release(ctx)).To(Succeed())
		var g *lock.Grant
		Eventually(got, 5*time.Second).Should(Receive(&g), "bob is handed the lock by the release")
		Expect(g.Release(ctx)).To(Succeed())
	})

	It("wake the manager when one has no owner: status.waiters shows its join at once", func() {
		ns := kit.NewNamespace()
		fl := kit.NewLock(ns, "ledger", util.LeaseSeconds(60)) // no deadline comes during the spec
		carol, _ := ordinary(ns, "carol")
		holder, err := honest(ns, "ledger", "holder").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() []string { return waiterIDs(ns, "ledger") }, 10*time.Second, 20*time.Millisecond).Should(BeEmpty())

		By("a client of another language joins without the ownerReference protocol.md asks for")
		w := forged(fl, "carol", "carol")
		w.OwnerReferences = nil
		Expect(carol.Create(ctx, w)).To(Succeed())
		Eventually(func() []string { return waiterIDs(ns, "ledger") }, 10*time.Second, 20*time.Millisecond).
			Should(Equal([]string{"carol"}), "the manager was not woken by the join")
		Expect(holder.Release(ctx)).To(Succeed())
	})

	It("do not make the manager write in a loop when one names a pod", func() {
		ns := kit.NewNamespace()
		fl := kit.NewLock(ns, "ledger", util.LeaseSeconds(15))
		mallory, _ := ordinary(ns, "mallory")
		holder, err := kit.Locker(ns, "ledger", "holder").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		util.KeepAlive(holder, 0)
		Expect(mallory.Create(ctx, forged(fl, "p", "pod/p/0f6c1a3e-0000-4000-8000-000000000000"))).To(Succeed())
		queueRV := func() string { return kit.GetLease(ns, locksv1alpha1.QueueLeaseName(fl.UID)).ResourceVersion }
		time.Sleep(time.Second)
		before := queueRV()
		time.Sleep(2 * time.Second)
		Expect(queueRV()).To(Equal(before), "the manager keeps rewriting the queue Lease")
	})

	It("are skipped when malformed, and a client joins over one left at its own Lease's name", func() {
		ns := kit.NewNamespace()
		fl := kit.NewLock(ns, "ledger", util.LeaseSeconds(15))
		mallory, _ := ordinary(ns, "mallory")
		holder, err := honest(ns, "ledger", "holder").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(mallory.Create(ctx, forged(fl, "long", strings.Repeat("x", 2000)))).To(Succeed()) // over 1024 bytes
		Expect(mallory.Create(ctx, forged(fl, "empty", ""))).To(Succeed())
		squat := forged(fl, "bob", "")
		metav1.SetMetaDataAnnotation(&squat.ObjectMeta, locksv1alpha1.JoinAnnotation, "9223372036854775807")
		Expect(mallory.Create(ctx, squat)).To(Succeed())

		got, _ := acquireAsync(ctx, honest(ns, "ledger", "bob"))
		Eventually(func() []string { return waiterIDs(ns, "ledger") }, 10*time.Second, 20*time.Millisecond).
			Should(Equal([]string{"bob"}))
		Expect(holder.Release(ctx)).To(Succeed())
		var g *lock.Grant
		Eventually(got, 5*time.Second).Should(Receive(&g), "bob is handed the lock by the release")
		Expect(kit.LeaseState(ns, "ledger").Holder).To(Equal("bob"))
		Expect(g.Release(ctx)).To(Succeed())
	})

	It("cannot take a waiter's place by writing another holder into its Lease", func() {
		ns := kit.NewNamespace()
		fl := kit.NewLock(ns, "ledger", util.LeaseSeconds(15))
		mallory, _ := ordinary(ns, "mallory")
		bob := forged(fl, "bob", "bob")
		Expect(k8sClient.Create(ctx, bob)).To(Succeed())
		next := bob.DeepCopy()
		lease.Stamp(bob, next) // bob's ticket carried, as a beat would
		mallorysID := "mallory"
		next.Spec.HolderIdentity = &mallorysID
		policyDenied(mallory.Update(ctx, next), "fencedlock-waiter-lease", "")
	})

	It("do not make a client's Acquire hang when an unlabelled Lease has its waiter Lease's name", func() {
		ns := kit.NewNamespace()
		fl := kit.NewLock(ns, "ledger", util.LeaseSeconds(15))
		mallory, _ := ordinary(ns, "mallory")
		holder, err := honest(ns, "ledger", "holder").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		squat := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns,
			Name: locksv1alpha1.WaiterLeaseName(fl.UID, "victim")}}
		Expect(mallory.Create(ctx, squat)).To(Succeed())

		actx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		got, failed := acquireAsync(actx, honest(ns, "ledger", "victim"))
		time.Sleep(time.Second) // the victim joined, as far as it knows
		Expect(holder.Release(ctx)).To(Succeed())
		select {
		case g := <-got:
			Expect(g.Release(ctx)).To(Succeed())
		case err := <-failed:
			Expect(err.Error()).To(ContainSubstring(squat.Name), "the refusal names the Lease in the way")
			Expect(actx.Err()).NotTo(HaveOccurred(), "it failed only when its context ended: it hung")
		case <-time.After(10 * time.Second):
			Fail("Acquire neither got the lock nor failed within 10 s of the release: it hangs")
		}
	})
})
