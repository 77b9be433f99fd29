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
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/fencedlock/fencedlock/cmd/manager/internal/cabundle"
	"github.com/fencedlock/fencedlock/cmd/manager/setup"
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

// webhooks returns how the webhooks register with rot. With self-managed certificates: once the
// rotator has written them, ready once the CA injector has put their CA in the webhook
// configurations, and add (to call on the manager) adds the rotator and the injector. Without: at
// once (cert-manager's certificates are mounted before the manager starts).
func (rot certRotation) webhooks(cfg *rest.Config) (w *setup.Webhooks, add func(ctrl.Manager) error, err error) {
	if !rot.enabled {
		return &setup.Webhooks{}, func(ctrl.Manager) error { return nil }, nil
	}
	if rot.namespace == "" {
		return nil, nil, errors.New("--cert-namespace (or POD_NAMESPACE) is required for self-managed certificates")
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("creating the CA injector's clientset: %w", err)
	}
	// The CA goes into the webhook configurations through the CA injector, not the rotator: it
	// keeps the previous CA there while the replicas move to the new certificate.
	inj := cabundle.New(cs, cabundle.Config{Namespace: rot.namespace, SecretName: rot.secretName,
		ValidatingConfiguration: rot.validatingConfigName, MutatingConfiguration: rot.mutatingConfig,
		Overlap: rot.caOverlap})
	certsReady := make(chan struct{})
	w = &setup.Webhooks{CertsReady: certsReady, Ready: func() error {
		if !inj.Injected() {
			return errors.New("the CA is not in the webhook configurations yet")
		}
		return nil
	}}
	add = func(mgr ctrl.Manager) error {
		if err := mgr.Add(inj); err != nil {
			return fmt.Errorf("adding the CA injector: %w", err)
		}
		err := rotator.AddRotator(mgr, &rotator.CertRotator{
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
			return fmt.Errorf("setting up certificate rotation: %w", err)
		}
		return nil
	}
	return w, add, nil
}

// The certificate rotator keeps its Secret in the manager's namespace, and the CA injector the CA
// in the webhook configurations.
// +kubebuilder:rbac:groups="",namespace=system,resources=secrets,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations;mutatingwebhookconfigurations,verbs=get;list;watch;update;patch
