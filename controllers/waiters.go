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
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
)

// waiterLog remembers, per lock, which queued pods were told they are waiting, so that each pod
// gets one Waiting event. It holds only the current queues.
type waiterLog struct {
	mu    sync.Mutex
	seen  map[types.NamespacedName]map[types.UID]struct{}
	total int // pods in all queues
}

func newWaiterLog() *waiterLog {
	return &waiterLog{seen: map[types.NamespacedName]map[types.UID]struct{}{}}
}

// announceWaiters emits a Waiting event for each pod newly seen in the lock's queue, with its
// position among all waiters (pods and clients).
func (r *FencedLockReconciler) announceWaiters(fl *locksv1alpha1.FencedLock, qp queuePlan) {
	var pods []*corev1.Pod
	var positions []int
	for i, w := range qp.waiting {
		if pod := qp.pods[w.Holder]; pod != nil {
			pods, positions = append(pods, pod), append(positions, i+1)
		}
	}
	r.waiters.announce(client.ObjectKeyFromObject(fl), pods, func(i int, pod *corev1.Pod) {
		r.recorder.Eventf(pod, fl, corev1.EventTypeNormal, locksv1alpha1.ReasonWaiting, actionQueue,
			"Waiting for lock %s (position %d of %d)", fl.Name, positions[i], len(qp.waiting))
	})
}

// reportMissingLock tells pods waiting for a lock that does not exist (yet, or any more) why they
// wait: they stay gated until a FencedLock of that name exists.
func (r *FencedLockReconciler) reportMissingLock(ctx context.Context, key types.NamespacedName) error {
	fl := &locksv1alpha1.FencedLock{}
	fl.Namespace, fl.Name = key.Namespace, key.Name
	pods, err := r.lockPods(fl)
	if err != nil {
		return err
	}
	view := newLeaseView(ctx, r.Client, key.Namespace, key.Name, lease.State{})
	asking := computeQueue(pods, key.Name, lease.State{}, view.holds)
	r.waiters.announce(key, asking, func(_ int, pod *corev1.Pod) {
		r.recorder.Eventf(pod, nil, corev1.EventTypeWarning, locksv1alpha1.ReasonLockNotFound, actionQueue,
			"%s", lockNotFoundMessage(key))
	})
	r.conditions.keep(key, pods)
	for _, pod := range asking {
		r.explain(fl, pod, r.shownCondition(key, pod), lockNotFoundCondition(key), 0, r.clock.Now())
	}
	return nil
}

// lockNotFoundMessage says which lock a pod's missing lock is looked for as (namespace and name),
// and why there: the likeliest mistake is a lock of another namespace.
func lockNotFoundMessage(key types.NamespacedName) string {
	return fmt.Sprintf("FencedLock %s/%s does not exist: %s (%s), so the lock is looked for there; "+
		"the pod stays gated until it is created", key.Namespace, key.Name, locksv1alpha1.LocksLiveInPodNamespace, key.Namespace)
}

// announce records queue as the lock's current queue and calls tell with the position of each pod
// that was not in it before: each pod is told once while it waits. tell runs under w.mu.
func (w *waiterLog) announce(key types.NamespacedName, queue []*corev1.Pod, tell func(i int, pod *corev1.Pod)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	old, cur := w.seen[key], make(map[types.UID]struct{}, len(queue))
	for i, pod := range queue {
		cur[pod.UID] = struct{}{}
		if _, ok := old[pod.UID]; !ok {
			tell(i, pod)
		}
	}
	w.set(key, cur)
}

// set records a lock's current queue (the caller holds w.mu) and updates the queue-length gauge.
func (w *waiterLog) set(key types.NamespacedName, cur map[types.UID]struct{}) {
	w.total += len(cur) - len(w.seen[key])
	if len(cur) == 0 {
		delete(w.seen, key)
	} else {
		w.seen[key] = cur
	}
	setWaitingPods(w.total)
}
