//go:build e2e

// Package e2e runs fencedlock on a real single-node cluster: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, containerd and kubelet, built and started by the
// project's own hack/ scripts on 127.0.0.1. The manager runs outside the cluster with a kubeconfig
// (webhooks registered by URL), and test pods use the host network to reach the API server.
package e2e

import (
	"context"
	"fmt"
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
	workerImage = "localhost/fencedlock/ledger-worker:e2e"
)

var (
	ctx        context.Context
	cancel     context.CancelFunc
	k8sClient  client.Client
	clientset  *kubernetes.Clientset
	clusterDir = envOr("E2E_CLUSTER_DIR", "/tmp/fencedlock-e2e")
	apiPort    = envOr("E2E_API_PORT", "26443")
	// env is what every hack/ script of the suite runs with.
	env []string
)

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "fencedlock e2e suite (real single-node cluster)")
}

// run runs a command from the repository root with the suite's environment, streaming its output.
func run(name string, args ...string) string {
	cmd := exec.Command(name, args...)
	cmd.Dir = util.RepoRoot()
	cmd.Env = env
	var out strings.Builder
	cmd.Stdout = &out
	cmd.Stderr = GinkgoWriter
	start := time.Now()
	err := cmd.Run()
	fmt.Fprintf(GinkgoWriter, "%s %s: %s\n", name, strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	ExpectWithOffset(1, err).NotTo(HaveOccurred(), "%s %v\n%s", name, args, out.String())
	return strings.TrimSpace(out.String())
}

var _ = BeforeSuite(func() {
	ctx, cancel = context.WithCancel(context.Background())
	start := time.Now()
	env = append(os.Environ(),
		"CLUSTER_DIR="+clusterDir, "API_PORT="+apiPort, "ETCD_PORT="+envOr("E2E_ETCD_PORT", "22379"),
		"MANAGER_DIR="+filepath.Join(clusterDir, "manager"), "WEBHOOK_PORT="+envOr("E2E_WEBHOOK_PORT", "19443"),
		"PROBE_PORT="+envOr("E2E_PROBE_PORT", "18081"), "METRICS_PORT="+envOr("E2E_METRICS_PORT", "18080"),
		"KUBECONFIG="+filepath.Join(clusterDir, "admin.kubeconfig"))

	By("building the node's binaries (once) and starting the cluster")
	bin := run("hack/k8s-binaries.sh", "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kubectl")
	env = append(env, "PATH="+bin+":"+os.Getenv("PATH"))
	run("hack/cluster-up.sh", "--node")

	By("building the worker image and loading it into the node's containerd")
	imgDir := GinkgoT().TempDir()
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", filepath.Join(imgDir, "ledger-worker"), "./cmd/ledger-worker")
	build.Dir, build.Env = util.RepoRoot(), append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), string(out))
	run("hack/mkimage.sh", filepath.Join(imgDir, "ledger-worker"), workerImage, filepath.Join(imgDir, "worker.tar"))
	run("hack/cluster-load-image.sh", filepath.Join(imgDir, "worker.tar"))

	By("starting the manager next to the cluster")
	run("hack/local-manager.sh", "start")

	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(clusterDir, "admin.kubeconfig"))
	Expect(err).NotTo(HaveOccurred())
	k8sClient, err = client.New(cfg, client.Options{Scheme: util.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	clientset = kubernetes.NewForConfigOrDie(cfg)
	AddReportEntry("setup wall time", time.Since(start).Round(time.Millisecond).String())
	fmt.Fprintf(GinkgoWriter, "e2e setup took %s\n", time.Since(start).Round(time.Millisecond))
})

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
	}
	if os.Getenv("E2E_KEEP_CLUSTER") != "" {
		fmt.Fprintf(GinkgoWriter, "keeping the cluster: KUBECONFIG=%s/admin.kubeconfig\n", clusterDir)
		return
	}
	run("hack/local-manager.sh", "stop")
	run("hack/cluster-down.sh")
})
