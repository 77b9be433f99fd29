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
	"strconv"
	"time"

	// Import all Kubernetes client auth plugins (e.g. Azure, GCP, OIDC, etc.)
	// to ensure that exec-entrypoint and run can make use of them.
	_ "k8s.io/client-go/plugin/pkg/client/auth"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/fencedlock/fencedlock/cmd/manager/setup"
	"github.com/fencedlock/fencedlock/controllers"
	// +kubebuilder:scaffold:imports
)

var setupLog = ctrl.Log.WithName("setup")

func main() {
	var metricsAddr string
	var metricsCertPath, metricsCertName, metricsCertKey string
	var webhookCertPath, webhookCertName, webhookCertKey string
	var webhookPort int
	var webhookHost string
	var rot certRotation
	var statusMinInterval, eventInterval time.Duration
	var eventBurst, concurrency int
	var enableLeaderElection bool
	var leaseDuration, renewDeadline, retryPeriod time.Duration
	var probeAddr string
	var secureMetrics bool
	var enableHTTP2 bool
	var tlsOpts []func(*tls.Config)
	flag.StringVar(&metricsAddr, "metrics-bind-address", "0", "The address the metrics endpoint binds to. "+
		"Use :8443 for HTTPS or :8080 for HTTP, or leave as 0 to disable the metrics service.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "The address the probe endpoint binds to.")
	flag.BoolVar(&enableLeaderElection, "leader-elect", false,
		"Enable leader election for controller manager. "+
			"Enabling this will ensure there is only one active controller manager.")
	// controller-runtime's defaults. A replica that dies without releasing leadership (SIGKILL,
	// node lost) is replaced after up to lease duration + retry period.
	flag.DurationVar(&leaseDuration, "leader-elect-lease-duration", 15*time.Second,
		"How long non-leaders wait after the last renewal before taking over leadership.")
	flag.DurationVar(&renewDeadline, "leader-elect-renew-deadline", 10*time.Second,
		"How long the leader keeps retrying to renew before giving leadership up (and exiting).")
	flag.DurationVar(&retryPeriod, "leader-elect-retry-period", 2*time.Second,
		"How often candidates try to acquire or renew leadership.")
	flag.BoolVar(&secureMetrics, "metrics-secure", true,
		"If set, the metrics endpoint is served securely via HTTPS. Use --metrics-secure=false to use HTTP instead.")
	flag.StringVar(&webhookCertPath, "webhook-cert-path", "", "The directory that contains the webhook certificate.")
	flag.StringVar(&webhookCertName, "webhook-cert-name", "tls.crt", "The name of the webhook certificate file.")
	flag.StringVar(&webhookCertKey, "webhook-cert-key", "tls.key", "The name of the webhook key file.")
	flag.DurationVar(&statusMinInterval, "status-min-interval", controllers.DefaultStatusMinInterval, fmt.Sprintf(
		"Coalesce FencedLock status writes of a busy lock: after a burst of %d, one per this interval (0: write every change).",
		controllers.StatusBurst))
	flag.IntVar(&concurrency, "max-concurrent-reconciles", controllers.DefaultMaxConcurrentReconciles, "Locks reconciled in parallel.")
	flag.IntVar(&eventBurst, "event-burst", controllers.DefaultEventBurst, "Granted/Released events a lock may emit in a burst (0: unlimited).")
	flag.DurationVar(&eventInterval, "event-interval", controllers.DefaultEventInterval,
		"After a burst, one Granted/Released event per lock per this interval.")
	flag.BoolVar(&rot.enabled, "cert-rotation", true, "Manage the webhook certificates in-cluster (CA and serving "+
		"certificate in a Secret, CA injected into the webhook configurations, rotated). Off when --webhook-cert-path is set.")
	flag.StringVar(&rot.namespace, "cert-namespace", os.Getenv("POD_NAMESPACE"), "Namespace of the certificate Secret and the webhook Service.")
	flag.StringVar(&rot.secretName, "cert-secret-name", "fencedlock-webhook-server-cert", "Secret holding the webhook certificates.")
	flag.StringVar(&rot.serviceName, "webhook-service-name", "fencedlock-webhook-service", "Service in front of the webhook server.")
	flag.StringVar(&rot.validatingConfigName, "validating-webhook-configuration", "fencedlock-validating-webhook-configuration",
		"ValidatingWebhookConfiguration to inject the CA into.")
	flag.StringVar(&rot.mutatingConfig, "mutating-webhook-configuration", "fencedlock-mutating-webhook-configuration",
		"MutatingWebhookConfiguration to inject the CA into.")
	flag.DurationVar(&rot.caOverlap, "ca-bundle-overlap", 10*time.Minute, "How long a superseded CA stays in the "+
		"webhook configurations after a CA rotation (self-managed certificates), while the replicas move to the new "+
		"certificate: longer than the kubelet takes to update a mounted Secret.")
	flag.StringVar(&webhookHost, "webhook-host", "", "Address the webhook server binds to (empty: all).")
	flag.IntVar(&webhookPort, "webhook-port", 9443, "Port the webhook server listens on. "+
		"Defaults to 9443. Set -1 to disable the webhook server.")
	flag.StringVar(&metricsCertPath, "metrics-cert-path", "",
		"The directory that contains the metrics server certificate.")
	flag.StringVar(&metricsCertName, "metrics-cert-name", "tls.crt", "The name of the metrics server certificate file.")
	flag.StringVar(&metricsCertKey, "metrics-cert-key", "tls.key", "The name of the metrics server key file.")
	flag.BoolVar(&enableHTTP2, "enable-http2", false,
		"If set, HTTP/2 will be enabled for the metrics and webhook servers")
	opts := zap.Options{
		Development: false,
	}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()

	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))

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

	if !enableHTTP2 {
		tlsOpts = append(tlsOpts, disableHTTP2)
	}

	// Initial webhook TLS options
	webhookTLSOpts := tlsOpts
	webhookServerOptions := webhook.Options{
		TLSOpts: webhookTLSOpts,
		Host:    webhookHost,
		Port:    webhookPort,
	}

	if len(webhookCertPath) > 0 {
		setupLog.Info("Initializing webhook certificate watcher using provided certificates",
			"webhook-cert-path", webhookCertPath, "webhook-cert-name", webhookCertName, "webhook-cert-key", webhookCertKey)

		webhookServerOptions.CertDir = webhookCertPath
		webhookServerOptions.CertName = webhookCertName
		webhookServerOptions.KeyName = webhookCertKey
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
		BindAddress:   metricsAddr,
		SecureServing: secureMetrics,
		TLSOpts:       tlsOpts,
	}

	if secureMetrics {
		// FilterProvider is used to protect the metrics endpoint with authn/authz.
		// These configurations ensure that only authorized users and service accounts
		// can access the metrics endpoint. The RBAC are configured in 'config/rbac/kustomization.yaml'. More info:
		// https://pkg.go.dev/sigs.k8s.io/controller-runtime@v0.25.0/pkg/metrics/filters#WithAuthenticationAndAuthorization
		metricsServerOptions.FilterProvider = filters.WithAuthenticationAndAuthorization
	}

	// Without --metrics-cert-path, controller-runtime serves metrics with a self-signed
	// certificate. With cert-manager, config/default's [METRICS-WITH-CERTS] and
	// config/prometheus's [PROMETHEUS-WITH-CERTS] sections mount and trust a managed one.
	if len(metricsCertPath) > 0 {
		setupLog.Info("Initializing metrics certificate watcher using provided certificates",
			"metrics-cert-path", metricsCertPath, "metrics-cert-name", metricsCertName, "metrics-cert-key", metricsCertKey)

		metricsServerOptions.CertDir = metricsCertPath
		metricsServerOptions.CertName = metricsCertName
		metricsServerOptions.KeyName = metricsCertKey
	}

	cfg := ctrl.GetConfigOrDie()
	var webhooks *setup.Webhooks
	addCertRotation := func(ctrl.Manager) error { return nil }
	if webhookPort >= 0 {
		rot.enabled = rot.enabled && webhookCertPath == ""
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
			HealthProbeBindAddress: probeAddr,
			LeaderElection:         enableLeaderElection,
			LeaderElectionID:       "fencedlock-manager.fencedlock.io",
			LeaseDuration:          &leaseDuration,
			RenewDeadline:          &renewDeadline,
			RetryPeriod:            &retryPeriod,
			// The program exits as soon as the manager stops, so stepping down at once is safe.
			LeaderElectionReleaseOnCancel: true,
		},
		Controller: []controllers.Option{
			controllers.WithStatusMinInterval(statusMinInterval),
			controllers.WithEventRateLimit(eventBurst, eventInterval),
			controllers.WithMaxConcurrentReconciles(concurrency),
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

	setupLog.Info("Starting manager")
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
