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
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/config"
	"github.com/fencedlock/fencedlock/pkg/leader"
	"github.com/fencedlock/fencedlock/pkg/leader/crleader"
	"github.com/fencedlock/fencedlock/pkg/token"
	"github.com/fencedlock/fencedlock/test/util"
)

var batchGVK = schema.GroupVersionKind{Group: "example.fencedlock.io", Version: "v1", Kind: "SettlementBatch"}

// operatorAccount creates service account ns/op with the RBAC of config/samples/fenced_leader_rbac.yaml
// (made for namespace ns) and its reconcilers' rights on ConfigMaps and SettlementBatches, and
// returns a rest.Config authenticating as it with a token of the TokenRequest API.
func operatorAccount(ns string) *rest.Config {
	Expect(k8sClient.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "op"}})).To(Succeed())
	raw, err := os.ReadFile(filepath.Join(util.RepoRoot(), "config", "samples", "fenced_leader_rbac.yaml"))
	Expect(err).NotTo(HaveOccurred())
	raw = bytes.ReplaceAll(raw, []byte("operator-controller-manager"), []byte("op"))
	raw = bytes.ReplaceAll(raw, []byte("operator-system"), []byte(ns))
	objs, err := config.Decode(bytes.NewReader(raw))
	Expect(err).NotTo(HaveOccurred())
	for _, u := range objs {
		Expect(k8sClient.Create(ctx, u)).To(Succeed())
		DeferCleanup(func() { _ = k8sClient.Delete(ctx, u) })
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "op-reconcilers"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"}},
		{APIGroups: []string{batchGVK.Group}, Resources: []string{"settlementbatches", "settlementbatches/status"}, Verbs: []string{"*"}},
	}}
	Expect(k8sClient.Create(ctx, role)).To(Succeed())
	Expect(k8sClient.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "op-reconcilers"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: "op"}}})).To(Succeed())
	tr, err := clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "op",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600))}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return &rest.Config{Host: cfg.Host, TLSClientConfig: rest.TLSClientConfig{CAData: cfg.CAData}, BearerToken: tr.Status.Token}
}

// replica is one replica of an operator with fenced leadership: its leadership and the client its
// manager would get (crleader's Config and NewClient).
type replica struct {
	l  *crleader.Leadership
	cl client.Client
}

func newReplica(sa *rest.Config, ns, suffix string, renew time.Duration) replica {
	l, err := crleader.New(ctx, sa, crleader.Options{Namespace: ns, Name: "op",
		Identity: "system:serviceaccount:" + ns + ":op/" + suffix, RenewInterval: renew})
	Expect(err).NotTo(HaveOccurred())
	var o ctrl.Options
	l.Apply(&o)
	cl, err := o.NewClient(l.Config(), client.Options{Scheme: k8sClient.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	return replica{l: l, cl: cl}
}

func batch(ns string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(batchGVK)
	u.SetNamespace(ns)
	u.SetName("batch")
	return u
}

func configMap(ns, name, v string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"v": v}}
}

// writes are the five writes a controller makes, by cl, each marked with v: an update and a
// patch of ConfigMap ledger, a status update of SettlementBatch batch, a create of ConfigMap
// created-<v> and a delete of ConfigMap doomed. It returns their errors by name.
func writes(cl client.Client, ns, v string) map[string]error {
	errs := map[string]error{}
	cm := &corev1.ConfigMap{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ledger"}, cm)).To(Succeed())
	cm.Data["v"] = v
	errs["update"] = cl.Update(ctx, cm)
	patched := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ledger"}}
	errs["patch"] = cl.Patch(ctx, patched, client.RawPatch("application/merge-patch+json", []byte(`{"data":{"p":"`+v+`"}}`)))
	b := batch(ns)
	Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(b), b)).To(Succeed())
	Expect(unstructured.SetNestedField(b.Object, v, "status", "phase")).To(Succeed())
	errs["status"] = cl.Status().Update(ctx, b)
	errs["create"] = cl.Create(ctx, configMap(ns, "created-"+v, v))
	errs["delete"] = cl.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "doomed"}})
	return errs
}

// landed reads what each of writes' writes left: "" for a create or delete that did not land.
func landed(ns, v string) map[string]bool {
	cm := &corev1.ConfigMap{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ledger"}, cm)).To(Succeed())
	b := batch(ns)
	Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(b), b)).To(Succeed())
	phase, _, _ := unstructured.NestedString(b.Object, "status", "phase")
	created := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "created-" + v}, &corev1.ConfigMap{})
	doomed := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "doomed"}, &corev1.ConfigMap{})
	return map[string]bool{"update": cm.Data["v"] == v, "patch": cm.Data["p"] == v, "status": phase == v,
		"create": created == nil, "delete": apierrors.IsNotFound(doomed)}
}

