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
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	fversion "github.com/fencedlock/fencedlock/internal/version"
)

// version is the plugin's version, set when releasing (`make release`):
//
//	go build -ldflags "-X main.version=v0.3.0" ./cmd/kubectl-fencedlock
//
// Unset, it is the version of the module the binary was built from (internal/version.Resolve).
var version = ""

func shortVersion() string { return fversion.Resolve(version) }

func newVersionCommand(o *options) *cobra.Command {
	var short bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version and how it was built",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprintln(o.streams.Out, "kubectl-fencedlock", shortVersion())
			if short {
				return nil
			}
			if bi, ok := debug.ReadBuildInfo(); ok {
				fmt.Fprintf(o.streams.Out, "module:   %s %s\n", bi.Main.Path, bi.Main.Version)
				settings := map[string]string{}
				for _, s := range bi.Settings {
					settings[s.Key] = s.Value
				}
				if rev := settings["vcs.revision"]; rev != "" {
					if settings["vcs.modified"] == "true" {
						rev += " (modified)"
					}
					fmt.Fprintf(o.streams.Out, "commit:   %s %s\n", rev, settings["vcs.time"])
				}
			}
			fmt.Fprintf(o.streams.Out, "go:       %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
	cmd.Flags().BoolVar(&short, "short", false, "Print the version only")
	return cmd
}
