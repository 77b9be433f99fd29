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

// Command kubectl-fencedlock is the kubectl plugin for fencedlock: inspect locks, acquire and
// release them from a shell, and run a command while holding one (like flock(1), etcdctl lock
// and consul lock).
package main

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// completerName is the name kubectl looks up on PATH to complete "kubectl fencedlock <TAB>": it
// runs it with the words typed after "kubectl fencedlock". A link of that name to this binary
// (or the script of the same name next to this file) answers like cobra's __complete.
const completerName = "kubectl_complete-fencedlock"

func main() {
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	args := os.Args[1:]
	if strings.HasPrefix(filepath.Base(os.Args[0]), completerName) {
		args = append([]string{cobra.ShellCompRequestCmd}, args...)
	}
	root := newRootCommand(streams)
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	os.Exit(exitCode(streams.ErrOut, cmd, err))
}

func newRootCommand(streams genericiooptions.IOStreams) *cobra.Command {
	flags := genericclioptions.NewConfigFlags(true)
	root := &cobra.Command{
		Use:   "kubectl-fencedlock",
		Short: "Work with fenced locks: locks whose every grant carries a strictly increasing fencing token",
		Long: `Work with FencedLocks.

A FencedLock grants one holder at a time and gives every grant a fencing token that is strictly
greater than all tokens issued before. Pass the token with every write to fenced storage; the
storage refuses writes with stale tokens, so a holder that was paused past its lease cannot
overwrite newer data.`,
		Version:       shortVersion(),
		SilenceUsage:  true,
		SilenceErrors: true,
		// Help and completion show the name users type: "kubectl fencedlock".
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl fencedlock"},
	}
	root.CompletionOptions.HiddenDefaultCmd = false
	root.SuggestionsMinimumDistance = suggestionDistance
	root.SetFlagErrorFunc(flagError)
	flags.AddFlags(root.PersistentFlags())
	o := &options{flags: flags, streams: streams}
	root.AddCommand(newGetCommand(o), newAcquireCommand(o), newRenewCommand(o), newReleaseCommand(o), newRunCommand(o),
		newStampCommand(o), newApplyCommand(o), newDeleteCommand(o), newCheckCommand(o), newVersionCommand(o))
	root.AddCommand(newWhyCommand(o))
	return root
}
