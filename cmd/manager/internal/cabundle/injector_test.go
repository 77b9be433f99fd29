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

package cabundle

import (
	"bytes"
	"context"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestInjectorKeepsEveryConfiguration runs the injector on a fake clientset: the Secret's CA goes
// into every webhook of both kinds of configuration, and a deleted Secret comes back.
func TestInjectorKeepsEveryConfiguration(t *testing.T) {
	now := time.Now()
	ca := testCA(t, 1, now.Add(-time.Hour), now.Add(time.Hour))
	old := testCA(t, 2, now.Add(-2*time.Hour), now.Add(time.Hour))
	cc := func(b []byte) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{CABundle: b}
	}
	cs := fake.NewClientset(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "sys", Name: "certs"}, Data: map[string][]byte{"ca.crt": pemOf(ca)}},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "v"},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "a", ClientConfig: cc(pemOf(old))}, {Name: "b"}}},
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "m"},
			Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "c"}}},
	)
	inj := New(cs, Config{Namespace: "sys", SecretName: "certs", ValidatingConfiguration: "v",
		MutatingConfiguration: "m", Overlap: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- inj.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	waitFor(t, "the CA injected", inj.Injected)
	v, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "v", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := v.Webhooks[0].ClientConfig.CABundle; !bytes.Equal(got, pemOf(ca, old)) {
		t.Errorf("validating webhook a: bundle of %d bytes; want the new CA, then the one it replaces", len(got))
	}
	if got := v.Webhooks[1].ClientConfig.CABundle; !bytes.Equal(got, pemOf(ca)) {
		t.Errorf("validating webhook b: bundle of %d bytes; want the CA", len(got))
	}
	m, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "m", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Webhooks[0].ClientConfig.CABundle; !bytes.Equal(got, pemOf(ca)) {
		t.Errorf("mutating webhook c: bundle of %d bytes; want the CA", len(got))
	}

	if err := cs.CoreV1().Secrets("sys").Delete(ctx, "certs", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the Secret recreated", func() bool {
		s, err := cs.CoreV1().Secrets("sys").Get(ctx, "certs", metav1.GetOptions{})
		return err == nil && len(s.Data) == 0
	})
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
