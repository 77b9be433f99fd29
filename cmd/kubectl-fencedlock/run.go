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
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/fencedlock/fencedlock/pkg/lock"
)

// The environment run gives its command.
const (
	envToken     = "FENCING_TOKEN"
	envPermit    = "FENCING_PERMIT"
	envLock      = "FENCEDLOCK_LOCK"
	envNamespace = "FENCEDLOCK_NAMESPACE"
	envHolder    = "FENCEDLOCK_HOLDER"
)

// forwarded are the signals run passes on to its command's process group, once each.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

type runOptions struct {
	wait     waitOptions
	identity string
	grace    time.Duration
	lostCode int
}

func newRunCommand(o *options) *cobra.Command {
	var r runOptions
	cmd := &cobra.Command{
		Use:   "run LOCK -- COMMAND [ARGS...]",
		Short: "Run a command while holding a lock, with its fencing token in $FENCING_TOKEN",
		Long: `Acquire LOCK (waiting for it unless --no-wait or --timeout), run COMMAND with the grant's
fencing token in $FENCING_TOKEN, keep the lease renewed while it runs, and release the lock when
it exits. The command's exit status is passed through. On a semaphore (spec.permits above 1) it
takes one permit, whose number is in $FENCING_PERMIT.

The command runs in a process group of its own. SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to run
are passed on to that group once; in a terminal, the command gets the terminal (so Ctrl-C reaches
it once, not twice), and Ctrl-Z does not suspend it: a stopped command would keep the lock. On
Linux the command is killed if run itself is killed (even with SIGKILL), so it never outlives the
lock it was given; processes it moved to other process groups or sessions are not.

If the grant is lost while the command runs (the lease could not be renewed in time, or the
controller revoked it), the command's process group is sent SIGTERM, then SIGKILL after --grace.
The renewal loop cannot protect a process that is paused: pass $FENCING_TOKEN with every write so
that fenced storage refuses writes made after the lock moved on.

Environment of COMMAND: FENCING_TOKEN, FENCING_PERMIT (the permit's number, from 1; always 1 for
a lock), FENCEDLOCK_LOCK, FENCEDLOCK_NAMESPACE (the lock's namespace, which "kubectl fencedlock
apply" and "stamp" default to), FENCEDLOCK_HOLDER.

` + exitCodesHelp,
		Example: `  # Run a settlement job under the lock
  kubectl fencedlock run settlement -- ./settle.sh

  # Only if nobody holds the lock now; exit 0 when busy, like "flock -n -E 0"
  kubectl fencedlock run settlement --no-wait --conflict-exit-code 0 -- ./settle.sh

  # A fenced write from the shell: server-side apply stamped with the token
  kubectl fencedlock run settlement -n books -- kubectl fencedlock apply -f ledger.yaml --lock settlement`,
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 1 || len(args) < 2 {
				return errors.New("usage: kubectl fencedlock run LOCK -- COMMAND [ARGS...]")
			}
			return nil
		},
		// Plain errors of run are its own failures, told apart from the command's statuses.
		Annotations: map[string]string{failureExitCode: strconv.Itoa(exitRunFailure)},
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) == 0 {
				return o.completeLocks(cmd, args, toComplete)
			}
			return nil, cobra.ShellCompDirectiveDefault // the command and its arguments
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLocked(cmd.Context(), o, args[0], args[1:], r)
		},
	}
	r.wait.addFlags(cmd)
	cmd.Flags().StringVar(&r.identity, "identity", "", identityHelp)
	cmd.Flags().DurationVar(&r.grace, "grace", 10*time.Second, "After losing the lock, wait this long between SIGTERM and SIGKILL")
	cmd.Flags().IntVar(&r.lostCode, "lost-exit-code", exitLost, "Exit status when the lock was lost while the command ran")
	return cmd
}

