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
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/lock"
)

// waitOptions are how acquire and run take a lock: wait for it (the default), or not.
type waitOptions struct {
	noWait       bool
	timeout      time.Duration
	conflictCode int
}

func (w *waitOptions) addFlags(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&w.noWait, "no-wait", false, "Fail at once if the lock is held, instead of waiting for it")
	cmd.Flags().VarP((*flockSeconds)(&w.timeout), "timeout", "w",
		"Give up waiting for the lock after this long: a duration (30s) or seconds (5, 0.5) as flock -w takes (0: wait until it is free)")
	cmd.Flags().IntVarP(&w.conflictCode, "conflict-exit-code", "E", exitNotAcquired,
		"Exit status when the lock is not acquired: held with --no-wait, or still held at --timeout")
	cmd.MarkFlagsMutuallyExclusive("no-wait", "timeout")
}

// take acquires FencedLock name for identity as w says. If the lock is not acquired because it is
// held (with --no-wait, or still at --timeout), the error is an *exitError with w.conflictCode
// that says who holds the lock and with which token. permits is the FencedLock's spec.permits,
// zero if it could not be read.
func take(ctx context.Context, o *options, name, identity string, w waitOptions) (g *lock.Grant, permits int, err error) {
	ns, err := o.namespace()
	if err != nil {
		return nil, 0, err
	}
	cl, cs, err := o.clients()
	if err != nil {
		return nil, 0, err
	}
	if permits, err = lockExists(ctx, cl, ns, name); err != nil {
		return nil, 0, err
	}
	l, err := lock.New(cs.CoordinationV1(), ns, name, lock.WithIdentity(identity),
		lock.WithWaitCallback(func(st lock.Status) { waitingLine(o, ns, name, identity, waitState(st)) }))
	if err != nil {
		return nil, 0, err
	}
	if w.noWait {
		g, err := l.TryAcquire(ctx)
		if errors.Is(err, lock.ErrHeld) || errors.Is(err, lock.ErrReserved) {
			return nil, permits, &exitError{code: w.conflictCode, err: heldMessage(ns, name, identity, permits, err)}
		}
		if errors.Is(err, lock.ErrNotInitialized) {
			return nil, permits, &exitError{code: w.conflictCode, err: fmt.Errorf("FencedLock %s/%s: %w", ns, name, err)}
		}
		return g, permits, err
	}
	actx := ctx
	if w.timeout > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(ctx, w.timeout)
		defer cancel()
	}
	g, err = l.Acquire(actx)
	if err != nil && ctx.Err() == nil && errors.Is(actx.Err(), context.DeadlineExceeded) {
		return nil, permits, &exitError{code: w.conflictCode, err: timedOut(cs, ns, name, identity, w.timeout, err)}
	}
	return g, permits, err
}

// heldMessage says why --no-wait did not take the lock, from TryAcquire's *lock.HeldError or
// *lock.ReservedError: who holds it (every permit of a semaphore), or that its room goes to the
// queue.
func heldMessage(ns, name, identity string, permits int, err error) error {
	if r, ok := errors.AsType[*lock.ReservedError](err); ok {
		if permits > 1 || r.Permits > 1 {
			return fmt.Errorf("FencedLock %s/%s has a free permit, but it goes to the waiters in its queue (last token %s); "+
				"wait without --no-wait to join the queue", ns, name, r.Token)
		}
		return fmt.Errorf("FencedLock %s/%s is free but goes to the waiters in its queue (token %s); "+
			"wait without --no-wait to join the queue", ns, name, r.Token)
	}
	h, ok := errors.AsType[*lock.HeldError](err)
	if !ok {
		return err
	}
	switch {
	case h.Holder == identity && (permits > 1 || h.Permits > 1):
		return fmt.Errorf("FencedLock %s/%s: %q holds a permit already (token %s), and an identity holds one permit "+
			"at a time; use another --identity", ns, name, identity, h.Token)
	case h.Holder != "":
		return fmt.Errorf("FencedLock %s/%s is held by %q with token %s%s", ns, name, h.Holder, h.Token,
			holderNote(ns, name, identity, h.Holder, h.Token))
	}
	return fmt.Errorf("FencedLock %s/%s: all %d permits are held (by %s; last token %s)", ns, name, h.Permits,
		strings.Join(quoted(identity, h.Holders), ", "), h.Token)
}

// quoted quotes holders, marking those that are other processes of identity's user and host.
func quoted(identity string, holders []string) []string {
	q := make([]string, len(holders))
	for i, h := range holders {
		q[i] = fmt.Sprintf("%q", h) + ownNote(identity, h)
	}
	return q
}

