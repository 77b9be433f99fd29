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
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fencedlock/fencedlock/test/lincheck"
)

// Operations that must not disturb anyone: with two replicas, a PodDisruptionBudget, readiness
// gated on the webhook server and a preStop delay, a fenced write is refused or admitted by the
// fence, never failed for want of a webhook to call.
var _ = Describe("Operating the install during a campaign", Ordered, func() {
	BeforeEach(func() {
		DeferCleanup(func() {
			waitManagerRollout()
			waitWebhooksServing()
			waitLeader()
		})
	})

	It("rolls the manager out (rollout restart, then an image change and back) with no fenced write failed and no violation", func() {
		upgraded := strings.TrimSuffix(managerImage, ":e2e") + ":e2e-upgrade"
		tar := filepath.Join(GinkgoT().TempDir(), "manager-upgrade.tar")
		run("hack/retag-image.sh", managerTar, upgraded, tar)
		run("hack/cluster-load-image.sh", tar)
		DeferCleanup(func() { setManagerImage(managerImage) })

		c := newCampaign()
		var steps []string
		h := c.run(20*time.Second, func() {
			step := func(name string, f func()) {
				time.Sleep(3 * time.Second) // holders at work before and after every step
				start := time.Now()
				By(name)
				f()
				steps = append(steps, fmt.Sprintf("%s: %s", name, time.Since(start).Round(100*time.Millisecond)))
			}
			step("kubectl rollout restart", func() {
				run("kubectl", "-n", managerNamespace, "rollout", "restart", "deployment/"+managerDeployment)
				waitManagerRollout()
			})
			step("kubectl set image "+upgraded, func() { setManagerImage(upgraded) })
			step("kubectl set image "+managerImage, func() { setManagerImage(managerImage) })
			time.Sleep(3 * time.Second)
		})
		a := c.admissions(h)
		a.report("rollout restart + 2 image changes", steps)
		Expect(a.unavailable).To(BeEmpty(), "fenced writes or pod creations failed for webhook unavailability")
	})

	It("rotates the webhook certificates (new serving certificate; new CA; Secret deleted) with no admission failed", func() {
		c := newCampaign()
		var steps []string
		h := c.run(20*time.Second, func() {
			step := func(name string, f func()) {
				time.Sleep(3 * time.Second)
				start := time.Now()
				By(name)
				before := secretData()
				f()
				waitServing(before)
				steps = append(steps, fmt.Sprintf("%s: every replica serving the new certificate after %s", name,
					time.Since(start).Round(100*time.Millisecond)))
			}
			step("a new serving certificate (tls.crt and tls.key removed from the Secret)", func() {
				patchSecret(func(s *corev1.Secret) { delete(s.Data, "tls.crt"); delete(s.Data, "tls.key") })
			})
			step("a new CA (the Secret emptied)", func() {
				patchSecret(func(s *corev1.Secret) { s.Data = nil })
			})
			step("the Secret deleted", func() {
				Expect(k8sClient.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: managerNamespace, Name: certSecret}})).To(Succeed())
			})
			time.Sleep(3 * time.Second)
		})
		a := c.admissions(h)
		a.report("certificate rotations", steps)
		Expect(a.unavailable).To(BeEmpty(), "fenced writes or pod creations failed during the rotations")
		Expect(caBundles()).To(Succeed())
	})
})

// setManagerImage changes the manager's image with `kubectl set image` and waits for the rollout.
func setManagerImage(image string) {
	d := &appsv1.Deployment{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: managerNamespace, Name: managerDeployment}, d)).To(Succeed())
	if d.Spec.Template.Spec.Containers[0].Image != image {
		run("kubectl", "-n", managerNamespace, "set", "image", "deployment/"+managerDeployment, "manager="+image)
	}
	waitManagerRollout()
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: managerNamespace, Name: managerDeployment}, d)).To(Succeed())
	Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(image))
}

// admissions sorts a campaign's fenced writes (and its pod creations, which the pod gate admits)
// by what answered them.
type admissions struct {
	writes, ok, denied, otherFailed int
	podsCreated                     int
	unavailable                     []string // failed for want of a webhook (or of its certificate)
}

