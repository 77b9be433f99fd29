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
	"fmt"
	"net/http"

	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	fencewebhook "github.com/fencedlock/fencedlock/webhook"
)

// Webhooks configures the registration of the fence and the pod gate.
type Webhooks struct {
	// CertsReady, if not nil, holds the registration back until it is closed: the webhook server
	// reads its certificates when it starts, and it starts once a webhook is registered. Nil: the
	// certificates exist, and the webhooks register before the manager starts.
	CertsReady <-chan struct{}
	// Ready, if not nil, is a further condition of readiness (e.g. the CA in the webhook
	// configurations): nil once met.
	Ready func() error
}

// registerWebhooks registers the fence and the pod gate on mgr's webhook server.
func registerWebhooks(mgr ctrl.Manager) error {
	// The gate stamps queue order on the real clock even when the controller runs on a fake one
	// (tests): a frozen clock would make every pod arrive at the same instant.
	return fencewebhook.SetupWithManager(mgr, clock.RealClock{})
}

// addTo has register (registerWebhooks, or a test's stand-in) register the webhooks on mgr, at
// once or (with CertsReady) from a Runnable, and returns the readiness check: the webhooks
// registered, Ready met and the server serving.
func (w *Webhooks) addTo(mgr ctrl.Manager, register func(ctrl.Manager) error) (healthz.Checker, error) {
	reg := &registration{mgr: mgr, certsReady: w.CertsReady, registered: make(chan struct{}), setup: register}
	if w.CertsReady == nil {
		if err := reg.register(); err != nil {
			return nil, err
		}
	} else if err := mgr.Add(reg); err != nil {
		return nil, fmt.Errorf("adding the webhook registration: %w", err)
	}
	return func(req *http.Request) error {
		select {
		case <-reg.registered:
		default:
			return errors.New("webhook certificates are not ready yet")
		}
		if w.Ready != nil {
			if err := w.Ready(); err != nil {
				return err
			}
		}
		return mgr.GetWebhookServer().StartedChecker()(req)
	}, nil
}

// registration is a manager Runnable registering the webhooks once the certificates exist. An
// error is returned, so the manager stops and reports it.
type registration struct {
	mgr        ctrl.Manager
	certsReady <-chan struct{}
	registered chan struct{}
	setup      func(ctrl.Manager) error
}

// NeedLeaderElection: every replica serves the webhooks.
func (r *registration) NeedLeaderElection() bool { return false }

// Start waits for the certificates, registers the webhooks and returns.
func (r *registration) Start(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-r.certsReady:
	}
	return r.register()
}

func (r *registration) register() error {
	if err := r.setup(r.mgr); err != nil {
		return fmt.Errorf("registering the webhooks: %w", err)
	}
	close(r.registered)
	return nil
}
