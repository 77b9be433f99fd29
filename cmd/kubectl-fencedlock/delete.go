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
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
)

func newDeleteCommand(o *options) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "delete LOCK [--force]",
		Short: "Delete a FencedLock; a held one only with --force",
		Long: `Delete a FencedLock and, through the garbage collector, its Leases.

Deleting a held lock ends its grants without a revocation, and every later write to the objects
it fences is refused (LockNotFound), its holders' included. A held lock (by its Lease, or by the
status that the lock-deletion admission policy judges) is therefore deleted only with --force,
which first annotates it fencedlock.io/allow-delete=true, the annotation that policy asks for.`,
		Example: `  # A free lock
  kubectl fencedlock delete settlement -n books

  # A held one, deliberately
  kubectl fencedlock delete settlement -n books --force`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completeLocks,
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, err := o.namespace()
			if err != nil {
				return err
			}
			cl, cs, err := o.clients()
			if err != nil {
				return err
			}
			return deleteLock(cmd.Context(), o, cl, cs, ns, args[0], force)
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "Delete the lock even while it is held, ending its grants")
	return cmd
}

func deleteLock(ctx context.Context, o *options, cl client.Client, cs kubernetes.Interface, ns, name string, force bool) error {
	var fl locksv1alpha1.FencedLock
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &fl); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("FencedLock %s/%s not found", ns, name)
		}
		return err
	}
	holders, err := lockHolders(ctx, cs, &fl)
	if err != nil {
		return err
	}
	if len(holders) > 0 && !force {
		return fmt.Errorf("FencedLock %s/%s is held (by %s): deleting it ends the grant without a revocation, and refuses "+
			"every later write to the objects it fences. To delete it anyway: kubectl fencedlock delete %s -n %s --force",
			ns, name, strings.Join(holders, ", "), name, ns)
	}
	if force {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, locksv1alpha1.AllowDeleteAnnotation)
		if err := cl.Patch(ctx, &fl, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			return fmt.Errorf("annotating FencedLock %s/%s %s: %w", ns, name, locksv1alpha1.AllowDeleteAnnotation, err)
		}
	}
	uid := fl.UID // the lock looked at, not one created since under its name
	if err := cl.Delete(ctx, &fl, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		return err
	}
	if len(holders) > 0 {
		fmt.Fprintf(o.streams.ErrOut, "ended the grant of %s\n", strings.Join(holders, ", "))
	}
	fmt.Fprintf(o.streams.Out, "fencedlock.locks.fencedlock.io %q deleted\n", name)
	return nil
}

// lockHolders returns the holders of fl: its Lease's, and those its status still shows (which
// the lock-deletion policy judges by).
func lockHolders(ctx context.Context, cs kubernetes.Interface, fl *locksv1alpha1.FencedLock) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	add := func(id string) {
		if id != "" && !seen[id] {
			seen[id] = true
			out = append(out, fmt.Sprintf("%q", id))
		}
	}
	l, err := cs.CoordinationV1().Leases(fl.Namespace).Get(ctx, fl.Name, metav1.GetOptions{})
	switch {
	case err == nil:
		if st, err := lease.Read(l); err == nil {
			for _, p := range st.Permits {
				add(p.Holder)
			}
		}
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("reading the Lease of FencedLock %s/%s: %w", fl.Namespace, fl.Name, err)
	}
	add(fl.Status.Holder)
	for _, h := range fl.Status.Holders {
		add(h.Identity)
	}
	return out, nil
}
