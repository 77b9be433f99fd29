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
	"encoding/pem"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/test/util"
)

// The install as config/default names it.
const (
	managerNamespace  = "fencedlock-system"
	managerDeployment = "fencedlock-controller-manager"
	certSecret        = "fencedlock-webhook-server-cert"
	validatingConfig  = "fencedlock-validating-webhook-configuration"
	mutatingConfig    = "fencedlock-mutating-webhook-configuration"
	webhookService    = "fencedlock-webhook-service"
	leaderLease       = "fencedlock-manager.fencedlock.io"
	imageAnnotation   = "e2e.fencedlock.io/manager-image-sha256"
	failpointEnv      = "FENCEDLOCK_FAILPOINT_CRASH_AFTER_POD_GRANT"
	// hack/cluster-up.sh's containerd.
	containerdSocket = "/run/fencedlock-containerd/containerd.sock"
)

var managerLabels = client.MatchingLabels{"control-plane": "controller-manager", "app.kubernetes.io/name": "fencedlock"}

// installManager applies test/e2e/overlay and waits until both replicas serve both webhooks.
// imageSum goes into the pod template, so a rebuilt image (same tag) rolls the replicas.
func installManager(kustomize, imageSum string) {
	// A manager that ran next to the cluster (hack/local-manager.sh) registered the webhooks by URL.
	for _, obj := range []client.Object{&admissionregistrationv1.ValidatingWebhookConfiguration{}, &admissionregistrationv1.MutatingWebhookConfiguration{}} {
		name := validatingConfig
		if _, ok := obj.(*admissionregistrationv1.MutatingWebhookConfiguration); ok {
			name = mutatingConfig
		}
		if err := k8sClient.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
			Expect(apierrors.IsNotFound(err)).To(BeTrue(), "reading %s: %v", name, err)
			continue
		}
		if byURL(obj) {
			By("deleting " + name + ", registered by URL for a manager outside the cluster")
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, obj))).To(Succeed())
		}
	}
	rendered := run(kustomize, "build", "test/e2e/overlay")
	runWithInput([]byte(rendered), "kubectl", "apply", "--server-side", "--force-conflicts", "-f", "-")
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d := &appsv1.Deployment{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: managerNamespace, Name: managerDeployment}, d); err != nil {
			return err
		}
		if d.Spec.Template.Annotations[imageAnnotation] == imageSum {
			return nil
		}
		if d.Spec.Template.Annotations == nil {
			d.Spec.Template.Annotations = map[string]string{}
		}
		d.Spec.Template.Annotations[imageAnnotation] = imageSum
		return k8sClient.Update(ctx, d)
	})).To(Succeed())
	waitManagerRollout()
	waitWebhooksServing()
	// A Lease left by a replica that died with the node (a kept cluster restarted) holds
	// leadership until it expires: the suite starts once a live replica leads.
	waitLeader()
}

// waitLeader waits until a running replica holds the leader-election Lease.
func waitLeader() {
	start := time.Now()
	EventuallyWithOffset(1, func(g Gomega) {
		id := leader()
		g.Expect(id).NotTo(BeEmpty(), "nobody leads")
		live := slices.ContainsFunc(managerPods(), func(p corev1.Pod) bool {
			return p.Name == podOf(id) && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning
		})
		g.Expect(live).To(BeTrue(), "leader %s is not a running replica", id)
	}, time.Minute, 100*time.Millisecond).Should(Succeed())
	fmt.Fprintf(GinkgoWriter, "a live replica leads after %s\n", time.Since(start).Round(time.Millisecond))
}

func byURL(obj client.Object) bool {
	switch c := obj.(type) {
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		return slices.ContainsFunc(c.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool { return w.ClientConfig.URL != nil })
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		return slices.ContainsFunc(c.Webhooks, func(w admissionregistrationv1.MutatingWebhook) bool { return w.ClientConfig.URL != nil })
	}
	return false
}

