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
	"io"
	"slices"

	"github.com/spf13/cobra"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/token"
)

func newWhyCommand(o *options) *cobra.Command {
	var selector string
	cmd := &cobra.Command{
		Use:   "why (POD | -l SELECTOR)",
		Short: "Say why a pod waits: per lock, its live position, who holds the lock, or that its token is dead",
		Long: `Say why a pod that asks for locks waits, or whether it holds them, computed live from the
locks' Leases (the pod's lock.fencedlock.io/<lock> conditions, which the manager writes, may show a
position as of a little earlier). A pod's locks live in its own namespace. With -l, every pod the
label selector matches, as kubectl get -l selects them.`,
		Example: `  # Why does this Job's pod not start?
  kubectl fencedlock why settle-28573-x7k2p -n team-a
  # Every pod of the Job
  kubectl fencedlock why -l job-name=settle -n team-a`,
		Args: func(_ *cobra.Command, args []string) error {
			if (len(args) == 1) == (selector != "") {
				return fmt.Errorf("name one pod, or select pods with -l, not both: got %d names and selector %q", len(args), selector)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, _, err := o.clients()
			if err != nil {
				return err
			}
			ns, err := o.namespace()
			if err != nil {
				return err
			}
			pods, err := whyPods(cmd.Context(), cl, ns, args, selector)
			if err != nil {
				return err
			}
			for i := range pods {
				if err := explainPod(cmd.Context(), o.streams.Out, cl, &pods[i]); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "Explain every pod this label selector matches (e.g. job-name=settle)")
	return cmd
}

// whyPods reads the pod named in args, or the pods selector matches, in namespace ns.
func whyPods(ctx context.Context, cl client.Client, ns string, args []string, selector string) ([]corev1.Pod, error) {
	if len(args) == 1 {
		var pod corev1.Pod
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: args[0]}, &pod); err != nil {
			return nil, fmt.Errorf("reading pod %s/%s: %w", ns, args[0], err)
		}
		return []corev1.Pod{pod}, nil
	}
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, fmt.Errorf("-l %q: %w", selector, err)
	}
	var list corev1.PodList
	if err := cl.List(ctx, &list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, fmt.Errorf("listing pods %s in %s: %w", selector, ns, err)
	}
	if len(list.Items) == 0 {
		return nil, fmt.Errorf("no pods in namespace %s match -l %s", ns, selector)
	}
	slices.SortFunc(list.Items, func(a, b corev1.Pod) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	return list.Items, nil
}

// explainPod writes why pod waits, reading each lock it asks for.
func explainPod(ctx context.Context, w io.Writer, cl client.Client, pod *corev1.Pod) error {
	locks, err := locksv1alpha1.ParsePodLocks(pod)
	if err != nil {
		return fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	views := make([]lockView, 0, len(locks))
	for _, name := range locks {
		v, err := readLockView(ctx, cl, pod.Namespace, name)
		if err != nil {
			return err
		}
		views = append(views, v)
	}
	return writeWhy(w, pod, views)
}

// lockView is what why reads of one lock a pod asks for.
type lockView struct {
	name string
	// found: the FencedLock exists; leased: its Lease was read, as st.
	found, leased bool
	st            lease.State
	// queue is the lock's queue, as its Leases store it (lease.QueueFrom).
	queue lease.Queue
}

// readLockView reads lock name of namespace ns: the FencedLock, then all its Leases in one list
// (lease.LockSelector), so the Lease and the queue are of one revision.
func readLockView(ctx context.Context, cl client.Client, ns, name string) (lockView, error) {
	v := lockView{name: name}
	var fl locksv1alpha1.FencedLock
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &fl); err != nil {
		if apierrors.IsNotFound(err) {
			return v, nil
		}
		return v, fmt.Errorf("reading FencedLock %s/%s: %w", ns, name, err)
	}
	v.found = true
	sel, err := labels.Parse(lease.LockSelector(fl.UID))
	if err != nil {
		return v, fmt.Errorf("selecting the Leases of lock %s/%s: %w", ns, name, err)
	}
	var list coordinationv1.LeaseList
	if err := cl.List(ctx, &list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return v, fmt.Errorf("listing the Leases of lock %s/%s: %w", ns, name, err)
	}
	all := make([]*coordinationv1.Lease, len(list.Items))
	for i := range list.Items {
		all[i] = &list.Items[i]
		if all[i].Name != name {
			continue
		}
		if st, err := lease.Read(all[i]); err == nil {
			v.st, v.leased = st, true
		}
	}
	v.queue, _ = lease.QueueFrom(all, v.st.Served)
	return v, nil
}

// writeWhy writes, for pod, one line per lock it asks for (views, in the order it is granted
// them), each followed by the pod's condition for that lock if it has one.
func writeWhy(w io.Writer, pod *corev1.Pod, views []lockView) error {
	state := string(pod.Status.Phase)
	if locksv1alpha1.HasLockGate(pod) {
		state = "gated (scheduling gate " + locksv1alpha1.SchedulingGate + ": it is not scheduled before it holds all its locks)"
	}
	if _, err := fmt.Fprintf(w, "Pod %s/%s: %s\n", pod.Namespace, pod.Name, orNone(state)); err != nil {
		return err
	}
	lacking := "" // the first lock the pod does not hold
	for _, v := range views {
		line, holds := explainLock(pod, v, lacking)
		if !holds && lacking == "" {
			lacking = v.name
		}
		fmt.Fprintf(w, "  %s: %s\n", v.name, line)
		for _, c := range pod.Status.Conditions {
			if c.Type == locksv1alpha1.PodConditionType(v.name) {
				fmt.Fprintf(w, "    condition %s=%s, %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
			}
		}
	}
	return nil
}

// explainLock says where pod stands with lock v, given lacking, the first of its earlier locks
// it does not hold ("" if it holds them all), and whether it holds v.
func explainLock(pod *corev1.Pod, v lockView, lacking string) (string, bool) {
	ns := pod.Namespace
	if !v.found {
		return fmt.Sprintf("FencedLock %s/%s does not exist: %s (%s), so the lock is looked for there; "+
			"the pod stays gated until it is created", ns, v.name, locksv1alpha1.LocksLiveInPodNamespace, ns), false
	}
	if !v.leased {
		return "the manager has not initialized the lock's Lease yet (is the manager running?)", false
	}
	id := locksv1alpha1.PodHolderIdentity(pod.Name, string(pod.UID))
	if p, ok := v.st.HolderOf(id); ok {
		return fmt.Sprintf("holds it with token %s", p.Token), true
	}
	if pos, of := v.queue.Position(v.st.Served, id); pos > 0 {
		return fmt.Sprintf("waiting at position %d of %d; %s", pos, of, v.st.HoldersText()), false
	}
	tok, err := token.Parse(pod.Annotations[locksv1alpha1.LockTokenAnnotation(v.name)])
	switch {
	case err == nil && v.st.RevokedToken == tok:
		return fmt.Sprintf("does not hold it: its token %s is dead, revoked by the manager (%s)", tok,
			v.st.HoldersText()), false
	case err == nil:
		return fmt.Sprintf("does not hold it: its token %s is dead, the grant ended (%s)", tok, v.st.HoldersText()), false
	case !locksv1alpha1.HasLockGate(pod):
		return "does not hold it", false
	case lacking != "":
		return fmt.Sprintf("not queued yet: the pod first needs lock %s (a pod is granted its locks one at a time, "+
			"in name order); %s", lacking, v.st.HoldersText()), false
	}
	return "not queued yet: the manager queues a gated pod at its next look (is the manager running?); " +
		v.st.HoldersText(), false
}
