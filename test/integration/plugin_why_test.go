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
	"os/exec"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/test/util"
)

// kubectl fencedlock why, built and run as a process against the real API server and manager.
var _ = Describe("kubectl fencedlock why", Ordered, func() {
	var bin, kubeconfig string

	BeforeAll(func() {
		bin, kubeconfig = buildWithKubeconfig("github.com/fencedlock/fencedlock/cmd/kubectl-fencedlock", "plugin-why")
	})
	why := func(ns string, pod ...string) string {
		args := append([]string{"--kubeconfig", kubeconfig, "why", "-n", ns}, pod...)
		s, err := gexec.Start(exec.Command(bin, args...), GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		Eventually(s, 30*time.Second).Should(gexec.Exit(0), string(s.Err.Contents()))
		return strings.TrimSpace(string(s.Out.Contents()))
	}

	It("shows a waiting pod's live position and holder, and a granted pod's token", func() {
		ns := kit.NewNamespace()
		kit.NewLock(ns, "jobs")
		library, err := kit.Locker(ns, "jobs", "library").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		kit.CreatePod(util.Pod(ns, "w1", "jobs"))
		Eventually(func() int32 { return kit.GetLock(ns, "jobs").Status.WaitingCount }).Should(Equal(int32(1)))
		kit.CreatePod(util.Pod(ns, "w2", "jobs"))
		Eventually(func() int32 { return kit.GetLock(ns, "jobs").Status.WaitingCount }).Should(Equal(int32(2)))

		out := why(ns, "w2")
		Expect(out).To(HavePrefix("Pod " + ns + "/w2: gated"))
		Expect(out).To(ContainSubstring("jobs: waiting at position 2 of 2; held by library (token " + library.Token().String() + ")"))
		Eventually(func() string { return why(ns, "w2") }).Should(ContainSubstring(
			"condition lock.fencedlock.io/jobs=False, Waiting: Waiting for FencedLock "+ns+"/jobs at position 2"),
			"the pod's condition, as the manager wrote it")

		Expect(library.Release(ctx)).To(Succeed())
		Eventually(func() bool { return locksv1alpha1.HasLockGate(kit.GetPod(ns, "w1")) }).Should(BeFalse())
		tok := kit.GetPod(ns, "w1").Annotations[locksv1alpha1.TokenAnnotation]
		Expect(why(ns, "w1")).To(ContainSubstring("jobs: holds it with token " + tok))
		Expect(why(ns, "w2")).To(ContainSubstring("jobs: waiting at position 1 of 1; held by pod/w1/"))

		By("every pod a selector matches, oldest first, as for a Job's pods")
		all := why(ns, "-l", "fencedlock.io/lock=jobs")
		Expect(strings.Index(all, "Pod "+ns+"/w1: ")).To(BeNumerically(">=", 0), all)
		Expect(strings.Index(all, "Pod "+ns+"/w2: gated")).To(BeNumerically(">", strings.Index(all, "Pod "+ns+"/w1: ")), all)
		s, err := gexec.Start(exec.Command(bin, "--kubeconfig", kubeconfig, "why", "-l", "job-name=none", "-n", ns), GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		Eventually(s, 30*time.Second).Should(gexec.Exit(1))
		Expect(string(s.Err.Contents())).To(ContainSubstring("no pods in namespace " + ns + " match -l job-name=none"))
	})

	It("says where a missing lock was looked for", func() {
		ns := kit.NewNamespace()
		kit.CreatePod(util.Pod(ns, "lost", "ops.ledger"))
		Expect(why(ns, "lost")).To(ContainSubstring("ops.ledger: FencedLock " + ns +
			"/ops.ledger does not exist: a pod's locks live in its own namespace (" + ns + ")"))
	})
})
