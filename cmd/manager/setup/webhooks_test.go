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
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// A manager that talks to no API server: enough to run Runnables that need none.
func offlineManager(t *testing.T) ctrl.Manager {
	t.Helper()
	mgr, err := ctrl.NewManager(&rest.Config{Host: "https://127.0.0.1:1"}, ctrl.Options{
		Scheme: Scheme(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		WebhookServer: webhook.NewServer(webhook.Options{Port: -1}), // no certificates here
	})
	if err != nil {
		t.Fatal(err)
	}
	return mgr
}

// A registration that fails stops the manager, which reports the error (it used to os.Exit from a
// goroutine); until the certificates are ready it waits, and the manager runs.
func TestRegistrationErrorStopsTheManager(t *testing.T) {
	mgr := offlineManager(t)
	certsReady := make(chan struct{})
	boom := errors.New("boom")
	reg := &registration{mgr: mgr, certsReady: certsReady, registered: make(chan struct{}),
		setup: func(ctrl.Manager) error { return boom }}
	if err := mgr.Add(reg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()

	select {
	case err := <-done:
		t.Fatalf("the manager stopped before the certificates were ready: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	close(certsReady)
	select {
	case err := <-done:
		if !errors.Is(err, boom) {
			t.Fatalf("manager stopped with %v; want the registration's error", err)
		}
	case <-ctx.Done():
		t.Fatal("the manager did not stop on the registration's error")
	}
	select {
	case <-reg.registered:
		t.Error("a failed registration counts as registered")
	default:
	}
}

// Readiness waits for the registration, then for Ready (then for the webhook server, which
// needs certificates: the integration and end-to-end suites run it).
func TestWebhooksReadiness(t *testing.T) {
	mgr := offlineManager(t)
	certsReady := make(chan struct{})
	notYet := errors.New("CA not injected")
	w := &Webhooks{CertsReady: certsReady, Ready: func() error { return notYet }}
	check, err := w.addTo(mgr, func(m ctrl.Manager) error {
		m.GetWebhookServer().Register("/test", http.NotFoundHandler())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, "/readyz", nil)
	if err := check(req); err == nil {
		t.Error("ready before the webhooks registered")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	close(certsReady)
	deadline := time.Now().Add(10 * time.Second)
	for err := check(req); !errors.Is(err, notYet); err = check(req) {
		if time.Now().After(deadline) {
			t.Fatalf("readiness = %v; want Ready's error once registered", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
