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

// Package cabundle keeps the CA of the manager's self-managed webhook certificates in the caBundle
// of its webhook configurations, across CA rotations.
package cabundle

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
)

// Config names what an Injector keeps.
type Config struct {
	// Namespace and SecretName name the certificate Secret (its ca.crt is the current CA).
	Namespace, SecretName string
	// ValidatingConfiguration and MutatingConfiguration name the webhook configurations whose
	// webhooks get the CA (an empty name: none of that kind).
	ValidatingConfiguration, MutatingConfiguration string
	// Overlap is how long a superseded CA stays in the bundles after a rotation.
	Overlap time.Duration
}

// Injector puts the CA of the certificate Secret into the caBundle of every webhook of the webhook
// configurations, and keeps the CAs it replaces there for Config.Overlap. cert-controller's own
// injection replaces the bundle with the new CA at once, while each replica goes on serving its
// previous certificate until the kubelet projects the new Secret into the pod (up to about a
// minute) and the webhook server reloads it: every admission in between failed TLS verification.
// With both CAs in the bundle, the old certificate and the new one both verify.
//
// It also recreates the Secret (empty) when it is deleted: the rotator fills in a Secret but never
// creates one, and without it no replica could start.
//
// Every replica runs it (the bundle must be right whichever replica is up); updates are
// conditional on the resourceVersion read, and the result does not depend on who writes it.
// Build it with New; it is a manager Runnable.
type Injector struct {
	cs           kubernetes.Interface
	cfg          Config
	secretLabels map[string]string
	clock        clock.Clock
	log          logr.Logger
	firstSeenMu  sync.Mutex
	firstSeen    map[[32]byte]time.Time // when this process first saw each CA in the Secret
	injected     atomic.Bool
	trigger      chan struct{}
	secrets      cache.Store
	configs      []*configuration
}

// New returns an Injector keeping the configurations cfg names through cs.
func New(cs kubernetes.Interface, cfg Config) *Injector {
	i := &Injector{cs: cs, cfg: cfg, secretLabels: map[string]string{"app.kubernetes.io/name": "fencedlock"},
		clock: clock.RealClock{}, log: ctrl.Log.WithName("ca-injector"), firstSeen: map[[32]byte]time.Time{},
		trigger: make(chan struct{}, 1)}
	if n := cfg.ValidatingConfiguration; n != "" {
		i.configs = append(i.configs, validating(cs, n))
	}
	if n := cfg.MutatingConfiguration; n != "" {
		i.configs = append(i.configs, mutating(cs, n))
	}
	return i
}

// NeedLeaderElection: every replica keeps the bundle.
func (i *Injector) NeedLeaderElection() bool { return false }

// Injected is true once this process has seen the Secret's CA in every configuration.
func (i *Injector) Injected() bool { return i.injected.Load() }

func (i *Injector) kick() {
	select {
	case i.trigger <- struct{}{}:
	default:
	}
}

// byName restricts an informer factory to the objects of one name.
func byName(name string) informers.SharedInformerOption {
	return informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	})
}

// Start watches the Secret and the webhook configurations and syncs on every change, and every
// minute (to drop superseded CAs once their overlap is over).
func (i *Injector) Start(ctx context.Context) error {
	sf := informers.NewSharedInformerFactoryWithOptions(i.cs, 0, informers.WithNamespace(i.cfg.Namespace),
		byName(i.cfg.SecretName))
	si := sf.Core().V1().Secrets().Informer()
	i.secrets = si.GetStore()
	factories := make([]informers.SharedInformerFactory, 0, 1+len(i.configs))
	infs := make([]cache.SharedIndexInformer, 0, 1+len(i.configs))
	factories, infs = append(factories, sf), append(infs, si)
	for _, c := range i.configs {
		factories, infs = append(factories, c.factory), append(infs, c.informer)
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { i.kick() },
		UpdateFunc: func(any, any) { i.kick() },
		DeleteFunc: func(any) { i.kick() },
	}
	for _, inf := range infs {
		if _, err := inf.AddEventHandler(handler); err != nil {
			return fmt.Errorf("watching for the CA injector: %w", err)
		}
	}
	for _, f := range factories {
		f.Start(ctx.Done())
	}
	for _, f := range factories {
		f.WaitForCacheSync(ctx.Done())
	}
	defer func() {
		for _, f := range factories {
			f.Shutdown()
		}
	}()
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	i.kick()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-i.trigger:
		}
		if err := i.sync(ctx); err != nil {
			i.log.Info("CA bundle not synced yet; retrying", "reason", err.Error())
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
			i.kick()
		}
	}
}

// sync brings every configuration's bundles up to date with the Secret's CA.
func (i *Injector) sync(ctx context.Context) error {
	obj, ok, err := i.secrets.GetByKey(i.cfg.Namespace + "/" + i.cfg.SecretName)
	if err != nil {
		return err
	}
	if !ok {
		return i.recreateSecret(ctx)
	}
	ca := obj.(*corev1.Secret).Data["ca.crt"]
	if len(ca) == 0 {
		return nil // the rotator has not filled it in yet
	}
	current, err := parseCerts(ca)
	if err == nil && len(current) == 0 {
		err = errors.New("no certificate")
	}
	if err != nil {
		return fmt.Errorf("secret %s: ca.crt: %w", i.cfg.SecretName, err)
	}
	now := i.clock.Now()
	keepOld := now.Sub(i.firstSeenAt(current[0].Raw, now)) < i.cfg.Overlap

	done := true
	for _, c := range i.configs {
		wrote, err := c.sync(ctx, func(b []byte) []byte { return bundle(current, b, keepOld, now) })
		if err != nil {
			return err
		}
		done = done && !wrote // seen once the informer has the update
	}
	if done && !i.injected.Swap(true) {
		i.log.Info("CA injected into the webhook configurations")
	}
	return nil
}

// firstSeenAt returns when this process first saw the CA of DER bytes raw (now, if it never did).
func (i *Injector) firstSeenAt(raw []byte, now time.Time) time.Time {
	i.firstSeenMu.Lock()
	defer i.firstSeenMu.Unlock()
	key := sha256.Sum256(raw)
	seen, known := i.firstSeen[key]
	if !known {
		seen = now
		i.firstSeen[key] = now
	}
	return seen
}

// recreateSecret creates the deleted Secret empty, for the rotator to fill in and the kubelet to
// mount.
func (i *Injector) recreateSecret(ctx context.Context) error {
	_, err := i.cs.CoreV1().Secrets(i.cfg.Namespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Namespace: i.cfg.Namespace, Name: i.cfg.SecretName, Labels: i.secretLabels}, Type: corev1.SecretTypeOpaque},
		metav1.CreateOptions{})
	switch {
	case err == nil:
		i.log.Info("Recreated the deleted webhook certificate Secret", "secret", i.cfg.SecretName)
		return nil
	case apierrors.IsAlreadyExists(err):
		return nil
	default:
		return fmt.Errorf("recreating Secret %s: %w", i.cfg.SecretName, err)
	}
}
