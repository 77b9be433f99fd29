// Command kubectl-fencedlock is the kubectl plugin for fencedlock: inspect locks, acquire and
// release them from a shell, and run a command while holding one (like flock(1), etcdctl lock
// and consul lock).
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

func main() {
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	cmd := newRootCommand(streams)
	if err := cmd.Execute(); err != nil {
		if exit, ok := errors.AsType[*exitError](err); ok {
			os.Exit(exit.code)
		}
		fmt.Fprintln(streams.ErrOut, "error:", err)
		os.Exit(1)
	}
}

// exitError carries the exit code of a command run under the lock.
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

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
		SilenceUsage:  true,
		SilenceErrors: true,
		// Help and completion show the name users type: "kubectl fencedlock".
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl fencedlock"},
	}
	root.CompletionOptions.HiddenDefaultCmd = false
	flags.AddFlags(root.PersistentFlags())
	o := &options{flags: flags, streams: streams}
	root.AddCommand(newGetCommand(o), newAcquireCommand(o), newRenewCommand(o), newReleaseCommand(o), newRunCommand(o),
		newStampCommand(o), newApplyCommand(o))
	return root
}
