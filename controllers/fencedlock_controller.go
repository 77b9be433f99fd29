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

// Package controllers reconciles FencedLocks with their backing Leases.
package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
)

// FencedLockReconciler keeps each FencedLock's Lease in existence, revokes expired grants and
// mirrors the Lease into the FencedLock status. Build it with NewFencedLockReconciler.
type FencedLockReconciler struct {
	client.Client
	// apiReader reads around the cache, to diagnose a Lease the label-selected cache cannot see.
	apiReader client.Reader
	recorder  events.EventRecorder
	// clock is the one clock expiry is judged on.
	clock clock.PassiveClock
	// statusMinInterval coalesces status writes of a lock that changes hands faster than this.
	statusMinInterval time.Duration
	// statusRenewalInterval is how often a renewal alone rewrites the status.
	statusRenewalInterval time.Duration
	// maxConcurrentReconciles is how many locks are reconciled at once (one lock is never
	// reconciled concurrently with itself).
	maxConcurrentReconciles int
	// afterPodGrant, if set, runs between the Lease write that grants a pod and the pod patch that
	// ungates it: the fault-injection tests crash the manager there.
	afterPodGrant func()
	// limiter rate-limits the lock-level Granted/Released events of each lock.
	limiter *eventLimiter

	observer *observer
	// queues reads the locks' queue Leases, each version of a long queue parsed once.
	queues *queueReader
	// podIndex is the pod informer's indexer, with podsByLockIndex (see lockPods).
	podIndex toolscache.Indexer
	// waiterIndex is the Lease informer's indexer, with waitersByLockIndex (see lockWaiters).
	waiterIndex toolscache.Indexer
	waiters     *waiterLog
	// conditions remembers the lock conditions this manager wrote on pods (see explainPods).
	conditions *conditionLog
	// condWriter writes them, off the reconciles' path.
	condWriter *conditionWriter
	// retries is the controller's rate limiter, through which a failed reconcile keeps its deadline.
	retries *retryLimiter
}

// EventReporter is the name the reconciler's events are reported under; pass it to the
// manager's GetEventRecorder.
const EventReporter = "fencedlock-controller"

// NewFencedLockReconciler returns a reconciler writing through c, reading around the cache through
// apiReader (the manager's GetAPIReader) and recording events with recorder. Without options it
// runs as cmd/manager does by default: on the real clock, with the Default* settings.
func NewFencedLockReconciler(c client.Client, apiReader client.Reader, recorder events.EventRecorder,
	opts ...Option) *FencedLockReconciler {
	r := &FencedLockReconciler{
		Client:                  c,
		apiReader:               apiReader,
		recorder:                recorder,
		clock:                   clock.RealClock{},
		statusMinInterval:       DefaultStatusMinInterval,
		statusRenewalInterval:   DefaultStatusRenewalInterval,
		maxConcurrentReconciles: DefaultMaxConcurrentReconciles,
		limiter:                 newEventLimiter(DefaultEventBurst, DefaultEventInterval),
		observer:                newObserver(),
		queues:                  newQueueReader(),
		waiters:                 newWaiterLog(),
		conditions:              newConditionLog(),
		retries:                 newRetryLimiter(),
	}
	r.condWriter = newConditionWriter(r.writePodCondition)
	for _, o := range opts {
		o(r)
	}
	return r
}

// Verb grant is no API verb: the admission policies of config/policy recognise the manager by it
// (grants to pods, revocations, token stamps).
// +kubebuilder:rbac:groups=locks.fencedlock.io,resources=fencedlocks,verbs=get;list;watch;grant
// +kubebuilder:rbac:groups=locks.fencedlock.io,resources=fencedlocks/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;patch

