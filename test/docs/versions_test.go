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

package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/fencedlock/fencedlock/config"
	"github.com/fencedlock/fencedlock/test/util"
)

// minKubernetesMinor is config.MinKubernetesMinor, which kubectl fencedlock check holds the
// server to.
var minKubernetesMinor = strconv.Itoa(config.MinKubernetesMinor)

// The README's minimum Kubernetes version, the chart's kubeVersion and the policies' API version
// tell one story.
func TestMinimumKubernetesVersionAgrees(t *testing.T) {
	read := func(rel string) string {
		b, err := os.ReadFile(filepath.Join(util.RepoRoot(), rel))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if m := regexp.MustCompile(`Requires Kubernetes ≥ 1\.(\d+)`).FindStringSubmatch(read("README.md")); m == nil ||
		m[1] != minKubernetesMinor {
		t.Errorf("README.md: the minimum Kubernetes version is %v; want 1.%s", m, minKubernetesMinor)
	}
	if m := regexp.MustCompile(`(?m)^kubeVersion: ">= 1\.(\d+)\.0-0"$`).FindStringSubmatch(read("dist/chart/Chart.yaml")); m == nil ||
		m[1] != minKubernetesMinor {
		t.Errorf("dist/chart/Chart.yaml: kubeVersion is %v; want \">= 1.%s.0-0\"", m, minKubernetesMinor)
	}
	for f, objs := range policyObjects(t) {
		for _, o := range objs {
			if o.GetAPIVersion() != "admissionregistration.k8s.io/v1" {
				t.Errorf("%s: %s %s is %s; the minimum Kubernetes version assumes admissionregistration.k8s.io/v1",
					f, o.GetKind(), o.GetName(), o.GetAPIVersion())
			}
		}
	}
}
