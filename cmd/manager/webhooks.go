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
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"github.com/fencedlock/fencedlock/cmd/manager/internal/cabundle"
	fencewebhook "github.com/fencedlock/fencedlock/webhook"
)

// certRotation configures the self-managed webhook certificates: without cert-manager, the
// manager keeps a CA and a serving certificate in a Secret, writes them to the webhook server's
// cert dir, injects the CA into the webhook configurations and rotates both before they expire.
type certRotation struct {
	enabled                              bool
	namespace, secretName, serviceName   string
	validatingConfigName, mutatingConfig string
	certDir                              string
	// caOverlap is how long a superseded CA stays in the webhook configurations' caBundle.
	caOverlap time.Duration
}

// setupWebhooks registers fencedlock's webhooks once their serving certificates exist and returns
// the readiness check: not ready until the certificates are in place and the server is serving.
func setupWebhooks(mgr ctrl.Manager, rot certRotation) (healthz.Checker, error) {
	certsReady := make(chan struct{})
	caInjected := func() bool { return true }
	if rot.enabled {
		if rot.namespace == "" {
			return nil, errors.New("--cert-namespace (or POD_NAMESPACE) is required for self-managed certificates")
		}
		// The CA goes into the webhook configurations through the CA injector, not the rotator: it
		// keeps the previous CA there while the replicas move to the new certificate.
		cs, err := kubernetes.NewForConfig(mgr.GetConfig())
		if err != nil {
			return nil, err
		}
		inj := cabundle.New(cs, cabundle.Config{Namespace: rot.namespace, SecretName: rot.secretName,
			ValidatingConfiguration: rot.validatingConfigName, MutatingConfiguration: rot.mutatingConfig,
			Overlap: rot.caOverlap})
		if err := mgr.Add(inj); err != nil {
			return nil, err
		}
		caInjected = inj.Injected
		err = rotator.AddRotator(mgr, &rotator.CertRotator{
			SecretKey:      types.NamespacedName{Namespace: rot.namespace, Name: rot.secretName},
			CertDir:        rot.certDir,
			CAName:         "fencedlock-ca",
			CAOrganization: "fencedlock",
			DNSName:        fmt.Sprintf("%s.%s.svc", rot.serviceName, rot.namespace),
			ExtraDNSNames:  []string{fmt.Sprintf("%s.%s.svc.cluster.local", rot.serviceName, rot.namespace)},
			IsReady:        certsReady,
			// Every replica serves the webhook, so every replica needs the certificates.
			RequireLeaderElection: false,
		})
		if err != nil {
			return nil, fmt.Errorf("setting up certificate rotation: %w", err)
		}
	} else {
		close(certsReady)
	}

	registered := make(chan struct{})
	go func() {
		// The webhook server reads its certificates when it starts: register (and so start) it
		// only once they exist.
		<-certsReady
		if err := fencewebhook.SetupWithManager(mgr, clock.RealClock{}); err != nil {
			setupLog.Error(err, "Failed to set up the webhooks")
			os.Exit(1)
		}
		close(registered)
	}()
	return func(req *http.Request) error {
		select {
		case <-registered:
			if !caInjected() {
				return errors.New("the CA is not in the webhook configurations yet")
			}
			return mgr.GetWebhookServer().StartedChecker()(req)
		default:
			return errors.New("webhook certificates are not ready yet")
		}
	}, nil
}

// The certificate rotator keeps its Secret in the manager's namespace and injects the CA into the
// webhook configurations.
// +kubebuilder:rbac:groups="",namespace=system,resources=secrets,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations;mutatingwebhookconfigurations,verbs=get;list;watch;update;patch
