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
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/token"
)

// +kubebuilder:rbac:groups="",resources=pods/status,verbs=patch

// conditionLog remembers, per lock and pod, the condition this manager last wrote and the pod's
// resourceVersion the write made: until the cache shows that version, the cached pod still shows
// what came before, and writing again would be a wasted write. A pod version past it that shows
// something else was written by someone else, and is put right.
type conditionLog struct {
	mu      sync.Mutex
	written map[types.NamespacedName]map[types.UID]writtenCondition
}

type writtenCondition struct {
	cond corev1.PodCondition
	rv   uint64
}

func newConditionLog() *conditionLog {
	return &conditionLog{written: map[types.NamespacedName]map[types.UID]writtenCondition{}}
}

// shown returns the condition pod shows for lock as far as this manager knows: what it wrote
// last, while the cached pod is older than that write, else the pod's own.
func (c *conditionLog) shown(key types.NamespacedName, pod *corev1.Pod) *corev1.PodCondition {
	c.mu.Lock()
	w, ok := c.written[key][pod.UID]
	c.mu.Unlock()
	if rv, err := strconv.ParseUint(pod.ResourceVersion, 10, 64); ok && (err != nil || rv < w.rv) {
		return &w.cond
	}
	return podConditionFor(pod, key.Name)
}

func (c *conditionLog) note(key types.NamespacedName, uid types.UID, cond corev1.PodCondition, rv string) {
	v, _ := strconv.ParseUint(rv, 10, 64)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.written[key] == nil {
		c.written[key] = map[types.UID]writtenCondition{}
	}
	c.written[key][uid] = writtenCondition{cond: cond, rv: v}
}

// keep forgets the pods of the lock that are not among pods (gone, or no longer the lock's).
func (c *conditionLog) keep(key types.NamespacedName, pods []*corev1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.written[key]
	if len(m) == 0 {
		return
	}
	live := make(map[types.UID]bool, len(pods))
	for _, p := range pods {
		live[p.UID] = true
	}
	for uid := range m {
		if !live[uid] {
			delete(m, uid)
		}
	}
	if len(m) == 0 {
		delete(c.written, key)
	}
}

// explainPods brings the lock's conditions on its pods up to date (see conditionDue): each
// waiting pod's position and holders, each holder pod's grant, and, for a running pod still
// shown as granted that holds the lock no more (its Lease was deleted, or the write that revoked
// it was not followed by its condition), that its token is dead. It returns when a position not
// written now falls due. A failed write is logged and retried by the next reconcile: the
// conditions are output only, and never hold up a grant.
func (r *FencedLockReconciler) explainPods(fl *locksv1alpha1.FencedLock, st lease.State,
	pods []*corev1.Pod, holders permitPods, qp queuePlan, now time.Time) time.Time {
	key := client.ObjectKeyFromObject(fl)
	r.conditions.keep(key, pods)
	var wake time.Time
	for i, w := range qp.waiting {
		if pod := qp.pods[w.Holder]; pod != nil {
			want := waitingCondition(fl, st, i+1, len(qp.waiting), now)
			wake = earliest(wake, r.explain(fl, pod, r.shownCondition(key, pod), want, i+1, now))
		}
	}
	for _, p := range st.Permits {
		if pod := holders.pods[p.Number]; pod != nil {
			r.explain(fl, pod, r.shownCondition(key, pod), grantedCondition(fl, p.Token, p.Number), 0, now)
		}
	}
	for _, pod := range pods {
		tok, err := token.Parse(pod.Annotations[locksv1alpha1.LockTokenAnnotation(fl.Name)])
		if err != nil || locksv1alpha1.HasLockGate(pod) || podDone(pod) {
			continue
		}
		if _, held := st.HolderOf(locksv1alpha1.PodHolderIdentity(pod.Name, string(pod.UID))); held {
			continue
		}
		if cur := r.shownCondition(key, pod); cur != nil && cur.Reason == locksv1alpha1.ReasonGranted {
			why := "the lock's Lease no longer names the pod"
			if st.RevokedToken == tok {
				why = "revoked by the manager"
			}
			r.explain(fl, pod, cur, revokedCondition(fl, tok, why), 0, now)
		}
	}
	if !wake.IsZero() {
		// One wake-up a minute at most refreshes every position then due, not one per pod.
		wake = wake.Truncate(time.Minute).Add(time.Minute)
	}
	return wake
}

// shownCondition is pod's condition for the lock of key as far as this manager knows: one it asked
// for and has not written yet, else conditionLog.shown.
func (r *FencedLockReconciler) shownCondition(key types.NamespacedName, pod *corev1.Pod) *corev1.PodCondition {
	if c := r.condWriter.pendingFor(pod.UID, key.Name); c != nil {
		return c
	}
	return r.conditions.shown(key, pod)
}

