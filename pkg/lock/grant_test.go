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

package lock

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
)

// lockLease is the free Lease of FencedLock ns/lock, stamped with token 10, with the given
// annotations besides.
func lockLease(annotations ...string) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lock", ResourceVersion: "11",
		Annotations: map[string]string{locksv1alpha1.TokenAnnotation: "10"}}}
	l.Spec.LeaseDurationSeconds = new(int32(1))
	for i := 0; i+1 < len(annotations); i += 2 {
		l.Annotations[annotations[i]] = annotations[i+1]
	}
	return l
}

// TryAcquire tells a held lock from a free one owed to its queue, each with its own error.
func TestTryAcquireErrors(t *testing.T) {
	ctx := context.Background()
	cs := casClientset(t, lockLease())
	if _, err := newLocker(t, cs, "lock", WithIdentity("a")).TryAcquire(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := newLocker(t, cs, "lock", WithIdentity("b")).TryAcquire(ctx)
	if h, ok := errors.AsType[*HeldError](err); !ok || h.Holder != "a" || errors.Is(err, ErrReserved) {
		t.Errorf("held lock: %v; want a HeldError naming a", err)
	}

	for _, c := range []struct {
		annotation, value string
		pod               bool
	}{{locksv1alpha1.WaitingAnnotation, "true", false}, {locksv1alpha1.ReservedAnnotation, "4", true}} {
		cs := casClientset(t, lockLease(c.annotation, c.value))
		_, err := newLocker(t, cs, "lock", WithIdentity("b")).TryAcquire(ctx)
		if r, ok := errors.AsType[*ReservedError](err); !ok || r.Pod != c.pod || errors.Is(err, ErrHeld) {
			t.Errorf("%s: %v; want a ReservedError (pod: %v)", c.annotation, err, c.pod)
		}
	}

	unstamped := lockLease()
	delete(unstamped.Annotations, locksv1alpha1.TokenAnnotation)
	cs = casClientset(t, unstamped)
	if _, err := newLocker(t, cs, "lock").TryAcquire(ctx); !errors.Is(err, ErrNotInitialized) {
		t.Errorf("uninitialized lock: %v; want ErrNotInitialized", err)
	}
}

// Attach to a grant that ended fails with a LostError.
func TestAttachLost(t *testing.T) {
	cs := casClientset(t, lockLease())
	_, err := newLocker(t, cs, "lock", WithIdentity("a")).Attach(context.Background(), 10)
	if l, ok := errors.AsType[*LostError](err); !ok || l.Token != 10 {
		t.Errorf("Attach: %v; want a LostError", err)
	}
}

func acquired(t *testing.T, cs *fake.Clientset) *Grant {
	t.Helper()
	g, err := newLocker(t, cs, "lock", WithIdentity("a")).TryAcquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// A keep-alive renews until stopped; Stop waits for it; one runs at a time; Release stops it.
func TestKeepAliveLifetime(t *testing.T) {
	ctx := context.Background()
	cs := casClientset(t, lockLease())
	g := acquired(t, cs)
	before := writes(cs)
	k, err := g.KeepAlive(ctx, 5*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.KeepAlive(ctx, 0); !errors.Is(err, ErrKeepAliveRunning) {
		t.Errorf("second KeepAlive: %v; want ErrKeepAliveRunning", err)
	}
	for writes(cs) < before+3 {
		time.Sleep(time.Millisecond)
	}
	k.Stop()
	select {
	case <-k.Done():
	default:
		t.Fatal("Done open after Stop returned")
	}
	if k.Err() != nil {
		t.Errorf("Err after Stop: %v", k.Err())
	}
	stopped := writes(cs)
	time.Sleep(30 * time.Millisecond)
	if n := writes(cs); n != stopped {
		t.Errorf("%d renewals after Stop returned", n-stopped)
	}

	k, err = g.KeepAlive(ctx, time.Hour)
	if err != nil {
		t.Fatalf("KeepAlive after the first stopped: %v", err)
	}
	if err := g.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-k.Done():
	default:
		t.Error("keep-alive still running after Release returned")
	}
}

// A keep-alive that cannot renew for a whole lease duration reports each failure, then declares
// the grant lost with the renewal error.
func TestKeepAlivePresumedLost(t *testing.T) {
	cs := casClientset(t, lockLease())
	g := acquired(t, cs)
	cs.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("down")
	})
	k, err := g.KeepAlive(context.Background(), 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.After(5 * time.Second)
	for k.Err() == nil {
		select {
		case <-deadline:
			t.Fatal("no renewal error reported")
		case <-time.After(time.Millisecond):
		}
	}
	if !apierrors.IsServiceUnavailable(k.Err()) {
		t.Errorf("Err while renewing: %v", k.Err())
	}
	select {
	case <-k.Done():
	case <-deadline:
		t.Fatal("keep-alive did not end")
	}
	<-g.Lost()
	l, ok := errors.AsType[*LostError](g.Err())
	if !ok || !apierrors.IsServiceUnavailable(l) || !errors.Is(k.Err(), ErrLost) {
		t.Errorf("grant: %v, keep-alive: %v; want a LostError wrapping the renewal error", g.Err(), k.Err())
	}
}

// A release reads the queue (one list of the queue Lease and the waiter Leases) as of the Lease it writes
// over ("not older than" its resourceVersion, from the API server's watch cache). It reads again
// from etcd if the cache cannot catch up, or shows nobody to serve (it may lag a join made a
// moment ago): either way it serves the head in its write.
func TestReleaseReadsQueueAsOfItsLease(t *testing.T) {
	for _, c := range []struct {
		cache string // what the API server's cache answers: "fresh", "behind" (cannot catch up), "lags" (no join yet)
		reads []string
	}{{"fresh", []string{"list@13"}}, {"behind", []string{"list@13", "list@"}}, {"lags", []string{"list@13", "list@"}}} {
		now := time.Now()
		cur := semaphoreLease(2, "13", permit(1, "me", 11, 0, now))
		cur.Annotations[locksv1alpha1.WaitingAnnotation] = "true"
		ref := lease.LockOf(cur)
		next := lease.NewWaiter("ns", locksv1alpha1.WaiterLeaseName(ref.UID, "next"), ref)
		lease.JoinWaiter(nil, next, "next", now)
		next.ResourceVersion = "12" // its join's: its ticket
		cs := casClientset(t, cur, queueLease(), next)
		var reads []string
		tooLarge := func() error {
			err := apierrors.NewTimeoutError("Too large resource version: 13, current: 12", 1)
			err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge}}
			return err
		}
		cs.PrependReactor("list", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
			rv := a.(k8stesting.ListActionImpl).ListOptions.ResourceVersion
			reads = append(reads, "list@"+rv)
			switch {
			case rv == "":
				return false, nil, nil
			case c.cache == "behind":
				return true, nil, tooLarge()
			case c.cache == "lags":
				return true, &coordinationv1.LeaseList{}, nil
			}
			return false, nil, nil
		})
		g, err := newLocker(t, cs, "pool", WithIdentity("me")).Attach(context.Background(), 11)
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Release(context.Background()); err != nil {
			t.Fatalf("cache %s: Release: %v", c.cache, err)
		}
		if !slices.Equal(reads, c.reads) {
			t.Errorf("cache %s: queue reads %q; want %q", c.cache, reads, c.reads)
		}
		got, err := cs.CoordinationV1().Leases("ns").Get(context.Background(), "pool", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		st, _ := lease.Read(got)
		if _, served := st.HolderOf("next"); !served || len(st.Permits) != 1 {
			t.Errorf("cache %s: permits after the release %+v; want the head's, next", c.cache, st.Permits)
		}
	}
}
