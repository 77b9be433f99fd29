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
	"bufio"
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/onsi/gomega/gexec"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/test/util"
)

// writeLine is one write the sample operator reports.
type writeLine struct {
	Replica string `json:"replica"`
	Op      string `json:"op"`
	Start   int64  `json:"start"`
	OK      bool   `json:"ok"`
	Error   string `json:"error"`
}

// pausedLeader is what a paused leader did after it resumed, and what the ledger shows.
type pausedLeader struct {
	// attempted and admitted count its writes started after it resumed, by operation.
	attempted, admitted map[string]int
	// fenced counts those the fence refused.
	fenced int
	// flippedBack counts the ledger's versions written by the paused leader after its successor's.
	flippedBack int
}

// pauseTheLeader runs two replicas of cmd/fenced-operator with --election=election, stops the
// leader with SIGSTOP until the other leads, lets the successor write, resumes the first, and
// waits until it stops.
func pauseTheLeader(bin, kubeconfig, election string, args ...string) pausedLeader {
	ns := kit.NewNamespace()
	if election == "fenced" {
		kit.NewLock(ns, "fenced-operator", util.LeaseSeconds(2), func(fl *locksv1alpha1.FencedLock) {
			fl.Spec.Fence.HolderBinding = true
		})
	}
	writers := util.LedgerWriters(ctx, clientset, ns)
	start := func(replica string) *gexec.Session {
		cmd := exec.Command(bin, append([]string{"--kubeconfig", kubeconfig, "--namespace", ns, "--replica", replica,
			"--election", election}, args...)...)
		s, err := gexec.Start(cmd, nil, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { s.Signal(syscall.SIGCONT); s.Kill().Wait() })
		return s
	}
	a := start("a")
	Eventually(a.Out, 30*time.Second).Should(gbytes.Say(`"event":"elected"`))
	b := start("b")
	time.Sleep(500 * time.Millisecond)
	a.Signal(syscall.SIGSTOP)
	Eventually(b.Out, 60*time.Second).Should(gbytes.Say(`"event":"elected"`))
	time.Sleep(500 * time.Millisecond)
	resumed := time.Now().UnixNano()
	a.Signal(syscall.SIGCONT)
	Eventually(a, 60*time.Second).Should(gexec.Exit(), "the paused leader notices and stops")
	b.Terminate().Wait(10 * time.Second)

	p := pausedLeader{attempted: map[string]int{}, admitted: map[string]int{}}
	sc := bufio.NewScanner(bytes.NewReader(a.Out.Contents()))
	for sc.Scan() {
		var l writeLine
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.Op == "" || l.Start < resumed {
			continue
		}
		if p.attempted[l.Op]++; p.attempted[l.Op] == 1 {
			GinkgoWriter.Printf("the paused leader's first %s after resuming: ok=%v %s\n", l.Op, l.OK, l.Error)
		}
		if l.OK {
			p.admitted[l.Op]++
		}
		if strings.Contains(l.Error, `admission webhook "fence.locks.fencedlock.io" denied the request`) {
			p.fenced++
		}
	}
	seenB := false
	for _, w := range writers() {
		seenB = seenB || w == "b"
		if seenB && w == "a" {
			p.flippedBack++
		}
	}
	GinkgoWriter.Printf("%s election, the paused leader after resuming: attempted %v, admitted %v, fenced %d; "+
		"ledger versions by it after its successor's: %d\n", election, p.attempted, p.admitted, p.fenced, p.flippedBack)
	return p
}

var _ = Describe("The sample operator, two replicas, the leader paused past its lease", Ordered, func() {
	var bin, kubeconfig string
	BeforeAll(func() {
		bin, kubeconfig = buildWithKubeconfig("github.com/fencedlock/fencedlock/cmd/fenced-operator", "fenced-operator")
	})

	It("with controller-runtime's stock leader election, the paused leader's writes land", func() {
		p := pauseTheLeader(bin, kubeconfig, "stock", "--lease-duration=4s", "--renew-deadline=3s", "--retry-period=1s")
		Expect(p.flippedBack).To(BeNumerically(">", 0), "the ledger went back to the deposed leader's writes")
		for _, op := range []string{"update", "patch", "status", "create", "delete"} {
			Expect(p.admitted[op]).To(BeNumerically(">", 0), "a stale %s landed", op)
		}
	})

	It("with fenced leadership, every write it attempts is refused and none lands", func() {
		// --linger: it writes on for 2s after its term, as a process that has not noticed yet would.
		p := pauseTheLeader(bin, kubeconfig, "fenced", "--linger=2s")
		Expect(p.admitted).To(BeEmpty())
		Expect(p.flippedBack).To(BeZero())
		// It tried each write: refused by the fence, or in the process once its keep-alive saw the
		// loss (which of the two comes first after SIGCONT is the scheduler's choice).
		for _, op := range []string{"update", "patch", "status", "create", "delete"} {
			Expect(p.attempted[op]).To(BeNumerically(">", 0), "it attempted a %s", op)
		}
	})
})
