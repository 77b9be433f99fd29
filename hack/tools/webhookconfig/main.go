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

// Command webhookconfig rewrites the generated webhook configurations (config/webhook) for a
// manager running outside the cluster: each webhook is called by URL on a local address with the
// given CA bundle instead of through the in-cluster Service, as envtest does. Output is YAML for
// `kubectl apply -f -`.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

func main() {
	in := flag.String("in", "config/webhook/manifests.yaml", "Generated webhook configurations")
	base := flag.String("url", "https://127.0.0.1:9443", "Base URL the manager's webhook server listens on")
	caFile := flag.String("ca", "", "PEM CA bundle that signed the webhook server's certificate")
	prefix := flag.String("name-prefix", "fencedlock-", "Prefix for the configurations' names (as config/default)")
	flag.Parse()
	if err := run(*in, *base, *caFile, *prefix); err != nil {
		fmt.Fprintln(os.Stderr, "webhookconfig:", err)
		os.Exit(1)
	}
}

func run(in, base, caFile, prefix string) error {
	raw, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return fmt.Errorf("reading CA: %w", err)
	}
	var out bytes.Buffer
	for doc := range strings.SplitSeq(string(raw), "\n---") {
		if strings.TrimSpace(strings.Trim(doc, "-")) == "" {
			continue
		}
		var kind struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &kind); err != nil {
			return err
		}
		var obj any
		switch kind.Kind {
		case "ValidatingWebhookConfiguration":
			var c admissionregistrationv1.ValidatingWebhookConfiguration
			configs := func() (out []*admissionregistrationv1.WebhookClientConfig) {
				for i := range c.Webhooks {
					out = append(out, &c.Webhooks[i].ClientConfig)
				}
				return out
			}
			obj, err = rewrite(doc, &c, &c.ObjectMeta, configs, prefix, base, ca)
		case "MutatingWebhookConfiguration":
			var c admissionregistrationv1.MutatingWebhookConfiguration
			configs := func() (out []*admissionregistrationv1.WebhookClientConfig) {
				for i := range c.Webhooks {
					out = append(out, &c.Webhooks[i].ClientConfig)
				}
				return out
			}
			obj, err = rewrite(doc, &c, &c.ObjectMeta, configs, prefix, base, ca)
		default:
			return fmt.Errorf("unexpected kind %q in %s", kind.Kind, in)
		}
		if err != nil {
			return err
		}
		b, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		out.WriteString("---\n")
		out.Write(b)
	}
	_, err = os.Stdout.Write(out.Bytes())
	return err
}

// rewrite decodes doc into obj, prefixes its name and points every webhook at base by URL.
func rewrite(doc string, obj any, meta *metav1.ObjectMeta, configs func() []*admissionregistrationv1.WebhookClientConfig,
	prefix, base string, ca []byte) (any, error) {
	if err := yaml.Unmarshal([]byte(doc), obj); err != nil {
		return nil, err
	}
	meta.Name = prefix + meta.Name
	for _, cc := range configs() {
		*cc = byURL(*cc, base, ca)
	}
	return obj, nil
}

func byURL(cc admissionregistrationv1.WebhookClientConfig, base string, ca []byte) admissionregistrationv1.WebhookClientConfig {
	path := ""
	if cc.Service != nil && cc.Service.Path != nil {
		path = *cc.Service.Path
	}
	url := strings.TrimSuffix(base, "/") + path
	return admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: ca}
}
