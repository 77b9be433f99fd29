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

// Package version names the build a binary is, for the manager and the plugin alike.
package version

import "runtime/debug"

// Resolve returns linked, the version a release build links into the binary's main.version
// (`make release`: go build -ldflags "-X main.version=v0.3.0"), or else the main module's version:
// "v0.3.0" after `go install github.com/fencedlock/fencedlock/cmd/...@v0.3.0`, "(devel)" for a
// build from a clone, which is no release.
func Resolve(linked string) string {
	if linked != "" {
		return linked
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(unknown)"
}
