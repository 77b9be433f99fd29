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

package controllers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
)

// Pods hold a lock under identity "pod/<name>/<uid>". While a pod holds it, the controller keeps
// the grant alive on the pod's behalf (no renewals: like an ephemeral znode, the grant lives as
// long as its pod). The grant ends when the pod finishes or is deleted (released), or when the pod
// has not been Ready for longer than the lease (revoked: e.g. its node is partitioned), or, before
// it was first Ready, for longer than its lock's start-up allowance (spec.startupSeconds).

// podIsHolder reports whether holder names pod: whether it is pod's PodHolderIdentity, compared
// without building that string (every reconcile asks it of every pod of the lock).
func podIsHolder(holder string, pod *corev1.Pod) bool {
	rest, ok := strings.CutPrefix(holder, locksv1alpha1.PodHolderPrefix)
	n := len(pod.Name)
	return ok && len(rest) == n+1+len(pod.UID) && rest[:n] == pod.Name && rest[n] == '/' && rest[n+1:] == string(pod.UID)
}

func isPodHolder(holder string) bool { return strings.HasPrefix(holder, locksv1alpha1.PodHolderPrefix) }

func podDone(pod *corev1.Pod) bool {
	return !pod.DeletionTimestamp.IsZero() || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// enqueuedAt is when a pod joined the queue: the gate's high-resolution stamp, else its creation.
func enqueuedAt(pod *corev1.Pod) time.Time {
	if t, err := time.Parse(time.RFC3339Nano, pod.Annotations[locksv1alpha1.EnqueuedAnnotation]); err == nil {
		return t
	}
	return pod.CreationTimestamp.Time
}

// computeQueue returns the pods waiting for the lock in FIFO order: gated, not being deleted, not
// a holder (holds a permit of it: st), and, for a pod asking for several locks, holding all that come before lock in the
// order (waitsFor; holds says which it holds). Ties (same instant) break by creation time, then
// name, so the order is stable.
func computeQueue(pods []*corev1.Pod, lock string, st lease.State, holds holdsFunc) []*corev1.Pod {
	type waiter struct {
		pod *corev1.Pod
		at  time.Time // parsed once: a queue of a thousand pods is sorted on every reconcile
	}
	var ws []waiter
	holders := st.Holders()
	for _, p := range pods {
		if locksv1alpha1.HasLockGate(p) && p.DeletionTimestamp.IsZero() &&
			!slices.ContainsFunc(holders, func(h string) bool { return podIsHolder(h, p) }) && waitsFor(p, lock, holds) {
			ws = append(ws, waiter{p, enqueuedAt(p)})
		}
	}
	// A total order (the pods of a lock share its namespace, so their names differ): no stable
	// sort needed.
	slices.SortFunc(ws, func(a, b waiter) int {
		return cmp.Or(a.at.Compare(b.at),
			a.pod.CreationTimestamp.Compare(b.pod.CreationTimestamp.Time), cmp.Compare(a.pod.Name, b.pod.Name))
	})
	q := make([]*corev1.Pod, len(ws))
	for i, w := range ws {
		q[i] = w.pod
	}
	return q
}

// permitPods are the holder pods of a lock's permits that exist, by permit number, and how far
// each is through its other locks.
type permitPods struct {
	pods     map[int]*corev1.Pod
	progress map[int]progress
}

// findHolders finds the pods among pods that hold a permit of the lock (st), with their progress
// through their other locks (view).
func findHolders(pods []*corev1.Pod, st lease.State, view *leaseView, lock string) permitPods {
	h := permitPods{pods: map[int]*corev1.Pod{}, progress: map[int]progress{}}
	for _, p := range st.Permits {
		if pod := findHolder(pods, p.Holder); pod != nil {
			h.pods[p.Number], h.progress[p.Number] = pod, view.progress(pod, lock)
		}
	}
	return h
}

// ready says whether the pod holding permit p is Ready, nil if no pod of the lock holds it or it
// is still gated while it waits for its other locks: such a pod cannot be Ready, and neither its
// not-Ready clock nor its start-up starts before it is ungated.
func (h permitPods) ready(p lease.Permit) *bool {
	pod := h.pods[p.Number]
	if pod == nil || (locksv1alpha1.HasLockGate(pod) && h.progress[p.Number].lacks != "") {
		return nil
	}
	return new(podReady(pod))
}

// findHolder returns the pod holding the lock, or nil if the holder is not one of pods.
func findHolder(pods []*corev1.Pod, holder string) *corev1.Pod {
	if !isPodHolder(holder) {
		return nil
	}
	for _, pod := range pods {
		if podIsHolder(holder, pod) {
			return pod
		}
	}
	return nil
}

// lockPods returns the pods that ask for fl, as the label-selected cache holds them: they are
// read-only here (ungate patches a copy). They come from the pod informer's index, which copies
// nothing: a List copies every pod of the lock on every reconcile, and with a thousand pods queued
// that copy, and the garbage it left, was most of the manager's CPU.
func (r *FencedLockReconciler) lockPods(fl *locksv1alpha1.FencedLock) ([]*corev1.Pod, error) {
	if r.podIndex == nil {
		return nil, errors.New("FencedLockReconciler has no pod index: set it up with SetupWithManager")
	}
	objs, err := r.podIndex.ByIndex(podsByLockIndex, fl.Namespace+"/"+fl.Name)
	if err != nil {
		return nil, fmt.Errorf("listing pods of lock %s: %w", fl.Name, err)
	}
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if pod, ok := o.(*corev1.Pod); ok {
			pods = append(pods, pod)
		}
	}
	return pods, nil
}

// lockOfPod maps a pod to every lock it asks for.
func lockOfPod(_ context.Context, obj client.Object) []reconcile.Request {
	names := podLockNames(obj)
	reqs := make([]reconcile.Request, 0, len(names))
	for _, name := range names {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}})
	}
	return reqs
}

// podChangeMatters lets through every pod event but an update that changed nothing the controller
// reads: such an update is its own lock-condition write (explainPods), or another condition's, and
// a reconcile of the lock for each would double the reconciles of a long queue.
var podChangeMatters = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	old, okOld := e.ObjectOld.(*corev1.Pod)
	cur, okCur := e.ObjectNew.(*corev1.Pod)
	if !okOld || !okCur {
		return true
	}
	return old.UID != cur.UID || !old.DeletionTimestamp.Equal(cur.DeletionTimestamp) ||
		old.Status.Phase != cur.Status.Phase || podReady(old) != podReady(cur) ||
		!maps.Equal(old.Labels, cur.Labels) || !maps.Equal(old.Annotations, cur.Annotations) ||
		!slices.Equal(old.Spec.SchedulingGates, cur.Spec.SchedulingGates) ||
		!slices.EqualFunc(otherConditions(old), otherConditions(cur), podConditionEqual)
}}

// otherConditions are a pod's conditions but its lock conditions, whose changes are the
// controller's own writes.
func otherConditions(pod *corev1.Pod) []corev1.PodCondition {
	out := make([]corev1.PodCondition, 0, len(pod.Status.Conditions))
	for _, c := range pod.Status.Conditions {
		if !strings.HasPrefix(string(c.Type), locksv1alpha1.PodConditionTypePrefix) {
			out = append(out, c)
		}
	}
	return out
}

func podConditionEqual(a, b corev1.PodCondition) bool {
	return a.Type == b.Type && a.Status == b.Status
}
