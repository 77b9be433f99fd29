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
	"fmt"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/lock"
	"github.com/fencedlock/fencedlock/test/util"
)

// leaseReads counts the Lease reads made through it: GETs by name, LISTs by label selector.
type leaseReads struct {
	coordinationv1client.LeasesGetter
	mu sync.Mutex
	n  map[string]int
}

func (r *leaseReads) Leases(ns string) coordinationv1client.LeaseInterface {
	return countedReads{r.LeasesGetter.Leases(ns), r}
}

func (r *leaseReads) of(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[name]
}

// ofQueue counts the reads of the queue of the lock whose Lease is l: GETs of its queue Lease and
// LISTs of its Leases.
func (r *leaseReads) ofQueue(l *coordinationv1.Lease) int {
	return r.of(lease.QueueOf(l)) + r.of("list:"+lease.LockSelector(lease.LockOf(l).UID))
}

func (r *leaseReads) count(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == nil {
		r.n = map[string]int{}
	}
	r.n[key]++
}

type countedReads struct {
	coordinationv1client.LeaseInterface
	r *leaseReads
}

func (c countedReads) Get(ctx context.Context, name string, o metav1.GetOptions) (*coordinationv1.Lease, error) {
	c.r.count(name)
	return c.LeaseInterface.Get(ctx, name, o)
}

func (c countedReads) List(ctx context.Context, o metav1.ListOptions) (*coordinationv1.LeaseList, error) {
	c.r.count("list:" + o.LabelSelector)
	return c.LeaseInterface.List(ctx, o)
}

func (c countedReads) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	c.r.count("watch")
	return c.LeaseInterface.Watch(ctx, o)
}

// watchedPast waits until a watch of both of a lock's Leases has delivered resourceVersion rv.
func watchedPast(ns, selector, from, rv string) {
	w, err := clientset.CoordinationV1().Leases(ns).Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: from})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	defer w.Stop()
	EventuallyWithOffset(1, func() bool {
		select {
		case ev := <-w.ResultChan():
			le, ok := ev.Object.(*coordinationv1.Lease)
			return ok && lease.Covers(le.ResourceVersion, rv)
		default:
			return false
		}
	}, 10*time.Second, time.Millisecond).Should(BeTrue())
}

// servedAsHead queues id, through leases, as the head of the queue of lock name behind a holder,
// which then releases: id is served in that release.
func servedAsHead(leases coordinationv1client.LeasesGetter, ns, name, id string) *lock.Grant {
	holder, err := kit.Locker(ns, name, "holder").TryAcquire(ctx)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	got, failed := acquireAsync(ctx, util.NewLocker(leases, ns, name, lock.WithIdentity(id)))
	EventuallyWithOffset(1, func() []string { return waiterIDs(ns, name) }, 10*time.Second, 20*time.Millisecond).
		Should(Equal([]string{id}))
	EventuallyWithOffset(1, func() bool { return kit.LeaseState(ns, name).Waiting }, 10*time.Second, 20*time.Millisecond).
		Should(BeTrue())
	ExpectWithOffset(1, holder.Release(ctx)).To(Succeed())
	var g *lock.Grant
	EventuallyWithOffset(1, got, 10*time.Second).Should(Receive(&g))
	ConsistentlyWithOffset(1, failed).ShouldNot(Receive())
	return g
}

