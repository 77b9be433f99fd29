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

package main

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/config"
)

const (
	fixInstall          = "install fencedlock (dist/install.yaml, or the Helm chart dist/chart) on this cluster"
	defaultManagerNS    = "fencedlock-system"
	admissionAPIVersion = "admissionregistration.k8s.io/v1"
)

func (c *checker) serverVersion() checkResult {
	v, err := c.cs.Discovery().ServerVersion()
	if err != nil {
		return fail("check the kubeconfig and that the API server is reachable", "the server version could not be read: %v", err)
	}
	minor, err := strconv.Atoi(strings.TrimRight(v.Minor, "+"))
	if err != nil || v.Major != "1" {
		return fail("use Kubernetes 1.x", "Kubernetes %s: version %q.%q not understood", v.GitVersion, v.Major, v.Minor)
	}
	if minor < config.MinKubernetesMinor {
		return fail(fmt.Sprintf("upgrade the cluster to Kubernetes 1.%d or later", config.MinKubernetesMinor),
			"Kubernetes %s is older than 1.%d, which serves the install's admission policies", v.GitVersion, config.MinKubernetesMinor)
	}
	return pass("Kubernetes %s (fencedlock needs 1.%d or later)", v.GitVersion, config.MinKubernetesMinor)
}

func (c *checker) crd(ctx context.Context) checkResult {
	name := "fencedlocks." + locksv1alpha1.GroupVersion.Group
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	if err := c.cl.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
		return fail(fixInstall, "CRD %s: %v", name, err)
	}
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, raw := range conds {
		cond, _ := raw.(map[string]any)
		if cond["type"] == "Established" && cond["status"] == "True" {
			return pass("CRD %s is established", name)
		}
	}
	return fail("kubectl describe crd "+name+" (its conditions say why)", "CRD %s is not established", name)
}

// webhooks checks each webhook of config/webhook: a configuration of its kind has it, with a CA
// bundle that parses and has not expired. It returns the namespace of the webhooks' Service (the
// manager's), or "" if none names one.
func (c *checker) webhooks(ctx context.Context) ([]checkResult, string) {
	want, err := config.WebhookConfigurations()
	if err != nil {
		return []checkResult{fail("rebuild the plugin", "the plugin's copy of config/webhook: %v", err)}, ""
	}
	var out []checkResult
	managerNS := ""
	for _, w := range want {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion(w.GetAPIVersion())
		list.SetKind(w.GetKind() + "List")
		if err := c.cl.List(ctx, list); err != nil {
			out = append(out, fail(fixInstall, "listing %ss: %v", w.GetKind(), err))
			continue
		}
		hooks, _, _ := unstructured.NestedSlice(w.Object, "webhooks")
		for _, h := range hooks {
			name, _ := h.(map[string]any)["name"].(string)
			r, ns := checkWebhook(list, w.GetKind(), name, c.now())
			out = append(out, r)
			managerNS = cmpOr(managerNS, ns)
		}
	}
	return out, managerNS
}

// checkWebhook finds the webhook called name in the configurations of list and checks its CA.
func checkWebhook(list *unstructured.UnstructuredList, kind, name string, now time.Time) (checkResult, string) {
	for _, cfg := range list.Items {
		hooks, _, _ := unstructured.NestedSlice(cfg.Object, "webhooks")
		for _, h := range hooks {
			hook, _ := h.(map[string]any)
			if hook["name"] != name {
				continue
			}
			ns, _, _ := unstructured.NestedString(hook, "clientConfig", "service", "namespace")
			bundle, _, _ := unstructured.NestedString(hook, "clientConfig", "caBundle")
			where := fmt.Sprintf("%s %s, webhook %s", kind, cfg.GetName(), name)
			return checkCABundle(where, bundle, now), ns
		}
	}
	return fail(fixInstall, "no %s has webhook %s", kind, name), ""
}

// checkCABundle checks that a caBundle holds certificates, none expired, and says when the first
// expires.
func checkCABundle(where, bundle string, now time.Time) checkResult {
	const fixCA = "the manager fills the CA in (--cert-rotation) or cert-manager's CA injector does: check its logs"
	pemBytes, err := base64.StdEncoding.DecodeString(bundle)
	if err != nil || len(pemBytes) == 0 {
		return fail(fixCA, "%s: no CA bundle", where)
	}
	var first *x509.Certificate
	for block, rest := pem.Decode(pemBytes); block != nil; block, rest = pem.Decode(rest) {
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return fail(fixCA, "%s: a CA certificate does not parse: %v", where, err)
		}
		if now.After(cert.NotAfter) {
			return fail(fixCA, "%s: CA certificate %q expired %s", where, cert.Subject.CommonName, cert.NotAfter.UTC().Format(time.RFC3339))
		}
		if first == nil || cert.NotAfter.Before(first.NotAfter) {
			first = cert
		}
	}
	if first == nil {
		return fail(fixCA, "%s: the CA bundle holds no PEM certificate", where)
	}
	return pass("%s: CA %q valid until %s (%s)", where, first.Subject.CommonName,
		first.NotAfter.UTC().Format(time.RFC3339), duration.HumanDuration(first.NotAfter.Sub(now)))
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// policies checks each admission policy of config/policy: installed (under the install's prefix,
// "fencedlock-" or a Helm release's) and bound.
func (c *checker) policies(ctx context.Context) []checkResult {
	objs, err := config.Policies()
	if err != nil {
		return []checkResult{fail("rebuild the plugin", "the plugin's copy of config/policy: %v", err)}
	}
	var out []checkResult
	for _, p := range objs {
		if strings.HasSuffix(p.GetKind(), "Binding") {
			continue
		}
		out = append(out, c.policy(ctx, p.GetAPIVersion(), p.GetKind(), p.GetName()))
	}
	return out
}

