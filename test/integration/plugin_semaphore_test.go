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
	"path/filepath"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/onsi/gomega/gexec"

	"github.com/fencedlock/fencedlock/pkg/lock"
	"github.com/fencedlock/fencedlock/pkg/token"
	"github.com/fencedlock/fencedlock/test/util"
)

// The kubectl plugin on a semaphore, with Go clients on the same permits and queue.
var _ = Describe("kubectl fencedlock on a semaphore", Ordered, func() {
	var bin, kubeconfig, ns string

	BeforeAll(func() {
		bin, kubeconfig = buildWithKubeconfig("github.com/fencedlock/fencedlock/cmd/kubectl-fencedlock", "plugin-semaphore")
		ns = kit.NewNamespace()
		kit.NewLock(ns, "pool", util.Permits(2), util.LeaseSeconds(15))
	})

	plugin := func(args ...string) *gexec.Session {
		s, err := gexec.Start(exec.Command(bin, append([]string{"--kubeconfig", kubeconfig, "-n", ns}, args...)...),
			GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		return s
	}
	runOK := func(args ...string) (stdout, stderr string) {
		s := plugin(args...)
		Eventually(s, 30*time.Second).Should(gexec.Exit(0), string(s.Err.Contents()))
		return strings.TrimSpace(string(s.Out.Contents())), string(s.Err.Contents())
	}
	tokenOf := func(s string) token.Token {
		t, err := token.Parse(s)
		Expect(err).NotTo(HaveOccurred(), "%q", s)
		return t
	}

	It("runs a command on a permit with $FENCING_PERMIT; acquire prints the permit; get shows every permit", func() {
		h1, err := kit.Locker(ns, "pool", "h1").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())

		out, errOut := runOK("run", "pool", "--identity", "runner", "--", "sh", "-c", `echo "$FENCING_PERMIT $FENCING_TOKEN"`)
		f := strings.Fields(out)
		Expect(f).To(HaveLen(2), out)
		Expect(f[0]).To(Equal("2"), "h1 holds permit 1")
		Expect(tokenOf(f[1])).To(BeNumerically(">", h1.Token()))
		Expect(errOut).To(ContainSubstring("acquired pool with token " + f[1] + ", permit 2 of 2"))

		tok, errOut := runOK("acquire", "pool", "--identity", "shell", "--no-wait")
		Expect(tokenOf(tok)).To(BeNumerically(">", tokenOf(f[1])), "stdout is the token alone")
		Expect(errOut).To(ContainSubstring("with token " + tok + ", permit 2 of 2"))

		table, _ := runOK("get", "pool")
		Expect(table).To(MatchRegexp(`pool\s+2/2\s+` + tok + `\s`))
		Expect(table).To(MatchRegexp(`permit 1\s+h1\s+` + h1.Token().String() + `\s`))
		Expect(table).To(MatchRegexp(`permit 2\s+shell\s+` + tok + `\s`))

		// Issue 46, point 7: kubectl get flock showed a blank HOLDER for a semaphore, and a
		// RENEWED column that the status refreshes only once per --status-renewal-interval.
		assets, err := util.Assets()
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			out, err := exec.Command(filepath.Join(assets, "kubectl"), "--kubeconfig", kubeconfig, "-n", ns,
				"get", "flock", "pool").CombinedOutput()
			g.Expect(err).NotTo(HaveOccurred(), string(out))
			g.Expect(string(out)).To(MatchRegexp(`(?m)^NAME\s+HELD\s+HOLDER\s+TOKEN\s+ACQUIRED\s+WAITING\s+AGE$`))
			g.Expect(string(out)).To(MatchRegexp(`(?m)^pool\s+2/2\s+h1, shell\s+` + tok + `\s`))
		}, 30*time.Second).Should(Succeed())

		s := plugin("acquire", "pool", "--identity", "other", "--no-wait")
		Eventually(s, 30*time.Second).Should(gexec.Exit(124))
		Expect(string(s.Err.Contents())).To(ContainSubstring(`all 2 permits are held (by "h1", "shell"; last token ` + tok))

		runOK("release", "pool", "--identity", "shell", "--fencing-token", tok)
		Expect(h1.Release(ctx)).To(Succeed())
		table, _ = runOK("get", "pool")
		Expect(table).To(MatchRegexp(`pool\s+0/2\s+` + tok + `\s`))
		Expect(table).NotTo(ContainSubstring("permit 1"))
	})

	It("queues a CLI waiter with Go clients in one FIFO queue: each release hands its permit to the next", func() {
		h1, err := kit.Locker(ns, "pool", "h1").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		h2, err := kit.Locker(ns, "pool", "h2").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())

		cli := plugin("run", "pool", "--identity", "cli", "--", "sh", "-c", `echo "$FENCING_PERMIT $FENCING_TOKEN"; sleep 2`)
		Eventually(func() []string { return waiterIDs(ns, "pool") }, 10*time.Second, 20*time.Millisecond).
			Should(Equal([]string{"cli"}))
		Expect(string(cli.Err.Contents())).To(ContainSubstring("waiting for pool: all 2 permits held: permit 1 \"h1\""))
		gotGo, _ := acquireAsync(ctx, kit.Locker(ns, "pool", "go-after-cli"))
		Eventually(func() []string { return waiterIDs(ns, "pool") }, 10*time.Second, 20*time.Millisecond).
			Should(Equal([]string{"cli", "go-after-cli"}))

		By("h2's release serves the CLI, the head, on permit 2")
		Expect(h2.Release(ctx)).To(Succeed())
		Eventually(cli.Out, 10*time.Second).Should(gbytes.Say(`2 \d+\n`))
		cliTok := tokenOf(regexp.MustCompile(`2 (\d+)`).FindStringSubmatch(string(cli.Out.Contents()))[1])
		Expect(cliTok).To(BeNumerically(">", h2.Token()))
		Consistently(gotGo, 500*time.Millisecond).ShouldNot(Receive(), "the Go client is behind the CLI")

		By("the CLI's release, when its command ends, hands permit 2 to the Go client")
		Eventually(cli, 30*time.Second).Should(gexec.Exit(0))
		var g *lock.Grant
		Eventually(gotGo, 10*time.Second).Should(Receive(&g))
		Expect(g.Permit()).To(Equal(2))
		Expect(g.Token()).To(BeNumerically(">", cliTok))
		Expect(h1.Release(ctx)).To(Succeed())
		Expect(g.Release(ctx)).To(Succeed())
	})
})