var _ = Describe("A holder that follows its lock's queue", func() {
	// What following relies on: one watch of one resource delivers its events in resourceVersion
	// order, whichever of the selected objects each is about.
	It("is shown both Leases' writes by one watch, in resourceVersion order and none missing", func() {
		ns := kit.NewNamespace()
		leases := clientset.CoordinationV1().Leases(ns)
		sel := map[string]string{locksv1alpha1.LockUIDLabel: "order"}
		rvs := make([]string, 0, 2)
		for _, name := range []string{"a", "b"} {
			l, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: sel}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			rvs = append(rvs, l.ResourceVersion)
		}
		w, err := leases.Watch(ctx, metav1.ListOptions{LabelSelector: locksv1alpha1.LockUIDLabel + "=order", ResourceVersion: rvs[1]})
		Expect(err).NotTo(HaveOccurred())
		defer w.Stop()
		written := make([]string, 0, 60)
		for i := range 60 {
			name := []string{"a", "b"}[i%2]
			l, err := leases.Get(ctx, name, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			l.Spec.HolderIdentity = new(fmt.Sprint(i))
			l, err = leases.Update(ctx, l, metav1.UpdateOptions{})
			Expect(err).NotTo(HaveOccurred())
			written = append(written, name+"@"+l.ResourceVersion)
		}
		var seen []string
		for len(seen) < len(written) {
			var ev watch.Event
			Eventually(w.ResultChan(), 10*time.Second).Should(Receive(&ev))
			if le, ok := ev.Object.(*coordinationv1.Lease); ok && ev.Type == watch.Modified {
				seen = append(seen, le.Name+"@"+le.ResourceVersion)
			}
		}
		Expect(seen).To(Equal(written))
	})

	It("hands the lock on in one write: a holder served as the head serves a waiter that joined while it held, from the watch it waited on", func() {
		ns := kit.NewNamespace()
		kit.NewLock(ns, "relay", util.LeaseSeconds(15))
		lockLease := kit.GetLease(ns, "relay")
		uid := string(metav1.GetControllerOf(lockLease).UID)
		queue := lease.QueueOf(lockLease)
		sel := locksv1alpha1.LockUIDLabel + "=" + uid

		By("the manager labels both of the lock's Leases with its uid")
		Expect(lockLease.Labels).To(HaveKeyWithValue(locksv1alpha1.LockUIDLabel, uid))
		Eventually(func() map[string]string { return kit.GetLease(ns, queue).Labels }, 10*time.Second, 20*time.Millisecond).
			Should(HaveKeyWithValue(locksv1alpha1.LockUIDLabel, uid))
		Expect(lease.FollowSelector(lockLease)).To(Equal(sel))

		reads := &leaseReads{LeasesGetter: kit.Leases}
		b := servedAsHead(reads, ns, "relay", "b")

		By("c joins while b holds; b renews after that join, so its release is conditioned on a version past it")
		granted := kit.GetLease(ns, "relay").ResourceVersion
		gotC, _ := acquireAsync(ctx, kit.Locker(ns, "relay", "c"))
		Eventually(func() []lease.Waiter { return queueOf(ns, "relay").Waiting(kit.LeaseState(ns, "relay").Served) },
			10*time.Second, 20*time.Millisecond).Should(HaveLen(1))
		Expect(b.Renew(ctx)).To(Succeed())
		watchedPast(ns, sel, granted, kit.GetLease(ns, "relay").ResourceVersion)

		Expect(b.Release(ctx)).To(Succeed())
		Expect(reads.ofQueue(lockLease)).To(BeZero(),
			"b followed the queue on the watch it waited on: neither its grant nor its release read the queue")
		var c *lock.Grant
		Eventually(gotC, 10*time.Second).Should(Receive(&c))
		Expect(c.Token()).To(BeNumerically(">", b.Token()))
		st := kit.LeaseState(ns, "relay")
		Expect(st.Holder).To(Equal("c"))
		Expect(c.Release(ctx)).To(Succeed())
	})

	It("waits again on the watch its last grant kept: a worker that acquires again at once opens no watch", func() {
		ns := kit.NewNamespace()
		kit.NewLock(ns, "again", util.LeaseSeconds(15))
		lockLease := kit.GetLease(ns, "again")
		reads := &leaseReads{LeasesGetter: kit.Leases}
		h, err := kit.Locker(ns, "again", "holder").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		lb := util.NewLocker(reads, ns, "again", lock.WithIdentity("b"))
		gotB, failed := acquireAsync(ctx, lb)
		Eventually(func() []string { return waiterIDs(ns, "again") }, 10*time.Second, 20*time.Millisecond).Should(Equal([]string{"b"}))
		Eventually(func() bool { return kit.LeaseState(ns, "again").Waiting }, 10*time.Second, 20*time.Millisecond).Should(BeTrue())
		Expect(h.Release(ctx)).To(Succeed())
		var b *lock.Grant
		Eventually(gotB, 10*time.Second).Should(Receive(&b))
		Expect(reads.of("watch")).To(Equal(1), "b waited on one watch")

		By("c queues while b holds; b releases to c and acquires again at once: it waits behind c")
		gotC, _ := acquireAsync(ctx, kit.Locker(ns, "again", "c"))
		Eventually(func() []lease.Waiter { return queueOf(ns, "again").Waiting(kit.LeaseState(ns, "again").Served) },
			10*time.Second, 20*time.Millisecond).Should(HaveLen(1))
		Expect(b.Release(ctx)).To(Succeed())
		var c *lock.Grant
		Eventually(gotC, 10*time.Second).Should(Receive(&c))
		bAgain, failedAgain := acquireAsync(ctx, lb)
		Eventually(func() []lease.Waiter { return queueOf(ns, "again").Waiting(kit.LeaseState(ns, "again").Served) },
			10*time.Second, 20*time.Millisecond).Should(HaveLen(1))
		Expect(c.Release(ctx)).To(Succeed())
		Eventually(bAgain, 10*time.Second).Should(Receive())
		Expect(failed).NotTo(Receive())
		Expect(failedAgain).NotTo(Receive())
		Expect(reads.of("watch")).To(Equal(1), "b's second wait went on the watch its grant kept")
		Expect(reads.ofQueue(lockLease)).To(BeZero())
	})

	It("reads the queue from etcd when the queue it follows has no head: a join its watch has not shown yet keeps its place", func() {
		ns := kit.NewNamespace()
		kit.NewLock(ns, "last", util.LeaseSeconds(15))
		lockLease := kit.GetLease(ns, "last")
		reads := &leaseReads{LeasesGetter: kit.Leases}
		b := servedAsHead(reads, ns, "last", "b")
		Expect(kit.LeaseState(ns, "last").Waiting).To(BeTrue(), "serving the last waiter keeps the waiting mark")

		Expect(b.Release(ctx)).To(Succeed())
		Expect(reads.ofQueue(lockLease)).To(BeNumerically(">=", 1), "the followed queue showed nobody: b read it before removing the mark")
		Expect(kit.LeaseState(ns, "last").Waiting).To(BeFalse(), "read empty, the queue's mark goes")
	})

	It("labels both Leases of a lock made before the label existed", func() {
		ns := kit.NewNamespace()
		kit.NewLock(ns, "older", util.LeaseSeconds(15))
		queue := lease.QueueOf(kit.GetLease(ns, "older"))
		uid := string(metav1.GetControllerOf(kit.GetLease(ns, "older")).UID)
		Eventually(func() map[string]string { return kit.GetLease(ns, queue).Labels }, 10*time.Second, 20*time.Millisecond).
			Should(HaveKeyWithValue(locksv1alpha1.LockUIDLabel, uid))
		for _, name := range []string{"older", queue} {
			l := kit.GetLease(ns, name)
			Expect(k8sClient.Patch(ctx, l, mergePatch(`{"metadata":{"labels":{%q:null}}}`, locksv1alpha1.LockUIDLabel))).To(Succeed())
		}
		for _, name := range []string{"older", queue} {
			Eventually(func() map[string]string { return kit.GetLease(ns, name).Labels }, 10*time.Second, 20*time.Millisecond).
				Should(HaveKeyWithValue(locksv1alpha1.LockUIDLabel, uid), "Lease %s", name)
		}
	})

	It("waits on the lock Lease alone, and reads the queue at release, for a principal that may watch it by name only", func() {
		ns := kit.NewNamespace()
		kit.NewLock(ns, "narrow", util.LeaseSeconds(15))
		queue := lease.QueueOf(kit.GetLease(ns, "narrow"))
		// A waiter creates its waiter Lease and a release lists the lock's waiter Leases: RBAC
		// names no object for create or list. Watches, reads and updates are by name.
		mine := locksv1alpha1.WaiterLeaseName(lease.LockOf(kit.GetLease(ns, "narrow")).UID, "narrow")
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "narrow"}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
			ResourceNames: []string{"narrow", queue, mine}, Verbs: []string{"get", "watch", "update"},
		}, {
			APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create", "list"},
		}}}
		Expect(k8sClient.Create(ctx, role)).To(Succeed())
		Expect(k8sClient.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "narrow"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "narrow"},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "narrow"}}})).To(Succeed())
		c := rest.CopyConfig(cfg)
		c.Impersonate = rest.ImpersonationConfig{UserName: "narrow"}
		cs, err := kubernetes.NewForConfig(c)
		Expect(err).NotTo(HaveOccurred())
		_, err = cs.CoordinationV1().Leases(ns).Watch(ctx, metav1.ListOptions{LabelSelector: lease.FollowSelector(kit.GetLease(ns, "narrow"))})
		Expect(err).To(HaveOccurred(), "the role allows no watch without a name")

		reads := &leaseReads{LeasesGetter: cs.CoordinationV1()}
		g := servedAsHead(reads, ns, "narrow", "narrow")

		gotNext, _ := acquireAsync(ctx, kit.Locker(ns, "narrow", "next"))
		Eventually(func() []lease.Waiter { return queueOf(ns, "narrow").Waiting(kit.LeaseState(ns, "narrow").Served) },
			10*time.Second, 20*time.Millisecond).Should(HaveLen(1))
		before := reads.ofQueue(kit.GetLease(ns, "narrow"))
		Expect(g.Release(ctx)).To(Succeed())
		Expect(reads.ofQueue(kit.GetLease(ns, "narrow"))).To(BeNumerically(">", before), "without the watch of the lock's Leases, the release lists them")
		var next *lock.Grant
		Eventually(gotNext, 10*time.Second).Should(Receive(&next))
		Expect(next.Token()).To(BeNumerically(">", g.Token()))
		Expect(next.Release(ctx)).To(Succeed())
	})
})