// explain writes want as pod's condition for fl if conditionDue says so, and returns when a
// change not written now falls due.
func (r *FencedLockReconciler) explain(fl *locksv1alpha1.FencedLock, pod *corev1.Pod,
	cur *corev1.PodCondition, want podCondition, pos int, now time.Time) time.Time {
	write, due := conditionDue(cur, want, pos, now)
	if !write {
		return due
	}
	r.condWriter.enqueue(conditionWrite{lock: fl.Name, pod: types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name},
		uid: pod.UID, cond: newPodCondition(pod, fl.Name, cur, want, now)})
	return time.Time{}
}

// writePodCondition patches the status of pod c.pod with c.cond (its one condition for c.lock:
// conditions merge by type), on the pod of UID c.uid only. A pod gone or replaced is no error.
func (r *FencedLockReconciler) writePodCondition(ctx context.Context, c conditionWrite) error {
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": c.uid},
		"status":   map[string]any{"conditions": []corev1.PodCondition{c.cond}},
	})
	if err != nil {
		return fmt.Errorf("encoding pod condition patch: %w", err)
	}
	out := &corev1.Pod{}
	out.Namespace, out.Name = c.pod.Namespace, c.pod.Name
	if err := r.Status().Patch(ctx, out, client.RawPatch(types.StrategicMergePatchType, patch)); err != nil {
		if apierrors.IsNotFound(err) || podReplaced(err) {
			return nil
		}
		return fmt.Errorf("patching status of pod %s: %w", c.pod.Name, err)
	}
	countPodConditionWrite()
	r.conditions.note(types.NamespacedName{Namespace: c.pod.Namespace, Name: c.lock}, c.uid, c.cond, out.ResourceVersion)
	return nil
}

// conditionWrite is one pod lock condition to write.
type conditionWrite struct {
	lock string
	pod  types.NamespacedName
	uid  types.UID
	cond corev1.PodCondition
}

// conditionWriter writes pods' lock conditions off the reconciles' path, one at a time, the latest
// wanted per pod and lock: a grant never waits for the explanation of the queue behind it, and a
// condition superseded before its turn (a position moved on again in a fast drain) is not
// written at all. It runs on the leader only, as the reconciles that fill it.
type conditionWriter struct {
	write   func(context.Context, conditionWrite) error
	mu      sync.Mutex
	pending map[conditionKey]conditionWrite
	order   []conditionKey
	// inflight is the condition being written: until its write is noted (conditionLog), it is
	// what the pod is about to show.
	inflight *conditionWrite
	wake     chan struct{}
}

type conditionKey struct {
	uid  types.UID
	lock string
}

func newConditionWriter(write func(context.Context, conditionWrite) error) *conditionWriter {
	return &conditionWriter{write: write, pending: map[conditionKey]conditionWrite{}, wake: make(chan struct{}, 1)}
}

// enqueue asks for c, in place of any condition of the same pod and lock not written yet.
func (w *conditionWriter) enqueue(c conditionWrite) {
	k := conditionKey{uid: c.uid, lock: c.lock}
	w.mu.Lock()
	if _, queued := w.pending[k]; !queued {
		w.order = append(w.order, k)
	}
	w.pending[k] = c
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// pendingFor returns the condition asked for pod uid and lock and not written yet, nil if none.
func (w *conditionWriter) pendingFor(uid types.UID, lock string) *corev1.PodCondition {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := conditionKey{uid: uid, lock: lock}
	if c, ok := w.pending[k]; ok {
		return &c.cond
	}
	if c := w.inflight; c != nil && c.uid == uid && c.lock == lock {
		return &c.cond
	}
	return nil
}

// next takes the oldest condition asked for.
func (w *conditionWriter) next() (conditionWrite, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.order) == 0 {
		return conditionWrite{}, false
	}
	k := w.order[0]
	w.order = w.order[1:]
	c := w.pending[k]
	delete(w.pending, k)
	w.inflight = &c
	return c, true
}

// done ends the write next returned last.
func (w *conditionWriter) done() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.inflight = nil
}

// Start writes until ctx ends. A failed write is logged: the next reconcile of the lock asks for
// the condition again.
func (w *conditionWriter) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("pod-conditions")
	for {
		c, ok := w.next()
		if !ok {
			select {
			case <-ctx.Done():
				return nil
			case <-w.wake:
				continue
			}
		}
		if err := w.write(ctx, c); err != nil && ctx.Err() == nil {
			log.Error(err, "Writing a pod's lock condition", "pod", c.pod.Name, "lock", c.lock, "reason", c.cond.Reason)
		}
		w.done()
	}
}
