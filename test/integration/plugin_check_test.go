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
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/onsi/gomega/gexec"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/config"
	"github.com/fencedlock/fencedlock/test/util"
)

// Issue 46: kubectl fencedlock check, in the spirit of cmctl check api, against the install this
// suite makes (envtest's webhook configurations, config/policy under "fencedlock-", the manager
// in-process). The suite's manager runs without leader election: the spec writes the leader's
// Lease as a leader would.
var _ = Describe("kubectl fencedlock check", Ordered, func() {
	var bin, kubeconfig, ns string
	var items int // the lines of a check: version, CRD, each webhook, each policy, leader, fence

	BeforeAll(func() {
		bin, kubeconfig = buildWithKubeconfig("github.com/fencedlock/fencedlock/cmd/kubectl-fencedlock", "checker")
		ns = kit.NewNamespace()
		policies, err := config.Policies()
		Expect(err).NotTo(HaveOccurred())
		for _, p := range policies {
			if !strings.HasSuffix(p.GetKind(), "Binding") {
				items++
			}
		}
		webhooks, err := config.WebhookConfigurations()
		Expect(err).NotTo(HaveOccurred())
		for _, w := range webhooks {
			hooks, _, _ := unstructured.NestedSlice(w.Object, "webhooks")
			items += len(hooks)
		}
		items += 4
	})
	check := func(args ...string) *gexec.Session {
		s, err := gexec.Start(exec.Command(bin, append([]string{"--kubeconfig", kubeconfig, "-n", ns, "check",
			"--manager-namespace", ns}, args...)...), GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { s.Kill() })
		return s
	}
	lines := func(s *gexec.Session, code int) string {
		EventuallyWithOffset(1, s, 90*time.Second).Should(gexec.Exit(code), string(s.Err.Contents()))
		out := string(s.Out.Contents())
		GinkgoWriter.Printf("$ kubectl fencedlock check\n%s", out)
		return out
	}

	It("fails on a manager without a live leader, and passes once it has one", func() {
		out := lines(check(), 1)
		Expect(out).To(ContainSubstring("FAIL  leader election Lease " + ns + "/" + locksv1alpha1.LeaderElectionID))
		Expect(strings.Count(out, "OK    ")).To(Equal(items - 1))

		leader := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: locksv1alpha1.LeaderElectionID},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: new("manager-0_abc"), LeaseDurationSeconds: new(int32(600)),
				RenewTime: &metav1.MicroTime{Time: time.Now()}}}
		Expect(k8sClient.Create(ctx, leader)).To(Succeed())
		out = lines(check(), 0)
		Expect(strings.Count(out, "OK    ")).To(Equal(items), "one line per item")
		Expect(out).NotTo(ContainSubstring("FAIL"))
		for _, want := range []string{
			"OK    Kubernetes v1.",
			"OK    CRD fencedlocks.locks.fencedlock.io is established",
			"OK    ValidatingWebhookConfiguration validating-webhook-configuration, webhook fence.locks.fencedlock.io: CA ",
			"OK    ValidatingAdmissionPolicy fencedlock-lock-deletion, bound by fencedlock-lock-deletion",
			"OK    MutatingAdmissionPolicy fencedlock-token-record, bound by fencedlock-token-record",
			`OK    the manager's leader is "manager-0_abc"`,
			"OK    the fence refused a dry-run create of ConfigMap " + ns + "/fencedlock-check-",
		} {
			Expect(out).To(ContainSubstring(want))
		}
	})

	It("fails on a policy without a binding, and --wait waits until it is bound again", func() {
		objs, err := util.PolicyObjects(filepath.Join(util.RepoRoot(), "config", "policy", "lock_deletion.yaml"), "fencedlock-")
		Expect(err).NotTo(HaveOccurred())
		var binding *unstructured.Unstructured
		for _, o := range objs {
			if o.GetKind() == "ValidatingAdmissionPolicyBinding" {
				binding = o
			}
		}
		Expect(binding).NotTo(BeNil())
		Expect(k8sClient.Delete(ctx, binding.DeepCopy())).To(Succeed())
		restore := func() {
			err := k8sClient.Create(ctx, binding.DeepCopy())
			Expect(client.IgnoreAlreadyExists(err)).To(Succeed())
		}
		DeferCleanup(restore)

		out := lines(check(), 1)
		Expect(out).To(ContainSubstring("FAIL  ValidatingAdmissionPolicy fencedlock-lock-deletion has no binding: it is not enforced"))
		Expect(out).To(ContainSubstring("fix: install the binding"))
		Expect(strings.Count(out, "FAIL")).To(Equal(1))

		s := check("--wait", "60s")
		Eventually(s.Err, 30*time.Second).Should(gbytes.Say("not ready yet: ValidatingAdmissionPolicy fencedlock-lock-deletion has no binding"))
		restore()
		out = lines(s, 0)
		Expect(out).To(ContainSubstring("OK    ValidatingAdmissionPolicy fencedlock-lock-deletion, bound by fencedlock-lock-deletion"))
		Expect(apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(binding), binding.DeepCopy()))).To(BeFalse())
	})
})