func runLocked(ctx context.Context, o *options, name string, argv []string, r runOptions) error {
	// A command that cannot run fails before the lock is taken, with a shell's status.
	path, err := exec.LookPath(argv[0])
	if err != nil {
		code := exitNotFound
		if errors.Is(err, fs.ErrPermission) {
			code = exitCannotInvoke
		}
		return &exitError{code: code, err: err}
	}
	ns, err := o.namespace()
	if err != nil {
		return err
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)

	g, permits, err := takeInterruptibly(ctx, o, name, r, sigs)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.streams.ErrOut, "acquired %s with token %s%s\n", name, g.Token(), permitNote(g.Permit(), permits))
	keepAlive, err := g.KeepAlive(context.Background(), 0)
	if err != nil {
		releaseGrant(o, name, g)
		return err
	}
	defer keepAlive.Stop()

	env := withEnv(os.Environ(), envToken+"="+g.Token().String(), envPermit+"="+strconv.Itoa(g.Permit()), envLock+"="+name,
		envNamespace+"="+ns, envHolder+"="+g.Holder())
	c, err := startChild(path, argv, env, o.streams)
	if err != nil {
		keepAlive.Stop()
		releaseGrant(o, name, g)
		return &exitError{code: exitCannotInvoke, err: fmt.Errorf("executing %s: %w", argv[0], err)}
	}

	lost := false
	for done := false; !done; {
		select {
		case <-c.exited:
			done = true
		case s := <-sigs:
			c.signal(s.(syscall.Signal)) // the command decides how to stop; we release after it exits
		case <-g.Lost():
			lost = true
			fmt.Fprintf(o.streams.ErrOut, "lost lock %s: %v; stopping the command\n", name, g.Err())
			c.signal(syscall.SIGTERM)
			select {
			case <-c.exited:
			case <-time.After(r.grace):
				c.signal(syscall.SIGKILL)
				<-c.exited
			}
			done = true
		}
	}
	keepAlive.Stop()
	if lost {
		return &exitError{code: r.lostCode, err: fmt.Errorf(
			"lock %s was lost while the command ran (the command's %s): not reporting success", name, c.status)}
	}
	if err := releaseQuietly(g); errors.Is(err, lock.ErrLost) {
		// The lease ran out unnoticed (run was paused, say): the work ended without the lock.
		return &exitError{code: r.lostCode, err: fmt.Errorf(
			"lock %s was lost before the command finished (the command's %s): %w", name, c.status, err)}
	} else if err != nil {
		fmt.Fprintf(o.streams.ErrOut, "releasing %s: %v\n", name, err)
	} else {
		fmt.Fprintf(o.streams.ErrOut, "released %s (token %s)\n", name, g.Token())
	}
	if c.status.signal != 0 {
		return &exitError{code: 128 + int(c.status.signal), reraise: reraisable(c.status.signal)}
	}
	if c.status.code != 0 {
		return &exitError{code: c.status.code}
	}
	return nil
}

// takeInterruptibly takes the lock; a forwarded signal ends the wait, and run then exits as if
// the command, which never started, had been killed by it.
func takeInterruptibly(ctx context.Context, o *options, name string, r runOptions,
	sigs <-chan os.Signal) (*lock.Grant, int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		g       *lock.Grant
		permits int
		err     error
	}
	res := make(chan result, 1)
	go func() {
		g, permits, err := take(ctx, o, name, identityOr(r.identity), r.wait)
		res <- result{g, permits, err}
	}()
	select {
	case got := <-res:
		return got.g, got.permits, got.err
	case s := <-sigs:
		cancel()
		if got := <-res; got.g != nil {
			releaseGrant(o, name, got.g) // granted just as the signal came
		}
		sig := s.(syscall.Signal)
		return nil, 0, &exitError{code: 128 + int(sig), reraise: reraisable(sig),
			err: fmt.Errorf("waiting for lock %s: interrupted (%v)", name, sig)}
	}
}

// childStatus is how the command ended: its exit code, or the signal that killed it.
type childStatus struct {
	code   int
	signal syscall.Signal
}

func (s childStatus) String() string {
	if s.signal != 0 {
		return fmt.Sprintf("killed by %v", s.signal)
	}
	return fmt.Sprintf("exit status %d", s.code)
}

// reraisable returns sig if run should die of it after its command did (see exitError), else 0.
// Only signals whose default action is to terminate quietly: the others dump core.
func reraisable(sig syscall.Signal) syscall.Signal {
	switch sig {
	case syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP:
		return sig
	}
	return 0
}

// withEnv returns env with each "KEY=value" of set replacing any value of KEY: a command run
// under a lock by a command run under another lock sees its own lock, not the outer one.
func withEnv(env []string, set ...string) []string {
	out := make([]string, 0, len(env)+len(set))
	for _, kv := range env {
		key, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(kv, holdTokenEnv+"=") && !setsKey(set, key) {
			out = append(out, kv)
		}
	}
	return append(out, set...)
}

func setsKey(set []string, key string) bool {
	for _, kv := range set {
		if k, _, _ := strings.Cut(kv, "="); k == key {
			return true
		}
	}
	return false
}
