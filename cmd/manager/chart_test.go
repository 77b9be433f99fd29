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
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fencedlock/fencedlock/config"
	"github.com/fencedlock/fencedlock/test/util"
)

// The chart must wire the manager to the objects it renders, whatever the release is called: the
// manager's defaults name the kustomize install's objects (fencedlock-...).
const chartRelease, chartNamespace = "locks", "locks-system"

func helmTemplate(t *testing.T, args ...string) map[string][]*unstructured.Unstructured {
	t.Helper()
	return byKind(t, render(t, "helm", append([]string{"template", chartRelease, "../../dist/chart", "-n", chartNamespace}, args...)...))
}

// render runs a pinned tool of bin/ (make helm, make kustomize), skipping the test without it.
func render(t *testing.T, tool string, args ...string) []byte {
	t.Helper()
	bin := "../../bin/" + tool
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("no bin/%s (make %s): nothing is rendered", tool, tool)
	}
	out, err := exec.Command(bin, args...).Output()
	if err != nil {
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			t.Fatalf("%s %s: %v\n%s", tool, args[0], err, ee.Stderr)
		}
		t.Fatal(err)
	}
	return out
}

// byKind decodes a rendered multi-document YAML stream, grouping the objects by kind.
func byKind(t *testing.T, out []byte) map[string][]*unstructured.Unstructured {
	t.Helper()
	byKind := map[string][]*unstructured.Unstructured{}
	objs, err := config.Decode(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range objs {
		byKind[obj.GetKind()] = append(byKind[obj.GetKind()], obj)
	}
	return byKind
}

func names(objs []*unstructured.Unstructured) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.GetName())
	}
	return out
}

func one(t *testing.T, objs map[string][]*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	t.Helper()
	if len(objs[kind]) != 1 {
		t.Fatalf("%d %s objects, want 1: %v", len(objs[kind]), kind, names(objs[kind]))
	}
	return objs[kind][0]
}

func replicas(d *unstructured.Unstructured) string {
	r, _, _ := unstructured.NestedFieldNoCopy(d.Object, "spec", "replicas")
	return fmt.Sprint(r)
}

func managerArgs(t *testing.T, objs map[string][]*unstructured.Unstructured) []string {
	t.Helper()
	d := one(t, objs, "Deployment")
	cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	args, _, _ := unstructured.NestedStringSlice(cs[0].(map[string]any), "args")
	return args
}

func TestChartSelfManagedCertificates(t *testing.T) {
	objs := helmTemplate(t)
	d := one(t, objs, "Deployment")
	if r := replicas(d); r != "2" {
		t.Errorf("replicas %s, want 2", r)
	}
	secret := one(t, objs, "Secret").GetName()
	svcs := names(objs["Service"])
	vwc, mwc := one(t, objs, "ValidatingWebhookConfiguration"), one(t, objs, "MutatingWebhookConfiguration")
	webhookSvc := ""
	for _, cfg := range []*unstructured.Unstructured{vwc, mwc} {
		hooks, _, _ := unstructured.NestedSlice(cfg.Object, "webhooks")
		if len(hooks) == 0 {
			t.Fatalf("%s %s has no webhooks", cfg.GetKind(), cfg.GetName())
		}
		for _, h := range hooks {
			name, _, _ := unstructured.NestedString(h.(map[string]any), "clientConfig", "service", "name")
			if !slices.Contains(svcs, name) {
				t.Errorf("%s calls Service %q, which the chart does not render (%v)", cfg.GetKind(), name, svcs)
			}
			webhookSvc = name
		}
	}
	args := managerArgs(t, objs)
	for _, want := range []string{"--cert-secret-name=" + secret, "--webhook-service-name=" + webhookSvc,
		"--validating-webhook-configuration=" + vwc.GetName(), "--mutating-webhook-configuration=" + mwc.GetName(), "--leader-elect"} {
		if !slices.Contains(args, want) {
			t.Errorf("manager args %v lack %s", args, want)
		}
	}
	if slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--webhook-cert-path") }) {
		t.Error("self-managed certificates, yet --webhook-cert-path (which turns the rotator off)")
	}
	if len(objs["Certificate"]) != 0 {
		t.Error("a cert-manager Certificate in the self-managed mode")
	}
	// The rotator's Secret permissions: a Role of the release namespace that can create and update Secrets.
	found := false
	for _, r := range objs["Role"] {
		rules, _, _ := unstructured.NestedSlice(r.Object, "rules")
		for _, rule := range rules {
			res, _, _ := unstructured.NestedStringSlice(rule.(map[string]any), "resources")
			verbs, _, _ := unstructured.NestedStringSlice(rule.(map[string]any), "verbs")
			found = found || (slices.Contains(res, "secrets") && slices.Contains(verbs, "create") && slices.Contains(verbs, "update"))
		}
	}
	if !found {
		t.Errorf("no Role grants the manager the certificate Secret (Roles: %v)", names(objs["Role"]))
	}
	one(t, objs, "PodDisruptionBudget")
	checkPolicies(t, objs)
}

