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
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
)

// outputWide is get's own -o format besides the default table.
const outputWide = "wide"

func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = locksv1alpha1.AddToScheme(s)
	return s
}

func newGetCommand(o *options) *cobra.Command {
	var all, watch bool
	out := newPrintFlags("", outputWide)
	cmd := &cobra.Command{
		Use:     "get [LOCK]",
		Aliases: []string{"list", "ls"},
		Short:   "Show locks: holder, token, renewal, waiting queue",
		Example: `  # All locks of the current namespace
  kubectl fencedlock get

  # One lock with its queue of waiters, as YAML
  kubectl fencedlock get settlement -o yaml

  # Every namespace, with lease duration and next waiters
  kubectl fencedlock get -A -o wide

  # The token of a lock as its status shows it
  kubectl fencedlock get settlement -o jsonpath='{.status.token}'

  # A line per change of holder, token, renewal or queue, until Ctrl-C
  kubectl fencedlock get settlement -w`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: o.completeLocks,
		RunE: func(cmd *cobra.Command, args []string) error {
			printer, err := out.printer()
			if err != nil {
				return err
			}
			if watch && (len(args) != 1 || all) {
				return errors.New("--watch takes one LOCK, and no --all-namespaces")
			}
			cl, _, err := o.clients()
			if err != nil {
				return err
			}
			ns, err := o.namespace()
			if err != nil {
				return err
			}
			var list locksv1alpha1.FencedLockList
			if len(args) == 1 {
				var fl locksv1alpha1.FencedLock
				if err := cl.Get(cmd.Context(), client.ObjectKey{Namespace: ns, Name: args[0]}, &fl); err != nil {
					return err
				}
				if watch {
					return watchLock(cmd.Context(), o, ns, fl.Name, printer, *out.OutputFormat == outputWide)
				}
				list.Items = append(list.Items, fl)
			} else {
				var opts []client.ListOption
				if !all {
					opts = append(opts, client.InNamespace(ns))
				}
				if err := cl.List(cmd.Context(), &list, opts...); err != nil {
					return err
				}
			}
			if printer != nil {
				// The stored objects, as kubectl get prints them: one object for a name, else a list.
				list.SetGroupVersionKind(locksv1alpha1.GroupVersion.WithKind("FencedLockList"))
				for i := range list.Items {
					list.Items[i].SetGroupVersionKind(locksv1alpha1.GroupVersion.WithKind(locksv1alpha1.Kind))
				}
				if len(args) == 1 {
					return printer.PrintObj(&list.Items[0], o.streams.Out)
				}
				return printer.PrintObj(&list, o.streams.Out)
			}
			if len(list.Items) == 0 {
				if all {
					fmt.Fprintln(o.streams.ErrOut, "No resources found")
				} else {
					fmt.Fprintf(o.streams.ErrOut, "No resources found in %s namespace.\n", ns)
				}
				return nil
			}
			if err := liveHolders(cmd.Context(), cl, &list, ns, all); err != nil {
				return err
			}
			return printLocks(o.streams.Out, &list, *out.OutputFormat == outputWide, all, time.Now())
		},
	}
	out.addFlags(cmd, "a table")
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "List locks of all namespaces")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "After printing the lock, print it again at every change of its Lease or FencedLock, until interrupted")
	return cmd
}

// liveHolders overwrites holder, token and renewal in the table with the Leases' current state.
func liveHolders(ctx context.Context, cl client.Client, list *locksv1alpha1.FencedLockList, ns string, all bool) error {
	var leases coordinationv1.LeaseList
	opts := []client.ListOption{client.MatchingLabelsSelector{Selector: lease.Selector()}}
	if !all {
		opts = append(opts, client.InNamespace(ns))
	}
	if err := cl.List(ctx, &leases, opts...); err != nil {
		return fmt.Errorf("listing leases: %w", err)
	}
	byKey := map[client.ObjectKey]*coordinationv1.Lease{}
	for i := range leases.Items {
		byKey[client.ObjectKeyFromObject(&leases.Items[i])] = &leases.Items[i]
	}
	for i := range list.Items {
		fl := &list.Items[i]
		l, ok := byKey[client.ObjectKeyFromObject(fl)]
		if !ok {
			continue
		}
		if st, err := lease.Read(l); err == nil {
			showLease(fl, st)
		}
	}
	return nil
}

func printLocks(w io.Writer, list *locksv1alpha1.FencedLockList, wide, allNamespaces bool, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	head := []string{"NAME", "HOLDER", "TOKEN", "RENEWED", "WAITING", "AGE"}
	if allNamespaces {
		head = append([]string{"NAMESPACE"}, head...)
	}
	if wide {
		head = append(head, "LEASE", "READY", "NEXT")
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, fl := range list.Items {
		row := []string{fl.Name, orNone(fl.Status.Holder), orNone(fl.Status.Token), age(fl.Status.RenewTime, now),
			fmt.Sprint(fl.Status.WaitingCount), duration.HumanDuration(now.Sub(fl.CreationTimestamp.Time))}
		semaphore := isSemaphore(&fl)
		if semaphore {
			row[1], row[3] = orNone(fl.Status.Held), age(lastRenewal(fl.Status.Holders), now)
		}
		if allNamespaces {
			row = append([]string{fl.Namespace}, row...)
		}
		if wide {
			ready := "Unknown"
			if c := meta.FindStatusCondition(fl.Status.Conditions, locksv1alpha1.ConditionReady); c != nil {
				ready = c.Reason
			}
			next := make([]string, 0, len(fl.Status.Waiters))
			for _, wt := range fl.Status.Waiters {
				next = append(next, wt.Identity)
			}
			row = append(row, fmt.Sprintf("%ds", fl.Spec.LeaseDurationSeconds), ready, orNone(strings.Join(next, ",")))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
		if semaphore {
			printPermits(tw, &fl, allNamespaces, now)
		}
	}
	return tw.Flush()
}

// printPermits prints a semaphore's rows under its own: one per held permit (its holder, token
// and renewal) and one per waiter its status shows, in queue order, noting a waiter that waits
// while a process of its own user and host holds a permit.
func printPermits(tw io.Writer, fl *locksv1alpha1.FencedLock, allNamespaces bool, now time.Time) {
	indent := ""
	if allNamespaces {
		indent = "\t"
	}
	for _, h := range fl.Status.Holders {
		fmt.Fprintf(tw, "%s  permit %d\t%s\t%s\t%s\n", indent, h.Permit, h.Identity, h.Token, age(h.RenewTime, now))
	}
	for i, w := range fl.Status.Waiters {
		who := w.Identity
		if w.Pod != "" {
			who = "pod " + w.Pod
		}
		for _, h := range fl.Status.Holders {
			if sameUserHost(w.Identity, h.Identity) { // it waits for another process of its user and host
				who += fmt.Sprintf(" (same %s as permit %d)", userHostOf(h.Identity), h.Permit)
				break
			}
		}
		fmt.Fprintf(tw, "%s  waiter %d\t%s\n", indent, i+1, who)
	}
}

// lastRenewal is the latest renewal of any permit, nil if none is held.
func lastRenewal(hs []locksv1alpha1.Holder) *metav1.MicroTime {
	var last *metav1.MicroTime
	for _, h := range hs {
		if h.RenewTime != nil && (last == nil || h.RenewTime.After(last.Time)) {
			last = h.RenewTime
		}
	}
	return last
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

func age(t *metav1.MicroTime, now time.Time) string {
	if t == nil {
		return "<none>"
	}
	return duration.HumanDuration(now.Sub(t.Time)) + " ago"
}
