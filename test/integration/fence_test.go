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
	"fmt"
	"os/exec"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/onsi/gomega/gexec"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/token"
	"github.com/fencedlock/fencedlock/test/util"
)

// writeCM updates a ConfigMap's data and token annotation without a resourceVersion precondition:
// a blind write, which only the fence can stop.
func writeCM(ns, name string, tok string, data string) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}},"data":{"balance":%q}}`, locksv1alpha1.TokenAnnotation, tok, data)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	return k8sClient.Patch(ctx, cm, client.RawPatch("application/merge-patch+json", []byte(patch)))
}

func balance(ns string) string {
	cm := &corev1.ConfigMap{}
	ExpectWithOffset(1, k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ledger"}, cm)).To(Succeed())
	return cm.Data["balance"]
}

func deniedWith(err error, want string) {
	ExpectWithOffset(1, err).To(HaveOccurred())
	ExpectWithOffset(1, err.Error()).To(ContainSubstring(`admission webhook "fence.locks.fencedlock.io" denied the request`))
	ExpectWithOffset(1, err.Error()).To(ContainSubstring(want))
}

func fenceCounter(decision, reason string) float64 {
	return counterValue("fencedlock_fence_decisions_total", map[string]string{"decision": decision, "reason": reason})
}

func counterValue(name string, labels map[string]string) float64 {
	families, err := crmetrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metric:
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue metric
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

var _ = Describe("The fence", func() {
	var (
		ns   string
		a, b token.Token
	)
	// Two grants of lock "settlement": a (stale) then b (current).
	BeforeEach(func() {
		ns = kit.NewNamespace()
		kit.NewLock(ns, "settlement", util.LeaseSeconds(15))
		ga, err := kit.Locker(ns, "settlement", "worker-a").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		a = ga.Token()
		Expect(ga.Release(ctx)).To(Succeed())
		gb, err := kit.Locker(ns, "settlement", "worker-b").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		b = gb.Token()
	})

	It("refuses a stale write to a ConfigMap and keeps the current holder's data", func() {
		Expect(k8sClient.Create(ctx, util.FencedConfigMap(ns, "ledger", "settlement", b, "100"))).To(Succeed())
		Expect(writeCM(ns, "ledger", b.String(), "120")).To(Succeed())

		deniedWith(writeCM(ns, "ledger", a.String(), "0"), fmt.Sprintf(
			"stale fencing token %s for lock %s/settlement: the lock was re-acquired with token %s; re-acquire and retry", a, ns, b))
		Expect(balance(ns)).To(Equal("120"))

		By("a write that keeps the stored annotation is judged by it")
		Expect(writeCM(ns, "ledger", b.String(), "130")).To(Succeed())
		Expect(balance(ns)).To(Equal("130"))
	})

	It("refuses a stale create", func() {
		deniedWith(k8sClient.Create(ctx, util.FencedConfigMap(ns, "new", "settlement", a, "1")), "stale fencing token")
	})

	It("fences a custom resource without any configuration for its kind", func() {
		sb := &unstructured.Unstructured{}
		sb.SetAPIVersion("example.fencedlock.io/v1")
		sb.SetKind("SettlementBatch")
		sb.SetNamespace(ns)
		sb.SetName("batch-1")
		sb.SetLabels(map[string]string{locksv1alpha1.FencedByLabel: "settlement"})
		sb.SetAnnotations(map[string]string{locksv1alpha1.TokenAnnotation: b.String()})
		Expect(unstructured.SetNestedField(sb.Object, "open", "spec", "state")).To(Succeed())
		// The API server's token-record policy learns a new CRD's schema within ~5 s (OpenAPI
		// polling) and answers 503 until then: a retryable refusal, as clients treat 503.
		Eventually(func() error {
			err := k8sClient.Create(ctx, sb.DeepCopy())
			if err != nil && !apierrors.IsServiceUnavailable(err) {
				StopTrying("refused for good").Wrap(err).Now()
			}
			return err
		}, 15*time.Second, 200*time.Millisecond).Should(Succeed())
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(sb), sb)).To(Succeed())

		stale := sb.DeepCopy()
		stale.SetAnnotations(map[string]string{locksv1alpha1.TokenAnnotation: a.String()})
		Expect(unstructured.SetNestedField(stale.Object, "settled-by-a", "spec", "state")).To(Succeed())
		deniedWith(k8sClient.Update(ctx, stale), "stale fencing token "+a.String())

		By("the status subresource is not fenced: it cannot carry a token (documented)")
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(sb), sb)).To(Succeed())
		Expect(unstructured.SetNestedField(sb.Object, "observed", "status", "phase")).To(Succeed())
		Expect(k8sClient.Status().Update(ctx, sb)).To(Succeed())
	})

	It("refuses forged tokens, malformed tokens and missing tokens", func() {
		Expect(k8sClient.Create(ctx, util.FencedConfigMap(ns, "ledger", "settlement", b, "100"))).To(Succeed())
		deniedWith(writeCM(ns, "ledger", (b+1000).String(), "x"), "was never issued")
		deniedWith(writeCM(ns, "ledger", " "+b.String(), "x"), "malformed fencing token")
		deniedWith(writeCM(ns, "ledger", "-1", "x"), "malformed fencing token")
		noToken := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bare",
			Labels: map[string]string{locksv1alpha1.FencedByLabel: "settlement"}}}
		deniedWith(k8sClient.Create(ctx, noToken), "must present annotation fencedlock.io/token")
		Expect(balance(ns)).To(Equal("100"))
	})

	It("needs a current token to remove the fence label", func() {
		Expect(k8sClient.Create(ctx, util.FencedConfigMap(ns, "ledger", "settlement", b, "100"))).To(Succeed())
		unfence := func(tok token.Token) error {
			patch := fmt.Sprintf(`{"metadata":{"labels":{%q:null},"annotations":{%q:%q}}}`,
				locksv1alpha1.FencedByLabel, locksv1alpha1.TokenAnnotation, tok)
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ledger"}}
			return k8sClient.Patch(ctx, cm, client.RawPatch("application/merge-patch+json", []byte(patch)))
		}
		deniedWith(unfence(a), "stale fencing token")
		Expect(unfence(b)).To(Succeed())
		Expect(writeCM(ns, "ledger", "anything", "free for all")).To(Succeed(), "an unfenced object is not checked")
	})

	It("refuses a move to another lock in one write", func() {
		kit.NewLock(ns, "other", util.LeaseSeconds(15))
		Expect(k8sClient.Create(ctx, util.FencedConfigMap(ns, "ledger", "settlement", b, "100"))).To(Succeed())
		cm := &corev1.ConfigMap{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ledger"}, cm)).To(Succeed())
		cm.Labels[locksv1alpha1.FencedByLabel] = "other"
		deniedWith(k8sClient.Update(ctx, cm), "needs two writes")
	})

	It("lets only the current epoch delete", func() {
		Expect(k8sClient.Create(ctx, util.FencedConfigMap(ns, "old", "settlement", b, "1"))).To(Succeed())
		g, err := kit.Locker(ns, "settlement", "worker-b").Attach(ctx, b)
		Expect(err).NotTo(HaveOccurred())
		Expect(g.Release(ctx)).To(Succeed())
		c, err := kit.Locker(ns, "settlement", "worker-c").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())

		By("worker b lost the lock: it cannot delete what it wrote")
		deniedWith(k8sClient.Delete(ctx, util.FencedConfigMap(ns, "old", "settlement", b, "")), "was last written with token "+b.String())

		By("worker c stamps the object with its token, then deletes it with a resourceVersion precondition")
		Expect(writeCM(ns, "old", c.Token().String(), "closed")).To(Succeed())
		cm := &corev1.ConfigMap{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "old"}, cm)).To(Succeed())
		Expect(k8sClient.Delete(ctx, cm, client.Preconditions{ResourceVersion: &cm.ResourceVersion})).To(Succeed())
	})

	It("refuses writes for a lock that does not exist or a label that names no lock", func() {
		deniedWith(k8sClient.Create(ctx, util.FencedConfigMap(ns, "orphan", "no-such-lock", b, "1")),
			"which does not exist: create the FencedLock")
		deniedWith(k8sClient.Create(ctx, util.FencedConfigMap(ns, "bad", "Not_A_Lock", b, "1")), "does not name a FencedLock")
	})

	It("reads the Lease from its cache for Cached locks and live for Strict ones", func() {
		Expect(k8sClient.Create(ctx, util.FencedConfigMap(ns, "ledger", "settlement", b, "0"))).To(Succeed())
		strictBefore := counterValue("fencedlock_fence_live_reads_total", map[string]string{"why": "strict"})
		admittedBefore := fenceCounter("admitted", "Current")
		for i := range 5 {
			Expect(writeCM(ns, "ledger", b.String(), fmt.Sprint(i))).To(Succeed())
		}
		// At least these five: the counter is the process's, and the API server may call the
		// webhook again when it retries an update internally.
		Expect(fenceCounter("admitted", "Current") - admittedBefore).To(BeNumerically(">=", 5.0))
		Expect(counterValue("fencedlock_fence_live_reads_total", map[string]string{"why": "strict"})).To(Equal(strictBefore))

		setFence(ns, "settlement", `{"mode":"Strict"}`)
		Eventually(func() float64 {
			_ = writeCM(ns, "ledger", b.String(), "strict")
			return counterValue("fencedlock_fence_live_reads_total", map[string]string{"why": "strict"})
		}).Should(BeNumerically(">", strictBefore))
	})

	It("binds writes to the holder's principal when holderBinding is on", func() {
		setFence(ns, "settlement", `{"holderBinding":true}`)
		g, err := kit.Locker(ns, "settlement", "worker-b").Attach(ctx, b)
		Expect(err).NotTo(HaveOccurred())
		Expect(g.Release(ctx)).To(Succeed())
		alice, err := kit.Locker(ns, "settlement", "alice/laptop").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())

		Eventually(func() error {
			return as("alice").Create(ctx, util.FencedConfigMap(ns, "bound", "settlement", alice.Token(), "alice's"))
		}).Should(Succeed())
		deniedWith(as("mallory").Create(ctx, util.FencedConfigMap(ns, "stolen", "settlement", alice.Token(), "x")),
			"a token copied to another principal cannot be used")

		By("a pod holder must write with its own service-account token (pod-uid claim)")
		Expect(alice.Release(ctx)).To(Succeed())
		pod := kit.CreatePod(util.Pod(ns, "worker-0", "settlement"))
		var podToken token.Token
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
			var err error
			podToken, err = token.Parse(pod.Annotations[locksv1alpha1.TokenAnnotation])
			g.Expect(err).NotTo(HaveOccurred())
		}).Should(Succeed())
		asPod := func(uid string) client.Client {
			return impersonating(rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":default",
				Groups: []string{"system:masters"}, Extra: map[string][]string{"authentication.kubernetes.io/pod-uid": {uid}}})
		}
		Expect(asPod(string(pod.UID)).Create(ctx, util.FencedConfigMap(ns, "pods", "settlement", podToken, "pod's"))).To(Succeed())
		deniedWith(asPod("uid-other").Create(ctx, util.FencedConfigMap(ns, "pods2", "settlement", podToken, "x")),
			"requires writes by its holder pod/worker-0/")
	})

	It("fails closed while the webhook is not serving", func() {
		Expect(k8sClient.Create(ctx, util.FencedConfigMap(ns, "ledger", "settlement", b, "100"))).To(Succeed())
		stopManager()
		DeferCleanup(startManager)
		err := writeCM(ns, "ledger", b.String(), "unchecked")
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring(`failed calling webhook "fence.locks.fencedlock.io"`))
		Expect(balance(ns)).To(Equal("100"))

		By("unfenced objects are unaffected")
		Expect(k8sClient.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plain"}})).To(Succeed())
	})
})

var _ = Describe("The paused holder, with two OS processes", func() {
	var workerBin, kubeconfig string

	BeforeEach(func() {
		workerBin, kubeconfig = buildWithKubeconfig("github.com/fencedlock/fencedlock/cmd/ledger-worker", "worker")
	})

	It("refuses the paused holder's late write; the newer holder's data survives", func() {
		ns := kit.NewNamespace()
		kit.NewLock(ns, "settlement", util.LeaseSeconds(2))
		worker := func(id, work string) *gexec.Session {
			cmd := exec.Command(workerBin, "--kubeconfig", kubeconfig, "--namespace", ns, "--lock", "settlement",
				"--configmap", "ledger", "--identity", id, "--work", work, "--entry", "balance by "+id)
			s, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
			Expect(err).NotTo(HaveOccurred())
			return s
		}

		By("worker A acquires, then is frozen with SIGSTOP")
		procA := worker("worker-a", "8s")
		Eventually(procA.Out, 20*time.Second).Should(gbytes.Say(`acquired lock \S+ with token (\d+)`))
		Expect(procA.Command.Process.Signal(syscall.SIGSTOP)).To(Succeed())
		DeferCleanup(func() { _ = procA.Command.Process.Signal(syscall.SIGCONT); procA.Kill() })
		tokA := kit.LeaseState(ns, "settlement").Token.String()

		By("its lease expires and the controller revokes it")
		Eventually(func() string {
			st := kit.LeaseState(ns, "settlement")
			return st.Holder
		}, 10*time.Second, 20*time.Millisecond).Should(BeEmpty())

		By("worker B acquires a higher token and writes")
		procB := worker("worker-b", "0s")
		Eventually(procB, 20*time.Second).Should(gexec.Exit(0))
		Expect(string(procB.Out.Contents())).To(ContainSubstring("write accepted"))
		cm := &corev1.ConfigMap{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ledger"}, cm)).To(Succeed())
		tokB := cm.Annotations[locksv1alpha1.RecordedTokenAnnotation]
		Expect(cm.Data["writer"]).To(Equal("worker-b"))

		By("worker A resumes and writes with its old token: refused")
		Expect(procA.Command.Process.Signal(syscall.SIGCONT)).To(Succeed())
		Eventually(procA, 20*time.Second).Should(gexec.Exit(3))
		out := string(procA.Out.Contents())
		Expect(out).To(ContainSubstring(fmt.Sprintf(
			"stale fencing token %s for lock %s/settlement: the lock was re-acquired with token %s", tokA, ns, tokB)))
		Expect(out).To(ContainSubstring("I lost the lock"))

		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ledger"}, cm)).To(Succeed())
		Expect(cm.Data["entry"]).To(Equal("balance by worker-b"))
		Expect(cm.Annotations[locksv1alpha1.RecordedTokenAnnotation]).To(Equal(tokB))
	})
})

// setFence merge-patches spec.fence of a lock (a patch: the controller writes its status meanwhile).
func setFence(ns, name, fenceJSON string) {
	fl := &locksv1alpha1.FencedLock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"fence":`+fenceJSON+`}}`))
	ExpectWithOffset(1, k8sClient.Patch(ctx, fl, patch)).To(Succeed())
}

