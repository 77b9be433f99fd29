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
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// caInjector puts the CA of the certificate Secret into the caBundle of every webhook of both
// webhook configurations, and keeps the CAs it replaces there for overlap. cert-controller's own
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
type caInjector struct {
	cs                     kubernetes.Interface
	namespace, secretName  string
	validating, mutating   string
	secretLabels           map[string]string
	overlap                time.Duration
	clock                  clock.Clock
	firstSeenMu            sync.Mutex
	firstSeen              map[[32]byte]time.Time // when this process first saw each CA in the Secret
	injected               atomic.Bool
	trigger                chan struct{}
	secrets                cache.Store
	validatings, mutatings cache.Store
}

// pemCertificate is the PEM block type of a certificate.
const pemCertificate = "CERTIFICATE"

// maxOldCAs bounds the superseded CAs kept in a bundle (rotations in quick succession).
const maxOldCAs = 3

func newCAInjector(cs kubernetes.Interface, rot certRotation) *caInjector {
	return &caInjector{cs: cs, namespace: rot.namespace, secretName: rot.secretName,
		validating: rot.validatingConfigName, mutating: rot.mutatingConfig, overlap: rot.caOverlap,
		secretLabels: map[string]string{"app.kubernetes.io/name": "fencedlock"},
		clock:        clock.RealClock{}, firstSeen: map[[32]byte]time.Time{}, trigger: make(chan struct{}, 1)}
}

// NeedLeaderElection: every replica keeps the bundle.
func (i *caInjector) NeedLeaderElection() bool { return false }

// Injected is true once this process has seen the Secret's CA in both configurations.
func (i *caInjector) Injected() bool { return i.injected.Load() }

func (i *caInjector) kick() {
	select {
	case i.trigger <- struct{}{}:
	default:
	}
}

// Start watches the Secret and the webhook configurations and syncs on every change, and every
// minute (to drop superseded CAs once their overlap is over).
func (i *caInjector) Start(ctx context.Context) error {
	byName := func(name string) informers.SharedInformerOption {
		return informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		})
	}
	sf := informers.NewSharedInformerFactoryWithOptions(i.cs, 0, informers.WithNamespace(i.namespace), byName(i.secretName))
	vf := informers.NewSharedInformerFactoryWithOptions(i.cs, 0, byName(i.validating))
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { i.kick() },
		UpdateFunc: func(any, any) { i.kick() },
		DeleteFunc: func(any) { i.kick() },
	}
	si := sf.Core().V1().Secrets().Informer()
	vi := vf.Admissionregistration().V1().ValidatingWebhookConfigurations().Informer()
	for _, inf := range []cache.SharedIndexInformer{si, vi} {
		if _, err := inf.AddEventHandler(handler); err != nil {
			return err
		}
	}
	i.secrets, i.validatings = si.GetStore(), vi.GetStore()
	factories := []informers.SharedInformerFactory{sf, vf}
	if i.mutating != "" {
		mf := informers.NewSharedInformerFactoryWithOptions(i.cs, 0, byName(i.mutating))
		mi := mf.Admissionregistration().V1().MutatingWebhookConfigurations().Informer()
		if _, err := mi.AddEventHandler(handler); err != nil {
			return err
		}
		i.mutatings = mi.GetStore()
		factories = append(factories, mf)
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
			setupLog.Info("CA bundle not synced yet; retrying", "reason", err.Error())
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
			i.kick()
		}
	}
}

