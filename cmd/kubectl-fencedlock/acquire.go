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
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/lock"
	"github.com/fencedlock/fencedlock/pkg/token"
)

func newAcquireCommand(o *options) *cobra.Command {
	var (
		w        waitOptions
		identity string
		hold     bool
		waitFlag bool
	)
	out := newPrintFlags("")
	cmd := &cobra.Command{
		Use:   "acquire LOCK",
		Short: "Acquire a lock and print its fencing token",
		Long: `Acquire a lock, waiting until it is free unless --no-wait or --timeout says otherwise, and
print its fencing token on stdout.

The grant lasts the lock's leaseDurationSeconds unless renewed: renew it ("kubectl fencedlock
renew"), or pass --hold to have a background process renew it until "kubectl fencedlock release".
For a single command that needs the lock while it runs, "kubectl fencedlock run" renews and
releases for you.

The holder identity defaults to user@host/<pid>-<random>, unique to this process; renew and
release by the same user on the same host find it from the token. The exit status is 124 (--conflict-exit-code) when the lock was not acquired
because it is held, and 1 for any other error.`,
		Example: `  # Take the lock, waiting for it, and keep it renewed in the background
  TOKEN=$(kubectl fencedlock acquire settlement --hold)
  ./settle.sh --fencing-token "$TOKEN"
  kubectl fencedlock release settlement

  # Take it only if it is free now; renew and release by hand
  TOKEN=$(kubectl fencedlock acquire settlement --no-wait) || exit
  kubectl fencedlock renew settlement --fencing-token "$TOKEN"
  kubectl fencedlock release settlement --fencing-token "$TOKEN"

  # Wait at most a minute; print the lock as JSON
  kubectl fencedlock acquire settlement --timeout 1m -o json`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completeLocks,
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if cmd.Flags().Changed("wait") && !waitFlag {
				w.noWait = true // the old spelling of --no-wait
			}
			if tok := os.Getenv(holdTokenEnv); tok != "" {
				return runRenewer(o, name, tok) // this process is the renewer of an acquire --hold
			}
			identity = identityOr(identity)
			printer, err := out.printer() // an unknown -o fails before the lock is taken
			if err != nil {
				return err
			}
			var running *holdState
			if hold && !holdSupported {
				return errors.New("--hold is not supported on this system: renew by hand, or use run")
			}
			if hold {
				if running, err = loadHold(o, name); err != nil {
					return err
				}
				if running != nil && running.alive {
					return &exitError{code: w.conflictCode, err: fmt.Errorf(
						"FencedLock %s/%s is already held here by \"acquire --hold\" (token %s, renewer pid %d): release it first",
						running.Namespace, name, running.Token, running.Pid)}
				}
			}
			ctx := cmd.Context()
			g, permits, err := take(ctx, o, name, identity, w)
			if err != nil {
				return err
			}
			// Once acquired, a failure must not leave the lock held: the caller saw no token.
			var buf bytes.Buffer
			if printer == nil {
				fmt.Fprintln(&buf, g.Token())
			} else {
				fl, err := grantedLock(ctx, o, name, g)
				if err == nil {
					err = printer.PrintObj(fl, &buf)
				}
				if err != nil {
					releaseGrant(o, name, g)
					return err
				}
			}
			how := fmt.Sprintf("lease %s; renew or release before it runs out", g.Duration())
			if hold {
				pid, err := startHold(o, name, identity, g)
				if err != nil {
					releaseGrant(o, name, g)
					return fmt.Errorf("starting the background renewer: %w", err)
				}
				how = fmt.Sprintf("renewed in the background by pid %d until \"kubectl fencedlock release %s\"", pid, name)
			}
			if _, err := o.streams.Out.Write(buf.Bytes()); err != nil {
				return err
			}
			fmt.Fprintf(o.streams.ErrOut, "acquired %s as %s with token %s%s (%s)\n", name, g.Holder(), g.Token(),
				permitNote(g.Permit(), permits), how)
			return nil
		},
	}
	w.addFlags(cmd)
	cmd.Flags().StringVar(&identity, "identity", "", identityHelp)
	cmd.Flags().BoolVar(&hold, "hold", false,
		"Keep the lock renewed by a background process until \"kubectl fencedlock release\" or until it is lost")
	cmd.Flags().BoolVar(&waitFlag, "wait", true, "Wait for the lock (the default)")
	_ = cmd.Flags().MarkDeprecated("wait", "acquire waits by default; use --no-wait to fail fast")
	out.addFlags(cmd, "the fencing token")
	return cmd
}

// grantedLock is the FencedLock as acquire prints it: the stored object, with holder, token and
// times from the grant's Lease (the status may not show the grant yet).
func grantedLock(ctx context.Context, o *options, name string, g *lock.Grant) (*locksv1alpha1.FencedLock, error) {
	ns, err := o.namespace()
	if err != nil {
		return nil, err
	}
	cl, cs, err := o.clients()
	if err != nil {
		return nil, err
	}
	var fl locksv1alpha1.FencedLock
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &fl); err != nil {
		return nil, fmt.Errorf("reading FencedLock %s/%s: %w", ns, name, err)
	}
	st := lease.State{Holder: g.Holder(), Token: g.Token(), Limit: fl.Spec.PermitCount(),
		Permits: []lease.Permit{{Number: g.Permit(), Holder: g.Holder(), Token: g.Token()}}}
	if fl.Spec.PermitCount() > 1 {
		st.Holder = "" // a semaphore's holders are its permits
	}
	if l, err := cs.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
		if now, err := lease.Read(l); err == nil {
			if _, ok := now.Permit(g.Holder(), g.Token()); ok {
				st = now
			}
		}
	}
	showLease(&fl, st)
	fl.SetGroupVersionKind(locksv1alpha1.GroupVersion.WithKind(locksv1alpha1.Kind))
	return &fl, nil
}