// Reconcile brings one FencedLock's Lease and status up to date.
func (r *FencedLockReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	now := r.clock.Now()
	r.observer.setTimer(req.NamespacedName, false) // whatever brought this reconcile is spent
	wake, err := r.reconcile(ctx, req.NamespacedName, now)
	// A failed reconcile is retried, by retries or controller-runtime's backoff.
	r.observer.setTimer(req.NamespacedName, err != nil || !wake.IsZero())
	if err != nil && !wake.IsZero() {
		// controller-runtime ignores the Result of a failed reconcile: its backoff (minutes,
		// growing) would trade the grant's deadline away. Retry with a backoff of our own, never
		// later than the deadline, through the controller's rate limiter (see retryLimiter).
		retry := now.Add(r.observer.failed(req.NamespacedName))
		if wake.After(now) && wake.Before(retry) {
			retry = wake
		}
		r.retries.retryIn(req, retry.Sub(now))
		logf.FromContext(ctx).Info("Reconcile failed; retrying by the grant's deadline",
			"retryAfter", retry.Sub(now).String(), "deadline", wake)
	}
	if err != nil {
		// Returned, so that controller-runtime counts and logs it; without a deadline to keep,
		// its own backoff will do.
		return ctrl.Result{}, err
	}
	r.observer.succeeded(req.NamespacedName)
	if wake.IsZero() {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{RequeueAfter: wake.Sub(now)}, nil
}

// conflictRecheck is how soon a lock whose Lease name is taken by a Lease the cache cannot see
// (LeaseConflict) is looked at again: its deletion by whoever owns it brings no event.
const conflictRecheck = 10 * time.Second

// reconcile does Reconcile's work and returns when to look at the lock again (zero: at its next
// event). Along with an error it returns the grant's deadline if one is known, for Reconcile to
// keep.
func (r *FencedLockReconciler) reconcile(ctx context.Context, key types.NamespacedName, now time.Time) (time.Time, error) {
	var fl locksv1alpha1.FencedLock
	if err := r.Get(ctx, key, &fl); err != nil {
		if apierrors.IsNotFound(err) {
			r.observer.forget(key)
			r.limiter.forget(key)
			r.queues.forget(key)
			return time.Time{}, r.reportMissingLock(ctx, key)
		}
		return time.Time{}, err
	}
	if !fl.DeletionTimestamp.IsZero() {
		return time.Time{}, nil // the Lease goes with it (ownerReference)
	}

	l, notReady, err := r.ensureLease(ctx, &fl)
	if err != nil || l == nil {
		if notReady != nil {
			status := *fl.Status.DeepCopy()
			setReadyCondition(&status, fl.Generation, metav1.ConditionFalse, notReady.reason, notReady.message, now)
			_, err := r.writeStatus(ctx, &fl, status)
			// A Lease outside the cache's label selection sends no event when it goes: look again.
			return now.Add(conflictRecheck), err
		}
		return time.Time{}, err // nil: a Lease write was made, its watch event continues the work
	}
	st, err := lease.Read(l)
	if err != nil {
		return time.Time{}, err // ensureLease has vetted the Lease
	}
	if st.ForgedTicket != 0 {
		// The plan's Lease write (Settle, or the revocation that serves the queue) replaces it.
		// One series per forged value: the note names no resourceVersion, which moves on.
		r.recorder.Eventf(&fl, l, corev1.EventTypeWarning, locksv1alpha1.ReasonQueueRepaired, actionQueue,
			"Annotation %s %s is at or above the Lease's resourceVersion: no handover wrote it, and believed "+
				"it would skip every waiter for good; the waiters keep their places and it is replaced",
			locksv1alpha1.TicketAnnotation, st.ForgedTicket)
	}

	pods, err := r.lockPods(&fl)
	if err != nil {
		return time.Time{}, err
	}
	view := newLeaseView(ctx, r.Client, fl.Namespace, fl.Name, st)
	holders := findHolders(pods, st, view, fl.Name)
	qp, wait, qerr := r.syncQueue(ctx, &fl, st, pods, view.holds, now)
	if wait {
		return time.Time{}, nil // the queue write's event brings the next reconcile
	}
	obs, prev := r.observer.observe(key, st, l.ResourceVersion, holders.ready, now)
	var headPod *corev1.Pod
	var headProgress progress
	if len(qp.waiting) > 0 {
		headPod = qp.pods[qp.waiting[0].Holder]
	}
	if headPod != nil {
		headProgress = view.progress(headPod, fl.Name)
	}
	_, settles, err := lease.Settle(l.DeepCopy(), qp.Queue, now)
	if err != nil {
		return time.Time{}, err
	}
	grants := make([]planInput, len(st.Permits))
	for i, p := range st.Permits {
		grants[i] = planInput{st: st.OfPermit(p), obs: obs[p.Number], holderPod: holders.pods[p.Number],
			holderProgress: holders.progress[p.Number], waiting: qp.waiting, headPod: headPod, headProgress: headProgress,
			maxHold: maxHold(&fl), startup: fl.Spec.StartupAllowance(), now: now}
	}
	room := st.OfPermit(lease.Permit{})
	room.Permits, room.Served = nil, st.Served
	p := planLock(st, grants, planInput{st: room, waiting: qp.waiting, headPod: headPod, settles: settles,
		headProgress: headProgress, now: now})
	p.deadline = earliest(p.deadline, qp.Deadline)
	if p.writesLease() {
		var ended observation
		if len(p.grant.Permits) > 0 {
			ended = obs[p.grant.Permits[0].Number]
		}
		if err := r.applyPlan(ctx, &fl, l, p, qp.Queue, ended, now); err != nil {
			return p.deadline, err
		}
		return time.Time{}, qerr // the Lease write's watch event brings the next reconcile
	}
	if qerr != nil {
		return p.deadline, qerr
	}
	if p.deadline, err = r.ungateHolders(ctx, &fl, p, now); err != nil {
		return p.deadline, err
	}

	r.announceWaiters(&fl, qp)
	// The timers: a grant's deadline, a queued client's liveness deadline, a pod's position due,
	// a coalesced status write.
	wake := earliest(p.deadline, r.explainPods(&fl, st, pods, holders, qp, now))
	before, status := *fl.Status.DeepCopy(), computeStatus(&fl, st, qp, now)
	if !equality.Semantic.DeepEqual(before, status) {
		if due := r.observer.statusWrittenAt(key).Add(r.statusRenewalInterval); onlyRenewalTimes(before, status) && now.Before(due) {
			wake = earliest(wake, due) // a renewal alone waits for the refresh
		} else if wait := r.observer.statusWait(key, now, r.statusMinInterval); wait > 0 {
			wake = earliest(wake, now.Add(wait))
		} else if written, err := r.writeStatus(ctx, &fl, status); err != nil {
			return wake, err
		} else if written { // events and metrics once per change, even when a write conflicts
			r.recordTransition(&fl, l, before, st, prev, r.observer.statusWritten(key, now, r.statusMinInterval), now)
		}
	}
	return wake, nil
}

// ungateHolders ungates the holder pods of p still behind the gate (granted, but not patched:
// e.g. a crash in between) and returns p's deadline, moved earlier when the cache still shows a
// pod the API server has replaced.
func (r *FencedLockReconciler) ungateHolders(ctx context.Context, fl *locksv1alpha1.FencedLock, p plan,
	now time.Time) (time.Time, error) {
	deadline := p.deadline
	for _, u := range p.ungates {
		if r.observer.wasUngated(client.ObjectKeyFromObject(fl), u.ungate.UID) {
			continue
		}
		ok, err := r.ungate(ctx, fl, u.ungate, u.grant.Token, u.grant.Permits[0].Number, u.ungateTokens)
		if err != nil {
			return deadline, err
		}
		if !ok {
			// Look again soon; once the cache catches up, the grant is released.
			deadline = earliest(deadline, now.Add(replacedPodRetry))
		}
	}
	return deadline, nil
}

// replacedPodRetry is how soon a lock whose holder pod was replaced behind the cache's back is
// looked at again (the pod watch normally comes first).
const replacedPodRetry = time.Second

// earliest returns the earlier of two times, ignoring zero ones.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// writeStatus writes status if it differs from what is stored, and reports whether it did.
func (r *FencedLockReconciler) writeStatus(ctx context.Context, fl *locksv1alpha1.FencedLock, status locksv1alpha1.FencedLockStatus) (bool, error) {
	if equality.Semantic.DeepEqual(fl.Status, status) {
		return false, nil
	}
	fl.Status = status
	if err := r.Status().Update(ctx, fl); err != nil {
		if apierrors.IsConflict(err) {
			return false, nil // a newer FencedLock is on its way through the watch
		}
		return false, fmt.Errorf("updating status of FencedLock %s/%s: %w", fl.Namespace, fl.Name, err)
	}
	return true, nil
}

// recordTransition emits events and metrics for the grants and releases between the status before
// this reconcile and the Lease state now. prev are the grants' observations before this reconcile.
func (r *FencedLockReconciler) recordTransition(fl *locksv1alpha1.FencedLock, l *coordinationv1.Lease,
	before locksv1alpha1.FencedLockStatus, st lease.State, prev map[int]observation, revoked int, now time.Time) {
	t := computeTransition(before, st)
	// Revocations were counted when they were made; every other ended grant was released.
	if released := int(t.ended) - revoked; released > 0 {
		countReleases(released)
	}
	// A recreated Lease starts again at zero transitions: the grants ended with their Lease, not
	// by a release.
	leaseDeleted := len(t.endedShown) > 0 && !st.Held() && st.Transitions == 0
	for _, h := range t.endedShown {
		switch {
		case leaseDeleted:
			r.recorder.Eventf(fl, l, corev1.EventTypeWarning, locksv1alpha1.ReasonLeaseDeleted, actionRevoke,
				"The Lease was deleted while %s held it with token %s; recreated with token %s", h.Identity, h.Token, st.Token)
		case h.Token == st.RevokedToken.String():
			// reported when it was revoked
		default:
			for _, o := range prev {
				if o.token.String() == h.Token && !o.acquiredAt.IsZero() {
					observeHold(now.Sub(o.acquiredAt))
				}
			}
			r.event(fl, l, locksv1alpha1.ReasonReleased, actionRelease, "Released by %s (token %s)%s",
				h.Identity, h.Token, permitNote(fl, int(h.Permit)))
		}
	}
	for _, h := range t.grantedShown {
		r.event(fl, l, locksv1alpha1.ReasonGranted, actionGrant, "Granted to %s with token %s%s",
			h.Identity, h.Token, permitNote(fl, int(h.Permit)))
	}
	// On a busy lock, status writes are coalesced: say how many grants came and went unseen.
	if unseen := int(t.granted) - len(t.grantedShown); unseen > 0 {
		r.event(fl, l, locksv1alpha1.ReasonReleased, actionRelease,
			"%d more grant(s) were made and released in between (the lock's token is now %s)", unseen, st.Token)
	}
	countGrants(t.granted)
}

func maxHold(fl *locksv1alpha1.FencedLock) time.Duration {
	if fl.Spec.MaxHoldSeconds == nil {
		return 0
	}
	return time.Duration(*fl.Spec.MaxHoldSeconds) * time.Second
}

// SetupWithManager sets up the controller with the Manager. The manager's cache must select
// Leases with lease.Selector().
func (r *FencedLockReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.observer == nil {
		return errors.New("FencedLockReconciler must be built by NewFencedLockReconciler")
	}
	podIndex, err := indexPodsByLock(context.Background(), mgr.GetCache())
	if err != nil {
		return fmt.Errorf("indexing pods by lock: %w", err)
	}
	r.podIndex = podIndex
	if err := mgr.Add(r.condWriter); err != nil {
		return fmt.Errorf("adding the pod condition writer: %w", err)
	}
	if r.waiterIndex, err = indexWaitersByLock(context.Background(), mgr.GetCache()); err != nil {
		return fmt.Errorf("indexing waiter leases by lock: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&locksv1alpha1.FencedLock{}).
		Watches(&coordinationv1.Lease{}, leaseEvents{r: r, EventHandler: handler.EnqueueRequestForOwner(mgr.GetScheme(),
			mgr.GetRESTMapper(), &locksv1alpha1.FencedLock{}, handler.OnlyControllerOwner())}).
		// A waiter Lease's join, beat or leave wakes its lock (it is owned, not controlled).
		Watches(&coordinationv1.Lease{}, handler.EnqueueRequestsFromMapFunc(r.lockOfWaiter)).
		// Pods that ask for a lock (the cache holds no others) wake their lock, unless all that
		// changed is their lock conditions, which the controller writes and never reads.
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(lockOfPod), builder.WithPredicates(podChangeMatters)).
		// A multi-lock pod's grant or loss of one lock wakes its other locks.
		Watches(&coordinationv1.Lease{}, handler.EnqueueRequestsFromMapFunc(r.podLocksOfLeaseHolder)).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(1, r.maxConcurrentReconciles),
			RateLimiter: r.retries}).
		Named("fencedlock").
		Complete(r)
}