func (i *caInjector) sync(ctx context.Context) error {
	obj, ok, err := i.secrets.GetByKey(i.namespace + "/" + i.secretName)
	if err != nil {
		return err
	}
	if !ok {
		// Deleted: recreate it empty, for the rotator to fill in and the kubelet to mount.
		_, err := i.cs.CoreV1().Secrets(i.namespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
			Namespace: i.namespace, Name: i.secretName, Labels: i.secretLabels}, Type: corev1.SecretTypeOpaque},
			metav1.CreateOptions{})
		if err == nil {
			setupLog.Info("Recreated the deleted webhook certificate Secret", "secret", i.secretName)
		}
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}
	ca := obj.(*corev1.Secret).Data["ca.crt"]
	if len(ca) == 0 {
		return nil // the rotator has not filled it in yet
	}
	current, err := parseCerts(ca)
	if err != nil || len(current) == 0 {
		return fmt.Errorf("secret %s: ca.crt: %v", i.secretName, err)
	}
	now := i.clock.Now()
	i.firstSeenMu.Lock()
	key := sha256.Sum256(current[0].Raw)
	seen, known := i.firstSeen[key]
	if !known {
		seen = now
		i.firstSeen[key] = now
	}
	i.firstSeenMu.Unlock()
	keepOld := now.Sub(seen) < i.overlap

	done := true
	if o, ok, err := i.validatings.GetByKey(i.validating); err != nil {
		return err
	} else if ok {
		v := o.(*admissionregistrationv1.ValidatingWebhookConfiguration).DeepCopy()
		cfgs := make([]*admissionregistrationv1.WebhookClientConfig, 0, len(v.Webhooks))
		for w := range v.Webhooks {
			cfgs = append(cfgs, &v.Webhooks[w].ClientConfig)
		}
		if rebundle(cfgs, current, keepOld, now) {
			if _, err := i.cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, v, metav1.UpdateOptions{}); err != nil {
				return err
			}
			done = false // seen once the informer has the update
		}
	} else {
		return fmt.Errorf("ValidatingWebhookConfiguration %s not found", i.validating)
	}
	if i.mutatings != nil {
		o, ok, err := i.mutatings.GetByKey(i.mutating)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("MutatingWebhookConfiguration %s not found", i.mutating)
		}
		m := o.(*admissionregistrationv1.MutatingWebhookConfiguration).DeepCopy()
		cfgs := make([]*admissionregistrationv1.WebhookClientConfig, 0, len(m.Webhooks))
		for w := range m.Webhooks {
			cfgs = append(cfgs, &m.Webhooks[w].ClientConfig)
		}
		if rebundle(cfgs, current, keepOld, now) {
			if _, err := i.cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, m, metav1.UpdateOptions{}); err != nil {
				return err
			}
			done = false
		}
	}
	if done && !i.injected.Swap(true) {
		setupLog.Info("CA injected into the webhook configurations")
	}
	return nil
}

// rebundle sets the caBundle of each webhook's client config (see bundle) and reports whether any
// changed.
func rebundle(cfgs []*admissionregistrationv1.WebhookClientConfig, current []*x509.Certificate, keepOld bool,
	now time.Time) bool {
	changed := false
	for _, c := range cfgs {
		if b := bundle(current, c.CABundle, keepOld, now); !bytes.Equal(b, c.CABundle) {
			c.CABundle, changed = b, true
		}
	}
	return changed
}

// bundle is the caBundle for the current CA given the one in place: the current CA first, then,
// while keepOld, the other unexpired CAs already there (newest first, at most maxOldCAs).
func bundle(current []*x509.Certificate, existing []byte, keepOld bool, now time.Time) []byte {
	var out bytes.Buffer
	for _, c := range current {
		_ = pem.Encode(&out, &pem.Block{Type: pemCertificate, Bytes: c.Raw})
	}
	if !keepOld {
		return out.Bytes()
	}
	old, _ := parseCerts(existing)
	old = slices.DeleteFunc(old, func(c *x509.Certificate) bool {
		return now.After(c.NotAfter) || slices.ContainsFunc(current, func(k *x509.Certificate) bool { return k.Equal(c) })
	})
	slices.SortStableFunc(old, func(a, b *x509.Certificate) int { return b.NotBefore.Compare(a.NotBefore) })
	for n, c := range old {
		if n == maxOldCAs {
			break
		}
		_ = pem.Encode(&out, &pem.Block{Type: pemCertificate, Bytes: c.Raw})
	}
	return out.Bytes()
}

// parseCerts parses the PEM certificates in b, skipping anything else.
func parseCerts(b []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for len(b) > 0 {
		var block *pem.Block
		if block, b = pem.Decode(b); block == nil {
			break
		}
		if block.Type != pemCertificate {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return certs, err
		}
		certs = append(certs, c)
	}
	return certs, nil
}
