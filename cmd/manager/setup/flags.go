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

package setup

import (
	"flag"
	"fmt"
	"os"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fencedlock/fencedlock/controllers"
)

// Flags are the manager's command-line settings. They are bound here rather than in main so that
// the docs check (test/docs) reads the flag set the manager really parses, defaults included.
type Flags struct {
	MetricsAddr, ProbeAddr, PprofAddr                string
	SecureMetrics, EnableHTTP2                       bool
	MetricsCertPath, MetricsCertName, MetricsCertKey string
	WebhookCertPath, WebhookCertName, WebhookCertKey string
	WebhookHost                                      string
	WebhookPort                                      int

	LeaderElect                               bool
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration

	StatusMinInterval       time.Duration
	StatusRenewalInterval   time.Duration
	MaxConcurrentReconciles int
	EventBurst              int
	EventInterval           time.Duration

	CertRotation CertRotationFlags
	Zap          zap.Options

	Version bool
}

// CertRotationFlags configure the self-managed webhook certificates and the CA injector.
type CertRotationFlags struct {
	Enabled                                        bool
	Namespace, SecretName, ServiceName             string
	ValidatingConfiguration, MutatingConfiguration string
	CAOverlap                                      time.Duration
}

// BindFlags defines every flag of the manager on fs, controller-runtime's --kubeconfig and zap's
// logging flags included, and returns where they land once fs is parsed.
func BindFlags(fs *flag.FlagSet) *Flags {
	f := &Flags{}
	fs.StringVar(&f.MetricsAddr, "metrics-bind-address", "0", "The address the metrics endpoint binds to. "+
		"Use :8443 for HTTPS or :8080 for HTTP, or leave as 0 to disable the metrics service.")
	fs.StringVar(&f.ProbeAddr, "health-probe-bind-address", ":8081", "The address the probe endpoint binds to.")
	fs.StringVar(&f.PprofAddr, "pprof-bind-address", "", "The address Go's pprof endpoints bind to, "+
		"e.g. 127.0.0.1:8082 (empty: none). They are unauthenticated: bind them to loopback.")
	fs.BoolVar(&f.LeaderElect, "leader-elect", false,
		"Enable leader election for controller manager. "+
			"Enabling this will ensure there is only one active controller manager.")
	// controller-runtime's defaults. A replica that dies without releasing leadership (SIGKILL,
	// node lost) is replaced after up to lease duration + retry period.
	fs.DurationVar(&f.LeaseDuration, "leader-elect-lease-duration", 15*time.Second,
		"How long non-leaders wait after the last renewal before taking over leadership.")
	fs.DurationVar(&f.RenewDeadline, "leader-elect-renew-deadline", 10*time.Second,
		"How long the leader keeps retrying to renew before giving leadership up (and exiting).")
	fs.DurationVar(&f.RetryPeriod, "leader-elect-retry-period", 2*time.Second,
		"How often candidates try to acquire or renew leadership.")
	fs.BoolVar(&f.SecureMetrics, "metrics-secure", true,
		"If set, the metrics endpoint is served securely via HTTPS. Use --metrics-secure=false to use HTTP instead.")
	fs.StringVar(&f.WebhookCertPath, "webhook-cert-path", "", "The directory that contains the webhook certificate.")
	fs.StringVar(&f.WebhookCertName, "webhook-cert-name", "tls.crt", "The name of the webhook certificate file.")
	fs.StringVar(&f.WebhookCertKey, "webhook-cert-key", "tls.key", "The name of the webhook key file.")
	fs.DurationVar(&f.StatusMinInterval, "status-min-interval", controllers.DefaultStatusMinInterval, fmt.Sprintf(
		"Coalesce FencedLock status writes of a busy lock: after a burst of %d, one per this interval (0: write every change).",
		controllers.StatusBurst))
	fs.DurationVar(&f.StatusRenewalInterval, "status-renewal-interval", controllers.DefaultStatusRenewalInterval,
		"How often a renewal alone rewrites a held lock's status.renewTime (0: at every renewal); the Lease has every renewal, "+
			"and any other change is written at once.")
	fs.IntVar(&f.MaxConcurrentReconciles, "max-concurrent-reconciles", controllers.DefaultMaxConcurrentReconciles,
		"Locks reconciled in parallel.")
	fs.IntVar(&f.EventBurst, "event-burst", controllers.DefaultEventBurst,
		"Granted/Released events a lock may emit in a burst (0: unlimited).")
	fs.DurationVar(&f.EventInterval, "event-interval", controllers.DefaultEventInterval,
		"After a burst, one Granted/Released event per lock per this interval.")
	r := &f.CertRotation
	fs.BoolVar(&r.Enabled, "cert-rotation", true, "Manage the webhook certificates in-cluster (CA and serving "+
		"certificate in a Secret, CA injected into the webhook configurations, rotated). Off when --webhook-cert-path is set.")
	fs.StringVar(&r.Namespace, "cert-namespace", os.Getenv("POD_NAMESPACE"),
		"Namespace of the certificate Secret and the webhook Service.")
	fs.StringVar(&r.SecretName, "cert-secret-name", "fencedlock-webhook-server-cert", "Secret holding the webhook certificates.")
	fs.StringVar(&r.ServiceName, "webhook-service-name", "fencedlock-webhook-service", "Service in front of the webhook server.")
	fs.StringVar(&r.ValidatingConfiguration, "validating-webhook-configuration", "fencedlock-validating-webhook-configuration",
		"ValidatingWebhookConfiguration to inject the CA into.")
	fs.StringVar(&r.MutatingConfiguration, "mutating-webhook-configuration", "fencedlock-mutating-webhook-configuration",
		"MutatingWebhookConfiguration to inject the CA into.")
	fs.DurationVar(&r.CAOverlap, "ca-bundle-overlap", 10*time.Minute, "How long a superseded CA stays in the "+
		"webhook configurations after a CA rotation (self-managed certificates), while the replicas move to the new "+
		"certificate: longer than the kubelet takes to update a mounted Secret.")
	fs.StringVar(&f.WebhookHost, "webhook-host", "", "Address the webhook server binds to (empty: all).")
	fs.IntVar(&f.WebhookPort, "webhook-port", 9443, "Port the webhook server listens on. "+
		"Defaults to 9443. Set -1 to disable the webhook server.")
	fs.StringVar(&f.MetricsCertPath, "metrics-cert-path", "",
		"The directory that contains the metrics server certificate.")
	fs.StringVar(&f.MetricsCertName, "metrics-cert-name", "tls.crt", "The name of the metrics server certificate file.")
	fs.StringVar(&f.MetricsCertKey, "metrics-cert-key", "tls.key", "The name of the metrics server key file.")
	fs.BoolVar(&f.EnableHTTP2, "enable-http2", false,
		"If set, HTTP/2 will be enabled for the metrics and webhook servers")
	fs.BoolVar(&f.Version, "version", false, "Print the manager's version and exit.")
	f.Zap.BindFlags(fs)
	// ctrl.GetConfigOrDie reads --kubeconfig; controller-runtime registers it on flag.CommandLine
	// when imported, and here on any other flag set.
	config.RegisterFlags(fs)
	return f
}
