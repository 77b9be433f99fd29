package controllers

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
)

// mkPod builds a pod of lock "settlement"; enqueued is an offset from t0 (negative: no stamp).
func mkPod(name string, enqueued time.Duration, gatedPod bool) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name),
		Labels:            map[string]string{locksv1alpha1.LockLabel: "settlement"},
		Annotations:       map[string]string{},
		CreationTimestamp: metav1.NewTime(t0.Truncate(time.Second))}}
	if enqueued >= 0 {
		p.Annotations[locksv1alpha1.EnqueuedAnnotation] = t0.Add(enqueued).Format(time.RFC3339Nano)
	}
	if gatedPod {
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: locksv1alpha1.SchedulingGate}}
	}
	return p
}

func names(q []*corev1.Pod) []string {
	out := make([]string, 0, len(q))
	for _, p := range q {
		out = append(out, p.Name)
	}
	return out
}

func TestComputeQueue(t *testing.T) {
	deleting := mkPod("deleting", 1*time.Millisecond, true)
	deleting.DeletionTimestamp = new(metav1.NewTime(t0))
	pods := []corev1.Pod{
		mkPod("c", 3*time.Millisecond, true),
		mkPod("a", 2*time.Millisecond, true),
		mkPod("z-first", 1*time.Millisecond, true), // sub-second order beats names
		mkPod("running", 0, false),                 // ungated: not waiting
		deleting,
		mkPod("holder", 0, true), // granted, not ungated yet
		mkPod("tie-b", 5*time.Millisecond, true),
		mkPod("tie-a", 5*time.Millisecond, true),
	}
	got := names(computeQueue(pods, locksv1alpha1.PodHolderIdentity("holder", "uid-holder")))
	want := []string{"z-first", "a", "c", "tie-a", "tie-b"}
	if len(got) != len(want) {
		t.Fatalf("queue = %v; want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("queue = %v; want %v", got, want)
		}
	}
}

func TestPodObservation(t *testing.T) {
	st := held(locksv1alpha1.PodHolderIdentity("p", "uid-p"), 10)
	o := nextObservation(observation{}, st, new(false), t0) // just granted, not Ready yet
	if !o.notReadySince.Equal(t0) {
		t.Fatalf("notReadySince = %v", o.notReadySince)
	}
	o = nextObservation(o, st, new(false), t0.Add(5*time.Second))
	if !o.notReadySince.Equal(t0) {
		t.Fatal("notReadySince must keep the first observation")
	}
	o = nextObservation(o, st, new(true), t0.Add(6*time.Second))
	if !o.notReadySince.IsZero() {
		t.Fatal("a Ready pod clears notReadySince")
	}
	o = nextObservation(o, st, new(false), t0.Add(60*time.Second))
	if !o.notReadySince.Equal(t0.Add(60 * time.Second)) {
		t.Fatal("a pod that turns not Ready starts a new clock")
	}
}

func TestComputePlan(t *testing.T) {
	holderID := locksv1alpha1.PodHolderIdentity("holder", "uid-holder")
	holder := mkPod("holder", 0, false)
	holder.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	succeeded := holder
	succeeded.Status.Phase = corev1.PodSucceeded
	stillGated := mkPod("holder", 0, true)
	next := mkPod("next", time.Second, true)
	queue := []*corev1.Pod{&next}
	free := lease.State{Token: tokenOf(10), Duration: 15 * time.Second}
	podHeld := held(holderID, 10)
	client := held("library", 10)
	readyObs := observation{renewedAt: t0, acquiredAt: t0}
	notReadyObs := observation{renewedAt: t0, acquiredAt: t0, notReadySince: t0}

	cases := []struct {
		name      string
		st        lease.State
		obs       observation
		holderPod *corev1.Pod
		queue     []*corev1.Pod
		now       time.Time
		wantEnd   ending
		wantGrant string
		wantUngat bool
		wantDead  time.Time
	}{
		{name: "free, nobody waits", st: free},
		{name: "free: grant the first waiter", st: free, queue: queue, wantGrant: "next"},
		{name: "held by a Ready pod: nothing to do, no timer", st: podHeld, obs: readyObs, holderPod: &holder, queue: queue, now: t0.Add(time.Hour)},
		{name: "holder pod succeeded: hand over in one write", st: podHeld, obs: readyObs, holderPod: &succeeded, queue: queue,
			wantEnd: release, wantGrant: "next"},
		{name: "holder pod deleted, nobody waits", st: podHeld, obs: readyObs, wantEnd: release},
		{name: "holder pod not Ready within the lease: not yet", st: podHeld, obs: notReadyObs, holderPod: &stillGated, queue: queue,
			now: t0.Add(14 * time.Second), wantUngat: true, wantDead: t0.Add(15 * time.Second)},
		{name: "holder pod not Ready past the lease: revoke and hand over", st: podHeld, obs: notReadyObs, holderPod: &holder, queue: queue,
			now: t0.Add(15 * time.Second), wantEnd: revoke, wantGrant: "next"},
		{name: "library holder: waiters wait until its lease", st: client, obs: readyObs, queue: queue, now: t0.Add(time.Second),
			wantDead: t0.Add(15 * time.Second)},
		{name: "library holder expired: revoke and grant the waiter", st: client, obs: readyObs, queue: queue, now: t0.Add(15 * time.Second),
			wantEnd: revoke, wantGrant: "next"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := computePlan(tc.st, tc.obs, tc.holderPod, tc.queue, 0, tc.now)
			gotGrant := ""
			if p.grant != nil {
				gotGrant = p.grant.Name
			}
			if p.end != tc.wantEnd || gotGrant != tc.wantGrant || (p.ungate != nil) != tc.wantUngat || !p.deadline.Equal(tc.wantDead) {
				t.Fatalf("plan = end %v grant %q ungate %v deadline %v; want end %v grant %q ungate %v deadline %v",
					p.end, gotGrant, p.ungate != nil, p.deadline, tc.wantEnd, tc.wantGrant, tc.wantUngat, tc.wantDead)
			}
		})
	}
}

func TestPodReplaced(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	invalid := func(path ...string) error {
		return apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "worker-0",
			field.ErrorList{field.Invalid(field.NewPath(path[0], path[1:]...), "x", "field is immutable")})
	}
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"uid immutable", invalid("metadata", "uid"), true},
		{"uid precondition", apierrors.NewConflict(pods, "worker-0", errors.New("Precondition failed: UID")), true},
		{"another field invalid", invalid("metadata", "annotations"), false},
		{"not found", apierrors.NewNotFound(pods, "worker-0"), false},
		{"other", errors.New("connection refused"), false},
	}
	for _, tc := range cases {
		if got := podReplaced(tc.err); got != tc.want {
			t.Errorf("%s: podReplaced(%v) = %v; want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
