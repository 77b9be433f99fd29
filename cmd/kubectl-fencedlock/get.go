package main

import (
	"context"
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
	"k8s.io/cli-runtime/pkg/printers"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
)

// Output formats.
const (
	outputWide = "wide"
	outputJSON = "json"
	outputYAML = "yaml"
)

func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = locksv1alpha1.AddToScheme(s)
	return s
}

func newGetCommand(o *options) *cobra.Command {
	var output string
	var all bool
	cmd := &cobra.Command{
		Use:     "get [LOCK]",
		Aliases: []string{"list", "ls"},
		Short:   "Show locks: holder, token, renewal, waiting queue",
		Example: `  # All locks of the current namespace
  kubectl fencedlock get

  # One lock with its queue of waiters, as YAML
  kubectl fencedlock get settlement -o yaml

  # Every namespace, with lease duration and next waiters
  kubectl fencedlock get -A -o wide`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: o.completeLocks,
		RunE: func(cmd *cobra.Command, args []string) error {
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
			if output != outputJSON && output != outputYAML {
				if err := liveHolders(cmd.Context(), cl, &list, ns, all); err != nil {
					return err
				}
			}
			return printLocks(o.streams.Out, &list, output, all, time.Now())
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: one of (wide, json, yaml)")
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "List locks of all namespaces")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{outputWide, outputJSON, outputYAML}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// liveHolders overwrites holder, token and renewal in the table with the Leases' current state:
// the Lease is the source of truth, the status may be a moment behind on a busy lock.
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
		st, err := lease.Read(l)
		if err != nil {
			continue
		}
		fl.Status.Holder, fl.Status.Token, fl.Status.RenewTime = st.Holder, st.Token.String(), nil
		if st.Held() {
			fl.Status.RenewTime = st.RenewTime
		}
	}
	return nil
}

func printLocks(w io.Writer, list *locksv1alpha1.FencedLockList, output string, allNamespaces bool, now time.Time) error {
	switch output {
	case outputJSON, outputYAML:
		list.SetGroupVersionKind(locksv1alpha1.GroupVersion.WithKind("FencedLockList"))
		for i := range list.Items {
			list.Items[i].SetGroupVersionKind(locksv1alpha1.GroupVersion.WithKind("FencedLock"))
		}
		var obj runtime.Object = list
		if len(list.Items) == 1 {
			obj = &list.Items[0]
		}
		if output == outputJSON {
			return (&printers.JSONPrinter{}).PrintObj(obj, w)
		}
		return (&printers.YAMLPrinter{}).PrintObj(obj, w)
	case "", outputWide:
	default:
		return fmt.Errorf("unknown output format %q: use wide, json or yaml", output)
	}
	wide := output == outputWide
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
	}
	return tw.Flush()
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
