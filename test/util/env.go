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

// Package util starts the real control plane the tests run against: envtest with kube-apiserver
// and etcd built by hack/k8s-binaries.sh, and the fencedlock manager wired as cmd/manager wires it
// (by cmd/manager/setup).
package util

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/fencedlock/fencedlock/cmd/manager/setup"
	"github.com/fencedlock/fencedlock/controllers"
)

// RepoRoot is the repository's root directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Assets returns the directory holding kube-apiserver and etcd: $KUBEBUILDER_ASSETS, or the
// cache hack/k8s-binaries.sh fills (building what is missing).
func Assets() (string, error) {
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		return d, nil
	}
	out, err := exec.Command(filepath.Join(RepoRoot(), "hack", "k8s-binaries.sh")).Output()
	if err != nil {
		return "", fmt.Errorf("hack/k8s-binaries.sh failed (run it to see why): %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Scheme holds the built-in types and fencedlock's, as the manager's does.
func Scheme() *k8sruntime.Scheme { return setup.Scheme() }

// NewEnvironment returns an envtest environment with fencedlock's CRDs and webhook configuration
// (registered by URL to a local port, as envtest does), plus the CRDs in extraCRDDirs.
func NewEnvironment(extraCRDDirs ...string) (*envtest.Environment, error) {
	assets, err := Assets()
	if err != nil {
		return nil, err
	}
	return &envtest.Environment{
		CRDDirectoryPaths:     append([]string{filepath.Join(RepoRoot(), "config", "crd", "bases")}, extraCRDDirs...),
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
		Scheme:                Scheme(),
		WebhookInstallOptions: envtest.WebhookInstallOptions{
			Paths: []string{filepath.Join(RepoRoot(), "config", "webhook")},
		},
	}, nil
}

// NewManager returns a manager wired as cmd/manager wires it (setup.NewManager), running the
// FencedLock controller on clk and, when env installed webhooks, the webhooks, but without
// metrics or probe listeners. The controller writes every status change and every event (see
// Production for cmd/manager's pacing); opts apply after that.
func NewManager(cfg *rest.Config, clk clock.PassiveClock, env *envtest.Environment,
	opts ...controllers.Option) (ctrl.Manager, error) {
	o := setup.Options{
		Manager: ctrl.Options{
			Metrics:                metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress: "0",
			// Tests start several managers in one process (controller restarts).
			Controller: config.Controller{SkipNameValidation: new(true)},
		},
		// A test reads what a reconcile did at once, on a clock it may hold still: no coalescing
		// (a renewal's status too), no event limit, and one reconcile at a time.
		Controller: append([]controllers.Option{controllers.WithClock(clk), controllers.WithStatusMinInterval(0),
			controllers.WithStatusRenewalInterval(0),
			controllers.WithEventRateLimit(0, 0), controllers.WithMaxConcurrentReconciles(1)}, opts...),
	}
	if wio := env.WebhookInstallOptions; len(wio.ValidatingWebhooks)+len(wio.MutatingWebhooks) > 0 {
		o.Manager.WebhookServer = webhook.NewServer(webhook.Options{
			Host: wio.LocalServingHost, Port: wio.LocalServingPort, CertDir: wio.LocalServingCertDir,
		})
		o.Webhooks = &setup.Webhooks{} // envtest wrote the certificates
	}
	return setup.NewManager(cfg, o)
}

// Production configures the controller as cmd/manager does by default: coalesced status writes
// (a renewal's at most once a minute),
// rate-limited lock events and concurrent reconciles, with NewFencedLockReconciler's defaults.
func Production(r *controllers.FencedLockReconciler) {
	for _, o := range []controllers.Option{
		controllers.WithStatusMinInterval(controllers.DefaultStatusMinInterval),
		controllers.WithStatusRenewalInterval(controllers.DefaultStatusRenewalInterval),
		controllers.WithEventRateLimit(controllers.DefaultEventBurst, controllers.DefaultEventInterval),
		controllers.WithMaxConcurrentReconciles(controllers.DefaultMaxConcurrentReconciles),
	} {
		o(r)
	}
}

// StartManager starts a manager (see NewManager) and returns a function that stops it and waits
// until it has stopped, as a process exit would.
func StartManager(ctx context.Context, cfg *rest.Config, clk clock.PassiveClock, env *envtest.Environment,
	opts ...controllers.Option) (stop func(), err error) {
	mgr, err := NewManager(cfg, clk, env, opts...)
	if err != nil {
		return nil, err
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		cancel()
		return nil, fmt.Errorf("manager cache did not sync: %w", <-done)
	}
	return func() {
		cancel()
		if err := <-done; err != nil {
			fmt.Fprintln(os.Stderr, "manager stopped with an error:", err)
		}
	}, nil
}

// WriteKubeconfig writes, into dir, a kubeconfig for a new user of env in group system:masters,
// for processes the tests start (workers, the kubectl plugin, the manager as its own process).
func WriteKubeconfig(env *envtest.Environment, cfg *rest.Config, user, dir string) (string, error) {
	u, err := env.AddUser(envtest.User{Name: user, Groups: []string{"system:masters"}}, cfg)
	if err != nil {
		return "", err
	}
	kc, err := u.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, user+".kubeconfig")
	return path, os.WriteFile(path, kc, 0o600)
}

// StartEnvironment starts env and installs fencedlock's admission policies, as the install does.
func StartEnvironment(env *envtest.Environment) (*rest.Config, error) {
	cfg, err := env.Start()
	if err != nil {
		return nil, err
	}
	if err := InstallPolicies(context.Background(), cfg); err != nil {
		_ = env.Stop()
		return nil, err
	}
	return cfg, nil
}

// Started is a running envtest control plane with clients for it.
type Started struct {
	Env       *envtest.Environment
	Cfg       *rest.Config
	Client    client.Client
	Clientset *kubernetes.Clientset
}

// Start starts NewEnvironment(extraCRDDirs...) and returns it with a controller-runtime client
// and a clientset.
func Start(extraCRDDirs ...string) (*Started, error) {
	env, err := NewEnvironment(extraCRDDirs...)
	if err != nil {
		return nil, err
	}
	cfg, err := StartEnvironment(env)
	if err != nil {
		return nil, err
	}
	cl, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	return &Started{Env: env, Cfg: cfg, Client: cl, Clientset: cs}, err
}

// ExampleScript is the tested shell client of docs/protocol.md, relative to the repository root.
const ExampleScript = "docs/examples/fencedlock.sh"

// ClientLeaseVerbs are the verbs a client needs on Leases in its lock's namespace, as
// docs/protocol.md's client Role grants them (the docs check holds README.md and the docs to this
// list; the shell example's user in test/integration has exactly these).
var ClientLeaseVerbs = []string{"get", "list", "watch", "create", "update", "delete"}