// lockOfWaiter maps a waiter Lease to the lock it waits for: its FencedLock owner or, for one
// written without the ownerReference docs/protocol.md asks for (a client of another language),
// the FencedLock of its namespace whose uid its fencedlock.io/lock-uid label names. Readers of the
// queue select waiter Leases by that label alone, so such a waiter waits like any other, and
// its join must wake the manager like any other's. Only such Leases pay for the search.
func (r *FencedLockReconciler) lockOfWaiter(ctx context.Context, obj client.Object) []ctrl.Request {
	if obj.GetLabels()[locksv1alpha1.RoleLabel] != locksv1alpha1.RoleWaiter {
		return nil
	}
	for _, ref := range obj.GetOwnerReferences() {
		if ref.Kind == locksv1alpha1.Kind && ref.APIVersion == locksv1alpha1.GroupVersion.String() {
			return []ctrl.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: ref.Name}}}
		}
	}
	uid := types.UID(obj.GetLabels()[locksv1alpha1.LockUIDLabel])
	if uid == "" {
		return nil
	}
	var locks locksv1alpha1.FencedLockList
	if err := r.List(ctx, &locks, client.InNamespace(obj.GetNamespace()), client.UnsafeDisableDeepCopy); err != nil {
		logf.FromContext(ctx).Error(err, "finding the lock of a waiter Lease without an owner", "lease", obj.GetName())
		return nil
	}
	for i := range locks.Items {
		if locks.Items[i].UID == uid {
			return []ctrl.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: locks.Items[i].Name}}}
		}
	}
	return nil
}
