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
	"fmt"
	"os"
	"runtime"

	fversion "github.com/fencedlock/fencedlock/internal/version"
)

// version is the manager's version, set when releasing (`make release`, hack/release.sh):
//
//	go build -ldflags "-X main.version=v0.3.0" ./cmd/manager
//
// Unset, it is the version of the module the binary was built from: "(devel)" in a clone.
var version = ""

// printVersion is --version: the version, the Go toolchain and the platform, on stdout.
func printVersion() {
	fmt.Fprintf(os.Stdout, "fencedlock-manager %s %s %s/%s\n", fversion.Resolve(version), runtime.Version(),
		runtime.GOOS, runtime.GOARCH)
}