func (c *checker) policy(ctx context.Context, apiVersion, kind, name string) checkResult {
	list := func(kind string) ([]unstructured.Unstructured, error) {
		l := &unstructured.UnstructuredList{}
		l.SetAPIVersion(apiVersion)
		l.SetKind(kind + "List")
		err := c.cl.List(ctx, l)
		return l.Items, err
	}
	policies, err := list(kind)
	if err != nil {
		return fail(fmt.Sprintf("the server must serve %s %s (Kubernetes 1.%d or later)", apiVersion, kind, config.MinKubernetesMinor),
			"listing %ss: %v", kind, err)
	}
	bindings, err := list(kind + "Binding")
	if err != nil {
		return fail(fixInstall, "listing %sBindings: %v", kind, err)
	}
	var found []string
	for _, p := range policies {
		if p.GetName() != name && !strings.HasSuffix(p.GetName(), "-"+name) {
			continue
		}
		found = append(found, p.GetName())
		var by []string
		for _, b := range bindings {
			if pn, _, _ := unstructured.NestedString(b.Object, "spec", "policyName"); pn == p.GetName() {
				by = append(by, b.GetName())
			}
		}
		if len(by) > 0 {
			return pass("%s %s, bound by %s", kind, p.GetName(), strings.Join(by, ", "))
		}
	}
	if len(found) > 0 {
		return fail("install the binding of config/policy or the chart that names it (a policy without one judges nothing)",
			"%s %s has no binding: it is not enforced", kind, strings.Join(found, ", "))
	}
	return fail(fixInstall, "no %s %s (or <prefix>-%s) is installed", kind, name, name)
}

// leader checks that the manager's leader-election Lease has a holder that renewed it within its
// duration.
func (c *checker) leader(ctx context.Context, ns string) checkResult {
	ns = cmpOr(ns, defaultManagerNS)
	key := ns + "/" + locksv1alpha1.LeaderElectionID
	fix := fmt.Sprintf("is the manager running? kubectl -n %s get pods; kubectl -n %s logs deployment/<release>-controller-manager "+
		"(another namespace: --manager-namespace)", ns, ns)
	l, err := c.cs.CoordinationV1().Leases(ns).Get(ctx, locksv1alpha1.LeaderElectionID, metav1.GetOptions{})
	if err != nil {
		return fail(fix, "leader election Lease %s: %v", key, err)
	}
	holder := ""
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	if holder == "" || l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return fail(fix, "leader election Lease %s has no holder", key)
	}
	since := c.now().Sub(l.Spec.RenewTime.Time)
	if since > time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second {
		return fail(fix, "the manager's leader %q last renewed %s ago, longer than its lease (%ds)", holder,
			duration.HumanDuration(since), *l.Spec.LeaseDurationSeconds)
	}
	return pass("the manager's leader is %q (Lease %s, renewed %s ago)", holder, key, duration.HumanDuration(max(since, 0)))
}

// fence tries, as a server-side dry run, a write the fence must refuse: a ConfigMap fenced by a
// lock that does not exist. Refused by the fence webhook, it shows the API server calls it.
func (c *checker) fence(ctx context.Context) checkResult {
	probe := "fencedlock-check-" + rand.String(5)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: probe,
		Labels:      map[string]string{locksv1alpha1.FencedByLabel: probe},
		Annotations: map[string]string{locksv1alpha1.TokenAnnotation: "1"}}}
	err := c.cl.Create(ctx, cm, client.DryRunAll)
	what := fmt.Sprintf("a dry-run create of ConfigMap %s/%s, fenced by a lock that does not exist", c.ns, probe)
	fencedBy := `admission webhook "fence.` + locksv1alpha1.GroupVersion.Group + `" denied the request`
	switch {
	case err == nil:
		return fail("the fence's ValidatingWebhookConfiguration must match fenced objects in this namespace: "+
			"check its namespaceSelector and objectSelector", "%s was admitted: the fence did not judge it", what)
	case apierrors.IsForbidden(err) && strings.Contains(err.Error(), fencedBy):
		return pass("the fence refused %s", what)
	default:
		return fail("the API server must reach the fence webhook: check the webhook Service, its endpoints and the manager's logs",
			"%s failed, but not by the fence's refusal: %v", what, err)
	}
}
