//go:build bench

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

package bench

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
)

// The fence is two admission steps: a MutatingAdmissionPolicy (token-record) and a validating
// webhook. What each costs a write before any of fencedlock's logic runs is measured here with
// two that do nothing: a webhook that allows every request, served over HTTPS on 127.0.0.1 as
// the manager serves the fence (same certificate, HTTP/1.1, a process of its own), and a policy
// whose mutation is empty once an object carries its mark. Each is bound to a label of its own, which
// nothing of fencedlock's matches.

const (
	noopWebhookLabel = "bench.fencedlock.io/noop-webhook"
	noopPolicyLabel  = "bench.fencedlock.io/noop-policy"
	noopWebhookName  = "noop.bench.fencedlock.io"
)

// noopWebhook starts and registers the webhook that allows everything (test/bench/noopwebhook,
// a process of its own), waits until the API server calls it, and returns its label.
func (b *bench) noopWebhook() string {
	wio := b.wio
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(b.t))
	cmd := exec.Command(build(b.t, b.t.TempDir(), "./test/bench/noopwebhook"), "--addr", addr, "--cert-dir", wio.LocalServingCertDir)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			_ = c.Close()
			break
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("the bench's no-op webhook does not listen on %s after 30s", addr)
		}
	}

	url := fmt.Sprintf("https://%s/noop", addr)
	fail, none, timeout := admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNone, int32(10)
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-noop"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    noopWebhookName,
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: wio.LocalServingCAData},
			Rules:                   configMapWrites(),
			FailurePolicy:           &fail,
			SideEffects:             &none,
			TimeoutSeconds:          &timeout,
			AdmissionReviewVersions: []string{"v1"},
			ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: noopWebhookLabel, Operator: metav1.LabelSelectorOpExists}}},
		}},
	}
	if err := b.cl.Create(b.ctx, vwc); err != nil {
		b.t.Fatal(err)
	}
	b.awaitAdmission("noop-webhook-probe", noopWebhookLabel, func(*corev1.ConfigMap) bool {
		_, calls := histogramSums(b.apiMetrics(), "apiserver_admission_webhook_admission_duration_seconds", `name="`+noopWebhookName+`"`)
		return calls > 0
	})
	return noopWebhookLabel
}

// noopPolicy installs the MutatingAdmissionPolicy that marks an object once (annotation
// noopPolicyLabel) and changes nothing after, waits until it takes effect, and returns its label.
func (b *bench) noopPolicy() string {
	b.mutatingPolicy("bench-noop", noopPolicyLabel, "", configMapWrites(), nil, fmt.Sprintf(
		`has(object.metadata.annotations) && %[1]q in object.metadata.annotations ? [] : [JSONPatch{op: "add", `+
			`path: "/metadata/annotations/" + jsonpatch.escapeKey(%[1]q), value: "seen"}]`, noopPolicyLabel))
	b.awaitAdmission("noop-policy-probe", noopPolicyLabel, func(cm *corev1.ConfigMap) bool {
		return cm.Annotations[noopPolicyLabel] == "seen"
	})
	return noopPolicyLabel
}

// configMapWrites are the rules of both: ConfigMap creates and updates.
func configMapWrites() []admissionregistrationv1.RuleWithOperations {
	return []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
	}}
}

// awaitAdmission writes a ConfigMap carrying label until took says the admission step it selects
// is in effect (the API server loads webhook configurations and policies asynchronously). Every
// write presents a token, as the measured writes do: the token-record policy records it, and the
// no-op policy has annotations to add its mark to.
func (b *bench) awaitAdmission(name, label string, took func(*corev1.ConfigMap) bool) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: b.ns, Name: name, Labels: map[string]string{label: ""},
		Annotations: map[string]string{locksv1alpha1.TokenAnnotation: "1"}}}
	if err := b.cl.Create(b.ctx, cm); err != nil {
		b.t.Fatal(err)
	}
	b.rewriteUntil("admission step for label "+label, func() bool { return took(cm) }, func(i int) error {
		return b.cl.Patch(b.ctx, cm, client.RawPatch(types.MergePatchType, fmt.Appendf(nil,
			`{"metadata":{"annotations":{%q:"1"}},"data":{"n":"%d"}}`, locksv1alpha1.TokenAnnotation, i)))
	})
}

// rewriteUntil writes an object again (rewrite, the i-th time) until took says the bench's
// admission step (what) is in effect: the API server loads webhook configurations and policies
// asynchronously. It ends the benchmark after 30 s.
func (b *bench) rewriteUntil(what string, took func() bool, rewrite func(i int) error) {
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; !took(); i++ {
		if time.Now().After(deadline) {
			b.t.Fatalf("the bench's %s did not take effect within 30s", what)
		}
		time.Sleep(50 * time.Millisecond)
		if err := rewrite(i); err != nil {
			b.t.Fatal(err)
		}
	}
}