var _ = Describe("Fenced leadership", func() {
	var ns string
	var sa *rest.Config

	BeforeEach(func() {
		ns = kit.NewNamespace()
		sa = operatorAccount(ns)
		kit.NewLock(ns, "op", util.LeaseSeconds(2), func(fl *locksv1alpha1.FencedLock) {
			fl.Spec.Fence.HolderBinding = true
			fl.Spec.Fence.StatusWrites = locksv1alpha1.StatusWritesFenced
		})
	})

	It("refuses every write of a leader paused past its lease, and admits its successor's", func() {
		// Replica a renews once an hour: once its lease has expired it is a paused process, which
		// has not noticed and still presents its term's token.
		a := newReplica(sa, ns, "a", time.Hour)
		ta, err := a.l.Elector().Campaign(ctx)
		Expect(err).NotTo(HaveOccurred())
		for _, o := range []client.Object{configMap(ns, "ledger", "a"), configMap(ns, "doomed", "a"), batch(ns)} {
			Expect(a.cl.Create(ctx, o)).To(Succeed(), "the leader creates %s", o.GetName())
			Expect(o.GetLabels()).To(HaveKeyWithValue(locksv1alpha1.FencedByLabel, "op"))
		}
		b0 := batch(ns)
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(b0), b0)).To(Succeed())
		Expect(unstructured.SetNestedField(b0.Object, "a", "status", "phase")).To(Succeed())
		Expect(a.cl.Status().Update(ctx, b0)).To(Succeed(), "the leader writes status")

		b := newReplica(sa, ns, "b", 0)
		tb, err := b.l.Elector().Campaign(ctx) // the manager revokes a's expired term
		Expect(err).NotTo(HaveOccurred())
		Expect(tb.Token()).To(BeNumerically(">", ta.Token()))
		Expect(a.l.Elector().Token()).To(Equal(ta.Token()), "a has not noticed")
		DeferCleanup(func() { _ = b.l.Elector().Resign(ctx) })

		for op, err := range writes(a.cl, ns, "stale") {
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s by the deposed leader: %v", op, err)
			Expect(err.Error()).To(Or(ContainSubstring("stale fencing token"), ContainSubstring("no longer held")), op)
		}
		Expect(landed(ns, "stale")).To(HaveEach(BeFalse()), "no write of the deposed leader landed")

		Eventually(func(g Gomega) { // the fence's cache may still show a's term for a moment
			errs := writes(b.cl, ns, "b")
			for op, err := range errs {
				g.Expect(err).NotTo(HaveOccurred(), "%s by the new leader", op)
			}
		}).Should(Succeed())
		Expect(landed(ns, "b")).To(HaveEach(BeTrue()), "every write of the new leader landed")
	})

	It("lets a writer that never claimed the lock write status unless the lock opts in", func() {
		kit.NewLock(ns, "web")
		grant, err := kit.Locker(ns, "web", "deployer").Acquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		labels := map[string]string{"app": "web"}
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web",
			Labels:      map[string]string{locksv1alpha1.FencedByLabel: "web"},
			Annotations: map[string]string{locksv1alpha1.TokenAnnotation: grant.Token().String()}},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web"}}}}}}
		Expect(k8sClient.Create(ctx, d)).To(Succeed())

		kcm := as("system:kube-controller-manager")
		d.Status.ObservedGeneration, d.Status.Replicas = 1, 1
		Expect(kcm.Status().Update(ctx, d)).To(Succeed(), "status of a fenced Deployment, lock not opted in")

		fl := kit.GetLock(ns, "web")
		fl.Spec.Fence.StatusWrites = locksv1alpha1.StatusWritesFenced
		Expect(k8sClient.Update(ctx, fl)).To(Succeed())
		Eventually(func() error {
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(d), d)).To(Succeed())
			d.Status.Replicas = 2
			return kcm.Status().Update(ctx, d)
		}).Should(MatchError(ContainSubstring("spec.fence.statusWrites: Fenced")), "the lock opted in")
	})

	It("admits a token with the request only from who the threat model says", func() {
		leaderA := newReplica(sa, ns, "a", 0)
		t, err := leaderA.l.Elector().Campaign(ctx)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { _ = leaderA.l.Elector().Resign(ctx) })
		Expect(leaderA.cl.Create(ctx, configMap(ns, "ledger", "a"))).To(Succeed())

		// mallory may write ConfigMaps of the namespace, as a real (not impersonated) user.
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mallory"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"}}}}
		Expect(k8sClient.Create(ctx, role)).To(Succeed())
		Expect(k8sClient.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mallory"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "mallory"},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "mallory-" + ns}}})).To(Succeed())
		u, err := testEnv.AddUser(envtest.User{Name: "mallory-" + ns}, nil)
		Expect(err).NotTo(HaveOccurred())
		// presenting is mallory, impersonating user and presenting tok (a typed client: no discovery).
		presenting := func(user string, tok token.Token) corev1client.ConfigMapInterface {
			c := rest.CopyConfig(u.Config())
			c.Impersonate = rest.ImpersonationConfig{UserName: user,
				Extra: map[string][]string{locksv1alpha1.TokenExtra: {tok.String()}}}
			cs, err := kubernetes.NewForConfig(c)
			Expect(err).NotTo(HaveOccurred())
			return cs.CoreV1().ConfigMaps(ns)
		}
		del := func(cms corev1client.ConfigMapInterface) error {
			return cms.Delete(ctx, "ledger", metav1.DeleteOptions{})
		}

		By("without impersonate rights, the API server refuses the header")
		err = del(presenting("mallory-"+ns, t.Token()))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("cannot impersonate"))
		err = del(presenting("system:serviceaccount:"+ns+":op", t.Token()))
		Expect(err.Error()).To(ContainSubstring("cannot impersonate"), "nor may she pass for the leader")

		By("with the rights to present a token, holder binding refuses another principal's")
		cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "mallory-token-" + ns}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"users"}, ResourceNames: []string{"mallory-" + ns}, Verbs: []string{"impersonate"}},
			{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"userextras/fencedlock.io/token"}, Verbs: []string{"impersonate"}}}}
		Expect(k8sClient.Create(ctx, cr)).To(Succeed())
		DeferCleanup(func() { _ = k8sClient.Delete(ctx, cr) })
		crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: cr.Name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cr.Name},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "mallory-" + ns}}}
		Expect(k8sClient.Create(ctx, crb)).To(Succeed())
		DeferCleanup(func() { _ = k8sClient.Delete(ctx, crb) })
		Eventually(func() error { return del(presenting("mallory-"+ns, t.Token())) }).
			Should(MatchError(ContainSubstring("a token copied to another principal cannot be used")))
		err = del(presenting("mallory-"+ns, t.Token()+1000))
		Expect(err).To(MatchError(ContainSubstring("was never issued")), "a forged token")
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ledger"}, &corev1.ConfigMap{})).To(Succeed(),
			"the ledger survived")
		Expect(strings.Contains(leaderA.l.Elector().Identity(), ":op/")).To(BeTrue())
	})
})

