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
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/fencedlock/fencedlock/cmd/manager/setup"
	"github.com/fencedlock/fencedlock/config"
	"github.com/fencedlock/fencedlock/test/util"
)

// minKubernetesMinor is config.MinKubernetesMinor: the oldest Kubernetes the manager accepts at
// start-up and kubectl fencedlock check holds the server to.
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

// docs/operations.md's compatibility table is the manager's start-up check: the minimum version it
// states and every API it lists, with what for, are setup's, row for row.
func TestCompatibilityTableIsTheManagers(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(util.RepoRoot(), "docs/operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start := strings.Index(text, "\n## Compatibility\n")
	if start < 0 {
		t.Fatal(`docs/operations.md has no "## Compatibility" section`)
	}
	section := text[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	if m := regexp.MustCompile(`needs Kubernetes \*\*1\.(\d+)\*\* or later`).FindStringSubmatch(section); m == nil ||
		m[1] != minKubernetesMinor {
		t.Errorf("the compatibility section's minimum version is %v; the manager's is 1.%s", m, minKubernetesMinor)
	}
	matches := regexp.MustCompile("(?m)^\\| `([^`]+)` \\| `([^`]+)` \\| (.+) \\|$").FindAllStringSubmatch(section, -1)
	rows, want := make([]string, 0, len(matches)), make([]string, 0, len(setup.Requirements))
	for _, m := range matches {
		rows = append(rows, m[1]+" "+m[2]+": "+m[3])
	}
	for _, r := range setup.Requirements {
		want = append(want, r.GroupVersion+" "+r.Resource+": "+r.For)
	}
	if !slices.Equal(rows, want) {
		t.Errorf("the compatibility table lists\n  %s\nthe manager checks\n  %s", strings.Join(rows, "\n  "), strings.Join(want, "\n  "))
	}
}