// attachCommand builds renew and release, which act on a grant held under --identity and
// --fencing-token. Without --identity, the grant's holder is the identity "acquire --hold"
// recorded, else the Lease's holder of the token if it is a process of this user and host.
func attachCommand(o *options, use, short, example string, act func(*lock.Grant, context.Context) error, done string) *cobra.Command {
	var (
		identity string
		tok      string
	)
	cmd := &cobra.Command{
		Use:               use + " LOCK [--fencing-token TOKEN] [--identity ID]",
		Short:             short,
		Example:           example,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completeLocks,
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			h, err := loadHold(o, name)
			if err != nil {
				return err
			}
			if tok == "" && h != nil {
				tok = h.Token
			}
			if tok == "" {
				return fmt.Errorf("--fencing-token is required: no \"acquire --hold\" of %s runs here", name)
			}
			t, err := token.Parse(tok)
			if err != nil {
				return fmt.Errorf("--fencing-token: %w", err)
			}
			if h != nil && (h.Token != tok || (identity != "" && identity != h.Identity)) {
				h = nil // another grant than the one held in the background
			}
			if h != nil && identity == "" {
				identity = h.Identity
			}
			if identity == "" {
				if identity, err = o.holderOfToken(cmd.Context(), name, t); err != nil {
					return err
				}
			}
			l, err := o.locker(name, identity)
			if err != nil {
				return err
			}
			// The grant is checked (holder and token) before the renewer is stopped: a release
			// that names another identity must not cost the real holder its renewals.
			g, err := l.Attach(cmd.Context(), t)
			if use == "release" && h != nil && (err == nil || errors.Is(err, lock.ErrLost)) {
				o.endHold(h) // its grant is this release's, or lost anyway
			}
			if err != nil {
				return err
			}
			if err := act(g, cmd.Context()); err != nil {
				return err
			}
			fmt.Fprintf(o.streams.ErrOut, "%s %s (token %s)\n", done, name, t)
			return nil
		},
	}
	cmd.Flags().StringVar(&identity, "identity", "",
		"Holder identity the lock was acquired with (default: the token's holder, if a process of this user and host)")
	cmd.Flags().StringVar(&tok, "fencing-token", "",
		"Fencing token of the grant (default: the one \"acquire --hold\" keeps, if it runs here)")
	return cmd
}

// endHold stops the background renewer of h and forgets it.
func (o *options) endHold(h *holdState) {
	defer h.remove()
	if stopped, err := h.stop(); err != nil {
		fmt.Fprintf(o.streams.ErrOut, "stopping the background renewer (pid %d): %v\n", h.Pid, err)
	} else if stopped {
		fmt.Fprintf(o.streams.ErrOut, "stopped the background renewer (pid %d)\n", h.Pid)
	}
}

func newRenewCommand(o *options) *cobra.Command {
	return attachCommand(o, "renew", "Renew a grant so the controller does not revoke it",
		`  kubectl fencedlock renew settlement --fencing-token 1234`,
		(*lock.Grant).Renew, "renewed")
}

func newReleaseCommand(o *options) *cobra.Command {
	return attachCommand(o, "release", "Release a lock, and stop its background renewer if acquire --hold started one",
		`  # Release a grant taken by a process of this user on this host
  kubectl fencedlock release settlement --fencing-token 1234

  # Release what "acquire --hold" keeps, and stop its renewer
  kubectl fencedlock release settlement`,
		(*lock.Grant).Release, "released")
}

// releaseGrant releases g and says so; a failure is printed, not returned: the lease runs out.
func releaseGrant(o *options, name string, g *lock.Grant) {
	if err := releaseQuietly(g); err != nil {
		fmt.Fprintf(o.streams.ErrOut, "releasing %s: %v\n", name, err)
		return
	}
	fmt.Fprintf(o.streams.ErrOut, "released %s (token %s)\n", name, g.Token())
}

func releaseQuietly(g *lock.Grant) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := g.Release(ctx)
	if err != nil && !errors.Is(err, lock.ErrLost) && errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w (the lease runs out by itself)", err)
	}
	return err
}

// holderOfToken returns the identity holding lock name's grant with token tok, if it is a process
// of this user and host (tokenHolder). The token names one grant, and nobody else's is acted on
// without --identity.
func (o *options) holderOfToken(ctx context.Context, name string, tok token.Token) (string, error) {
	ns, err := o.namespace()
	if err != nil {
		return "", err
	}
	_, cs, err := o.clients()
	if err != nil {
		return "", err
	}
	l, err := cs.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("FencedLock %s/%s: reading its Lease to find the holder of token %s: %w", ns, name, tok, err)
	}
	st, err := lease.Read(l)
	if err != nil {
		return "", fmt.Errorf("FencedLock %s/%s: %w", ns, name, err)
	}
	id, ok, err := tokenHolder(st, tok)
	switch {
	case err != nil:
		return "", fmt.Errorf("FencedLock %s/%s: %w", ns, name, err)
	case !ok:
		return "", fmt.Errorf("FencedLock %s/%s: no grant with token %s is held (it was released or revoked, "+
			"or the token is wrong; the lock's last token is %s)", ns, name, tok, st.Token)
	}
	return id, nil
}
