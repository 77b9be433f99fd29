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

// Package config gives Go code what the install is made of, read from the manifests kustomize and
// the chart are built from (so that a list of them cannot drift): the admission policies of
// config/policy and the webhooks of config/webhook, and the oldest Kubernetes that serves them.
// kubectl fencedlock check verifies a cluster against it.
package config

import (
	"embed"
	"fmt"
	"io/fs"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// MinKubernetesMinor is the oldest Kubernetes minor version (1.x) fencedlock runs on: the first
// that serves every admission policy of config/policy at the version it is written in
// (MutatingAdmissionPolicy, the token record, is admissionregistration.k8s.io/v1 from 1.36). The
// manager refuses to start below it, kubectl fencedlock check reports it, and test/docs holds the
// README, the chart's kubeVersion and docs/operations.md's compatibility table to it.
const MinKubernetesMinor = 36

//go:embed policy/*.yaml webhook/manifests.yaml
var manifests embed.FS

// Policies returns the admission policies and their bindings of config/policy, named as there
// (an install prefixes the names: "fencedlock-" with kustomize, the release's with Helm).
func Policies() ([]*unstructured.Unstructured, error) {
	files, err := fs.Glob(manifests, "policy/*.yaml")
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, f := range files {
		if strings.HasPrefix(f, "policy/kustom") {
			continue // kustomize's own
		}
		objs, err := decode(f)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

// WebhookConfigurations returns the webhook configurations of config/webhook.
func WebhookConfigurations() ([]*unstructured.Unstructured, error) {
	return decode("webhook/manifests.yaml")
}

func decode(file string) ([]*unstructured.Unstructured, error) {
	fh, err := manifests.Open(file)
	if err != nil {
		return nil, err
	}
	defer func() { _ = fh.Close() }()
	objs, err := Decode(fh)
	if err != nil {
		return nil, fmt.Errorf("config/%s: %w", file, err)
	}
	return objs, nil
}