var _ = Describe("leader.Elector", func() {
	It("runs one term with the callbacks, reports each new leader, and hands over on cancel", func() {
		ns := kit.NewNamespace()
		kit.NewLock(ns, "op", util.LeaseSeconds(5))
		type started struct {
			id  string
			tok token.Token
		}
		starts, stops, leaders := make(chan started, 4), make(chan string, 4), make(chan string, 16)
		run := func(id string) (context.CancelFunc, chan error) {
			var el *leader.Elector
			el, err := leader.New(leader.Config{Leases: clientset.CoordinationV1(), Namespace: ns, Name: "op", Identity: id,
				Callbacks: leader.Callbacks{
					OnStartedLeading: func(c context.Context, tok token.Token) {
						defer GinkgoRecover()
						Expect(el.Token()).To(Equal(tok), "the token is the elector's while it leads")
						starts <- started{id, tok}
						<-c.Done()
					},
					OnStoppedLeading: func() { stops <- id },
					OnNewLeader:      func(l string) { leaders <- id + " sees " + l },
				}})
			Expect(err).NotTo(HaveOccurred())
			rctx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- el.Run(rctx) }()
			return stop, done
		}
		stopA, doneA := run("a")
		var first started
		Eventually(starts).Should(Receive(&first))
		Expect(first.id).To(Equal("a"))
		stopB, doneB := run("b")
		Eventually(leaders).Should(Receive(Equal("b sees a")))

		stopA()
		Eventually(doneA).Should(Receive(BeNil()), "Run returns nil after resigning")
		Eventually(stops).Should(Receive(Equal("a")))
		var second started
		Eventually(starts).Should(Receive(&second))
		Expect(second.id).To(Equal("b"))
		Expect(second.tok).To(BeNumerically(">", first.tok))
		Eventually(leaders).Should(Receive(Equal("b sees b")))
		stopB()
		Eventually(doneB).Should(Receive(BeNil()))
	})
})
