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
	"os"
	"path/filepath"
	"strings"
	"testing"
	"text/template"

	"sigs.k8s.io/yaml"
)

// The krew manifest is a krew-release-bot template; rendered as the bot renders it, it must be a
// manifest that installs the plugin and its completer on every platform it lists.
func TestKrewManifest(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "plugins", "fencedlock.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const tag = "v1.2.3"
	tmpl, err := template.New("krew").Funcs(template.FuncMap{
		"addURIAndSha": func(url, tag string) string {
			return "uri: " + strings.ReplaceAll(url, "{{ .TagName }}", tag) + "\n    sha256: " + strings.Repeat("0123456789abcdef", 4)
		},
	}).Parse(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := tmpl.Execute(&out, map[string]string{"TagName": tag}); err != nil {
		t.Fatal(err)
	}
	var m struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Version          string `json:"version"`
			Homepage         string `json:"homepage"`
			ShortDescription string `json:"shortDescription"`
			Description      string `json:"description"`
			Caveats          string `json:"caveats"`
			Platforms        []struct {
				Selector struct {
					MatchLabels map[string]string `json:"matchLabels"`
				} `json:"selector"`
				URI    string `json:"uri"`
				Sha256 string `json:"sha256"`
				Files  []struct {
					From string `json:"from"`
					To   string `json:"to"`
				} `json:"files"`
				Bin string `json:"bin"`
			} `json:"platforms"`
		} `json:"spec"`
	}
	if err := yaml.UnmarshalStrict([]byte(out.String()), &m); err != nil {
		t.Fatalf("rendered manifest: %v\n%s", err, out.String())
	}
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" || m.Metadata.Name != "fencedlock" {
		t.Errorf("not the fencedlock plugin manifest: %s %s %s", m.APIVersion, m.Kind, m.Metadata.Name)
	}
	if m.Spec.Version != tag || m.Spec.ShortDescription == "" || len(m.Spec.Platforms) == 0 {
		t.Errorf("version %q, shortDescription %q, %d platforms", m.Spec.Version, m.Spec.ShortDescription, len(m.Spec.Platforms))
	}
	for _, p := range m.Spec.Platforms {
		osArch := p.Selector.MatchLabels["os"] + "_" + p.Selector.MatchLabels["arch"]
		if !strings.HasSuffix(p.URI, "/"+tag+"/kubectl-fencedlock_"+tag+"_"+osArch+".tar.gz") || len(p.Sha256) != 64 {
			t.Errorf("%s: uri %q, sha256 %q", osArch, p.URI, p.Sha256)
		}
		from := map[string]bool{}
		for _, f := range p.Files {
			from[f.From] = true
		}
		if p.Bin != "kubectl-fencedlock" || !from["kubectl-fencedlock"] || !from[completerName] {
			t.Errorf("%s: bin %q, files %v: want the plugin and %s", osArch, p.Bin, p.Files, completerName)
		}
	}
	// The completer the archives ship.
	if st, err := os.Stat(completerName); err != nil || st.Mode()&0o111 == 0 {
		t.Errorf("%s must be an executable file next to the plugin's sources: %v", completerName, err)
	}
}
