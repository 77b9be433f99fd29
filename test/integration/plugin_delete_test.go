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
	"os/exec"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/test/util"
)

// Issue 46, point 8: deleting a held FencedLock succeeded silently. The lock-deletion policy
// refuses it, with how to do it deliberately; kubectl fencedlock delete --force does that; the
// namespace controller and the garbage collector are never refused.
var _ = Describe("deleting a held FencedLock", Ordered, func() {
	var bin, kubeconfig, ns, kubectl string

	BeforeAll(func() {
		bin, kubeconfig = buildWithKubeconfig("github.com/fencedlock/fencedlock/cmd/kubectl-fencedlock", "lock-deleter")
		ns = kit.NewNamespace()
		assets, err := util.Assets()
		Expect(err).NotTo(HaveOccurred())
		kubectl = filepath.Join(assets, "kubectl")
	})
	run := func(code int, name string, args ...string) string {
		s, err := gexec.Start(exec.Command(name, append([]string{"--kubeconfig", kubeconfig, "-n", ns}, args...)...),
			GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		EventuallyWithOffset(1, s, 30*time.Second).Should(gexec.Exit(code), "%v", args)
		return string(s.Out.Contents()) + string(s.Err.Contents())
	}
	// heldLock creates a lock in namespace n that a Go client holds, shown held in its status.
	heldLock := func(n, name string) {
		kit.NewLock(n, name, util.LeaseSeconds(30))
		g, err := kit.Locker(n, name, "holder-"+name).TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { _ = g.Release(ctx) })
		Eventually(func() string { return kit.GetLock(n, name).Status.Holder }, 30*time.Second).Should(Equal("holder-" + name))
	}
	exists := func(n, name string) error {
		return k8sClient.Get(ctx, client.ObjectKey{Namespace: n, Name: name}, &locksv1alpha1.FencedLock{})
	}

	It("refuses kubectl delete of a held lock with the command that does it deliberately, which works", func() {
		heldLock(ns, "vault")
		// The API server loads policies asynchronously: in a suite just started, wait for this one.
		Eventually(func() error {
			return k8sClient.Delete(ctx, &locksv1alpha1.FencedLock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vault"}},
				client.DryRunAll)
		}, 10*time.Second).Should(MatchError(ContainSubstring("is held")))
		out := run(1, kubectl, "delete", "flock", "vault")
		Expect(out).To(ContainSubstring("FencedLock " + ns + "/vault is held (by holder-vault): deleting it ends the grant"))
		Expect(out).To(ContainSubstring("To delete it anyway: kubectl fencedlock delete vault -n " + ns + " --force"))
		Expect(exists(ns, "vault")).To(Succeed())

		out = run(1, bin, "delete", "vault")
		Expect(out).To(ContainSubstring(`is held (by "holder-vault")`))
		Expect(out).To(ContainSubstring("kubectl fencedlock delete vault -n " + ns + " --force"))
		Expect(exists(ns, "vault")).To(Succeed())

		out = run(0, bin, "delete", "vault", "--force")
		Expect(out).To(ContainSubstring(`fencedlock.locks.fencedlock.io "vault" deleted`))
		Eventually(func() bool { return apierrors.IsNotFound(exists(ns, "vault")) }, 30*time.Second).Should(BeTrue())
	})

	It("deletes a free lock without --force, with kubectl or the plugin, but never orphaning its Leases", func() {
		kit.NewLock(ns, "free1")
		kit.NewLock(ns, "free2")
		out := run(1, kubectl, "delete", "flock", "free1", "--cascade=orphan") // it would hang
		Expect(out).To(ContainSubstring("FencedLock " + ns + "/free1: its Leases cannot be orphaned"))
		Expect(exists(ns, "free1")).To(Succeed())
		Expect(kit.GetLock(ns, "free1").Finalizers).To(BeEmpty())
		run(0, kubectl, "delete", "flock", "free1")
		run(0, bin, "delete", "free2")
		_ = run(1, bin, "delete", "free2") // gone
	})

	It("never refuses the garbage collector, nor the deletion of a namespace", func() {
		heldLock(ns, "owned")
		for _, user := range []string{"system:serviceaccount:kube-system:generic-garbage-collector", "system:kube-controller-manager"} {
			path, err := util.WriteKubeconfig(testEnv, nil, user, GinkgoT().TempDir())
			Expect(err).NotTo(HaveOccurred())
			gcCfg, err := clientcmd.BuildConfigFromFlags("", path)
			Expect(err).NotTo(HaveOccurred())
			gc, err := client.New(gcCfg, client.Options{Scheme: util.Scheme()})
			Expect(err).NotTo(HaveOccurred())
			Expect(gc.Delete(ctx, &locksv1alpha1.FencedLock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owned"}},
				client.DryRunAll)).To(Succeed(), user)
		}

		doomed := kit.NewNamespace()
		heldLock(doomed, "doomed")
		Expect(k8sClient.Delete(ctx, &locksv1alpha1.FencedLock{ObjectMeta: metav1.ObjectMeta{Namespace: doomed, Name: "doomed"}},
			client.DryRunAll)).To(MatchError(ContainSubstring("is held")), "outside a namespace deletion, refused")
		Expect(k8sClient.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: doomed}})).To(Succeed())
		// envtest runs no namespace controller: the namespace stays Terminating, as while the
		// namespace controller deletes its contents.
		Eventually(func() error {
			return k8sClient.Delete(ctx, &locksv1alpha1.FencedLock{ObjectMeta: metav1.ObjectMeta{Namespace: doomed, Name: "doomed"}})
		}, 10*time.Second).Should(Succeed())
	})
})
