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

package release_test

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/fencedlock/fencedlock/test/util"
)

func fileSHA256(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// checkSums: SHA256SUMS lists every other file of the release with its digest; returns its lines.
func checkSums(t *testing.T, dir string) []string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(read(t, dir, "SHA256SUMS")), "\n")
	listed := map[string]bool{}
	for _, l := range lines {
		sum, name, ok := strings.Cut(l, "  ")
		if !ok {
			t.Fatalf("SHA256SUMS: %q is no sha256sum line", l)
		}
		listed[name] = true
		if got := fileSHA256(t, filepath.Join(dir, name)); got != sum {
			t.Errorf("SHA256SUMS says %s for %s, which is %s", sum, name, got)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "SHA256SUMS" && !listed[e.Name()] {
			t.Errorf("SHA256SUMS does not list %s", e.Name())
		}
	}
	return lines
}

// checkChart: the packaged chart has the release's version and appVersion, and renders the
// release's image (its tag defaults to the appVersion).
func checkChart(t *testing.T, tgz string) {
	t.Helper()
	var meta struct {
		Name       string `json:"name"`
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(untar(t, tgz)["fencedlock/Chart.yaml"], &meta); err != nil {
		t.Fatal(err)
	}
	if meta.Name != "fencedlock" || meta.Version != chartVersion || meta.AppVersion != testVersion {
		t.Errorf("Chart.yaml: name %q, version %q, appVersion %q; want fencedlock, %s, %s",
			meta.Name, meta.Version, meta.AppVersion, chartVersion, testVersion)
	}
	for _, values := range [][]string{nil, {"--set", "certManager.enabled=true"}} {
		out, err := exec.Command(filepath.Join(util.RepoRoot(), "bin", "helm"),
			append([]string{"template", "fencedlock", tgz, "-n", "fencedlock-system"}, values...)...).Output()
		if err != nil {
			t.Fatalf("helm template %s %v: %v", filepath.Base(tgz), values, err)
		}
		checkImages(t, "the chart "+strings.Join(values, " "), string(out), manager)
	}
}

// checkKrew: the krew manifest is the release's, and each platform's sha256 is its archive's.
func checkKrew(t *testing.T, dir string) {
	t.Helper()
	var m struct {
		Spec struct {
			Version   string `json:"version"`
			Platforms []struct {
				URI    string `json:"uri"`
				Sha256 string `json:"sha256"`
			} `json:"platforms"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal([]byte(read(t, dir, "fencedlock.krew.yaml")), &m); err != nil {
		t.Fatal(err)
	}
	if m.Spec.Version != testVersion || len(m.Spec.Platforms) != 4 {
		t.Errorf("krew manifest: version %q, %d platforms; want %s, 4", m.Spec.Version, len(m.Spec.Platforms), testVersion)
	}
	for _, p := range m.Spec.Platforms {
		if !strings.HasPrefix(p.URI, "https://github.com/fencedlock/fencedlock/releases/download/"+testVersion+"/") {
			t.Errorf("krew manifest: uri %s is not the release's", p.URI)
		}
		archive := filepath.Join(dir, path.Base(p.URI))
		if _, err := os.Stat(archive); err != nil {
			t.Errorf("krew manifest: %s: %v", p.URI, err)
		} else if sum := fileSHA256(t, archive); p.Sha256 != sum {
			t.Errorf("krew manifest: sha256 %s for %s, which is %s", p.Sha256, path.Base(p.URI), sum)
		}
	}
}

// extract unpacks a plugin archive, which must hold exactly files, and returns the first's path.
func extract(t *testing.T, tgz string, files ...string) string {
	t.Helper()
	got := untar(t, tgz)
	names := make([]string, 0, len(got))
	for n := range got {
		names = append(names, n)
	}
	slices.Sort(names)
	if want := slices.Sorted(slices.Values(files)); !slices.Equal(names, want) {
		t.Fatalf("%s holds %v; want %v", filepath.Base(tgz), names, want)
	}
	bin := filepath.Join(t.TempDir(), files[0])
	if err := os.WriteFile(bin, got[files[0]], 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// checkImage: a docker-archive tarball tagged ref, of one layer; returns the file at entry in that
// layer, written out as an executable ("" for none).
func checkImage(t *testing.T, tarball, ref, entry string) string {
	t.Helper()
	files := untar(t, tarball)
	var manifest []struct {
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(files["manifest.json"], &manifest); err != nil {
		t.Fatalf("%s: manifest.json: %v", filepath.Base(tarball), err)
	}
	if len(manifest) != 1 || !slices.Equal(manifest[0].RepoTags, []string{ref}) || len(manifest[0].Layers) != 1 {
		t.Fatalf("%s: manifest %+v; want one image tagged %s", filepath.Base(tarball), manifest, ref)
	}
	if entry == "" {
		return ""
	}
	layer := filepath.Join(t.TempDir(), "layer.tar")
	if err := os.WriteFile(layer, files[manifest[0].Layers[0]], 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), entry)
	b, ok := untar(t, layer)[entry]
	if !ok {
		t.Fatalf("%s: no /%s in the image", filepath.Base(tarball), entry)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// untar reads the regular files of a tar or tar.gz archive, by name without a leading "./".
func untar(t *testing.T, name string) map[string][]byte {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var r io.Reader = f
	if strings.HasSuffix(name, "gz") {
		gz, err := gzip.NewReader(f)
		if err != nil {
			t.Fatalf("%s: %v", filepath.Base(name), err)
		}
		r = gz
	}
	files := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		} else if err != nil {
			t.Fatalf("%s: %v", filepath.Base(name), err)
		}
		if h.Typeflag == tar.TypeReg {
			if files[strings.TrimPrefix(h.Name, "./")], err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
	}
}
