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
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
)

// Pods hold a lock under identity "pod/<name>/<uid>". While a pod holds it, the controller keeps
// the grant alive on the pod's behalf (no renewals: like an ephemeral znode, the grant lives as
// long as its pod). The grant ends when the pod finishes or is deleted (released), or when the pod
// has not been Ready for longer than the lease (revoked: e.g. its node is partitioned).

// podIsHolder reports whether holder names pod.
func podIsHolder(holder string, pod *corev1.Pod) bool {
	return holder == locksv1alpha1.PodHolderIdentity(pod.Name, string(pod.UID))
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
func computeQueue(pods []corev1.Pod, lock string, st lease.State, holds holdsFunc) []*corev1.Pod {
	type waiter struct {
		pod *corev1.Pod
		at  time.Time // parsed once: a queue of a thousand pods is sorted on every reconcile
	}
	var ws []waiter
	for i := range pods {
		p := &pods[i]
		if locksv1alpha1.HasLockGate(p) && p.DeletionTimestamp.IsZero() && !holdsPermit(st, p) &&
			waitsFor(p, lock, holds) {
			ws = append(ws, waiter{p, enqueuedAt(p)})
		}
	}
	slices.SortStableFunc(ws, func(a, b waiter) int {
		return cmp.Or(a.at.Compare(b.at),
			a.pod.CreationTimestamp.Compare(b.pod.CreationTimestamp.Time), cmp.Compare(a.pod.Name, b.pod.Name))
	})
	q := make([]*corev1.Pod, len(ws))
	for i, w := range ws {
		q[i] = w.pod
	}
	return q
}

// holdsPermit reports whether pod holds a permit of the lock whose state is st.
func holdsPermit(st lease.State, pod *corev1.Pod) bool {
	_, ok := st.HolderOf(locksv1alpha1.PodHolderIdentity(pod.Name, string(pod.UID)))
	return ok
}

// permitPods are the holder pods of a lock's permits that exist, by permit number, and how far
// each is through its other locks.
type permitPods struct {
	pods     map[int]*corev1.Pod
	progress map[int]progress
}

// findHolders finds the pods among pods that hold a permit of the lock (st), with their progress
// through their other locks (view).
func findHolders(pods []corev1.Pod, st lease.State, view *leaseView, lock string) permitPods {
	h := permitPods{pods: map[int]*corev1.Pod{}, progress: map[int]progress{}}
	for _, p := range st.Permits {
		if pod := findHolder(pods, p.Holder); pod != nil {
			h.pods[p.Number], h.progress[p.Number] = pod, view.progress(pod, lock)
		}
	}
	return h
}

// ready says whether the pod holding permit p is Ready, nil if no pod of the lock holds it. A pod
// still gated while it waits for its other locks cannot be Ready: its not-Ready clock starts once
// it is ungated.
func (h permitPods) ready(p lease.Permit) *bool {
	pod := h.pods[p.Number]
	if pod == nil {
		return nil
	}
	return new(podReady(pod) || (locksv1alpha1.HasLockGate(pod) && h.progress[p.Number].lacks != ""))
}

// findHolder returns the pod holding the lock, or nil if the holder is not one of pods.
func findHolder(pods []corev1.Pod, holder string) *corev1.Pod {
	if !isPodHolder(holder) {
		return nil
	}
	for i := range pods {
		if podIsHolder(holder, &pods[i]) {
			return &pods[i]
		}
	}
	return nil
}

// podLockIndex indexes cached pods by every lock they ask for (podLockNames).
const podLockIndex = "fencedlock.lock"

// lockPods lists the pods that ask for fl, from the label-selected cache, without copying them:
// they are read-only here (ungate patches a copy).
func (r *FencedLockReconciler) lockPods(ctx context.Context, fl *locksv1alpha1.FencedLock) ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(fl.Namespace),
		client.MatchingFields{podLockIndex: fl.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing pods of lock %s: %w", fl.Name, err)
	}
	return pods.Items, nil
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
