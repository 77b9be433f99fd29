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
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fencedlock/fencedlock/config"
	"github.com/fencedlock/fencedlock/test/util"
)

// The manager's defaults for self-managed certificates (cmd/manager/main.go flags): the rotator
// keeps the CA and serving certificate in this Secret (which must exist: it does not create it),
// the CA injector puts the CA in the webhook configurations of these names, and the webhook server
// reads the certificate from this directory.
const (
	defaultValidatingConfig = "fencedlock-validating-webhook-configuration"
	defaultMutatingConfig   = "fencedlock-mutating-webhook-configuration"
	defaultCertSecret       = "fencedlock-webhook-server-cert"
	defaultWebhookService   = "fencedlock-webhook-service"
	defaultCertDir          = "/tmp/k8s-webhook-server/serving-certs"
	injectCAFrom            = "cert-manager.io/inject-ca-from"
)

// kustomizations lists every kustomization of the repository's config/ and the end-to-end
// overlay, so a new variant cannot be left out.
func kustomizations() []string {
	dirs, err := filepath.Glob(filepath.Join(util.RepoRoot(), "config", "*", "kustomization.yaml"))
	Expect(err).NotTo(HaveOccurred())
	out := make([]string, 0, 1+len(dirs))
	out = append(out, filepath.Join("test", "e2e", "overlay"))
	for _, d := range dirs {
		rel, err := filepath.Rel(util.RepoRoot(), filepath.Dir(d))
		Expect(err).NotTo(HaveOccurred())
		out = append(out, rel)
	}
	return out
}

func render(dir string) []*unstructured.Unstructured {
	kustomize := filepath.Join(util.RepoRoot(), "bin", "kustomize")
	if _, err := os.Stat(kustomize); err != nil {
		Fail("bin/kustomize is missing: run `make kustomize` (make test does)")
	}
	cmd := exec.Command(kustomize, "build", filepath.Join(util.RepoRoot(), dir))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	ExpectWithOffset(1, err).NotTo(HaveOccurred(), "kustomize build %s: %s", dir, stderr.String())
	objs, err := config.Decode(bytes.NewReader(out))
	ExpectWithOffset(1, err).NotTo(HaveOccurred(), dir)
	return objs
}

func ofKind(objs []*unstructured.Unstructured, kinds ...string) []*unstructured.Unstructured {
	return slices.DeleteFunc(slices.Clone(objs), func(o *unstructured.Unstructured) bool { return !slices.Contains(kinds, o.GetKind()) })
}

// managerArgs returns the manager container's flags (--name=value; a bare --name is "true").
func managerArgs(d *appsv1.Deployment) (*corev1.Container, map[string]string) {
	i := slices.IndexFunc(d.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == "manager" })
	ExpectWithOffset(1, i).To(BeNumerically(">=", 0), "no manager container")
	c := &d.Spec.Template.Spec.Containers[i]
	flags := map[string]string{}
	for _, a := range c.Args {
		name, value, ok := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !ok {
			value = "true"
		}
		flags[name] = value
	}
	return c, flags
}

func or(m map[string]string, k, def string) string {
	if v, ok := m[k]; ok {
		return v
	}
	return def
}

// mountedSecret returns the Secret mounted at dir in the manager container ("" if none).
func mountedSecret(d *appsv1.Deployment, c *corev1.Container, dir string) string {
	for _, m := range c.VolumeMounts {
		if strings.TrimSuffix(m.MountPath, "/") != dir {
			continue
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name == m.Name && v.Secret != nil {
				return v.Secret.SecretName
			}
		}
	}
	return ""
}

// webhookServices returns, per webhook configuration, the namespace/name of the Services its
// webhooks call.
func webhookServices(cfg *unstructured.Unstructured) []string {
	hooks, _, _ := unstructured.NestedSlice(cfg.Object, "webhooks")
	out := make([]string, 0, len(hooks))
	for _, h := range hooks {
		svc, found, _ := unstructured.NestedStringMap(h.(map[string]any), "clientConfig", "service")
		ExpectWithOffset(1, found).To(BeTrue(), "%s %s: a webhook is not called through a Service", cfg.GetKind(), cfg.GetName())
		out = append(out, svc["namespace"]+"/"+svc["name"])
	}
	return out
}

