//go:build e2e

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

package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fencedlock/fencedlock/config"
	"github.com/fencedlock/fencedlock/test/util"
)

const (
	helmRelease = "fencedlock" // so the chart names its objects as config/default does
	crdName     = "fencedlocks.locks.fencedlock.io"
)

// The chart (dist/chart) replaces the kustomize install in place, as a user moving to Helm would:
// everything of config/default but its Namespace and CRD is deleted, the CRD is adopted by the
// release, and `helm install` brings the same objects back under Helm. The kustomize install is
// restored afterwards for the other specs.
var _ = Describe("The Helm chart", Ordered, func() {
	var helm, kustomize string

	BeforeAll(func() {
		helm = filepath.Join(util.RepoRoot(), "bin", "helm")
		_, err := os.Stat(helm)
		Expect(err).NotTo(HaveOccurred(), "bin/helm is missing: run `make helm` (hack/e2e.sh does)")
		kustomize = filepath.Join(util.RepoRoot(), "bin", "kustomize")
		run(helm, "lint", "--strict", "dist/chart")

		By("removing the kustomize install (but its Namespace and the CRD, so no lock is lost)")
		for _, obj := range decodeAll([]byte(run(kustomize, "build", "test/e2e/overlay"))) {
			if k := obj.GetKind(); k == "Namespace" || k == "CustomResourceDefinition" {
				continue
			}
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, obj))).To(Succeed(), "deleting %s %s", obj.GetKind(), obj.GetName())
		}
		Eventually(podNames, 2*time.Minute, time.Second).Should(BeEmpty(), "manager pods left after deleting the install")
		By("letting the release adopt the CRD")
		adopt := fmt.Sprintf(`{"metadata":{"labels":{"app.kubernetes.io/managed-by":"Helm"},"annotations":{"meta.helm.sh/release-name":%q,"meta.helm.sh/release-namespace":%q}}}`,
			helmRelease, managerNamespace)
		crd := &unstructured.Unstructured{}
		crd.SetAPIVersion("apiextensions.k8s.io/v1")
		crd.SetKind("CustomResourceDefinition")
		crd.SetName(crdName)
		Expect(k8sClient.Patch(ctx, crd, client.RawPatch(types.MergePatchType, []byte(adopt)))).To(Succeed())

		DeferCleanup(func() {
			By("uninstalling the release and putting the kustomize install back")
			run(helm, "uninstall", helmRelease, "-n", managerNamespace, "--wait")
			Eventually(podNames, 2*time.Minute, time.Second).Should(BeEmpty())
			installManager(kustomize, fileSHA256(managerTar))
		})
	})

	It("installs with `helm install`, serves a campaign, and upgrades (`helm upgrade`: new image, 3 replicas) with no fenced write failed", func() {
		start := time.Now()
		values := filepath.Join(GinkgoT().TempDir(), "values.yaml")
		repo, tag, _ := strings.Cut(managerImage, ":")
		Expect(os.WriteFile(values, fmt.Appendf(nil, "manager:\n  image:\n    repository: %s\n    tag: %s\n    pullPolicy: Never\n",
			repo, tag), 0o600)).To(Succeed())
		run(helm, "install", helmRelease, "dist/chart", "-n", managerNamespace, "-f", values)
		waitManagerRollout()
		waitWebhooksServing()
		waitLeader()
		installed := time.Since(start)

		upgraded := tag + "-upgrade"
		tar := filepath.Join(GinkgoT().TempDir(), "manager-upgrade.tar")
		run("hack/retag-image.sh", managerTar, repo+":"+upgraded, tar)
		run("hack/cluster-load-image.sh", tar)

		c := newCampaign()
		var steps []string
		upgrade := func(image string, replicas int) {
			time.Sleep(3 * time.Second) // holders at work before and after every step
			s := time.Now()
			By(fmt.Sprintf("helm upgrade: image tag %s, %d replicas", image, replicas))
			run(helm, "upgrade", helmRelease, "dist/chart", "-n", managerNamespace, "--reuse-values",
				"--set", "manager.image.tag="+image, "--set", fmt.Sprintf("manager.replicas=%d", replicas))
			waitManagerRollout()
			steps = append(steps, fmt.Sprintf("helm upgrade (image %s, %d replicas): rolled out in %s", image, replicas,
				time.Since(s).Round(100*time.Millisecond)))
		}
		h := c.run(20*time.Second, func() {
			upgrade(upgraded, 3)
			upgrade(tag, 2) // and back
			time.Sleep(3 * time.Second)
		})
		steps = append([]string{fmt.Sprintf("helm install: both replicas serving after %s", installed.Round(100*time.Millisecond))}, steps...)
		a := c.admissions(h)
		a.report("helm install + 2 helm upgrades", steps)
		Expect(a.unavailable).To(BeEmpty(), "fenced writes or pod creations failed for webhook unavailability")
		Expect(caBundles()).To(Succeed())
		run(helm, "status", helmRelease, "-n", managerNamespace)
	})
})

// decodeAll decodes a multi-document YAML stream into objects.
func decodeAll(raw []byte) []*unstructured.Unstructured {
	objs, err := config.Decode(bytes.NewReader(raw))
	Expect(err).NotTo(HaveOccurred())
	return objs
}
