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
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/token"
)

// applyPlan makes the plan's Lease change in one compare-and-swap (ending the grant p.grant and
// serving the queue, so a handover is a single write, or settling the lock), then ungates a newly
// granted pod. q is the queue as judged (planQueue); obs is the ended grant's observation.
func (r *FencedLockReconciler) applyPlan(ctx context.Context, fl *locksv1alpha1.FencedLock, l *coordinationv1.Lease,
	p plan, q lease.Queue, obs observation, now time.Time) error {
	st := p.grant
	var h lease.Handover
	_, err := lease.CAS(ctx, lease.ClientWriter{Client: r.Client}, l, func(next *coordinationv1.Lease) error {
		var err error
		switch p.end {
		case release, revoke:
			h, err = lease.Revoke(next, st.Holder, st.Token, p.end == revoke, &q, now)
		default:
			h, _, err = lease.Settle(next, q, now)
		}
		return err
	})
	if apierrors.IsConflict(err) {
		return nil // the Lease changed meanwhile; its watch event brings a fresh look
	}
	if err != nil {
		return fmt.Errorf("updating lease: %w", err)
	}
	// The Events are sent once the ungate below is made: each is a write to the same API server,
	// and sent first they compete with the write the next pod waits for.
	var events []func()
	defer func() {
		for _, send := range events {
			send()
		}
	}()
	log := logf.FromContext(ctx)
	switch p.end {
	case revoke:
		r.observer.noteRevoke(client.ObjectKeyFromObject(fl))
		events = append(events, r.recordRevoke(ctx, fl, l, st, p.reason, obs, now))
		if pod := p.holder; pod != nil && !podDone(pod) {
			// The pod runs on with a dead token: its condition says so.
			why, _ := revokeWhy(fl, st, p.reason, obs)
			events = append(events, func() {
				r.explain(fl, pod, r.shownCondition(client.ObjectKeyFromObject(fl), pod), revokedCondition(fl, st.Token, why), 0, now)
			})
		}
	case release:
		log.Info("Released lock on behalf of its pod", "holder", st.Holder, "token", st.Token.String(), "why", p.why)
		if p.holder != nil {
			events = append(events, func() {
				r.recorder.Eventf(p.holder, fl, corev1.EventTypeNormal, locksv1alpha1.ReasonReleased, actionRelease,
					"Released lock %s (token %s): %s", fl.Name, st.Token, p.why)
			})
		}
	}
	if h.To == nil {
		return nil
	}
	pod := p.headPod
	if pod == nil || locksv1alpha1.PodHolderIdentity(pod.Name, string(pod.UID)) != h.To.Holder {
		if !h.To.Since.IsZero() { // a waiter Lease that does not say when it joined
			observeWait(now.Sub(h.To.Since.Time))
		}
		log.Info("Granted lock to the waiter at the head of its queue", "holder", h.To.Holder,
			"ticket", h.To.Ticket.String(), "token", h.Token.String())
		return nil
	}
	if r.afterPodGrant != nil {
		r.afterPodGrant()
	}
	observeWait(now.Sub(enqueuedAt(pod)))
	log.Info("Granted lock to pod", "pod", pod.Name, "ticket", h.To.Ticket.String(), "token", h.Token.String())
	events = append(events, func() {
		r.recorder.Eventf(pod, fl, corev1.EventTypeNormal, locksv1alpha1.ReasonGranted, actionGrant,
			"Granted lock %s with token %s%s", fl.Name, h.Token, permitNote(fl, h.Permit))
	})
	if !p.headUngates {
		// The pod waits for a later lock: the Lease write wakes that lock's reconcile (and the
		// one that grants the last lock ungates the pod).
		return nil
	}
	// If the pod was replaced meanwhile, the Lease write's watch event brings the reconcile that
	// releases this grant.
	_, err = r.ungate(ctx, fl, pod, h.Token, h.Permit, p.headTokens)
	return err
}

// permitNote names the permit in a semaphore's messages, and nothing for a lock.
func permitNote(fl *locksv1alpha1.FencedLock, permit int) string {
	if fl.Spec.PermitCount() == 1 && permit <= 1 {
		return ""
	}
	return fmt.Sprintf(" (permit %d of %d)", permit, fl.Spec.PermitCount())
}

// recordRevoke reports a revocation of the grant observed as obs: metrics and a log line now; it
// returns the sending of an event on the lock and, for a pod holder, one on the pod.
func (r *FencedLockReconciler) recordRevoke(ctx context.Context, fl *locksv1alpha1.FencedLock, l *coordinationv1.Lease,
	st lease.State, reason expiryReason, obs observation, now time.Time) (sendEvents func()) {
	held := now.Sub(obs.acquiredAt)
	countRevocation(reason, held)
	why, note := revokeWhy(fl, st, reason, obs)
	logf.FromContext(ctx).Info("Revoked grant", "holder", st.Holder, "token", st.Token.String(), "why", why,
		"held", held.String())
	return func() {
		r.recorder.Eventf(fl, l, corev1.EventTypeWarning, locksv1alpha1.ReasonExpired, actionRevoke, note)
		if pod := holderPodRef(fl.Namespace, st.Holder); pod != nil {
			r.recorder.Eventf(pod, fl, corev1.EventTypeWarning, locksv1alpha1.ReasonExpired, actionRevoke,
				"Revoked lock %s (token %s): %s", fl.Name, st.Token, why)
		}
	}
}

