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

// Package release_test builds a release (hack/release.sh, what `make release` runs) for a test
// version and checks what a user installs from it: every image pinned to the version, the chart's
// version, the krew manifest's checksums, binaries that report the version, and the same bytes
// from a second build.
package release_test

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/fencedlock/fencedlock/test/util"
)

var images = flag.Bool("release.images", true,
	"Build the release's images too (this machine's architecture): the manager's build dominates a cold run")

const (
	testVersion  = "v0.0.0-test.1"
	chartVersion = "0.0.0-test.1"
	manager      = "ghcr.io/fencedlock/fencedlock-manager:" + testVersion
	worker       = "ghcr.io/fencedlock/ledger-worker:" + testVersion
)

// release runs hack/release.sh for version into a new directory and returns it.
func release(t *testing.T, version string) (string, error) {
	t.Helper()
	root := util.RepoRoot()
	for _, tool := range []string{"helm", "kustomize"} {
		if _, err := os.Stat(filepath.Join(root, "bin", tool)); err != nil {
			t.Skipf("no bin/%s (make %s): no release is built", tool, tool)
		}
	}
	out := filepath.Join(t.TempDir(), "release")
	cmd := exec.Command(filepath.Join(root, "hack", "release.sh"), version, out)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "IMAGE_ARCHES=")
	if *images {
		cmd.Env = append(cmd.Env, "IMAGE_ARCHES="+runtime.GOARCH)
	}
	log, err := cmd.CombinedOutput()
	t.Logf("hack/release.sh %s:\n%s", version, log)
	if err != nil {
		return out, fmt.Errorf("%w: %s", err, log)
	}
	return out, nil
}

func TestRelease(t *testing.T) {
	dir, err := release(t, testVersion)
	if err != nil {
		t.Fatal(err)
	}
	sums := checkSums(t, dir)
	t.Run("install.yaml pins the manager's image", func(t *testing.T) {
		for _, f := range []string{"install.yaml", "install-cert-manager.yaml"} {
			checkImages(t, f, read(t, dir, f), manager)
		}
		checkImages(t, "samples.yaml", read(t, dir, "samples.yaml"), worker)
	})
	t.Run("the chart", func(t *testing.T) { checkChart(t, filepath.Join(dir, "fencedlock-"+chartVersion+".tgz")) })
	t.Run("the krew manifest", func(t *testing.T) { checkKrew(t, dir) })
	t.Run("the plugin reports the version", func(t *testing.T) {
		bin := extract(t, filepath.Join(dir, fmt.Sprintf("kubectl-fencedlock_%s_%s_%s.tar.gz", testVersion, runtime.GOOS, runtime.GOARCH)),
			"kubectl-fencedlock", "kubectl_complete-fencedlock", "LICENSE")
		if out := run(t, bin, "version", "--short"); out != "kubectl-fencedlock "+testVersion+"\n" {
			t.Errorf("kubectl-fencedlock version --short: %q", out)
		}
	})
	t.Run("the images", func(t *testing.T) {
		if !*images {
			t.Skip("-release.images=false")
		}
		checkImage(t, filepath.Join(dir, fmt.Sprintf("ledger-worker_%s_linux_%s.tar", testVersion, runtime.GOARCH)), worker, "")
		bin := checkImage(t, filepath.Join(dir, fmt.Sprintf("fencedlock-manager_%s_linux_%s.tar", testVersion, runtime.GOARCH)), manager, "manager")
		if out := run(t, bin, "--version"); !strings.HasPrefix(out, "fencedlock-manager "+testVersion+" ") {
			t.Errorf("manager --version: %q", out)
		}
	})
	t.Run("a second build has the same bytes", func(t *testing.T) {
		again, err := release(t, testVersion)
		if err != nil {
			t.Fatal(err)
		}
		if second := checkSums(t, again); !slices.Equal(sums, second) {
			t.Errorf("SHA256SUMS differ:\n%s\nand\n%s", strings.Join(sums, "\n"), strings.Join(second, "\n"))
		}
	})
}

// A VERSION that is no semantic version is refused with the form it must have, and nothing is
// written.
func TestReleaseRefusesABadVersion(t *testing.T) {
	for _, v := range []string{"", "0.1.0", "v0.1", "v1.2.3+build.4", "latest"} {
		out, err := release(t, v)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(err.Error(), "vMAJOR.MINOR.PATCH") {
			t.Errorf("version %q: %v", v, err)
		}
		if entries, err := os.ReadDir(filepath.Dir(out)); err != nil || len(entries) != 0 {
			t.Errorf("version %q: left %v (%v)", v, entries, err)
		}
	}
}

var imageLine = regexp.MustCompile(`(?m)^\s*(?:- )?image: *"?([^"\s]+)"?\s*$`)

// checkImages: the manifests name images, all of them want.
func checkImages(t *testing.T, name, manifests, want string) {
	t.Helper()
	found := imageLine.FindAllStringSubmatch(manifests, -1)
	if len(found) == 0 {
		t.Errorf("%s names no image", name)
	}
	for _, m := range found {
		if m[1] != want {
			t.Errorf("%s names the image %s; want only %s", name, m[1], want)
		}
	}
	if strings.Contains(manifests, ":latest") {
		t.Errorf("%s mentions a :latest tag", name)
	}
}

func read(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func run(t *testing.T, bin string, args ...string) string {
	t.Helper()
	out, err := exec.Command(bin, args...).Output()
	if err != nil {
		t.Fatalf("%s %v: %v", filepath.Base(bin), args, err)
	}
	return string(out)
}
