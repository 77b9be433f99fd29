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
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/token"
	"github.com/fencedlock/fencedlock/test/util"
)

// An adversary with ordinary RBAC: edit rights on ConfigMaps, pods, Deployments (and their scale),
// evictions and Leases in one namespace, nothing on fencedlock's API.
func ordinaryUser(ns, name string) (client.Client, *kubernetes.Clientset) {
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps", "pods", "pods/eviction"}, Verbs: []string{"*"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments", "deployments/scale", "deployments/status"}, Verbs: []string{"*"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"*"}},
	}}
	ExpectWithOffset(1, k8sClient.Create(ctx, role)).To(Succeed())
	ExpectWithOffset(1, k8sClient.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: name}}})).To(Succeed())
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: name}
	cs, err := kubernetes.NewForConfig(c)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return impersonating(c.Impersonate), cs
}

func mergePatch(format string, args ...any) client.Patch {
	return client.RawPatch(types.MergePatchType, fmt.Appendf(nil, format, args...))
}

// policyDenied expects a refusal by one of config/policy's admission policies.
func policyDenied(err error, policy, want string) {
	ExpectWithOffset(1, err).To(HaveOccurred())
	ExpectWithOffset(1, err.Error()).To(ContainSubstring(fmt.Sprintf("ValidatingAdmissionPolicy '%s'", policy)))
	ExpectWithOffset(1, err.Error()).To(ContainSubstring(want))
}

// policyDenials is how many admission requests a ValidatingAdmissionPolicy has refused, by the API
// server's counter (it counts refusals only).
func policyDenials(policy string) float64 {
	raw, err := clientset.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	var n float64
	for line := range strings.Lines(string(raw)) {
		if strings.HasPrefix(line, "apiserver_validating_admission_policy_check_total{") &&
			strings.Contains(line, `policy="`+policy+`"`) {
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			ExpectWithOffset(1, err).NotTo(HaveOccurred())
			n += v
		}
	}
	return n
}

