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

// Package setup wires the fencedlock manager: its scheme and cache, the FencedLock controller with
// its field indexes, the webhooks and the health checks. cmd/manager runs what it builds, and the
// tests run the same (test/util), so the two cannot drift. It lives under cmd/, the top of the
// import chain (it imports controllers and webhook, which never import each other), where
// test/util can still import it, and the docs checks (test/docs, cmd/kubectl-fencedlock's test)
// read the manager's flags and metrics from it; nothing else should.
package setup

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/controllers"
)

// Scheme returns a scheme with the built-in types and fencedlock's.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := locksv1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// Options is what differs between the manager of cmd/manager and those of the tests.
type Options struct {
	// Manager configures the manager's listeners, leader election and webhook server; NewManager
	// sets its Scheme and Cache.
	Manager ctrl.Options
	// Controller configures the FencedLock controller, after NewFencedLockReconciler's defaults.
	Controller []controllers.Option
	// Webhooks, if not nil, registers the fence and the pod gate on Manager.WebhookServer.
	Webhooks *Webhooks
}

// NewManager returns a manager for cfg running the FencedLock controller and, with o.Webhooks, the
// webhooks, with its healthz check and a readyz check: ready once the webhooks serve (see Webhooks).
func NewManager(cfg *rest.Config, o Options) (ctrl.Manager, error) {
	cfg = clientConfig(cfg)
	mo := o.Manager
	mo.Scheme = Scheme()
	mo.Cache = controllers.CacheOptions()
	mgr, err := ctrl.NewManager(cfg, mo)
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	r := controllers.NewFencedLockReconciler(mgr.GetClient(), mgr.GetAPIReader(),
		mgr.GetEventRecorder(controllers.EventReporter), o.Controller...)
	if err := r.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the FencedLock controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("adding the health check: %w", err)
	}
	ready := healthz.Ping
	if o.Webhooks != nil {
		if ready, err = o.Webhooks.addTo(mgr, registerWebhooks); err != nil {
			return nil, err
		}
	}
	if err := mgr.AddReadyzCheck("readyz", ready); err != nil {
		return nil, fmt.Errorf("adding the ready check: %w", err)
	}
	return mgr, nil
}

// clientConfig is cfg as the manager talks to the API server: a copy, with its Event requests
// bounded (boundEvents) and no compression.
//
// The manager's informers follow every lock Lease, waiter Lease and lock pod of the cluster. An
// API server with WatchListCompression (beta, on by default since Kubernetes 1.37) gzips such a
// watch for its whole life when the client accepts gzip: every event is compressed for this one
// watcher and decompressed here, CPU on both ends (docs/benchmarks.md) to save bytes on what is
// usually the cluster's own network.
func clientConfig(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.DisableCompression = true
	cfg.Wrap(boundEvents(eventsInFlight))
	return cfg
}
