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
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"

	"github.com/fencedlock/fencedlock/test/util"
)

// The kubectl plugin, built and run as a process against the real API server.
var _ = Describe("kubectl fencedlock", Ordered, func() {
	var bin, kubeconfig, ns string

	BeforeAll(func() {
		bin, kubeconfig = buildWithKubeconfig("github.com/fencedlock/fencedlock/cmd/kubectl-fencedlock", "plugin")
		ns = kit.NewNamespace()
		kit.NewLock(ns, "ledger", util.LeaseSeconds(15))
	})

	plugin := func(env []string, args ...string) *gexec.Session {
		cmd := exec.Command(bin, append([]string{"--kubeconfig", kubeconfig, "-n", ns}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		s, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		return s
	}
	runOK := func(args ...string) string {
		s := plugin(nil, args...)
		Eventually(s, 30*time.Second).Should(gexec.Exit(0), string(s.Err.Contents()))
		return strings.TrimSpace(string(s.Out.Contents()))
	}

	It("acquires, shows and releases a lock", func() {
		tok := runOK("acquire", "ledger", "--identity", "shell-user")
		Expect(tok).To(MatchRegexp(`^\d+$`))
		Expect(runOK("get")).To(MatchRegexp(`ledger\s+shell-user\s+` + tok))
		Eventually(func() string { return runOK("get", "ledger", "-o", "json") }, 10*time.Second).Should(
			ContainSubstring(`"holder": "shell-user"`), "the status follows the Lease")

		s := plugin(nil, "acquire", "ledger", "--identity", "someone-else", "--no-wait")
		Eventually(s, 30*time.Second).Should(gexec.Exit(124))
		Expect(string(s.Err.Contents())).To(ContainSubstring(`is held by "shell-user"`))

		runOK("release", "ledger", "--identity", "shell-user", "--fencing-token", tok)
		Expect(runOK("get")).To(MatchRegexp(`ledger\s+<none>\s+` + tok))
	})

	It("runs a command under the lock with $FENCING_TOKEN, passing its exit status through", func() {
		out := runOK("run", "ledger", "--", "sh", "-c", `echo "token=$FENCING_TOKEN lock=$FENCEDLOCK_LOCK"`)
		Expect(out).To(MatchRegexp(`^token=\d+ lock=ledger$`))

		s := plugin(nil, "run", "ledger", "--", "sh", "-c", "exit 7")
		Eventually(s, 30*time.Second).Should(gexec.Exit(7))
		Expect(string(s.Err.Contents())).To(ContainSubstring("released ledger"))
		Expect(runOK("get")).To(MatchRegexp(`ledger\s+<none>`), "released after the command")
	})

	It("writes fenced objects with stamp and apply; a stale token is refused", func() {
		manifest := filepath.Join(GinkgoT().TempDir(), "cm.yaml")
		Expect(os.WriteFile(manifest, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: books\ndata:\n  balance: \"1\"\n"), 0o600)).To(Succeed())

		stamped := runOK("stamp", "-f", manifest, "--lock", "ledger", "--fencing-token", "123")
		Expect(stamped).To(ContainSubstring(`fencedlock.io/token: "123"`))
		Expect(stamped).To(ContainSubstring(`fencedlock.io/fenced-by: ledger`))

		out := runOK("run", "ledger", "--", bin, "--kubeconfig", kubeconfig, "-n", ns, "apply", "-f", manifest, "--lock", "ledger")
		Expect(out).To(MatchRegexp(`configmaps/books applied with token \d+`))
		first := strings.Fields(out)[len(strings.Fields(out))-1]

		runOK("run", "ledger", "--", "true") // the lock moves on: first is stale now
		s := plugin([]string{"FENCING_TOKEN=" + first}, "apply", "-f", manifest, "--lock", "ledger")
		Eventually(s, 30*time.Second).Should(gexec.Exit(1))
		Expect(string(s.Err.Contents())).To(ContainSubstring("stale fencing token " + first))
	})
})