var _ = Describe("No way around the fence", func() {
	var (
		ns string
		b  token.Token // current token of lock "settlement", held by worker-b
	)
	BeforeEach(func() {
		ns = kit.NewNamespace()
		kit.NewLock(ns, "settlement", util.LeaseSeconds(15))
		gb, err := kit.Locker(ns, "settlement", "worker-b").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		b = gb.Token()
	})

	It("judges a write only by the token it presents: nothing is inherited from the stored object", func() {
		Expect(k8sClient.Create(ctx, util.FencedConfigMap(ns, "ledger", "settlement", b, "100"))).To(Succeed())
		cm := &corev1.ConfigMap{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ledger"}, cm)).To(Succeed())
		Expect(cm.Annotations).NotTo(HaveKey(locksv1alpha1.TokenAnnotation), "a stored object carries no presentable token")
		Expect(cm.Annotations).To(HaveKeyWithValue(locksv1alpha1.RecordedTokenAnnotation, b.String()))

		By("kubectl patch cm ledger --type merge -p '{\"data\":{\"balance\":\"777\"}}'")
		deniedWith(k8sClient.Patch(ctx, cm.DeepCopy(), mergePatch(`{"data":{"balance":"777"}}`)), "must present annotation fencedlock.io/token")
		By("a read-modify-write of the stored object")
		rmw := cm.DeepCopy()
		rmw.Data["balance"] = "778"
		deniedWith(k8sClient.Update(ctx, rmw), "must present annotation fencedlock.io/token")
		By("copying the record instead of presenting a token")
		deniedWith(k8sClient.Patch(ctx, cm.DeepCopy(), mergePatch(`{"metadata":{"annotations":{%q:%q}},"data":{"balance":"779"}}`,
			locksv1alpha1.RecordedTokenAnnotation, b)), "must present annotation fencedlock.io/token")
		Expect(balance(ns)).To(Equal("100"))

		By("the holder presents its token on every write")
		Expect(writeCM(ns, "ledger", b.String(), "101")).To(Succeed())
		Expect(balance(ns)).To(Equal("101"))
	})

	It("admits a token only while the lock is held with it: released and revoked tokens are refused", func() {
		Expect(k8sClient.Create(ctx, util.FencedConfigMap(ns, "ledger", "settlement", b, "100"))).To(Succeed())
		g, err := kit.Locker(ns, "settlement", "worker-b").Attach(ctx, b)
		Expect(err).NotTo(HaveOccurred())
		Expect(g.Release(ctx)).To(Succeed())
		deniedWith(writeCM(ns, "ledger", b.String(), "stale"), "is no longer held (released by its holder)")
		deniedWith(k8sClient.Delete(ctx, util.FencedConfigMap(ns, "ledger", "settlement", b, "")), "stamp the object with the current token")

		kit.NewLock(ns, "short", util.LeaseSeconds(1))
		gs, err := kit.Locker(ns, "short", "sleeper").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(k8sClient.Create(ctx, util.FencedConfigMap(ns, "short-cm", "short", gs.Token(), "1"))).To(Succeed())
		Eventually(func(g Gomega) {
			// Should this ever take long, the failure shows where the lock stands.
			l, fl := kit.GetLease(ns, "short"), kit.GetLock(ns, "short")
			g.Expect(l.Annotations[locksv1alpha1.RevokedTokenAnnotation]).To(Equal(gs.Token().String()),
				"the controller revokes the unrenewed grant (Lease: holder %v, renewTime %v, resourceVersion %s, annotations %v; lock status %+v)",
				ptr.Deref(l.Spec.HolderIdentity, ""), l.Spec.RenewTime, l.ResourceVersion, l.Annotations, fl.Status)
		}, 10*time.Second, 50*time.Millisecond).Should(Succeed())
		patch := mergePatch(`{"metadata":{"annotations":{%q:%q}},"data":{"balance":"late"}}`, locksv1alpha1.TokenAnnotation, gs.Token())
		deniedWith(k8sClient.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "short-cm"}}, patch),
			"revoked by the controller because its lease expired")
	})

	It("fences writes through /scale and evictions; /status stays unfenced", func() {
		_, cs := ordinaryUser(ns, "mallory")
		dep := func(name, lockName string) {
			labels := map[string]string{"app": name}
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{}},
				Spec: appsv1.DeploymentSpec{Replicas: new(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}}
			if lockName != "" {
				d.Labels[locksv1alpha1.FencedByLabel] = lockName
				d.Annotations = map[string]string{locksv1alpha1.TokenAnnotation: b.String()}
			}
			Expect(k8sClient.Create(ctx, d)).To(Succeed())
		}
		dep("fenced", "settlement")
		dep("plain", "")
		scale := func(name string, replicas int32) error {
			_, err := cs.AppsV1().Deployments(ns).UpdateScale(ctx, name, &autoscalingv1.Scale{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: autoscalingv1.ScaleSpec{Replicas: replicas}},
				metav1.UpdateOptions{})
			return err
		}
		err := scale("fenced", 5)
		Expect(err).To(MatchError(ContainSubstring(`admission webhook "subresources.fence.locks.fencedlock.io" denied the request`)))
		Expect(err).To(MatchError(ContainSubstring("/scale subresource cannot present a fencing token")))
		got := &appsv1.Deployment{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "fenced"}, got)).To(Succeed())
		Expect(*got.Spec.Replicas).To(Equal(int32(1)))
		Expect(scale("plain", 2)).To(Succeed(), "unfenced objects scale as before")

		By("a status write is not fenced (it cannot change what the holder wrote)")
		got.Status.ObservedGeneration = 7
		_, err = cs.AppsV1().Deployments(ns).UpdateStatus(ctx, got, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())

		By("an eviction is the DELETE it is: judged by the pod's recorded token")
		pod := util.Pod(ns, "fenced-pod", "")
		pod.Labels = map[string]string{locksv1alpha1.FencedByLabel: "settlement"}
		pod.Annotations = map[string]string{locksv1alpha1.TokenAnnotation: b.String()}
		kit.CreatePod(pod)
		g, err := kit.Locker(ns, "settlement", "worker-b").Attach(ctx, b)
		Expect(err).NotTo(HaveOccurred())
		Expect(g.Release(ctx)).To(Succeed())
		err = cs.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fenced-pod"}})
		Expect(err).To(MatchError(ContainSubstring("is no longer held")))
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed(), "the pod is still there")
	})

	It("enforces the Lease protocol on every principal allowed to update Leases", func() {
		mallory, _ := ordinaryUser(ns, "mallory")
		free := func() *coordinationv1.Lease {
			g, err := kit.Locker(ns, "settlement", "worker-b").Attach(ctx, b)
			Expect(err).NotTo(HaveOccurred())
			_ = g.Release(ctx)
			return kit.GetLease(ns, "settlement")
		}
		l := free()

		By("setting only the holder on a free Lease keeps the previous token: refused")
		steal := l.DeepCopy()
		steal.Spec.HolderIdentity = new("mallory")
		policyDenied(mallory.Update(ctx, steal), "fencedlock-lease-protocol", "a grant must set annotation fencedlock.io/token to the resourceVersion")

		By("a grant by the protocol is admitted, for any client")
		grant := l.DeepCopy()
		grant.Spec.HolderIdentity = new("mallory")
		grant.Annotations[locksv1alpha1.TokenAnnotation] = l.ResourceVersion
		grant.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
		Expect(mallory.Update(ctx, grant)).To(Succeed())

		held := kit.GetLease(ns, "settlement")
		for _, tc := range []struct {
			what, want string
			mutate     func(*coordinationv1.Lease)
		}{
			{"a renewal that changes the token", "only a grant (free to held) issues a new fencing token",
				func(l *coordinationv1.Lease) { l.Annotations[locksv1alpha1.TokenAnnotation] = l.ResourceVersion }},
			{"removing the token", "cannot be removed",
				func(l *coordinationv1.Lease) { delete(l.Annotations, locksv1alpha1.TokenAnnotation) }},
			{"lowering the token", "a new fencing token must be the resourceVersion",
				func(l *coordinationv1.Lease) { l.Annotations[locksv1alpha1.TokenAnnotation] = "1" }},
			{"handing the held lock to someone else with the old token", "a grant must set annotation fencedlock.io/token",
				func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = new("eve") }},
			{"revoking", "only the fencedlock manager revokes",
				func(l *coordinationv1.Lease) { l.Annotations[locksv1alpha1.RevokedTokenAnnotation] = "1" }},
			{"stretching the lease", "set by the fencedlock manager",
				func(l *coordinationv1.Lease) { l.Spec.LeaseDurationSeconds = new(int32(3600)) }},
			{"removing the managed-by label", "set by the fencedlock manager",
				func(l *coordinationv1.Lease) { delete(l.Labels, locksv1alpha1.ManagedByLabel) }},
			{"removing the owner", "set by the fencedlock manager",
				func(l *coordinationv1.Lease) { l.OwnerReferences = nil }},
		} {
			// Each change rides on a renewal, then on a release: the policy skips plain renewals and
			// plain releases (its matchConditions), and one that carries anything else must still be
			// judged in full.
			By(tc.what + ", in a renewal")
			next := held.DeepCopy()
			next.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
			tc.mutate(next)
			policyDenied(mallory.Update(ctx, next), "fencedlock-lease-protocol", tc.want)
			By(tc.what + ", in a release")
			next = held.DeepCopy()
			next.Spec.HolderIdentity = nil
			tc.mutate(next)
			policyDenied(mallory.Update(ctx, next), "fencedlock-lease-protocol", tc.want)
		}

		By("a renewal, a handover with a new token and a release by the protocol are admitted")
		renew := held.DeepCopy()
		renew.Spec.RenewTime = &metav1.MicroTime{Time: time.Now().Add(time.Second)}
		Expect(mallory.Update(ctx, renew)).To(Succeed())
		handover := renew.DeepCopy()
		handover.Spec.HolderIdentity = new("eve")
		handover.Annotations[locksv1alpha1.TokenAnnotation] = renew.ResourceVersion
		handover.Annotations[locksv1alpha1.TicketAnnotation] = (kit.LeaseState(ns, "settlement").Served + 1).String() // the queue head's ticket
		Expect(mallory.Update(ctx, handover)).To(Succeed(), "a handover is a release and a grant to the queue's head in one write")
		release := handover.DeepCopy()
		release.Spec.HolderIdentity = nil
		Expect(mallory.Update(ctx, release)).To(Succeed())

		By("pod/ identities are the controller's")
		l = kit.GetLease(ns, "settlement")
		podGrant := l.DeepCopy()
		podGrant.Spec.HolderIdentity = new("pod/worker-0/0000")
		podGrant.Annotations[locksv1alpha1.TokenAnnotation] = l.ResourceVersion
		policyDenied(mallory.Update(ctx, podGrant), "fencedlock-lease-protocol", "reserved for pods")

		By("only the manager creates fencedlock Leases")
		policyDenied(mallory.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mine",
			Labels: map[string]string{locksv1alpha1.ManagedByLabel: locksv1alpha1.ManagedByValue}}}),
			"fencedlock-lease-protocol", "create a FencedLock instead")
	})

	It("keeps a lock's queue Lease apart from its lock Lease: nobody but the manager moves a Lease between their policies", func() {
		mallory, _ := ordinaryUser(ns, "mallory")
		fl := &locksv1alpha1.FencedLock{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "settlement"}, fl)).To(Succeed())
		var ql *coordinationv1.Lease
		Eventually(func(g Gomega) {
			ql = &coordinationv1.Lease{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: locksv1alpha1.QueueLeaseName(fl.UID)}, ql)).To(Succeed())
		}, 10*time.Second, 50*time.Millisecond).Should(Succeed())
		Expect(ql.Labels).To(HaveKeyWithValue(locksv1alpha1.RoleLabel, locksv1alpha1.RoleQueue), "the manager marks the queue Lease")

		// Each refusal is counted against the policies that judged the write. A write that marks or
		// unmarks a Lease is judged by both (an objectSelector matches the old or the new object),
		// and the API server reports either refusal; any other write to a queue Lease by the
		// queue's rules alone.
		lockLease := kit.GetLease(ns, "settlement")
		onQueue := func(mutate func(*coordinationv1.Lease)) func() error {
			return func() error {
				next := ql.DeepCopy()
				mutate(next)
				return mallory.Update(ctx, next)
			}
		}
		for _, tc := range []struct {
			what, want string // want: a regular expression the refusal matches
			write      func() error
			both       bool // judged by the lock's rules too
		}{
			{"marking the lock Lease as a queue, to escape the lock's rules", "set by the fencedlock manager|has no holder",
				func() error {
					mark := lockLease.DeepCopy()
					mark.Labels[locksv1alpha1.RoleLabel] = locksv1alpha1.RoleQueue
					return mallory.Update(ctx, mark)
				}, true},
			{"creating a Lease marked as a queue", "create a FencedLock instead", func() error {
				return mallory.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "my-queue",
					Labels: map[string]string{locksv1alpha1.ManagedByLabel: locksv1alpha1.ManagedByValue, locksv1alpha1.RoleLabel: locksv1alpha1.RoleQueue}}})
			}, false},
			{"unmarking the queue Lease", "set by the fencedlock manager",
				onQueue(func(l *coordinationv1.Lease) { delete(l.Labels, locksv1alpha1.RoleLabel) }), true},
			{"removing the queue Lease's owner", "set by the fencedlock manager",
				onQueue(func(l *coordinationv1.Lease) { l.OwnerReferences = nil }), false},
			{"giving the queue Lease a duration", "set by the fencedlock manager",
				onQueue(func(l *coordinationv1.Lease) { l.Spec.LeaseDurationSeconds = new(int32(3600)) }), false},
			{"giving the queue Lease a holder", "has no holder",
				onQueue(func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = new("mallory") }), false},
			{"giving the queue Lease a token", "only fencedlock.io/queue and fencedlock.io/queue-unreadable",
				onQueue(func(l *coordinationv1.Lease) {
					metav1.SetMetaDataAnnotation(&l.ObjectMeta, locksv1alpha1.TokenAnnotation, l.ResourceVersion)
				}), false},
			{"giving the queue Lease the waiting mark", "only fencedlock.io/queue and fencedlock.io/queue-unreadable",
				onQueue(func(l *coordinationv1.Lease) {
					metav1.SetMetaDataAnnotation(&l.ObjectMeta, locksv1alpha1.WaitingAnnotation, "true")
				}), false},
		} {
			By(tc.what + ": refused")
			lock0, queue0 := policyDenials("fencedlock-lease-protocol"), policyDenials("fencedlock-queue-lease")
			err := tc.write()
			Expect(err).To(MatchError(MatchRegexp(`ValidatingAdmissionPolicy 'fencedlock-(queue-lease|lease-protocol)'`)))
			Expect(err).To(MatchError(MatchRegexp(tc.want)))
			lockDenied, queueDenied := policyDenials("fencedlock-lease-protocol")-lock0, policyDenials("fencedlock-queue-lease")-queue0
			Expect(queueDenied).To(BeNumerically(">=", 1), "the queue's rules judged it")
			if tc.both {
				Expect(lockDenied).To(BeNumerically(">=", 1), "the lock's rules judged it too")
			} else {
				Expect(lockDenied).To(BeZero(), "the lock's rules did not judge it")
			}
		}

		By("an entry of one's own in the queue Lease is refused: clients queue on their waiter Lease")
		join := ql.DeepCopy()
		q := lease.ReadQueue(join)
		q.Add(locksv1alpha1.PodHolderIdentity("mallory", "uid"), time.Now())
		Expect(lease.WriteQueue(join, q)).To(Succeed())
		policyDenied(mallory.Update(ctx, join), "fencedlock-queue-lease", "only the manager writes it")

		By("a queue Lease made before the role label existed gets it from the manager")
		Expect(k8sClient.Patch(ctx, join, client.RawPatch(types.JSONPatchType,
			[]byte(`[{"op":"remove","path":"/metadata/labels/fencedlock.io~1role"}]`)))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(join), join)).To(Succeed())
			g.Expect(join.Labels).To(HaveKeyWithValue(locksv1alpha1.RoleLabel, locksv1alpha1.RoleQueue))
		}, 10*time.Second, 50*time.Millisecond).Should(Succeed())
	})

	It("trusts only the Lease the FencedLock owns", func() {
		foreign := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "foreign",
			Labels: map[string]string{locksv1alpha1.ManagedByLabel: locksv1alpha1.ManagedByValue}}}
		Expect(k8sClient.Create(ctx, foreign)).To(Succeed())
		foreign.Annotations = map[string]string{locksv1alpha1.TokenAnnotation: foreign.ResourceVersion}
		foreign.Spec.HolderIdentity = new("mallory")
		Expect(k8sClient.Update(ctx, foreign)).To(Succeed())
		fl := &locksv1alpha1.FencedLock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "foreign"}}
		Expect(k8sClient.Create(ctx, fl)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(fl), fl)).To(Succeed())
			g.Expect(fl.Status.Conditions).To(ContainElement(HaveField("Reason", locksv1alpha1.ReasonLeaseConflict)))
		}, 10*time.Second, 50*time.Millisecond).Should(Succeed())
		tok, err := token.Parse(foreign.Annotations[locksv1alpha1.TokenAnnotation])
		Expect(err).NotTo(HaveOccurred())
		deniedWith(k8sClient.Create(ctx, util.FencedConfigMap(ns, "cm", "foreign", tok, "1")), "not owned by the FencedLock")
	})

	It("keeps a queued pod's gate, token and lock label the manager's", func() {
		mallory, _ := ordinaryUser(ns, "mallory")
		queued := util.Pod(ns, "queued", "settlement")
		createGated(mallory, queued) // worker-b holds the lock

		policyDenied(mallory.Patch(ctx, queued.DeepCopy(), mergePatch(`{"metadata":{"annotations":{%q:%q}}}`,
			locksv1alpha1.TokenAnnotation, b)), "fencedlock-pod-grant", "a token cannot be copied onto a pod")
		policyDenied(mallory.Patch(ctx, queued.DeepCopy(), client.RawPatch(types.JSONPatchType,
			[]byte(`[{"op":"remove","path":"/spec/schedulingGates/0"}]`))), "fencedlock-pod-grant", "wait for the grant")
		policyDenied(mallory.Patch(ctx, queued.DeepCopy(), mergePatch(`{"metadata":{"annotations":{%q:"1970-01-01T00:00:00Z"}}}`,
			locksv1alpha1.EnqueuedAnnotation)), "fencedlock-pod-grant", "set by the fencedlock manager")
		policyDenied(mallory.Patch(ctx, queued.DeepCopy(), mergePatch(`{"metadata":{"labels":{%q:"other"}}}`,
			locksv1alpha1.LockLabel)), "fencedlock-pod-grant", "cannot be added, changed or removed")
		Expect(mallory.Patch(ctx, queued.DeepCopy(), mergePatch(`{"metadata":{"annotations":{"note":"ordinary edits pass"}}}`))).To(Succeed())

		plain := util.Pod(ns, "plain", "")
		Expect(mallory.Create(ctx, plain)).To(Succeed())
		policyDenied(mallory.Patch(ctx, plain, mergePatch(`{"metadata":{"labels":{%q:"settlement"}}}`, locksv1alpha1.LockLabel)),
			"fencedlock-pod-grant", "set when a pod is created")
	})

	It("keeps a multi-lock pod's list of locks and its per-lock tokens the manager's", func() {
		mallory, _ := ordinaryUser(ns, "eve")
		multi := util.MultiLockPod(ns, "multi", "settlement,other")
		createGated(mallory, multi)
		Expect(multi.Labels).To(HaveKeyWithValue(locksv1alpha1.LockLabel, "other"), "labelled with its first lock")

		policyDenied(mallory.Patch(ctx, multi.DeepCopy(), mergePatch(`{"metadata":{"annotations":{%q:%q}}}`,
			locksv1alpha1.LockTokenAnnotation("settlement"), b)), "fencedlock-pod-grant", "a token cannot be copied onto a pod")
		policyDenied(mallory.Patch(ctx, multi.DeepCopy(), mergePatch(`{"metadata":{"annotations":{%q:"settlement"}}}`,
			locksv1alpha1.LocksAnnotation)), "fencedlock-pod-grant", "annotation fencedlock.io/locks is set when a pod is created")
		policyDenied(mallory.Patch(ctx, multi.DeepCopy(), mergePatch(`{"metadata":{"annotations":{%q:null}}}`,
			locksv1alpha1.LocksAnnotation)), "fencedlock-pod-grant", "cannot be added, changed or removed")

		queued := util.Pod(ns, "queued-single", "settlement")
		Expect(mallory.Create(ctx, queued)).To(Succeed())
		policyDenied(mallory.Patch(ctx, queued.DeepCopy(), mergePatch(`{"metadata":{"annotations":{%q:"settlement,other"}}}`,
			locksv1alpha1.LocksAnnotation)), "fencedlock-pod-grant", "annotation fencedlock.io/locks is set when a pod is created")
		Expect(mallory.Patch(ctx, multi.DeepCopy(), mergePatch(`{"metadata":{"annotations":{"note":"ordinary edits pass"}}}`))).To(Succeed())
	})

	It("reports each denial with the token it presented, DELETE apart from UPDATE", func() {
		Expect(k8sClient.Create(ctx, util.FencedConfigMap(ns, "ledger", "settlement", b, "100"))).To(Succeed())
		g, err := kit.Locker(ns, "settlement", "worker-b").Attach(ctx, b)
		Expect(err).NotTo(HaveOccurred())
		Expect(g.Release(ctx)).To(Succeed())
		c, err := kit.Locker(ns, "settlement", "worker-c").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(writeCM(ns, "ledger", (c.Token() + 1000).String(), "forged")).To(HaveOccurred())
		Expect(writeCM(ns, "ledger", b.String(), "stale")).To(HaveOccurred())
		Expect(writeCM(ns, "ledger", "1", "older")).To(HaveOccurred())
		Expect(k8sClient.Delete(ctx, util.FencedConfigMap(ns, "ledger", "settlement", b, ""))).To(HaveOccurred())
		Eventually(func(g Gomega) {
			var list eventsv1.EventList
			g.Expect(k8sClient.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
			notes := map[string]string{}
			for _, e := range list.Items {
				if e.Regarding.Kind == "FencedLock" && e.Type == corev1.EventTypeWarning {
					notes[e.Action] = e.Reason + ": " + e.Note
				}
			}
			g.Expect(notes).To(HaveKeyWithValue("DenyUpdate token="+(c.Token()+1000).String(), HavePrefix("ForgedToken")))
			g.Expect(notes).To(HaveKeyWithValue("DenyUpdate token="+b.String(), ContainSubstring("with token "+b.String())))
			g.Expect(notes).To(HaveKeyWithValue("DenyUpdate token=1", HavePrefix("StaleToken")))
			g.Expect(notes).To(HaveKeyWithValue("DenyDelete token="+b.String(), ContainSubstring("stamp the object")))
		}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
	})

	It("never keeps a namespace from deleting, nor a finalizer from being removed", func() {
		Expect(k8sClient.Create(ctx, util.FencedConfigMap(ns, "stale", "settlement", b, "1"))).To(Succeed())
		fin := util.FencedConfigMap(ns, "finalized", "settlement", b, "1")
		fin.Finalizers = []string{"example.com/cleanup"}
		Expect(k8sClient.Create(ctx, fin)).To(Succeed())
		gone := util.FencedConfigMap(ns, "orphaned", "settlement", b, "1")
		Expect(k8sClient.Create(ctx, gone)).To(Succeed())

		By("outside a terminating namespace, deletion admitted, the finalizer's removal needs no token")
		Expect(k8sClient.Delete(ctx, fin)).To(Succeed())
		deniedWith(k8sClient.Patch(ctx, fin.DeepCopy(), mergePatch(`{"metadata":{"finalizers":null},"data":{"balance":"changed"}}`)),
			"must present annotation")
		Expect(k8sClient.Patch(ctx, fin.DeepCopy(), mergePatch(`{"metadata":{"finalizers":null}}`))).To(Succeed())

		By("the lock goes first, then the namespace: every fenced object still deletes")
		g, err := kit.Locker(ns, "settlement", "worker-b").Attach(ctx, b)
		Expect(err).NotTo(HaveOccurred())
		Expect(g.Release(ctx)).To(Succeed())
		kit.DeleteLock(ns, "settlement") // its status may still show the grant just released
		// The webhook learns of the lock's deletion from its cache, a moment after the API server:
		// until then it judges the released token as before.
		Eventually(func() error { return k8sClient.Delete(ctx, gone) }, 10*time.Second, 20*time.Millisecond).
			Should(MatchError(ContainSubstring("which does not exist")))
		deniedWith(k8sClient.Delete(ctx, gone), "which does not exist")
		Expect(k8sClient.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		Eventually(func() error { return k8sClient.Delete(ctx, gone) }, 10*time.Second, 50*time.Millisecond).Should(Succeed())
		Expect(k8sClient.Delete(ctx, util.FencedConfigMap(ns, "stale", "settlement", b, ""))).To(Succeed())
	})
})

// createGated creates pod as user u and expects it to wait behind the lock gate.
func createGated(u client.Client, pod *corev1.Pod) {
	ExpectWithOffset(1, u.Create(ctx, pod)).To(Succeed(), "pod %s waits behind its gate", pod.Name)
	ExpectWithOffset(1, pod.Spec.SchedulingGates).To(ContainElement(HaveField("Name", locksv1alpha1.SchedulingGate)))
}