// lockExists fails at once for a FencedLock that does not exist, which Acquire would otherwise
// wait for, and returns its spec.permits. Other errors are left to Acquire, which retries the
// transient ones; so is a user who may use the Lease but not read the FencedLock (permits is then
// zero: unknown).
func lockExists(ctx context.Context, cl client.Client, ns, name string) (permits int, err error) {
	var fl locksv1alpha1.FencedLock
	err = cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &fl)
	switch {
	case apierrors.IsNotFound(err):
		return 0, fmt.Errorf("FencedLock %s/%s not found", ns, name)
	case meta.IsNoMatchError(err):
		return 0, fmt.Errorf("FencedLock %s/%s: the FencedLock API is not installed in this cluster: %w", ns, name, err)
	case err != nil:
		return 0, nil
	}
	return fl.Spec.PermitCount(), nil
}

// timedOut is the error of a wait that reached --timeout: who holds the lock now, read from its
// Lease, rather than "context deadline exceeded".
func timedOut(cs kubernetes.Interface, ns, name, identity string, after time.Duration, waitErr error) error {
	prefix := fmt.Sprintf("timed out after %s waiting for FencedLock %s/%s", after, ns, name)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := cs.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("%s (%w); reading its Lease: %w", prefix, waitErr, err)
	}
	st, err := lease.Read(l)
	switch {
	case err != nil:
		return fmt.Errorf("%s: %w", prefix, err)
	case st.Semaphore && (st.Full() || st.Reserved != 0 || st.Waiting || slices.Contains(st.Holders(), identity)):
		return fmt.Errorf("%s: %s", prefix, describeSemaphore(st, identity))
	case st.Held() && !st.Semaphore:
		return fmt.Errorf("%s: held by %q with token %s%s", prefix, st.Holder, st.Token,
			holderNote(ns, name, identity, st.Holder, st.Token))
	case st.Reserved != 0 || st.Waiting:
		return fmt.Errorf("%s: free, going to the waiter at the head of its queue (token %s)", prefix, st.Token)
	case !st.Initialized():
		return fmt.Errorf("%s: its Lease has no token yet (is the fencedlock manager running?)", prefix)
	}
	return fmt.Errorf("%s: it was free when the wait ended (%w)", prefix, waitErr)
}

// waitState is what a waiting Acquire saw, as the plugin describes a lock it reads from its Lease.
func waitState(st lock.Status) lease.State {
	s := lease.State{Token: st.Token, Limit: st.Permits, Semaphore: st.Permits > 1, Waiting: st.Queued}
	for _, h := range st.Holders {
		s.Permits = append(s.Permits, lease.Permit{Number: h.Permit, Holder: h.Identity, Token: h.Token})
	}
	if !s.Semaphore && len(s.Permits) == 1 {
		s.Holder = s.Permits[0].Holder
	}
	return s
}

// waitingLine prints one progress line when Acquire finds the lock held.
func waitingLine(o *options, ns, name, identity string, st lease.State) {
	switch {
	case st.Semaphore && st.Initialized():
		fmt.Fprintf(o.streams.ErrOut, "waiting for %s: %s\n", name, describeSemaphore(st, identity))
	case st.Held():
		fmt.Fprintf(o.streams.ErrOut, "waiting for %s: held by %q (token %s)%s\n", name, st.Holder, st.Token,
			holderNote(ns, name, identity, st.Holder, st.Token))
	case st.Initialized():
		fmt.Fprintf(o.streams.ErrOut, "waiting for %s: free, going to the waiters ahead in its queue (token %s)\n",
			name, st.Token)
	default:
		fmt.Fprintf(o.streams.ErrOut, "waiting for %s: the lock is not ready yet\n", name)
	}
}

// flockSeconds is --timeout: a duration ("30s", "2m"), or bare seconds ("5", "0.5") as flock(1)'s
// -w takes them, so that a habit of flock's works as typed.
type flockSeconds time.Duration

func (d *flockSeconds) Set(s string) error {
	v, err := time.ParseDuration(s)
	if f, ferr := strconv.ParseFloat(s, 64); ferr == nil {
		v, err = time.Duration(f*float64(time.Second)), nil
	}
	switch {
	case err != nil:
		return fmt.Errorf("%q is neither seconds (5, 0.5) nor a duration (30s, 2m)", s)
	case v < 0:
		return fmt.Errorf("%q is negative", s)
	}
	*d = flockSeconds(v)
	return nil
}

func (d *flockSeconds) String() string { return time.Duration(*d).String() }

func (d *flockSeconds) Type() string { return "duration" }