// revokeWhy says why the grant st, observed as obs, was revoked for reason: briefly (why), and
// as the lock's event says it (note).
func revokeWhy(fl *locksv1alpha1.FencedLock, st lease.State, reason expiryReason, obs observation) (why, note string) {
	switch reason {
	case expiryMaxHold:
		return fmt.Sprintf("held longer than spec.maxHoldSeconds=%d", *fl.Spec.MaxHoldSeconds),
			fmt.Sprintf("Grant of %s (token %s) exceeded spec.maxHoldSeconds=%d; revoked", st.Holder, st.Token, *fl.Spec.MaxHoldSeconds)
	case expiryNotReady:
		why = fmt.Sprintf("not Ready for %s", st.Duration)
		if startup := fl.Spec.StartupAllowance(); !obs.readySeen && startup > st.Duration {
			why = fmt.Sprintf("not Ready within its start-up allowance of %s (spec.startupSeconds)", startup)
		}
		return why, fmt.Sprintf("Holder %s (token %s) was %s; revoked", st.Holder, st.Token, why)
	}
	return fmt.Sprintf("not renewed within %s", st.Duration),
		fmt.Sprintf("Grant of %s (token %s) was not renewed within %s; revoked", st.Holder, st.Token, st.Duration)
}

// holderPodRef is the pod a pod holder identity names (pod/<name>/<uid>), nil for other holders.
func holderPodRef(namespace, holder string) *corev1.Pod {
	rest, ok := strings.CutPrefix(holder, locksv1alpha1.PodHolderPrefix)
	if !ok {
		return nil
	}
	i := strings.LastIndex(rest, "/")
	if i < 0 {
		return nil
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: rest[:i], UID: types.UID(rest[i+1:])}}
	pod.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Pod"))
	return pod
}

// ungate gives a granted pod its token (tok for this lock, of its permit; others for its other
// locks) and lets it be scheduled, in one patch. It reports false,
// without an error, when the pod is gone or was replaced by a namesake (a StatefulSet's worker-0
// recreated): the grant, whose identity names the old UID, is released by a later reconcile.
func (r *FencedLockReconciler) ungate(ctx context.Context, fl *locksv1alpha1.FencedLock, pod *corev1.Pod, tok token.Token,
	permit int, others map[string]token.Token) (bool, error) {
	patch, err := ungatePatch(pod, fl.Name, tok, permit, others)
	if err != nil {
		return false, err
	}
	if err := r.Patch(ctx, pod.DeepCopy(), patch); err != nil {
		if apierrors.IsNotFound(err) || podReplaced(err) {
			logf.FromContext(ctx).Info("Granted pod is gone; not ungating it or a namesake",
				"pod", pod.Name, "uid", pod.UID, "token", tok.String(), "reason", apierrors.ReasonForError(err))
			return false, nil
		}
		return false, fmt.Errorf("ungating pod %s of lock %s: %w", pod.Name, fl.Name, err)
	}
	r.observer.noteUngated(client.ObjectKeyFromObject(fl), pod.UID, r.clock.Now())
	return true, nil
}

// ungatePatch is the strategic merge patch that sets the pod's tokens and removes its gate: one
// annotation token.fencedlock.io/<lock> per lock (tok for lock, others for the rest), and, for a
// pod asking for one lock, fencedlock.io/token and fencedlock.io/permit (its permit's number) as
// well. A patch addresses a pod by name;
// metadata.uid makes it a precondition: the API server refuses the whole patch if the pod of that
// name has another UID (see podReplaced).
func ungatePatch(pod *corev1.Pod, lock string, tok token.Token, permit int, others map[string]token.Token) (client.Patch, error) {
	annotations := map[string]string{locksv1alpha1.LockTokenAnnotation(lock): tok.String()}
	for l, t := range others {
		annotations[locksv1alpha1.LockTokenAnnotation(l)] = t.String()
	}
	if len(others) == 0 {
		annotations[locksv1alpha1.TokenAnnotation] = tok.String()
		annotations[locksv1alpha1.PodPermitAnnotation] = strconv.Itoa(max(permit, 1))
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{
			"uid":         pod.UID,
			"annotations": annotations,
		},
		"spec": map[string]any{"schedulingGates": []map[string]string{
			{"$patch": "delete", "name": locksv1alpha1.SchedulingGate}}},
	})
	if err != nil {
		return nil, fmt.Errorf("encoding ungate patch: %w", err)
	}
	return client.RawPatch(types.StrategicMergePatchType, patch), nil
}

// podReplaced reports whether an ungate patch was refused because the pod of that name has another
// UID. The API server says so as Invalid on metadata.uid ("field is immutable"); a Conflict
// (a UID precondition failure) is accepted too. No other field of the patch can be Invalid there.
func podReplaced(err error) bool {
	if apierrors.IsConflict(err) {
		return true
	}
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	return slices.ContainsFunc(status.Status().Details.Causes, func(c metav1.StatusCause) bool {
		return c.Field == "metadata.uid"
	})
}
