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

// Package e2e runs fencedlock on a real single-node cluster: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, containerd and kubelet, built and started by the
// project's own hack/ scripts on 127.0.0.1. The manager runs IN the cluster, installed as users
// install it: config/default (what `make build-installer` renders to dist/install.yaml) through
// the overlay test/e2e/overlay, which only swaps in the image built here (hack/mkimage.sh, loaded
// into the node's containerd) and a faster readiness probe. Its two replicas reach the API server
// through the kubernetes Service (hack/cluster-up.sh DNATs it) and the API server calls the
// webhooks through their Service, with certificates made by the manager's cert-controller.
package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fencedlock/fencedlock/test/util"
)

const (
	workerImage  = "localhost/fencedlock/ledger-worker:e2e"
	managerImage = "localhost/fencedlock/manager:e2e" // as test/e2e/overlay sets it
)

var (
	ctx       context.Context
	cancel    context.CancelFunc
	k8sClient client.Client
	clientset *kubernetes.Clientset
	// kit builds the suite's namespaces, locks, pods and clients.
	kit        util.Kit
	clusterDir = envOr("E2E_CLUSTER_DIR", "/tmp/fencedlock-e2e")
	apiPort    = envOr("E2E_API_PORT", "26443")
	// env is what every hack/ script of the suite runs with.
	env []string
	// managerTar is the manager's image tarball, as BeforeSuite built and loaded it.
	managerTar string
)

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	if !RunSpecs(t, "fencedlock e2e suite (real single-node cluster)") {
		// The failures' messages once more, last: a CI log shown by its tail then says why.
		fmt.Print(failuresInBrief)
	}
}

// failuresInBrief holds the start of every failed spec's message, as ReportAfterSuite gathered it.
var failuresInBrief string

var _ = ReportAfterSuite("failures in brief", func(r Report) {
	var b strings.Builder
	for _, s := range r.SpecReports {
		if !s.Failed() {
			continue
		}
		lines := strings.Split(s.Failure.Message, "\n")
		fmt.Fprintf(&b, "FAILED %s (%s)\n  %s\n", s.FullText(), s.Failure.Location,
			strings.Join(lines[:min(len(lines), 25)], "\n  "))
	}
	failuresInBrief = b.String()
})

// run runs a command from the repository root with the suite's environment, streaming its output.
func run(name string, args ...string) string {
	return runWithInput(nil, name, args...)
}

// runWithInput is run with stdin.
func runWithInput(stdin []byte, name string, args ...string) string {
	cmd := exec.Command(name, args...)
	cmd.Dir = util.RepoRoot()
	cmd.Env = env
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out strings.Builder
	cmd.Stdout = &out
	cmd.Stderr = GinkgoWriter
	start := time.Now()
	err := cmd.Run()
	fmt.Fprintf(GinkgoWriter, "%s %s: %s\n", name, strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	ExpectWithOffset(2, err).NotTo(HaveOccurred(), "%s %v\n%s", name, args, out.String())
	return strings.TrimSpace(out.String())
}

func fileSHA256(path string) string {
	f, err := os.Open(path)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = f.Close() }()
	h := sha256.New()
	_, err = io.Copy(h, f)
	Expect(err).NotTo(HaveOccurred())
	return hex.EncodeToString(h.Sum(nil))
}

var _ = BeforeSuite(func() {
	ctx, cancel = context.WithCancel(context.Background())
	start := time.Now()
	env = append(os.Environ(),
		"CLUSTER_DIR="+clusterDir, "API_PORT="+apiPort, "ETCD_PORT="+envOr("E2E_ETCD_PORT", "22379"),
		"MANAGER_DIR="+filepath.Join(clusterDir, "manager"),
		"KUBECONFIG="+filepath.Join(clusterDir, "admin.kubeconfig"))
	kustomize := filepath.Join(util.RepoRoot(), "bin", "kustomize")
	_, err := os.Stat(kustomize)
	Expect(err).NotTo(HaveOccurred(), "bin/kustomize is missing: run `make kustomize` (hack/e2e.sh does)")

	// The images build while the cluster starts: both take tens of seconds on a cold machine.
	imgDir := GinkgoT().TempDir()
	images := make(chan error, 1)
	var imagesOut bytes.Buffer
	go func() {
		cmd := exec.Command("hack/image-tarballs.sh", imgDir)
		cmd.Dir = util.RepoRoot()
		cmd.Env = append(os.Environ(), "IMG="+managerImage, "WORKER_IMG="+workerImage)
		cmd.Stdout, cmd.Stderr = &imagesOut, &imagesOut
		images <- cmd.Run()
	}()

	By("building the node's binaries (once) and starting the cluster")
	bin := run("hack/k8s-binaries.sh", "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kubectl")
	env = append(env, "PATH="+bin+":"+os.Getenv("PATH"))
	run("hack/cluster-up.sh", "--node")
	// A manager left running next to the cluster by an earlier suite or `make demo` style run.
	run("hack/local-manager.sh", "stop")

	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(clusterDir, "admin.kubeconfig"))
	Expect(err).NotTo(HaveOccurred())
	k8sClient, err = client.New(cfg, client.Options{Scheme: util.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	clientset = kubernetes.NewForConfigOrDie(cfg)
	// A minute for a lock to become Ready: the manager may be rolling out or electing a leader.
	kit = util.Kit{Ctx: ctx, Client: k8sClient, Leases: clientset.CoordinationV1(), Prefix: "e2e-", ReadyTimeout: time.Minute}

	By("building the manager and worker images (hack/image-tarballs.sh) and loading them into the node's containerd")
	select {
	case err := <-images:
		Expect(err).NotTo(HaveOccurred(), "hack/image-tarballs.sh:\n%s", imagesOut.String())
	case <-time.After(10 * time.Minute):
		Fail("hack/image-tarballs.sh did not finish in 10 minutes:\n" + imagesOut.String())
	}
	fmt.Fprint(GinkgoWriter, imagesOut.String())
	managerTar = filepath.Join(imgDir, "manager.tar")
	run("hack/cluster-load-image.sh", managerTar, filepath.Join(imgDir, "ledger-worker.tar"))

	By("installing config/default (through test/e2e/overlay) and waiting for both replicas and their webhooks")
	installManager(kustomize, fileSHA256(filepath.Join(imgDir, "manager.tar")))
	AddReportEntry("setup wall time", time.Since(start).Round(time.Millisecond).String())
	fmt.Fprintf(GinkgoWriter, "e2e setup took %s\n", time.Since(start).Round(time.Millisecond))
})

// Every failed spec leaves the manager's recent logs in its report.
var _ = JustAfterEach(func() {
	if CurrentSpecReport().Failed() {
		dumpManagerLogs()
		dumpWebhookEndpoints()
	}
})

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
	}
	if os.Getenv("E2E_KEEP_CLUSTER") != "" {
		fmt.Fprintf(GinkgoWriter, "keeping the cluster: KUBECONFIG=%s/admin.kubeconfig\n", clusterDir)
		return
	}
	run("hack/cluster-down.sh")
})
