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

package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"

	// Import all Kubernetes client auth plugins (e.g. Azure, GCP, OIDC, etc.)
	// to ensure that exec-entrypoint and run can make use of them.
	_ "k8s.io/client-go/plugin/pkg/client/auth"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/cmd/manager/setup"
	"github.com/fencedlock/fencedlock/controllers"
	fversion "github.com/fencedlock/fencedlock/internal/version"
	// +kubebuilder:scaffold:imports
)

var setupLog = ctrl.Log.WithName("setup")

// gcPercent is the manager's GOGC unless the environment sets one. Nearly all of its heap is the
// informer cache (a FencedLock and two Leases per lock), live for good: Go's default (100) lets
// the heap grow to twice that before collecting. Half the headroom costs a collection twice as
// often, cheap next to a cache that barely changes (docs/benchmarks.md, "manager RSS").
const gcPercent = 50

func main() {
	f := setup.BindFlags(flag.CommandLine)
	flag.Parse()
	if f.Version {
		printVersion()
		return
	}
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
	rot := certRotation{enabled: f.CertRotation.Enabled, namespace: f.CertRotation.Namespace,
		secretName: f.CertRotation.SecretName, serviceName: f.CertRotation.ServiceName,
		validatingConfigName: f.CertRotation.ValidatingConfiguration, mutatingConfig: f.CertRotation.MutatingConfiguration,
		caOverlap: f.CertRotation.CAOverlap}
	var tlsOpts []func(*tls.Config)

	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&f.Zap)))

	// if the enable-http2 flag is false (the default), http/2 should be disabled
	// due to its vulnerabilities. More specifically, disabling http/2 will
	// prevent from being vulnerable to the HTTP/2 Stream Cancellation and
	// Rapid Reset CVEs. For more information see:
	// - https://github.com/advisories/GHSA-qppj-fm5r-hxr3
	// - https://github.com/advisories/GHSA-4374-p667-p6c8
	disableHTTP2 := func(c *tls.Config) {
		setupLog.Info("Disabling HTTP/2")
		c.NextProtos = []string{"http/1.1"}
	}

	if !f.EnableHTTP2 {
		tlsOpts = append(tlsOpts, disableHTTP2)
	}

	// Initial webhook TLS options
	webhookTLSOpts := tlsOpts
	webhookServerOptions := webhook.Options{
		TLSOpts: webhookTLSOpts,
		Host:    f.WebhookHost,
		Port:    f.WebhookPort,
	}

	if len(f.WebhookCertPath) > 0 {
		setupLog.Info("Initializing webhook certificate watcher using provided certificates",
			"webhook-cert-path", f.WebhookCertPath, "webhook-cert-name", f.WebhookCertName, "webhook-cert-key", f.WebhookCertKey)

		webhookServerOptions.CertDir = f.WebhookCertPath
		webhookServerOptions.CertName = f.WebhookCertName
		webhookServerOptions.KeyName = f.WebhookCertKey
	}

	if webhookServerOptions.CertDir == "" {
		// Where self-managed certificates are written (an emptyDir in the Deployment).
		webhookServerOptions.CertDir = filepath.Join(os.TempDir(), "k8s-webhook-server", "serving-certs")
	}
	webhookServer := webhook.NewServer(webhookServerOptions)

	// Metrics endpoint is enabled in 'config/default/kustomization.yaml'. The Metrics options configure the server.
	// More info:
	// - https://pkg.go.dev/sigs.k8s.io/controller-runtime@v0.25.0/pkg/metrics/server
	// - https://book.kubebuilder.io/reference/metrics.html
	metricsServerOptions := metricsserver.Options{
		BindAddress:   f.MetricsAddr,
		SecureServing: f.SecureMetrics,
		TLSOpts:       tlsOpts,
	}

	if f.SecureMetrics {
		// FilterProvider is used to protect the metrics endpoint with authn/authz.
		// These configurations ensure that only authorized users and service accounts
		// can access the metrics endpoint. The RBAC are configured in 'config/rbac/kustomization.yaml'. More info:
		// https://pkg.go.dev/sigs.k8s.io/controller-runtime@v0.25.0/pkg/metrics/filters#WithAuthenticationAndAuthorization
		metricsServerOptions.FilterProvider = filters.WithAuthenticationAndAuthorization
	}

	// Without --metrics-cert-path, controller-runtime serves metrics with a self-signed
	// certificate. With cert-manager, config/default's [METRICS-WITH-CERTS] and
	// config/prometheus's [PROMETHEUS-WITH-CERTS] sections mount and trust a managed one.
	if len(f.MetricsCertPath) > 0 {
		setupLog.Info("Initializing metrics certificate watcher using provided certificates",
			"metrics-cert-path", f.MetricsCertPath, "metrics-cert-name", f.MetricsCertName, "metrics-cert-key", f.MetricsCertKey)

		metricsServerOptions.CertDir = f.MetricsCertPath
		metricsServerOptions.CertName = f.MetricsCertName
		metricsServerOptions.KeyName = f.MetricsCertKey
	}

	cfg := ctrl.GetConfigOrDie()
	if err := setup.CheckServer(cfg); err != nil {
		setupLog.Error(err, "Refusing to start")
		os.Exit(1)
	}
	var webhooks *setup.Webhooks
	addCertRotation := func(ctrl.Manager) error { return nil }
	if f.WebhookPort >= 0 {
		rot.enabled = rot.enabled && f.WebhookCertPath == ""
		rot.certDir = webhookServerOptions.CertDir
		var err error
		if webhooks, addCertRotation, err = rot.webhooks(cfg); err != nil {
			setupLog.Error(err, "Failed to set up webhooks")
			os.Exit(1)
		}
	}
	mgr, err := setup.NewManager(cfg, setup.Options{
		Manager: ctrl.Options{
			Metrics:                metricsServerOptions,
			WebhookServer:          webhookServer,
			HealthProbeBindAddress: f.ProbeAddr,
			PprofBindAddress:       f.PprofAddr,
			LeaderElection:         f.LeaderElect,
			LeaderElectionID:       locksv1alpha1.LeaderElectionID,
			LeaseDuration:          &f.LeaseDuration,
			RenewDeadline:          &f.RenewDeadline,
			RetryPeriod:            &f.RetryPeriod,
			// The program exits as soon as the manager stops, so stepping down at once is safe.
			LeaderElectionReleaseOnCancel: true,
		},
		Controller: []controllers.Option{
			controllers.WithStatusMinInterval(f.StatusMinInterval),
			controllers.WithStatusRenewalInterval(f.StatusRenewalInterval),
			controllers.WithEventRateLimit(f.EventBurst, f.EventInterval),
			controllers.WithMaxConcurrentReconciles(f.MaxConcurrentReconciles),
			controllers.WithAfterPodGrant(crashFailpoint()),
		},
		Webhooks: webhooks,
	})
	if err != nil {
		setupLog.Error(err, "Failed to set up the manager")
		os.Exit(1)
	}
	if err := addCertRotation(mgr); err != nil {
		setupLog.Error(err, "Failed to set up certificate rotation")
		os.Exit(1)
	}
	// +kubebuilder:scaffold:builder

	setupLog.Info("Starting manager", "version", fversion.Resolve(version))
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		setupLog.Error(err, "Failed to run manager")
		os.Exit(1)
	}
}

// crashFailpoint returns a hook for the fault-injection tests: with the probability given in
// FENCEDLOCK_FAILPOINT_CRASH_AFTER_POD_GRANT, the process dies between granting a pod the Lease
// and ungating it, as a kill -9 would. Unset (always, outside tests), it does nothing.
func crashFailpoint() func() {
	p, err := strconv.ParseFloat(os.Getenv("FENCEDLOCK_FAILPOINT_CRASH_AFTER_POD_GRANT"), 64)
	if err != nil || p <= 0 {
		return nil
	}
	setupLog.Info("Failpoint armed: crash after a pod grant", "probability", p)
	return func() {
		if rand.Float64() < p {
			fmt.Fprintln(os.Stderr, "failpoint: crashing between the pod's Lease grant and its ungate")
			os.Exit(137)
		}
	}
}
