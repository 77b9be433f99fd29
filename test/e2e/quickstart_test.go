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
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/fencedlock/fencedlock/test/docs"
	"github.com/fencedlock/fencedlock/test/util"
)

// quickStartImage is the image the README's quick start runs: packed here from Debian's static
// busybox under the same name, so the kubelet finds it without a registry.
const quickStartImage = "busybox:1.35"

// The README's install lines, which BeforeSuite has done its own way (the suite's overlay of the
// same config/default, its images loaded into this node's containerd).
var quickStartInstall = []*regexp.Regexp{
	regexp.MustCompile(`^sudo ctr -n k8s\.io images import fencedlock-manager_`),
	regexp.MustCompile(`^kubectl apply --server-side -f install\.yaml`),
	regexp.MustCompile(`^kubectl krew install --manifest=fencedlock\.krew\.yaml `), // the suite builds the plugin
}

// quickStartWaits are the lines a reader looks at more than once: what they show depends on how
// far the Job has got, so the spec runs them until they show it.
var quickStartWaits = map[string]*regexp.Regexp{
	"kubectl get flock ledger":                  regexp.MustCompile(`(?m)^ledger\s+1/1\s+pod/settle-\S+\s+\d+\s+\S+\s+1\s+\S+$`),
	"kubectl fencedlock why -l job-name=settle": regexp.MustCompile(`(?m)^  ledger: waiting at position 1 of 1; held by pod/settle-\S+ \(token \d+\)`),
}

var quickStartGrant = regexp.MustCompile(`(?m)^granted token (\d+)$`)

var _ = Describe("The README's quick start on a real node", func() {
	It("runs a Job under a lock, one pod at a time, and shows why the second pod waits", func() {
		cmds := quickStartCommands()
		pluginDir := GinkgoT().TempDir()
		run("go", "build", "-o", filepath.Join(pluginDir, "kubectl-fencedlock"), "./cmd/kubectl-fencedlock")
		loadQuickStartImage()

		// The reader's current namespace is one of the suite's, not default.
		ns := kit.NewNamespace()
		kubeconfig := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
		Expect(os.WriteFile(kubeconfig, must(os.ReadFile(filepath.Join(clusterDir, "admin.kubeconfig"))), 0o600)).To(Succeed())
		shellEnv := append(slices.Clone(env), "KUBECONFIG="+kubeconfig, "PATH="+pluginDir+":"+pathOf(env))
		shell(shellEnv, "kubectl config set-context --current --namespace="+ns)

		var logs string
		for _, c := range cmds {
			if want, ok := quickStartWaits[firstLine(c)]; ok {
				Eventually(func() string { return shell(shellEnv, c) }).
					WithTimeout(90*time.Second).WithPolling(time.Second).Should(MatchRegexp(want.String()), c)
				continue
			}
			out := shell(shellEnv, c)
			if strings.HasPrefix(c, "kubectl logs ") {
				logs = out
			}
		}
		tokens := quickStartGrant.FindAllStringSubmatch(logs, -1)
		Expect(tokens).To(HaveLen(2), "the Job's two pods each print their grant:\n%s", logs)
		a, _ := strconv.ParseInt(tokens[0][1], 10, 64)
		b, _ := strconv.ParseInt(tokens[1][1], 10, 64)
		Expect(a).NotTo(Equal(b), "each grant has its own token")
	})
})

// quickStartCommands reads the README's quick start: its first sh block, one command per line or
// heredoc, with the install lines checked and left out.
func quickStartCommands() []string {
	raw := string(must(os.ReadFile(filepath.Join(util.RepoRoot(), "README.md"))))
	readme := docs.Parse("README.md", raw)
	h := slices.IndexFunc(readme.Headings, func(h docs.Heading) bool { return h.Text == "Quick start" })
	Expect(h).NotTo(BeNumerically("<", 0), "README.md has no heading \"Quick start\"")
	i := slices.IndexFunc(readme.Blocks, func(b docs.Block) bool { return b.Line > readme.Headings[h].Line && b.Lang == "sh" })
	Expect(i).NotTo(BeNumerically("<", 0), "README.md has no sh block under \"Quick start\"")
	Expect(h+1 >= len(readme.Headings) || readme.Blocks[i].Line < readme.Headings[h+1].Line).To(BeTrue(),
		"README.md's first sh block after \"Quick start\" is not in that section")
	block := strings.Join(readme.Blocks[i].Lines, "\n")
	var cmds []string
	lines := readme.Blocks[i].Lines
	for j := 0; j < len(lines); j++ {
		line := strings.TrimSpace(lines[j])
		if line == "" {
			continue
		}
		if slices.ContainsFunc(quickStartInstall, func(re *regexp.Regexp) bool { return re.MatchString(line) }) {
			continue
		}
		if _, tag, ok := strings.Cut(line, "<<'"); ok {
			tag = strings.TrimSuffix(tag, "'")
			end := slices.Index(lines[j+1:], tag)
			Expect(end).NotTo(BeNumerically("<", 0), "the heredoc %q is not closed", tag)
			line = strings.Join(lines[j:j+2+end], "\n")
			j += 1 + end
		}
		cmds = append(cmds, line)
	}
	for _, re := range quickStartInstall {
		Expect(block).To(MatchRegexp(`(?m)`+strings.TrimPrefix(re.String(), "^")),
			"the quick start's install lines changed: update the suite's stand-ins")
	}
	return cmds
}

// loadQuickStartImage packs Debian's static busybox (apt: busybox-static) as the quick start's image.
func loadQuickStartImage() {
	bb, err := exec.LookPath("busybox")
	Expect(err).NotTo(HaveOccurred(), "needs Debian's busybox-static (.ci/run installs it)")
	tar := filepath.Join(GinkgoT().TempDir(), "busybox.tar")
	cmd := exec.Command("hack/mkimage.sh", bb, quickStartImage, tar)
	cmd.Dir = util.RepoRoot()
	cmd.Env = append(slices.Clone(env), "IMAGE_ENTRY=/bin/sh")
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "%s", out)
	run("hack/cluster-load-image.sh", tar)
}

// shell runs one of the README's commands with bash, as a reader pastes it.
func shell(environ []string, command string) string {
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", command)
	cmd.Dir = GinkgoT().TempDir()
	cmd.Env = environ
	out, err := cmd.CombinedOutput()
	GinkgoWriter.Printf("$ %s\n%s\n", firstLine(command), out)
	Expect(err).NotTo(HaveOccurred(), "%s\n%s", command, out)
	return string(out)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	if i := strings.Index(line, " #"); i >= 0 {
		line = line[:i]
	}
	return strings.TrimSpace(line)
}

func pathOf(environ []string) string {
	for _, kv := range slices.Backward(environ) {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			return v
		}
	}
	return os.Getenv("PATH")
}

func must[T any](v T, err error) T {
	Expect(err).NotTo(HaveOccurred())
	return v
}