// waitManagerRollout waits (up to 3 minutes) until the Deployment's spec is rolled out: every replica updated and
// ready, none of an older template left.
func waitManagerRollout() {
	const timeout = 3 * time.Minute
	start := time.Now()
	EventuallyWithOffset(1, func(g Gomega) {
		d := &appsv1.Deployment{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: managerNamespace, Name: managerDeployment}, d)).To(Succeed())
		want := ptr.Deref(d.Spec.Replicas, 1)
		g.Expect(d.Status.ObservedGeneration).To(BeNumerically(">=", d.Generation), "the controller has not seen the change")
		g.Expect(d.Status.UpdatedReplicas).To(Equal(want), "updated replicas")
		g.Expect(d.Status.ReadyReplicas).To(Equal(want), "ready replicas")
		g.Expect(d.Status.Replicas).To(Equal(want), "replicas of an older template still running")
		pods := managerPods()
		running := slices.DeleteFunc(pods, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil })
		g.Expect(running).To(HaveLen(int(want)), "manager pods")
	}, timeout, 250*time.Millisecond).Should(Succeed(), "the manager Deployment did not roll out in %s", timeout)
	fmt.Fprintf(GinkgoWriter, "manager rollout: %s\n", time.Since(start).Round(time.Millisecond))
}

// waitWebhooksServing waits until the certificate rotator has put its CA into every webhook of
// both configurations, the webhook Service's endpoints are the live replicas, and the API server
// gets answers from both webhooks through the Service several times in a row. The API server
// calls an endpoint picked at random from its copy of the EndpointSlices: one answer says only
// that one endpoint serves, and a spec that started while another still named a replica that is
// gone would have its pod creations refused ("no route to host").
func waitWebhooksServing() {
	EventuallyWithOffset(1, func(g Gomega) {
		g.Expect(caBundles()).To(Succeed())
	}, time.Minute, 250*time.Millisecond).Should(Succeed(), "CA bundles not injected")
	EventuallyWithOffset(1, func(g Gomega) {
		g.Expect(webhookEndpoints()).To(ConsistOf(liveManagerIPs()),
			"the ready endpoints of %s are not the running replicas' pod IPs", webhookService)
	}, time.Minute, 250*time.Millisecond).Should(Succeed(), "the webhook Service's endpoints did not settle")
	EventuallyWithOffset(1, func(g Gomega) {
		for range 5 {
			pod := probePod("default", "gate-probe")
			g.Expect(k8sClient.Create(ctx, pod, client.DryRunAll)).To(Succeed())
			g.Expect(pod.Spec.SchedulingGates).To(ContainElement(corev1.PodSchedulingGate{Name: locksv1alpha1.SchedulingGate}),
				"the pod gate did not gate a lock-labelled pod")
			g.Expect(fenceAnswers("default")).To(Succeed())
		}
	}, time.Minute, 250*time.Millisecond).Should(Succeed(), "the webhooks do not answer through their Service")
}

// webhookEndpoints returns the addresses the webhook Service's EndpointSlices mark ready: those
// the API server picks from.
func webhookEndpoints() []string {
	eps, err := webhookSlices()
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	var ips []string
	for _, s := range eps.Items {
		for _, e := range s.Endpoints {
			if ptr.Deref(e.Conditions.Ready, true) && len(e.Addresses) > 0 {
				ips = append(ips, e.Addresses[0])
			}
		}
	}
	return ips
}

// webhookSlices lists the webhook Service's EndpointSlices.
func webhookSlices() (discoveryv1.EndpointSliceList, error) {
	var eps discoveryv1.EndpointSliceList
	err := k8sClient.List(ctx, &eps, client.InNamespace(managerNamespace),
		client.MatchingLabels{discoveryv1.LabelServiceName: webhookService})
	return eps, err
}

// liveManagerIPs returns the pod IPs of the manager replicas that run, are ready and are not being
// deleted.
func liveManagerIPs() []string {
	var ips []string
	for _, p := range managerPods() {
		ready := slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
			return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
		})
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && ready && p.Status.PodIP != "" {
			ips = append(ips, p.Status.PodIP)
		}
	}
	return ips
}

