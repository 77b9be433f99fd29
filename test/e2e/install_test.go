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
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/test/util"
)

var _ = Describe("The install (config/default) in the cluster", func() {
	It("runs two replicas of the image built here, behind the webhook Service, with cert-controller's CA in both webhook configurations", func() {
		// Specs run in random order: this one checks the install once the one before has settled.
		waitManagerRollout()
		waitWebhooksServing()
		d := &appsv1.Deployment{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: managerNamespace, Name: managerDeployment}, d)).To(Succeed())
		Expect(d.Spec.Replicas).To(HaveValue(Equal(int32(2))))
		Expect(d.Status.ReadyReplicas).To(Equal(int32(2)))
		Expect(d.Spec.Template.Spec.HostNetwork).To(BeFalse(), "the manager must run on the pod network, as on any cluster")
		Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(managerImage))
		Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--leader-elect"))

		By("both replicas are endpoints of the webhook Service")
		Expect(webhookEndpoints()).To(HaveLen(2))
		Expect(webhookEndpoints()).To(ConsistOf(liveManagerIPs()))

		By("the serving certificate is for the Service's DNS name and signed by the CA in both configurations")
		Expect(caBundles()).To(Succeed())
		s := &corev1.Secret{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: managerNamespace, Name: certSecret}, s)).To(Succeed())
		pool := x509.NewCertPool()
		Expect(pool.AppendCertsFromPEM(s.Data["ca.crt"])).To(BeTrue())
		block, _ := pem.Decode(s.Data["tls.crt"])
		Expect(block).NotTo(BeNil())
		cert, err := x509.ParseCertificate(block.Bytes)
		Expect(err).NotTo(HaveOccurred())
		_, err = cert.Verify(x509.VerifyOptions{DNSName: webhookService + "." + managerNamespace + ".svc", Roots: pool,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		Expect(err).NotTo(HaveOccurred())

		By("the API server gets answers from both webhooks through the Service")
		pod := probePod("default", "gate-probe")
		Expect(k8sClient.Create(ctx, pod, client.DryRunAll)).To(Succeed())
		Expect(pod.Spec.SchedulingGates).To(ContainElement(corev1.PodSchedulingGate{Name: locksv1alpha1.SchedulingGate}))
		Expect(fenceAnswers("default")).To(Succeed())

		By("one replica leads")
		waitLeader()
	})
})

func podNames() []string {
	pods := managerPods()
	names := make([]string, 0, len(pods))
	for _, p := range pods {
		names = append(names, p.Name)
	}
	return names
}

// probeResult is one write of the fence prober.
type probeResult struct {
	at    time.Time
	stale bool // presented a superseded token
	err   error
}

