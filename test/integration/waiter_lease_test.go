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
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/lock"
	"github.com/fencedlock/fencedlock/test/util"
)

// The waiter Lease (docs/protocol.md, the queue format): a waiter's place in the queue is
// the resourceVersion of its join, and the API server keeps every later write to that place.
var _ = Describe("A waiter Lease", func() {
	It("keeps the place its join was given, whoever writes it", func() {
		ns := kit.NewNamespace()
		fl := kit.NewLock(ns, "ledger", util.LeaseSeconds(15))
		mallory, _ := ordinaryUser(ns, "mallory")
		waiter := func(identity string) *coordinationv1.Lease {
			return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: locksv1alpha1.WaiterLeaseName(fl.UID, identity),
				Labels: map[string]string{locksv1alpha1.ManagedByLabel: locksv1alpha1.ManagedByValue,
					locksv1alpha1.LockUIDLabel: string(fl.UID), locksv1alpha1.RoleLabel: locksv1alpha1.RoleWaiter}}}
		}
		write := func(old *coordinationv1.Lease, change func(next *coordinationv1.Lease)) (*coordinationv1.Lease, error) {
			next := old.DeepCopy()
			change(next)
			return next, mallory.Update(ctx, next)
		}

		By("a join creates the waiter Lease: its ticket is the create's resourceVersion")
		alice := waiter("alice")
		lease.JoinWaiter(nil, alice, "alice", time.Now())
		Expect(mallory.Create(ctx, alice)).To(Succeed())
		joined := alice.ResourceVersion
		Expect(lease.WaiterTicket(alice)).To(Equal(mustTicket(joined)))

		By("a beat that does not carry the ticket is refused, and told which to send")
		_, err := write(alice, func(next *coordinationv1.Lease) { next.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()} })
		policyDenied(err, "fencedlock-waiter-lease", `set annotation fencedlock.io/ticket to "`+joined+`"`)

		By("a beat stamped as lease.Stamp does is admitted, and keeps the place")
		alice, err = write(alice, func(next *coordinationv1.Lease) {
			next.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
			lease.Stamp(alice, next)
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(alice.ResourceVersion).NotTo(Equal(joined))
		Expect(lease.WaiterTicket(alice)).To(Equal(mustTicket(joined)))

		By("bob joins after alice, and queues behind her")
		bob := waiter("bob")
		lease.JoinWaiter(nil, bob, "bob", time.Now())
		Expect(mallory.Create(ctx, bob)).To(Succeed())

		By("a write that picks an earlier place is refused")
		_, err = write(bob, func(next *coordinationv1.Lease) {
			metav1.SetMetaDataAnnotation(&next.ObjectMeta, locksv1alpha1.TicketAnnotation, "1")
		})
		policyDenied(err, "fencedlock-waiter-lease", "keeps the place of the waiter")
		_, err = write(bob, func(next *coordinationv1.Lease) {
			lease.JoinWaiter(bob, next, "bob", time.Now())
			metav1.SetMetaDataAnnotation(&next.ObjectMeta, locksv1alpha1.TicketAnnotation, "1")
		})
		policyDenied(err, "fencedlock-waiter-lease", "carries no fencedlock.io/ticket")
		created := waiter("carol")
		lease.JoinWaiter(nil, created, "carol", time.Now())
		metav1.SetMetaDataAnnotation(&created.ObjectMeta, locksv1alpha1.TicketAnnotation, "1")
		policyDenied(mallory.Create(ctx, created), "fencedlock-waiter-lease", "carries no fencedlock.io/ticket")

		By("alice joins again: behind bob now")
		alice, err = write(alice, func(next *coordinationv1.Lease) { lease.JoinWaiter(alice, next, "alice", time.Now()) })
		Expect(err).NotTo(HaveOccurred())
		var list coordinationv1.LeaseList
		Expect(k8sClient.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{
			locksv1alpha1.LockUIDLabel: string(fl.UID), locksv1alpha1.RoleLabel: locksv1alpha1.RoleWaiter})).To(Succeed())
		waiting, malformed := lease.Waiters(list.Items, 0)
		Expect(malformed).To(BeEmpty())
		Expect(waiting).To(HaveLen(2))
		Expect(waiting[0].Holder).To(Equal("bob"))
		Expect(waiting[1].Holder).To(Equal("alice"))

		By("a waiter Lease carries none of the lock's annotations, and keeps its name's form")
		_, err = write(bob, func(next *coordinationv1.Lease) {
			lease.Stamp(bob, next)
			metav1.SetMetaDataAnnotation(&next.ObjectMeta, locksv1alpha1.TokenAnnotation, bob.ResourceVersion)
		})
		policyDenied(err, "fencedlock-waiter-lease", "carries only fencedlock.io/join and fencedlock.io/ticket")
		misnamed := waiter("dave")
		misnamed.Name = "dave"
		lease.JoinWaiter(nil, misnamed, "dave", time.Now())
		policyDenied(mallory.Create(ctx, misnamed), "fencedlock-waiter-lease", "is named fencedlock-wait-<lock uid>")
	})
})

// mustTicket is the ticket resourceVersion rv stands for.
var _ = Describe("An unused waiter Lease", func() {
	It("is deleted by the manager after ten lease durations unused, and joining again creates it anew", func() {
		ns := kit.NewNamespace()
		fl := kit.NewLock(ns, "brief", util.LeaseSeconds(1))
		holder, err := kit.Locker(ns, "brief", "holder").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		util.KeepAlive(holder, 0)
		name := locksv1alpha1.WaiterLeaseName(fl.UID, "patient")
		wctx, cancel := context.WithCancel(ctx)
		_, failed := acquireAsync(wctx, kit.Locker(ns, "brief", "patient"))
		Eventually(func() []string { return waiterIDs(ns, "brief") }, 10*time.Second, 20*time.Millisecond).
			Should(Equal([]string{"patient"}))
		cancel() // it leaves: its waiter Lease stays, unused
		Eventually(failed, 10*time.Second).Should(Receive())
		left := time.Now()
		Eventually(func() bool {
			_, err := clientset.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}, 30*time.Second, 200*time.Millisecond).Should(BeTrue())
		Expect(time.Since(left)).To(BeNumerically(">=", 9*time.Second), "not before ten lease durations")

		By("joining again creates it")
		gone := kit.Locker(ns, "brief", "patient")
		got, _ := acquireAsync(ctx, gone)
		Eventually(func() []string { return waiterIDs(ns, "brief") }, 10*time.Second, 20*time.Millisecond).
			Should(Equal([]string{"patient"}))
		Expect(holder.Release(ctx)).To(Succeed())
		var g *lock.Grant
		Eventually(got, 10*time.Second).Should(Receive(&g))
		Expect(g.Release(ctx)).To(Succeed())
	})
})

func mustTicket(rv string) lease.Ticket {
	t, err := strconv.ParseUint(rv, 10, 64)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return lease.Ticket(t)
}