var _ = Describe("The holders of a semaphore's permits, as OS processes", func() {
	It("write one ConfigMap that does not exist yet at the same moment, and every write lands", func() {
		workerBin, kubeconfig := buildWithKubeconfig("github.com/fencedlock/fencedlock/cmd/ledger-worker", "worker")
		ns := kit.NewNamespace()
		const permits = 4
		kit.NewLock(ns, "reindex", util.Permits(permits), util.LeaseSeconds(60))
		tokens := make([]string, permits)
		for i := range tokens {
			g, err := kit.Locker(ns, "reindex", fmt.Sprintf("holder-%d", i)).TryAcquire(ctx)
			Expect(err).NotTo(HaveOccurred())
			tokens[i] = g.Token().String()
		}

		// The sample Job's pods start their writes within milliseconds of each other when they are
		// granted together: a create that lost to another holder's must not fail the write. A few
		// rounds, each on a ConfigMap of its own, make the collision likely.
		for round := range 5 {
			name := fmt.Sprintf("reindex-%d", round)
			workers := make([]*gexec.Session, permits)
			for i := range workers {
				cmd := exec.Command(workerBin, "--kubeconfig", kubeconfig, "--namespace", ns, "--lock", "reindex",
					"--configmap", name, "--identity", fmt.Sprintf("holder-%d", i), "--token-from-env", "FENCING_TOKEN")
				cmd.Env = append(cmd.Environ(), "FENCING_TOKEN="+tokens[i])
				s, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
				Expect(err).NotTo(HaveOccurred())
				workers[i] = s
			}
			for i, s := range workers {
				Eventually(s, 30*time.Second).Should(gexec.Exit(0), "holder-%d, round %d:\n%s", i, round, s.Out.Contents())
			}
			cm := &corev1.ConfigMap{}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cm)).To(Succeed())
			Expect(tokens).To(ContainElement(cm.Annotations[locksv1alpha1.RecordedTokenAnnotation]))
			Expect(cm.Data["token"]).To(Equal(cm.Annotations[locksv1alpha1.RecordedTokenAnnotation]), "the last write landed whole")
		}
	})
})