// dumpWebhookEndpoints prints the webhook Service's EndpointSlices and the manager pods, with
// their addresses and states: what a refused webhook call needs to be explained.
func dumpWebhookEndpoints() {
	eps, err := webhookSlices()
	if err != nil {
		fmt.Fprintf(GinkgoWriter, "listing the EndpointSlices of %s: %v\n", webhookService, err)
	}
	fmt.Fprintf(GinkgoWriter, "---- EndpointSlices of %s ----\n", webhookService)
	for _, s := range eps.Items {
		for _, e := range s.Endpoints {
			fmt.Fprintf(GinkgoWriter, "%s rv=%s: %v ready=%v serving=%v terminating=%v pod=%v\n", s.Name, s.ResourceVersion,
				e.Addresses, ptr.Deref(e.Conditions.Ready, true), ptr.Deref(e.Conditions.Serving, true),
				ptr.Deref(e.Conditions.Terminating, false), e.TargetRef)
		}
	}
	var pods corev1.PodList
	if err := k8sClient.List(ctx, &pods, client.InNamespace(managerNamespace), managerLabels); err != nil {
		fmt.Fprintf(GinkgoWriter, "listing the manager pods: %v\n", err)
	}
	fmt.Fprintf(GinkgoWriter, "---- manager pods ----\n")
	for _, p := range pods.Items {
		fmt.Fprintf(GinkgoWriter, "%s ip=%s phase=%s deleting=%v conditions=%v\n", p.Name, p.Status.PodIP, p.Status.Phase,
			p.DeletionTimestamp != nil, p.Status.Conditions)
	}
}

// caBundles checks that every webhook of both configurations carries the CA of the certificate
// Secret the manager's rotator maintains.
func caBundles() error {
	s := &corev1.Secret{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: managerNamespace, Name: certSecret}, s); err != nil {
		return err
	}
	ca := s.Data["ca.crt"]
	for _, k := range []string{"ca.crt", "ca.key", "tls.crt", "tls.key"} {
		if len(s.Data[k]) == 0 {
			return fmt.Errorf("secret %s has no %s yet", certSecret, k)
		}
	}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Name: validatingConfig}, v); err != nil {
		return err
	}
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Name: mutatingConfig}, m); err != nil {
		return err
	}
	check := func(kind, name string, cc admissionregistrationv1.WebhookClientConfig) error {
		switch {
		case cc.Service == nil:
			return fmt.Errorf("%s webhook %s is not called through a Service", kind, name)
		case !bundleStartsWith(cc.CABundle, ca):
			return fmt.Errorf("%s webhook %s: caBundle (%d bytes) does not start with the CA in secret %s", kind, name, len(cc.CABundle), certSecret)
		}
		return nil
	}
	if len(v.Webhooks) == 0 || len(m.Webhooks) == 0 {
		return fmt.Errorf("webhook configurations without webhooks: %d validating, %d mutating", len(v.Webhooks), len(m.Webhooks))
	}
	for _, w := range v.Webhooks {
		if err := check("validating", w.Name, w.ClientConfig); err != nil {
			return err
		}
	}
	for _, w := range m.Webhooks {
		if err := check("mutating", w.Name, w.ClientConfig); err != nil {
			return err
		}
	}
	return nil
}

// bundleStartsWith: the first certificate of a caBundle is the CA (PEM) given. The manager keeps a
// superseded CA after it for a while after a rotation, so the replicas' previous certificates verify.
func bundleStartsWith(bundle, ca []byte) bool {
	b, _ := pem.Decode(bundle)
	c, _ := pem.Decode(ca)
	return b != nil && c != nil && string(b.Bytes) == string(c.Bytes)
}

// probePod is a pod on this node asking for lockName.
func probePod(ns, lockName string) *corev1.Pod {
	p := util.Pod(ns, "gate-probe", lockName)
	forThisNode(&p.Spec)
	return p
}

// fenceAnswers creates (dry run) a ConfigMap fenced by a lock that does not exist: the fence
// refuses it, and the refusal must come from the fence, not from a failure to call it.
func fenceAnswers(ns string) error {
	err := k8sClient.Create(ctx, util.FencedConfigMap(ns, "fence-probe", "no-such-lock", 1, "0"), client.DryRunAll)
	if err == nil {
		return fmt.Errorf("the fence admitted a write fenced by a lock that does not exist")
	}
	if !answeredByFence(err) {
		return fmt.Errorf("the fence did not answer: %w", err)
	}
	return nil
}

// answeredByFence: the API server got a refusal from the fence webhook itself.
func answeredByFence(err error) bool {
	return err != nil && strings.Contains(err.Error(), `admission webhook "fence.locks.fencedlock.io" denied the request`)
}

func managerPods() []corev1.Pod {
	var pods corev1.PodList
	ExpectWithOffset(1, k8sClient.List(ctx, &pods, client.InNamespace(managerNamespace), managerLabels)).To(Succeed())
	return pods.Items
}

