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
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
)

// served lists every Requirement, as an API server that has them all does, less those dropped.
func served(drop ...string) []*metav1.APIResourceList {
	byGV := map[string]*metav1.APIResourceList{}
	var out []*metav1.APIResourceList
	for _, r := range Requirements {
		if r.Resource == "" || strings.Contains(strings.Join(drop, ","), r.GroupVersion+" "+r.Resource) {
			continue
		}
		l := byGV[r.GroupVersion]
		if l == nil {
			l = &metav1.APIResourceList{GroupVersion: r.GroupVersion}
			byGV[r.GroupVersion] = l
			out = append(out, l)
		}
		l.APIResources = append(l.APIResources, metav1.APIResource{Name: r.Resource})
	}
	return out
}

func fakeServer(gitVersion string, lists []*metav1.APIResourceList) *fakediscovery.FakeDiscovery {
	return &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: lists},
		FakedServerVersion: &version.Info{GitVersion: gitVersion}}
}

func TestCheckServer(t *testing.T) {
	cases := []struct {
		name    string
		server  *fakediscovery.FakeDiscovery
		wantErr []string
	}{
		{"everything, at the minimum version", fakeServer("v1.36.0", served()), nil},
		{"everything, a vendor's version", fakeServer("v1.37.2-gke.1100", served()), nil},
		{"a development build: judged by its APIs", fakeServer("v0.0.0-master+$Format:%H$", served()), nil},
		{"too old, without the v1 mutating policies", fakeServer("v1.35.4",
			served("admissionregistration.k8s.io/v1 mutatingadmissionpolicies", "admissionregistration.k8s.io/v1 mutatingadmissionpolicybindings")),
			[]string{"Kubernetes v1.35.4 is older than 1.36, the oldest fencedlock runs on",
				"admissionregistration.k8s.io/v1 mutatingadmissionpolicies is not served; needed for the token record",
				"see docs/operations.md, \"Compatibility\""}},
		{"no CRD", fakeServer("v1.37.2", served("locks.fencedlock.io/v1alpha1 fencedlocks", "locks.fencedlock.io/v1alpha1 fencedlocks/status")),
			[]string{"locks.fencedlock.io/v1alpha1 fencedlocks is not served; needed for the FencedLock CRD (install it first)"}},
		{"no validating policies", fakeServer("v1.37.2", served("admissionregistration.k8s.io/v1 validatingadmissionpolicies")),
			[]string{"admissionregistration.k8s.io/v1 validatingadmissionpolicies is not served"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := checkDiscovery(tc.server)
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}
