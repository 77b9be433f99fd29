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

package cabundle

import (
	"bytes"
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// configuration is one webhook configuration whose webhooks' caBundle the injector keeps,
// whatever its kind: the validating and the mutating ones differ only in their Go types.
type configuration struct {
	kind, name string
	factory    informers.SharedInformerFactory
	informer   cache.SharedIndexInformer
	// update rebundles a copy of the cached object and writes it if any bundle changed,
	// reporting whether it did.
	update func(ctx context.Context, cached any, rebundle func([]byte) []byte) (bool, error)
}

func validating(cs kubernetes.Interface, name string) *configuration {
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, byName(name))
	return newConfiguration(f, f.Admissionregistration().V1().ValidatingWebhookConfigurations().Informer(),
		"ValidatingWebhookConfiguration", name,
		func(c *admissionregistrationv1.ValidatingWebhookConfiguration) []*admissionregistrationv1.WebhookClientConfig {
			return clientConfigs(c.Webhooks, func(w *admissionregistrationv1.ValidatingWebhook) *admissionregistrationv1.WebhookClientConfig {
				return &w.ClientConfig
			})
		}, cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update)
}

func mutating(cs kubernetes.Interface, name string) *configuration {
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, byName(name))
	return newConfiguration(f, f.Admissionregistration().V1().MutatingWebhookConfigurations().Informer(),
		"MutatingWebhookConfiguration", name,
		func(c *admissionregistrationv1.MutatingWebhookConfiguration) []*admissionregistrationv1.WebhookClientConfig {
			return clientConfigs(c.Webhooks, func(w *admissionregistrationv1.MutatingWebhook) *admissionregistrationv1.WebhookClientConfig {
				return &w.ClientConfig
			})
		}, cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Update)
}

// newConfiguration returns the configuration of that kind and name, of Go type T, cached by
// informer (of factory), whose webhooks' client configs are configs and which write updates.
func newConfiguration[T runtime.Object](factory informers.SharedInformerFactory, informer cache.SharedIndexInformer,
	kind, name string, configs func(T) []*admissionregistrationv1.WebhookClientConfig,
	write func(context.Context, T, metav1.UpdateOptions) (T, error)) *configuration {
	return &configuration{kind: kind, name: name, factory: factory, informer: informer,
		update: func(ctx context.Context, cached any, rebundle func([]byte) []byte) (bool, error) {
			c := cached.(T).DeepCopyObject().(T)
			changed := false
			for _, cc := range configs(c) {
				if b := rebundle(cc.CABundle); !bytes.Equal(b, cc.CABundle) {
					cc.CABundle, changed = b, true
				}
			}
			if !changed {
				return false, nil
			}
			if _, err := write(ctx, c, metav1.UpdateOptions{}); err != nil {
				return false, fmt.Errorf("updating %s %s: %w", kind, name, err)
			}
			return true, nil
		}}
}

// clientConfigs returns the client config of each webhook of ws.
func clientConfigs[W any](ws []W, of func(*W) *admissionregistrationv1.WebhookClientConfig) []*admissionregistrationv1.WebhookClientConfig {
	cfgs := make([]*admissionregistrationv1.WebhookClientConfig, 0, len(ws))
	for w := range ws {
		cfgs = append(cfgs, of(&ws[w]))
	}
	return cfgs
}

// sync sets the caBundle of each of the configuration's webhooks to rebundle of the one in
// place, and reports whether it wrote the configuration.
func (c *configuration) sync(ctx context.Context, rebundle func([]byte) []byte) (bool, error) {
	o, ok, err := c.informer.GetStore().GetByKey(c.name)
	if err != nil {
		return false, err
	}
	if !ok {
		return false, fmt.Errorf("%s %s not found", c.kind, c.name)
	}
	return c.update(ctx, o, rebundle)
}
