package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/lock"
	"github.com/fencedlock/fencedlock/pkg/token"
)

func newAcquireCommand(o *options) *cobra.Command {
	var (
		wait     bool
		timeout  time.Duration
		identity string
		output   string
	)
	cmd := &cobra.Command{
		Use:   "acquire LOCK",
		Short: "Acquire a lock and print its fencing token",
		Long: `Acquire a lock and print its fencing token on stdout.

The grant lasts the lock's leaseDurationSeconds unless renewed ("kubectl fencedlock renew"); the
controller revokes it afterwards. For a command that needs the lock while it runs, use
"kubectl fencedlock run", which renews and releases for you.`,
		Example: `  # Take the lock if it is free now
  TOKEN=$(kubectl fencedlock acquire settlement --identity me)

  # Wait up to a minute for it
  kubectl fencedlock acquire settlement --identity me --wait --timeout 1m

  # Release it again
  kubectl fencedlock release settlement --identity me --token "$TOKEN"`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completeLocks,
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := o.locker(args[0], identity, lock.WithWaitCallback(func(st lease.State) {
				waitingLine(o, args[0], st)
			}))
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var g *lock.Grant
			if wait {
				if timeout > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, timeout)
					defer cancel()
				}
				g, err = l.Acquire(ctx)
			} else {
				g, err = l.TryAcquire(ctx)
			}
			if err != nil {
				return err
			}
			if output == outputJSON {
				return json.NewEncoder(o.streams.Out).Encode(map[string]any{
					"lock": args[0], "holder": g.Holder(), "token": g.Token.String(),
					"leaseDurationSeconds": int(g.Duration().Seconds()),
				})
			}
			fmt.Fprintln(o.streams.Out, g.Token)
			fmt.Fprintf(o.streams.ErrOut, "acquired %s as %s with token %s (lease %s; renew or release before it runs out)\n",
				args[0], g.Holder(), g.Token, g.Duration())
			return nil
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "Wait until the lock is free instead of failing")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "With --wait, give up after this long (0: wait forever)")
	cmd.Flags().StringVar(&identity, "identity", defaultIdentity(), "Holder identity (needed again to renew or release)")
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: empty (the token) or json")
	return cmd
}

// attachCommand builds renew and release, which act on a grant held under --identity/--token.
func attachCommand(o *options, use, short, example string, act func(*lock.Grant, context.Context) error, done string) *cobra.Command {
	var (
		identity string
		tok      string
	)
	cmd := &cobra.Command{
		Use:               use + " LOCK --identity ID --token TOKEN",
		Short:             short,
		Example:           example,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completeLocks,
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := token.Parse(tok)
			if err != nil {
				return fmt.Errorf("--token: %w", err)
			}
			l, err := o.locker(args[0], identity)
			if err != nil {
				return err
			}
			g, err := l.Attach(cmd.Context(), t)
			if err != nil {
				return err
			}
			if err := act(g, cmd.Context()); err != nil {
				return err
			}
			fmt.Fprintf(o.streams.ErrOut, "%s %s (token %s)\n", done, args[0], t)
			return nil
		},
	}
	cmd.Flags().StringVar(&identity, "identity", "", "Holder identity the lock was acquired with")
	cmd.Flags().StringVar(&tok, "token", "", "Fencing token of the grant")
	_ = cmd.MarkFlagRequired("identity")
	_ = cmd.MarkFlagRequired("token")
	return cmd
}

func newRenewCommand(o *options) *cobra.Command {
	return attachCommand(o, "renew", "Renew a grant so the controller does not revoke it",
		`  kubectl fencedlock renew settlement --identity me --token 1234`,
		(*lock.Grant).Renew, "renewed")
}

func newReleaseCommand(o *options) *cobra.Command {
	return attachCommand(o, "release", "Release a lock held under an identity and token",
		`  kubectl fencedlock release settlement --identity me --token 1234`,
		(*lock.Grant).Release, "released")
}

// waitingLine prints one progress line when Acquire finds the lock held.
func waitingLine(o *options, name string, st lease.State) {
	if st.Held() {
		fmt.Fprintf(o.streams.ErrOut, "waiting for %s: held by %s (token %s)\n", name, st.Holder, st.Token)
		return
	}
	fmt.Fprintf(o.streams.ErrOut, "waiting for %s: the lock is not ready yet\n", name)
}
