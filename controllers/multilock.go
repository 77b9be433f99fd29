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
	"slices"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/token"
)

// Several locks per pod (annotation fencedlock.io/locks): a pod is granted its locks one at a
// time in one global order, the sorted lock names, and is queued for its k-th lock only once it
// holds locks 1..k-1. Every pod waits only for locks greater than all it holds, so no cycle of
// waiting pods can form: no deadlock. The reconcile of a lock reads the pod's other locks from the
// Leases in the manager's cache (leaseView); a change of a Lease's holder wakes the other locks
// of the pod it names (podLocksOfLeaseHolder). The pod stays gated until it holds all its locks:
// the reconcile that sees it holding the last one ungates it with every token. A gated pod that
// lost an earlier lock (maxHoldSeconds, a deleted Lease) gives up the later ones it holds, since
// holding them while it queues again for the earlier one could close a cycle.

// holdsFunc reports whether pod holds lock.
type holdsFunc func(pod *corev1.Pod, lock string) bool

// waitsFor reports whether pod, one of the pods of lock, is to be queued for lock now: lock is the
// first of the locks it asks for that it does not hold. A pod asking for one lock always waits for
// it; only the locks annotation asks for more, so a pod without it is not parsed (every reconcile
// looks at every pod of its lock).
func waitsFor(pod *corev1.Pod, lock string, holds holdsFunc) bool {
	if _, several := pod.Annotations[locksv1alpha1.LocksAnnotation]; !several {
		return true
	}
	locks := locksv1alpha1.PodLocks(pod)
	if len(locks) <= 1 {
		return true
	}
	for _, l := range locks {
		if l == lock {
			return true
		}
		if holds == nil || !holds(pod, l) {
			return false
		}
	}
	return false // does not ask for lock
}

// progress is how far a pod is through its locks, as one lock's reconcile sees it.
type progress struct {
	// tokens are the pod's tokens for the locks it holds, this lock's excepted.
	tokens map[string]token.Token
	// lacks is the first of the pod's other locks it does not hold ("": it holds them all), and
	// lacksEarlier whether that lock comes before this one in the order.
	lacks        string
	lacksEarlier bool
}

// podProgress says which of pod's locks other than self it holds.
func podProgress(pod *corev1.Pod, self string, holds func(lock string) (token.Token, bool)) progress {
	var pr progress
	for _, l := range locksv1alpha1.PodLocks(pod) {
		if l == self {
			continue
		}
		if tok, ok := holds(l); ok {
			if pr.tokens == nil {
				pr.tokens = map[string]token.Token{}
			}
			pr.tokens[l] = tok
		} else if pr.lacks == "" {
			pr.lacks, pr.lacksEarlier = l, l < self
		}
	}
	return pr
}

// leaseView reads a namespace's lock Leases from the manager's cache, each at most once per
// reconcile.
type leaseView struct {
	ctx    context.Context
	c      client.Reader
	ns     string
	states map[string]*lease.State // nil: no usable Lease
}

func newLeaseView(ctx context.Context, c client.Reader, ns string, self string, st lease.State) *leaseView {
	return &leaseView{ctx: ctx, c: c, ns: ns, states: map[string]*lease.State{self: &st}}
}

func (v *leaseView) state(lock string) *lease.State {
	if st, ok := v.states[lock]; ok {
		return st
	}
	var l coordinationv1.Lease
	var st *lease.State
	if err := v.c.Get(v.ctx, client.ObjectKey{Namespace: v.ns, Name: lock}, &l); err == nil {
		if s, err := lease.Read(&l); err == nil {
			st = &s
		}
	}
	v.states[lock] = st
	return st
}

// token returns pod's token for lock if it holds it.
func (v *leaseView) token(pod *corev1.Pod, lock string) (token.Token, bool) {
	st := v.state(lock)
	if st == nil {
		return 0, false
	}
	p, ok := st.HolderOf(locksv1alpha1.PodHolderIdentity(pod.Name, string(pod.UID)))
	return p.Token, ok
}

func (v *leaseView) holds(pod *corev1.Pod, lock string) bool {
	_, ok := v.token(pod, lock)
	return ok
}

func (v *leaseView) progress(pod *corev1.Pod, self string) progress {
	return podProgress(pod, self, func(l string) (token.Token, bool) { return v.token(pod, l) })
}

// podLockNames indexes a pod by every lock it asks for.
func podLockNames(o client.Object) []string {
	pod, ok := o.(*corev1.Pod)
	if !ok {
		return nil
	}
	return locksv1alpha1.PodLocks(pod)
}

// podLocksOfLeaseHolder maps a lock's Lease to the other locks of the multi-lock pods that hold
// it (a permit of it; the old holders and the new ones of an update both count): such a pod's
// grant or loss of this lock decides whether it queues for, keeps or is ungated by the others.
func (r *FencedLockReconciler) podLocksOfLeaseHolder(ctx context.Context, obj client.Object) []reconcile.Request {
	l, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return nil
	}
	st, err := lease.Read(l)
	if err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, p := range st.Permits {
		ref := holderPodRef(l.Namespace, p.Holder)
		if ref == nil {
			continue
		}
		var pod corev1.Pod
		if err := r.Get(ctx, client.ObjectKeyFromObject(ref), &pod); err != nil || pod.UID != ref.UID {
			continue
		}
		locks := locksv1alpha1.PodLocks(&pod)
		if len(locks) <= 1 || !slices.Contains(locks, l.Name) {
			continue
		}
		for _, name := range locks {
			req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: l.Namespace, Name: name}}
			if name != l.Name && !slices.Contains(reqs, req) {
				reqs = append(reqs, req)
			}
		}
	}
	return reqs
}