// checkCASource asserts that the install's webhook configurations all get a CA bundle: from the
// manager's own CA injector (the CA of its rotator's Secret) or from cert-manager's. Without one, the
// API server cannot call the webhook and, with failurePolicy Fail, refuses every fenced write
// (validating) or every lock-labelled pod (mutating).
func checkCASource(dir string, objs []*unstructured.Unstructured) {
	deps := ofKind(objs, "Deployment")
	Expect(deps).To(HaveLen(1), "%s: one manager Deployment", dir)
	d := &appsv1.Deployment{}
	Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(deps[0].Object, d)).To(Succeed())
	c, flags := managerArgs(d)
	ns := d.Namespace
	configs := ofKind(objs, "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
	Expect(configs).To(HaveLen(2), "%s: the fence's and the pod gate's webhook configurations", dir)

	certPath, byPath := flags["webhook-cert-path"]
	if byPath || flags["cert-rotation"] == "false" {
		By(dir + ": certificates from cert-manager")
		certs := map[string]*unstructured.Unstructured{}
		for _, o := range ofKind(objs, "Certificate") {
			certs[o.GetNamespace()+"/"+o.GetName()] = o
		}
		for _, cfg := range configs {
			ref := cfg.GetAnnotations()[injectCAFrom]
			Expect(ref).NotTo(BeEmpty(), "%s: %s %s has no %s annotation: no CA would be injected", dir, cfg.GetKind(), cfg.GetName(), injectCAFrom)
			cert, ok := certs[ref]
			Expect(ok).To(BeTrue(), "%s: %s %s injects the CA of Certificate %s, which is not in the install", dir, cfg.GetKind(), cfg.GetName(), ref)
			dnsNames, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
			for _, svc := range webhookServices(cfg) {
				svcNS, svcName, _ := strings.Cut(svc, "/")
				Expect(dnsNames).To(ContainElement(svcName+"."+svcNS+".svc"), "%s: Certificate %s does not cover Service %s", dir, ref, svc)
			}
			secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
			Expect(mountedSecret(d, c, strings.TrimSuffix(certPath, "/"))).To(Equal(secretName),
				"%s: the manager must read Certificate %s's Secret at --webhook-cert-path", dir, ref)
		}
		return
	}

	By(dir + ": self-managed certificates (cert-controller)")
	names := map[string]string{
		"ValidatingWebhookConfiguration": or(flags, "validating-webhook-configuration", defaultValidatingConfig),
		"MutatingWebhookConfiguration":   or(flags, "mutating-webhook-configuration", defaultMutatingConfig),
	}
	service := ns + "/" + or(flags, "webhook-service-name", defaultWebhookService)
	for _, cfg := range configs {
		Expect(cfg.GetName()).To(Equal(names[cfg.GetKind()]),
			"%s: the CA injector puts the CA into %s %s, not into %s", dir, cfg.GetKind(), names[cfg.GetKind()], cfg.GetName())
		Expect(webhookServices(cfg)).To(HaveEach(service), "%s: the serving certificate is made for Service %s", dir, service)
	}
	secret := or(flags, "cert-secret-name", defaultCertSecret)
	Expect(slices.ContainsFunc(ofKind(objs, "Secret"), func(o *unstructured.Unstructured) bool {
		return o.GetName() == secret && o.GetNamespace() == ns
	})).To(BeTrue(), "%s: Secret %s/%s is not in the install; the rotator does not create it", dir, ns, secret)
	Expect(mountedSecret(d, c, defaultCertDir)).To(Equal(secret),
		"%s: the rotator writes no files; the webhook server reads Secret %s mounted at %s", dir, secret, defaultCertDir)
}

// The install manifests are applied to the real API server with server-side dry run, so schema,
// RBAC and admission problems in any variant fail the build.
var _ = Describe("config/ kustomizations (dist/install.yaml and its variants)", func() {
	It("every one renders; every install gives both webhook configurations a CA source and is accepted by the API server", func() {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fencedlock-system"}}
		Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, ns))).To(Succeed())
		installs := map[string]map[string]int{}
		for _, dir := range kustomizations() {
			objs := render(dir)
			if len(ofKind(objs, "Deployment")) == 0 || len(ofKind(objs, "CustomResourceDefinition")) == 0 {
				continue // a component (crd, manager, webhook, ...): built above, installed by the variants
			}
			checkCASource(dir, objs)
			kinds := map[string]int{}
			for _, obj := range objs {
				kinds[obj.GetKind()]++
				switch {
				case obj.GetKind() == "Namespace" || obj.GetKind() == "CustomResourceDefinition":
					continue // created above / installed by envtest
				case strings.HasPrefix(obj.GetAPIVersion(), "cert-manager.io/"):
					continue // cert-manager's CRDs are not installed here
				}
				err := k8sClient.Create(ctx, obj, client.DryRunAll)
				if apierrors.IsAlreadyExists(err) {
					err = nil
				}
				Expect(err).NotTo(HaveOccurred(), "%s: %s %s", dir, obj.GetKind(), obj.GetName())
			}
			installs[dir] = kinds
		}
		Expect(installs).To(HaveKey("config/default"))
		Expect(installs).To(HaveKey("config/cert-manager"))
		Expect(installs).To(HaveKey(filepath.Join("test", "e2e", "overlay")))
		for dir, kinds := range installs {
			Expect(kinds).To(HaveKeyWithValue("Deployment", 1), dir)
			Expect(kinds).To(HaveKeyWithValue("ValidatingWebhookConfiguration", 1), dir)
			Expect(kinds).To(HaveKeyWithValue("MutatingWebhookConfiguration", 1), dir)
			Expect(kinds).To(HaveKeyWithValue("PodDisruptionBudget", 1), dir)
			Expect(kinds).To(HaveKey("ValidatingAdmissionPolicy"), dir)
			Expect(kinds).To(HaveKey("MutatingAdmissionPolicy"), dir)
		}
		Expect(installs["config/cert-manager"]).To(HaveKeyWithValue("Certificate", 1))
		Expect(installs["config/cert-manager"]).NotTo(HaveKey("Secret"), "cert-manager creates the certificate Secret")
		fmt.Fprintf(GinkgoWriter, "installs rendered and dry-run applied: %v\n", installs)
	})
})
