package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/lock"
)

func newRunCommand(o *options) *cobra.Command {
	var (
		identity string
		timeout  time.Duration
		noWait   bool
		grace    time.Duration
	)
	cmd := &cobra.Command{
		Use:   "run LOCK -- COMMAND [ARGS...]",
		Short: "Run a command while holding a lock, with its fencing token in $FENCING_TOKEN",
		Long: `Acquire LOCK (waiting for it unless --no-wait), run COMMAND with the grant's fencing token in
$FENCING_TOKEN, keep the lease renewed while it runs, and release the lock when it exits. The
command's exit status is passed through.

If the grant is lost while the command runs (the lease could not be renewed in time, or the
controller revoked it), the command is sent SIGTERM, then SIGKILL after --grace. The renewal loop
cannot protect a process that is paused: pass $FENCING_TOKEN with every write so that fenced
storage refuses writes made after the lock moved on.

Environment of COMMAND: FENCING_TOKEN, FENCEDLOCK_LOCK, FENCEDLOCK_NAMESPACE, FENCEDLOCK_HOLDER.`,
		Example: `  # Run a settlement job under the lock
  kubectl fencedlock run settlement -- ./settle.sh

  # A fenced write from the shell: stamp the ConfigMap with the token
  kubectl fencedlock run settlement -- sh -c \
    'kubectl annotate cm ledger fencedlock.io/token=$FENCING_TOKEN --overwrite'`,
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 1 || len(args) < 2 {
				return errors.New("usage: kubectl fencedlock run LOCK -- COMMAND [ARGS...]")
			}
			return nil
		},
		ValidArgsFunction: o.completeLocks,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLocked(cmd.Context(), o, args[0], args[1:], identity, timeout, noWait, grace)
		},
	}
	cmd.Flags().StringVar(&identity, "identity", defaultIdentity(), "Holder identity")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "Give up waiting for the lock after this long (0: wait forever)")
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "Fail at once if the lock is held")
	cmd.Flags().DurationVar(&grace, "grace", 10*time.Second, "After losing the lock, wait this long between SIGTERM and SIGKILL")
	return cmd
}

func runLocked(ctx context.Context, o *options, name string, argv []string, identity string,
	timeout time.Duration, noWait bool, grace time.Duration) error {
	l, err := o.locker(name, identity, lock.WithWaitCallback(func(st lease.State) { waitingLine(o, name, st) }))
	if err != nil {
		return err
	}
	ns, _ := o.namespace()
	actx, cancel := context.WithCancel(ctx)
	if timeout > 0 {
		actx, cancel = context.WithTimeout(ctx, timeout)
	}
	var g *lock.Grant
	if noWait {
		g, err = l.TryAcquire(actx)
	} else {
		g, err = l.Acquire(actx)
	}
	cancel()
	if err != nil {
		return err
	}
	fmt.Fprintf(o.streams.ErrOut, "acquired %s with token %s\n", name, g.Token)

	kctx, stopKeepAlive := context.WithCancel(context.Background())
	defer stopKeepAlive()
	g.KeepAlive(kctx, 0)

	child := exec.Command(argv[0], argv[1:]...)
	child.Stdin, child.Stdout, child.Stderr = o.streams.In, o.streams.Out, o.streams.ErrOut
	child.Env = append(os.Environ(),
		"FENCING_TOKEN="+g.Token.String(), "FENCEDLOCK_LOCK="+name,
		"FENCEDLOCK_NAMESPACE="+ns, "FENCEDLOCK_HOLDER="+g.Holder())
	if err := child.Start(); err != nil {
		releaseGrant(o, name, g)
		return fmt.Errorf("starting %s: %w", argv[0], err)
	}
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(signals)
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()

	lost := false
	for done := false; !done; {
		select {
		case err := <-exited:
			exited <- err
			done = true
		case s := <-signals:
			_ = child.Process.Signal(s) // the command decides how to stop; we release after it exits
		case <-g.Lost():
			lost = true
			fmt.Fprintf(o.streams.ErrOut, "lost lock %s: %v; stopping the command\n", name, g.Err())
			_ = child.Process.Signal(syscall.SIGTERM)
			select {
			case err := <-exited:
				exited <- err
			case <-time.After(grace):
				_ = child.Process.Kill()
			}
			done = true
		}
	}
	code := exitCode(<-exited)
	stopKeepAlive()
	if lost {
		if code == 0 {
			code = 1 // the work finished without the lock: do not report success
		}
		return &exitError{code: code}
	}
	releaseGrant(o, name, g)
	if code != 0 {
		return &exitError{code: code}
	}
	return nil
}

func releaseGrant(o *options, name string, g *lock.Grant) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.Release(ctx); err != nil {
		fmt.Fprintf(o.streams.ErrOut, "releasing %s: %v\n", name, err)
		return
	}
	fmt.Fprintf(o.streams.ErrOut, "released %s (token %s)\n", name, g.Token)
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return 1
}
