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

// Command krewmanifest renders the krew plugin manifest template (plugins/fencedlock.yaml, written
// for krew-release-bot) for a release, as the bot would: the tag for {{ .TagName }}, and for each
// platform's archive, addURIAndSha's "uri: <url>" and "sha256: <digest>", the digest of the archive
// of that name in -archives. `make release` (hack/release.sh) runs it; the manifest goes to stdout.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"text/template"
)

func main() {
	tmpl := flag.String("template", "plugins/fencedlock.yaml", "The krew-release-bot template")
	tag := flag.String("tag", "", "The release's tag, e.g. v0.3.0")
	archives := flag.String("archives", "", "The directory holding the release's plugin archives")
	flag.Parse()
	if *tag == "" || *archives == "" {
		fmt.Fprintln(os.Stderr, "krewmanifest: -tag and -archives are required")
		os.Exit(2)
	}
	if err := render(os.Stdout, *tmpl, *tag, *archives); err != nil {
		fmt.Fprintln(os.Stderr, "krewmanifest:", err)
		os.Exit(1)
	}
}

func render(w io.Writer, tmplFile, tag, archives string) error {
	raw, err := os.ReadFile(tmplFile)
	if err != nil {
		return err
	}
	t, err := template.New(filepath.Base(tmplFile)).Option("missingkey=error").Funcs(template.FuncMap{
		// As krew-release-bot's: the URL's own {{ .TagName }} is a literal of the template.
		"addURIAndSha": func(url, tag string) (string, error) {
			url = strings.ReplaceAll(url, "{{ .TagName }}", tag)
			sum, err := fileSHA256(filepath.Join(archives, path.Base(url)))
			if err != nil {
				return "", err
			}
			return "uri: " + url + "\n    sha256: " + sum, nil
		},
	}).Parse(string(raw))
	if err != nil {
		return err
	}
	return t.Execute(w, map[string]string{"TagName": tag})
}

func fileSHA256(name string) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", fmt.Errorf("the manifest names an archive the release lacks: %w", err)
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("reading %s: %w", name, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
