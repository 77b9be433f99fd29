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

package policyeval

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/fencedlock/fencedlock/config"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Load reads the ValidatingAdmissionPolicies of the *.yaml files of dir (documents of other kinds,
// bindings included, are skipped), applies the API server's defaults and compiles them. A policy
// whose expressions do not compile is an error here, where the API server would refuse every
// request it matches.
func Load(dir string) (*Policies, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, fmt.Errorf("policyeval: %w", err)
	}
	p := &Policies{}
	for _, f := range files {
		policies, err := readPolicies(f)
		if err != nil {
			return nil, fmt.Errorf("policyeval: %w", err)
		}
		for _, vap := range policies {
			h, err := compile(vap)
			if err != nil {
				return nil, fmt.Errorf("policyeval: %s: %w", f, err)
			}
			p.hooks = append(p.hooks, h)
		}
	}
	// The API server meets its policies in no set order; a fixed one keeps the reported refusal
	// stable when two policies refuse a write.
	slices.SortFunc(p.hooks, func(a, b hook) int { return strings.Compare(a.Policy.Name, b.Policy.Name) })
	return p, nil
}

// readPolicies decodes the ValidatingAdmissionPolicies of a multi-document YAML file.
func readPolicies(file string) ([]*admissionregistrationv1.ValidatingAdmissionPolicy, error) {
	fh, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer func() { _ = fh.Close() }()
	objs, err := config.Decode(fh)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	var out []*admissionregistrationv1.ValidatingAdmissionPolicy
	for _, obj := range objs {
		if obj.GetAPIVersion() != admissionregistrationv1.SchemeGroupVersion.String() ||
			obj.GetKind() != "ValidatingAdmissionPolicy" {
			continue
		}
		vap := &admissionregistrationv1.ValidatingAdmissionPolicy{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, vap, true); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		setDefaults(vap)
		out = append(out, vap)
	}
	return out, nil
}

// setDefaults applies the defaults the API server gives a stored policy
// (k8s.io/kubernetes/pkg/apis/admissionregistration/v1/defaults.go): the matchers read an absent
// selector as matching nothing, the API server stores it as matching everything.
func setDefaults(vap *admissionregistrationv1.ValidatingAdmissionPolicy) {
	spec := &vap.Spec
	if spec.FailurePolicy == nil {
		spec.FailurePolicy = new(admissionregistrationv1.Fail)
	}
	if spec.MatchConstraints == nil {
		spec.MatchConstraints = &admissionregistrationv1.MatchResources{}
	}
	mc := spec.MatchConstraints
	if mc.MatchPolicy == nil {
		mc.MatchPolicy = new(admissionregistrationv1.Equivalent)
	}
	if mc.NamespaceSelector == nil {
		mc.NamespaceSelector = &metav1.LabelSelector{}
	}
	if mc.ObjectSelector == nil {
		mc.ObjectSelector = &metav1.LabelSelector{}
	}
	for _, rules := range [][]admissionregistrationv1.NamedRuleWithOperations{mc.ResourceRules, mc.ExcludeResourceRules} {
		for i := range rules {
			if rules[i].Scope == nil {
				rules[i].Scope = new(admissionregistrationv1.AllScopes)
			}
		}
	}
}