// fenceProber writes a fenced ConfigMap every interval, alternately with the lock's current token
// (must be admitted) and a superseded one (must be refused), until stopped.
func fenceProber(ns string, current, stale uint64, interval time.Duration) (stop func() []probeResult) {
	pctx, cancelP := context.WithCancel(ctx)
	var mu sync.Mutex
	var results []probeResult
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		for i := 0; pctx.Err() == nil; i++ {
			tok, isStale := current, i%2 == 1
			if isStale {
				tok = stale
			}
			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}},"data":{"n":%q}}`,
				locksv1alpha1.TokenAnnotation, strconv.FormatUint(tok, 10), strconv.Itoa(i))
			wctx, cancelW := context.WithTimeout(pctx, 10*time.Second)
			err := k8sClient.Patch(wctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"}},
				client.RawPatch(types.MergePatchType, []byte(patch)))
			cancelW()
			if pctx.Err() != nil {
				return
			}
			mu.Lock()
			results = append(results, probeResult{at: time.Now(), stale: isStale, err: err})
			mu.Unlock()
			time.Sleep(interval)
		}
	}()
	return func() []probeResult {
		cancelP()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(results)
	}
}

var _ = Describe("The manager's two replicas", func() {
	BeforeEach(func() {
		// Whatever a spec killed, the next one starts with both replicas serving.
		DeferCleanup(func() {
			waitManagerRollout()
			waitWebhooksServing()
			waitLeader()
		})
	})

	It("hand leadership over when the leader is killed mid-run, while the other replica keeps answering for the fence", func() {
		ns := kit.NewNamespace()
		By("a fenced ConfigMap under a held lock, and a superseded token")
		kit.NewLock(ns, "probe", util.LeaseSeconds(120))
		l := kit.Locker(ns, "probe", "e2e-prober")
		actx, cancelA := context.WithTimeout(ctx, time.Minute)
		defer cancelA()
		old, err := l.Acquire(actx)
		Expect(err).NotTo(HaveOccurred())
		Expect(old.Release(ctx)).To(Succeed())
		cur, err := l.Acquire(actx)
		Expect(err).NotTo(HaveOccurred())
		defer func() { _ = cur.Release(ctx) }()
		Expect(k8sClient.Create(ctx, util.FencedConfigMap(ns, "probe", "probe", cur.Token(), "0"))).To(Succeed())

		By("the sample Job's pods taking the lock in turn")
		job := installSamples(ns, 15)
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			granted := 0
			for _, p := range jobPods(ns, job.Name) {
				if p.Annotations[locksv1alpha1.TokenAnnotation] != "" {
					granted++
				}
			}
			g.Expect(granted).To(BeNumerically(">=", 1))
		}, 2*time.Minute, 100*time.Millisecond).Should(Succeed(), "no pod of the Job was granted the lock")

		stopProber := fenceProber(ns, uint64(cur.Token()), uint64(old.Token()), 50*time.Millisecond)
		time.Sleep(time.Second) // a baseline before the kill

		By("killing the leader (SIGKILL: its leader-election Lease is not released)")
		before := leader()
		Expect(before).NotTo(BeEmpty())
		Expect(killLeader()).To(Succeed())
		killedAt := time.Now()
		var after string
		Eventually(func() bool {
			after = leader()
			return after != "" && after != before
		}, time.Minute, 50*time.Millisecond).Should(BeTrue(), "no new leader within a minute (was %s)", before)
		leaderGap := time.Since(killedAt)

		By("the Job still finishes, one pod at a time, with rising tokens")
		Eventually(func(g Gomega) {
			expectJobSucceeded(g, job, 3)
		}, 3*time.Minute, 200*time.Millisecond).Should(Succeed(), func() string { return jobState(job) })
		results := stopProber()
		grants := make([]grant, 0, 3)
		for _, p := range jobPods(ns, job.Name) {
			grants = append(grants, parseGrant(ns, p.Name))
		}
		slices.SortFunc(grants, func(a, b grant) int { return a.grantedAt.Compare(b.grantedAt) })
		var slowest time.Duration
		for i := 1; i < len(grants); i++ {
			Expect(grants[i].token).To(BeNumerically(">", grants[i-1].token), "tokens in grant order: %+v", grants)
			Expect(grants[i].grantedAt.After(grants[i-1].acceptedAt)).To(BeTrue(), "grants overlap: %+v", grants)
			slowest = max(slowest, grants[i].grantedAt.Sub(grants[i-1].acceptedAt))
		}
		// The pod that was waiting at the kill is granted only by the next leader.
		AddReportEntry("slowest Job handover across the kill (previous write accepted -> next pod running)", slowest.String())

		By("the fence: never a superseded token admitted; the current one refused only while the dead replica was still an endpoint")
		var okDuringGap, current, failed int
		var firstFail, lastFail time.Time
		for _, r := range results {
			if r.stale {
				Expect(r.err).To(HaveOccurred(), "a write with superseded token %d was admitted at %s", old.Token(), r.at.Format(time.StampMilli))
				continue
			}
			current++
			if r.err == nil {
				if r.at.After(killedAt) && r.at.Before(killedAt.Add(leaderGap)) {
					okDuringGap++
				}
				continue
			}
			Expect(r.at.After(killedAt)).To(BeTrue(), "a write with the current token failed before the kill: %v", r.err)
			failed++
			if firstFail.IsZero() {
				firstFail = r.at
			}
			lastFail = r.at
		}
		Expect(okDuringGap).To(BeNumerically(">", 0), "no write was admitted while there was no leader: the fence must not depend on leadership")
		outage := time.Duration(0)
		if failed > 0 {
			outage = lastFail.Sub(killedAt)
			fmt.Fprintf(GinkgoWriter, "fence: %d of %d writes with the current token failed, from +%s to +%s after the kill\n",
				failed, current, firstFail.Sub(killedAt).Round(time.Millisecond), outage.Round(time.Millisecond))
		}
		Expect(outage).To(BeNumerically("<", 10*time.Second), "writes with the current token kept failing long after the kill")

		AddReportEntry("leader SIGKILLed -> new leader (its Lease expires: --leader-elect-lease-duration, 8 s in test/e2e/overlay)", leaderGap.Round(time.Millisecond).String())
		AddReportEntry("fence during the leader gap", fmt.Sprintf("%d writes with the current token admitted; %d of %d failed (dead endpoint), the last +%s after the kill",
			okDuringGap, failed, current, outage.Round(time.Millisecond)))
		fmt.Fprintf(GinkgoWriter, "leader %s killed; %s leads after %s\n", before, after, leaderGap.Round(time.Millisecond))
	})

	It("hand leadership over at once when the leader pod is deleted (a drain, a rollout)", func() {
		before := leader()
		Expect(before).NotTo(BeEmpty())
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: managerNamespace, Name: podOf(before)}}
		deletedAt := time.Now()
		Expect(k8sClient.Delete(ctx, pod)).To(Succeed())
		Eventually(func() bool {
			after := leader()
			return after != "" && after != before
		}, time.Minute, 50*time.Millisecond).Should(BeTrue(), "no new leader within a minute (was %s)", before)
		gap := time.Since(deletedAt)
		AddReportEntry("leader pod deleted -> new leader (the Lease is released on SIGTERM)", gap.Round(time.Millisecond).String())
		// A Lease that was not released would take its 15 s duration to expire.
		Expect(gap).To(BeNumerically("<", 10*time.Second), "the leader did not release its Lease when it was stopped")
		Expect(fenceAnswers("default")).To(Succeed())
	})
})