// webhookUnavailable: the API server could not get an answer from a webhook (no endpoint,
// connection refused or reset, TLS failure, timeout calling it).
func webhookUnavailable(msg string) bool {
	for _, s := range []string{"failed calling webhook", "connection refused", "no endpoints available",
		"x509:", "tls:", "service unavailable"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

func (c *campaign) admissions(h []lincheck.Op) admissions {
	var a admissions
	for _, op := range h {
		if op.Kind != lincheck.Write || op.Client == 0 {
			continue
		}
		a.writes++
		switch {
		case op.Outcome == lincheck.OK:
			a.ok++
		case op.Outcome == lincheck.Denied:
			a.denied++
		case webhookUnavailable(op.Note):
			a.unavailable = append(a.unavailable, op.Note)
		default:
			a.otherFailed++
			fmt.Fprintf(GinkgoWriter, "fenced write %s: %s\n", op.Outcome, op.Note)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.createErrs {
		if webhookUnavailable(e) {
			a.unavailable = append(a.unavailable, "creating a pod: "+e)
		}
	}
	var pods corev1.PodList
	Expect(k8sClient.List(ctx, &pods, client.InNamespace(c.ns))).To(Succeed())
	a.podsCreated = len(pods.Items)
	return a
}

func (a admissions) report(what string, steps []string) {
	msg := fmt.Sprintf("%s: %d fenced writes (%d admitted, %d refused by the fence, %d failed otherwise); "+
		"%d pods created through the pod gate; failed for webhook unavailability: %d",
		what, a.writes, a.ok, a.denied, a.otherFailed, a.podsCreated, len(a.unavailable))
	for _, s := range steps {
		msg += "\n  " + s
	}
	for i, u := range a.unavailable {
		if i == 5 {
			msg += fmt.Sprintf("\n  ... and %d more", len(a.unavailable)-5)
			break
		}
		msg += "\n  unavailable: " + u
	}
	AddReportEntry(what, msg)
	fmt.Fprintln(GinkgoWriter, msg)
	fmt.Println(msg)
}

func secretData() map[string][]byte {
	s := &corev1.Secret{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: managerNamespace, Name: certSecret}, s); err != nil {
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
		return nil
	}
	return s.Data
}

func patchSecret(mutate func(*corev1.Secret)) {
	s := &corev1.Secret{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: managerNamespace, Name: certSecret}, s)).To(Succeed())
	mutate(s)
	Expect(k8sClient.Update(ctx, s)).To(Succeed())
}

// waitServing waits until the Secret holds certificates other than before's and every manager
// replica serves its tls.crt on the webhook port (the kubelet projects a changed Secret into the
// pods within about a minute; the webhook server reloads the files when they change).
func waitServing(before map[string][]byte) {
	start := time.Now()
	Eventually(func(g Gomega) {
		s := &corev1.Secret{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: managerNamespace, Name: certSecret}, s)).To(Succeed())
		g.Expect(s.Data["tls.crt"]).NotTo(BeEmpty(), "no serving certificate in the Secret yet")
		g.Expect(bytes.Equal(s.Data["tls.crt"], before["tls.crt"])).To(BeFalse(), "the serving certificate was not renewed")
		block, _ := pem.Decode(s.Data["tls.crt"])
		g.Expect(block).NotTo(BeNil())
		pods := slices.DeleteFunc(managerPods(), func(p corev1.Pod) bool { return p.DeletionTimestamp != nil || p.Status.PodIP == "" })
		g.Expect(pods).NotTo(BeEmpty())
		for _, p := range pods {
			conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", net.JoinHostPort(p.Status.PodIP, "9443"),
				&tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only reads which certificate the pod serves
			g.Expect(err).NotTo(HaveOccurred(), "dialing %s", p.Name)
			served := conn.ConnectionState().PeerCertificates[0].Raw
			_ = conn.Close()
			g.Expect(bytes.Equal(served, block.Bytes)).To(BeTrue(), "%s still serves the previous certificate", p.Name)
		}
	}, 4*time.Minute, time.Second).Should(Succeed())
	fmt.Fprintf(GinkgoWriter, "every replica serves the new certificate after %s\n", time.Since(start).Round(100*time.Millisecond))
}