// leader returns the identity holding the manager's leader-election Lease (pod name, "_", a UUID).
func leader() string {
	l, err := clientset.CoordinationV1().Leases(managerNamespace).Get(ctx, leaderLease, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return ptr.Deref(l.Spec.HolderIdentity, "")
}

// podOf names the pod of a leader-election identity.
func podOf(identity string) string {
	name, _, _ := strings.Cut(identity, "_")
	return name
}

// killManager SIGKILLs the manager process of a pod, as an OOM kill or a crash would: no
// leader-election Lease released, no connection closed cleanly. The kubelet restarts it.
func killManager(podName string) error {
	pod := &corev1.Pod{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: managerNamespace, Name: podName}, pod); err != nil {
		return err
	}
	if len(pod.Status.ContainerStatuses) == 0 || pod.Status.ContainerStatuses[0].State.Running == nil {
		return fmt.Errorf("pod %s: the manager is not running", podName)
	}
	id, ok := strings.CutPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://")
	if !ok {
		return fmt.Errorf("pod %s: container %q", podName, pod.Status.ContainerStatuses[0].ContainerID)
	}
	out, err := exec.Command("ctr", "-a", containerdSocket, "-n", "k8s.io", "tasks", "kill", "-s", "SIGKILL", id).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ctr tasks kill %s: %w: %s", id, err, out)
	}
	return nil
}

// killLeader kills the replica holding leadership. While no live pod does (the Lease still names
// a replica that is gone), it kills a running one.
func killLeader() error {
	id := leader()
	pods := managerPods()
	for _, p := range pods {
		if p.Name == podOf(id) && p.DeletionTimestamp == nil {
			return killManager(p.Name)
		}
	}
	for _, p := range pods {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			return killManager(p.Name)
		}
	}
	return fmt.Errorf("no running manager pod (leader %q)", id)
}

// updateManager changes the Deployment (retrying conflicts and a restarting API server) and
// waits for the rollout.
func updateManager(mutate func(*appsv1.Deployment)) {
	EventuallyWithOffset(1, func() error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			d := &appsv1.Deployment{}
			if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: managerNamespace, Name: managerDeployment}, d); err != nil {
				return err
			}
			before := d.DeepCopy()
			mutate(d)
			if equality.Semantic.DeepEqual(before.Spec, d.Spec) {
				return nil
			}
			return k8sClient.Update(ctx, d)
		})
	}, time.Minute, time.Second).Should(Succeed(), "updating the manager Deployment")
	waitManagerRollout()
}

// setFailpoint rolls the replicas out with the crash-after-pod-grant failpoint armed at
// probability p (0: disarmed).
func setFailpoint(p float64) {
	updateManager(func(d *appsv1.Deployment) {
		c := &d.Spec.Template.Spec.Containers[0]
		c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == failpointEnv })
		if p > 0 {
			c.Env = append(c.Env, corev1.EnvVar{Name: failpointEnv, Value: strconv.FormatFloat(p, 'g', -1, 64)})
		}
	})
}

// stopManager scales the manager to 0 and waits until no replica is left, so nothing serves the
// webhooks; startManager brings the install's 2 back and waits for them. The replicas stop as in
// a drain (SIGTERM): the leader releases its Lease, so the next one leads as soon as it starts.
func stopManager() {
	EventuallyWithOffset(1, func() error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			d := &appsv1.Deployment{}
			if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: managerNamespace, Name: managerDeployment}, d); err != nil {
				return err
			}
			d.Spec.Replicas = ptr.To[int32](0)
			return k8sClient.Update(ctx, d)
		})
	}, time.Minute, time.Second).Should(Succeed())
	EventuallyWithOffset(1, func() []string { return podNames() }, time.Minute, 100*time.Millisecond).Should(BeEmpty(),
		"manager pods still there after scaling to 0")
}

func startManager() {
	updateManager(func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](2) })
}

func dumpManagerLogs() {
	cmd := exec.Command("kubectl", "-n", managerNamespace, "logs", "-l", "control-plane=controller-manager",
		"--prefix", "--tail=60", "--all-containers", "--request-timeout=10s")
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	fmt.Fprintf(GinkgoWriter, "---- manager logs (err %v) ----\n%s\n", err, out)
}