func TestChartCertManager(t *testing.T) {
	objs := helmTemplate(t, "--set", "certManager.enabled=true")
	cert := one(t, objs, "Certificate")
	one(t, objs, "Issuer")
	if len(objs["Secret"]) != 0 {
		t.Errorf("cert-manager makes the Secret, yet the chart ships %v", names(objs["Secret"]))
	}
	for _, kind := range []string{"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"} {
		if got := one(t, objs, kind).GetAnnotations()["cert-manager.io/inject-ca-from"]; got != chartNamespace+"/"+cert.GetName() {
			t.Errorf("%s: inject-ca-from %q, want %s/%s", kind, got, chartNamespace, cert.GetName())
		}
	}
	secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	args := managerArgs(t, objs)
	if !slices.Contains(args, "--webhook-cert-path=/tmp/k8s-webhook-server/serving-certs") {
		t.Errorf("manager args %v: the certificate is not read from the mounted Secret", args)
	}
	d := one(t, objs, "Deployment")
	vols, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "volumes")
	mounted := slices.ContainsFunc(vols, func(v any) bool {
		n, _, _ := unstructured.NestedString(v.(map[string]any), "secret", "secretName")
		return n == secretName
	})
	if !mounted {
		t.Errorf("the Certificate's Secret %s is not mounted", secretName)
	}
	checkPolicies(t, objs)
}

func TestChartValues(t *testing.T) {
	objs := helmTemplate(t, "--set", "manager.replicas=3", "--set", "metrics.enabled=false",
		"--set", "manager.resources.limits.memory=512Mi")
	d := one(t, objs, "Deployment")
	if r := replicas(d); r != "3" {
		t.Errorf("replicas %s, want 3", r)
	}
	if !slices.Contains(managerArgs(t, objs), "--metrics-bind-address=0") {
		t.Error("metrics.enabled=false does not turn the metrics server off")
	}
	cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if m, _, _ := unstructured.NestedString(cs[0].(map[string]any), "resources", "limits", "memory"); m != "512Mi" {
		t.Errorf("memory limit %q, want 512Mi", m)
	}
	for _, s := range objs["Service"] {
		if strings.Contains(s.GetName(), "metrics") {
			t.Errorf("metrics.enabled=false, yet Service %s", s.GetName())
		}
	}
}

// checkPolicies: the admission policies of config/policy, as many of each kind as it has, each
// with a binding naming it.
func checkPolicies(t *testing.T, objs map[string][]*unstructured.Unstructured) {
	t.Helper()
	want := map[string]int{"ValidatingAdmissionPolicy": 0, "MutatingAdmissionPolicy": 0}
	files, err := util.PolicyFiles()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		objs, err := util.PolicyObjects(f, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if _, counted := want[o.GetKind()]; counted {
				want[o.GetKind()]++
			}
		}
	}
	for kind, n := range want {
		policies := names(objs[kind])
		if len(policies) != n {
			t.Errorf("%d %s objects, want %d: %v", len(policies), kind, n, policies)
		}
		bound := map[string]bool{}
		for _, b := range objs[kind+"Binding"] {
			p, _, _ := unstructured.NestedString(b.Object, "spec", "policyName")
			if !slices.Contains(policies, p) {
				t.Errorf("%s %s binds %q, which the chart does not render", b.GetKind(), b.GetName(), p)
			}
			bound[p] = true
		}
		for _, p := range policies {
			if !bound[p] {
				t.Errorf("%s %s has no binding", kind, p)
			}
		}
	}
}
