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
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
)

// permitGrantLine is the sample worker's log line of a grant read from $FENCING_TOKEN.
var permitGrantLine = regexp.MustCompile(`\[(\d\d:\d\d:\d\d\.\d{3})\] (\S+)\s+was granted lock \S+: FENCING_TOKEN=(\d+)`)

var _ = Describe("A semaphore's Job on a real node", func() {
	It("runs five pods two at a time under a semaphore of two permits, each with its own higher token", func() {
		ns := kit.NewNamespace()
		job := installSample(ns, "locks_v1alpha1_semaphore.yaml", "job_reindex.yaml", 15)
		Expect(k8sClient.Create(ctx, job)).To(Succeed())

		// Watch the pods while the Job runs: never more than two ungated and unfinished at once,
		// and at some point two running while another waits gated (the third waits its turn).
		most, sawWaiting := 0, false
		Eventually(func(g Gomega) {
			running, gated := 0, 0
			for _, p := range jobPods(ns, "reindex") {
				switch {
				case p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed:
				case locksv1alpha1.HasLockGate(&p):
					gated++
				default:
					running++
				}
			}
			most = max(most, running)
			sawWaiting = sawWaiting || (running == 2 && gated > 0)
			g.Expect(running).To(BeNumerically("<=", 2), "more pods run than the semaphore has permits")
			expectJobSucceeded(g, job, 5)
		}, 4*time.Minute, 100*time.Millisecond).Should(Succeed(), func() string { return jobState(job) })
		Expect(most).To(Equal(2), "two pods ran at once")
		Expect(sawWaiting).To(BeTrue(), "a pod waited gated while both permits were held")

		type permitGrant struct {
			pod    string
			token  uint64
			permit string
			at     time.Time
		}
		pods := jobPods(ns, "reindex")
		grants := make([]permitGrant, 0, len(pods))
		for _, p := range pods {
			out := logs(ns, p.Name)
			m := permitGrantLine.FindStringSubmatch(out)
			Expect(m).NotTo(BeNil(), "pod %s logs:\n%s", p.Name, out)
			tok, _ := strconv.ParseUint(m[3], 10, 64)
			Expect(p.Annotations[locksv1alpha1.TokenAnnotation]).To(Equal(m[3]), "the token the pod read is its grant's")
			permit := p.Annotations[locksv1alpha1.PodPermitAnnotation]
			Expect(permit).To(BeElementOf("1", "2"))
			grants = append(grants, permitGrant{pod: p.Name, token: tok, permit: permit, at: clock(m[1])})
		}
		slices.SortFunc(grants, func(a, b permitGrant) int { return a.at.Compare(b.at) })
		for i := 1; i < len(grants); i++ {
			Expect(grants[i].token).NotTo(Equal(grants[i-1].token), "every permit grant has its own token: %+v", grants)
		}
		cm := &corev1.ConfigMap{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "reindex"}, cm)).To(Succeed())
		Expect(cm.Data["entry"]).To(MatchRegexp(`reindexed by \S+ with permit [12]`))
		fmt.Fprintf(GinkgoWriter, "semaphore grants: %+v\n", grants)
	})
})
