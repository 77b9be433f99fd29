package integration

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fencedlock/fencedlock/test/util"
)

// The install manifests are applied to the real API server with server-side dry run, so schema,
// RBAC and admission problems in config/default fail the build.
var _ = Describe("config/default (dist/install.yaml)", func() {
	It("is accepted by the API server", func() {
		kustomize := filepath.Join(util.RepoRoot(), "bin", "kustomize")
		if _, err := os.Stat(kustomize); err != nil {
			Fail("bin/kustomize is missing: run `make kustomize` (make test does)")
		}
		out, err := exec.Command(kustomize, "build", filepath.Join(util.RepoRoot(), "config", "default")).Output()
		Expect(err).NotTo(HaveOccurred())

		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fencedlock-system"}}
		Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, ns))).To(Succeed())

		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
		kinds := map[string]int{}
		for {
			var obj unstructured.Unstructured
			if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
				break
			} else {
				Expect(err).NotTo(HaveOccurred())
			}
			if obj.GetKind() == "Namespace" || obj.GetKind() == "CustomResourceDefinition" {
				continue // created above / installed by envtest
			}
			err := k8sClient.Create(ctx, &obj, client.DryRunAll)
			if apierrors.IsAlreadyExists(err) {
				err = nil
			}
			Expect(err).NotTo(HaveOccurred(), "%s %s", obj.GetKind(), obj.GetName())
			kinds[obj.GetKind()]++
		}
		Expect(kinds).To(HaveKeyWithValue("Deployment", 1))
		Expect(kinds).To(HaveKeyWithValue("ValidatingWebhookConfiguration", 1))
		Expect(kinds).To(HaveKeyWithValue("PodDisruptionBudget", 1))
	})
})
