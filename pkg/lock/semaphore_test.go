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
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/token"
)

const lockUID = "0f0f"

// casClientset is a fake API server for Leases that does what the client relies on: an update
// conditioned on a stale resourceVersion is a conflict, and every write gets a new, higher one.
func casClientset(t *testing.T, objs ...*coordinationv1.Lease) *fake.Clientset {
	t.Helper()
	cs := fake.NewClientset()
	var mu sync.Mutex
	rv := 100
	for _, o := range objs {
		if err := cs.Tracker().Add(o); err != nil {
			t.Fatal(err)
		}
	}
	cs.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		next := a.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease).DeepCopy()
		cur, err := cs.Tracker().Get(a.GetResource(), next.Namespace, next.Name)
		if err != nil {
			return true, nil, err
		}
		if cur.(*coordinationv1.Lease).ResourceVersion != next.ResourceVersion {
			return true, nil, apierrors.NewConflict(a.GetResource().GroupResource(), next.Name, errors.New("changed"))
		}
		rv++
		next.ResourceVersion = strconv.Itoa(rv)
		return true, next, cs.Tracker().Update(a.GetResource(), next, next.Namespace)
	})
	return cs
}

// semaphoreLease is the Lease of FencedLock ns/pool with n permits, stamped with token 10 at
// resourceVersion rv, with the permits given (and token the highest of theirs).
func semaphoreLease(n int, rv string, held ...lease.Permit) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pool", ResourceVersion: rv,
		Labels: map[string]string{locksv1alpha1.ManagedByLabel: locksv1alpha1.ManagedByValue},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: locksv1alpha1.GroupVersion.String(), Kind: "FencedLock",
			Name: "pool", UID: lockUID, Controller: new(true)}},
		Annotations: map[string]string{locksv1alpha1.TokenAnnotation: "10", locksv1alpha1.PermitsAnnotation: strconv.Itoa(n)}}}
	l.Spec.LeaseDurationSeconds = new(int32(15))
	last := token.Token(10)
	for _, p := range held {
		l.Annotations[locksv1alpha1.PermitAnnotation(p.Number)] = p.String()
		last = max(last, p.Token)
	}
	l.Annotations[locksv1alpha1.TokenAnnotation] = last.String()
	return l
}

func queueLease() *coordinationv1.Lease {
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: locksv1alpha1.QueueLeaseName(lockUID),
		ResourceVersion: "1"}}
}

func permit(n int, holder string, tok token.Token, ticket lease.Ticket, at time.Time) lease.Permit {
	t := metav1.NewMicroTime(at.Truncate(time.Microsecond))
	return lease.Permit{Number: n, Holder: holder, Token: tok, Ticket: ticket, AcquireTime: &t, RenewTime: &t}
}

func writes(cs *fake.Clientset) (n int) {
	for _, a := range cs.Actions() {
		if a.GetVerb() == "update" || a.GetVerb() == "create" {
			n++
		}
	}
	return n
}

// Two holders take the two permits of a semaphore at once, each with its own token above every
// earlier one; a third is refused until one releases; renewal, release and loss are per permit.
func TestSemaphorePermits(t *testing.T) {
	ctx := context.Background()
	cs := casClientset(t, semaphoreLease(2, "11"))
	take := func(id string) (*Grant, error) {
		return newLocker(t, cs, "pool", WithIdentity(id)).TryAcquire(ctx)
	}
	a, err := take("a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := take("b")
	if err != nil {
		t.Fatal(err)
	}
	if a.Permit() != 1 || b.Permit() != 2 || a.Token() <= 10 || b.Token() <= a.Token() {
		t.Fatalf("grants a: permit %d token %s, b: permit %d token %s; want permits 1 and 2, tokens above 10 and rising",
			a.Permit(), a.Token(), b.Permit(), b.Token())
	}
	_, err = take("c")
	if h, ok := errors.AsType[*HeldError](err); !ok || len(h.Holders) != 2 || !strings.Contains(err.Error(), "all 2 permits") {
		t.Fatalf("third TryAcquire: %v; want a HeldError naming both holders", err)
	}
	if _, err := take("a"); !errors.Is(err, ErrHeld) {
		t.Fatalf("a second permit for identity a: %v; want a HeldError", err)
	}
	if err := b.Renew(ctx); err != nil {
		t.Fatalf("renewing permit 2: %v", err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatalf("releasing permit 1: %v", err)
	}
	c, err := take("c")
	if err != nil || c.Permit() != 1 || c.Token() <= b.Token() {
		t.Fatalf("c after a released: %v (permit %d, token %s); want permit 1 with a token above %s", err, c.Permit(), c.Token(), b.Token())
	}
	if err := a.Renew(ctx); !errors.Is(err, ErrLost) {
		t.Errorf("a renews its released permit 1, now c's: %v; want a LostError", err)
	}
	if err := b.Renew(ctx); err != nil {
		t.Errorf("b's permit is untouched by a's release and c's grant: %v", err)
	}
}

// A semaphore turned back into a lock (spec.permits: 1) numbers its one holder 1: the grant shows
// it from its next write on.
func TestPermitRenumbered(t *testing.T) {
	ctx := context.Background()
	cs := casClientset(t, semaphoreLease(2, "13", permit(2, "me", 12, 0, time.Now())))
	g, err := newLocker(t, cs, "pool", WithIdentity("me")).Attach(ctx, 12)
	if err != nil || g.Permit() != 2 {
		t.Fatalf("Attach: %v, permit %d; want permit 2", err, g.Permit())
	}
	cur, _ := cs.CoordinationV1().Leases("ns").Get(ctx, "pool", metav1.GetOptions{})
	if _, err := lease.SetPermits(cur, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoordinationV1().Leases("ns").Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := g.Renew(ctx); err != nil || g.Permit() != 1 {
		t.Errorf("Renew on the lock: %v, permit %d; want permit 1", err, g.Permit())
	}
}

// A grant write whose response was lost is recognised by this identity's permit, even after
// another permit was granted since: the lock's token is then the other grant's.
func TestUnsureGrantOnSemaphore(t *testing.T) {
	sent := time.Date(2026, 1, 2, 3, 4, 5, 678901000, time.UTC)
	cur := semaphoreLease(2, "13", permit(1, "me", 11, 0, sent), permit(2, "other", 12, 0, sent))
	cs := casClientset(t, cur, queueLease())
	l := newLocker(t, cs, "pool", WithIdentity("me"))
	g, err := l.attempt(context.Background(), &acquisition{unsure: map[token.Token]time.Time{11: sent}}, cur)
	if err != nil || g == nil {
		t.Fatalf("attempt = %v, %v; want the grant the lost write made", g, err)
	}
	if g.Token() != 11 || g.Permit() != 1 {
		t.Errorf("grant token %s permit %d; want token 11 on permit 1", g.Token(), g.Permit())
	}
	if n := writes(cs); n != 0 {
		t.Errorf("%d writes; want none", n)
	}
}

// A queued waiter served onto a permit gets that permit's token, not the lock's last one.
func TestServedOnSemaphore(t *testing.T) {
	now := time.Now()
	cur := semaphoreLease(2, "14", permit(1, "later", 13, 0, now), permit(2, "me", 11, 7, now))
	cur.Annotations[locksv1alpha1.TicketAnnotation] = "7"
	cs := casClientset(t, cur, queueLease())
	l := newLocker(t, cs, "pool", WithIdentity("me"))
	g, err := l.attempt(context.Background(), &acquisition{ticket: 7}, cur)
	if err != nil || g == nil {
		t.Fatalf("attempt = %v, %v; want the grant of ticket 7", g, err)
	}
	if g.Token() != 11 || g.Permit() != 2 {
		t.Errorf("grant token %s permit %d; want token 11 on permit 2", g.Token(), g.Permit())
	}
}

// An identity that holds a permit does not queue for a second one: it waits for its own to end.
func TestNoSecondPermitQueued(t *testing.T) {
	cur := semaphoreLease(3, "11", permit(1, "me", 11, 0, time.Now()))
	cs := casClientset(t, cur, queueLease())
	var seen []Status
	l := newLocker(t, cs, "pool", WithIdentity("me"), WithWaitCallback(func(st Status) { seen = append(seen, st) }))
	a := &acquisition{}
	g, err := l.attempt(context.Background(), a, cur)
	if g != nil || err != nil || a.ticket != 0 {
		t.Fatalf("attempt = %v, %v, ticket %d; want to wait unqueued", g, err, a.ticket)
	}
	if n := writes(cs); n != 0 {
		t.Errorf("%d writes (a second grant or a queue entry); want none", n)
	}
	if len(seen) != 1 {
		t.Errorf("wait callback called %d times; want once", len(seen))
	}
}

// The wait callback hears of every change of a semaphore's holders, also a release that issued
// no token.
func TestWaitCallbackOnSemaphore(t *testing.T) {
	now := time.Now()
	full := semaphoreLease(2, "13", permit(1, "a", 11, 0, now), permit(2, "b", 12, 0, now))
	oneLeft := semaphoreLease(2, "14", permit(2, "b", 12, 0, now)) // a released; its room goes to the queue
	oneLeft.Annotations[locksv1alpha1.WaitingAnnotation] = "true"
	full.Annotations[locksv1alpha1.WaitingAnnotation] = "true"
	cs := casClientset(t, full, queueLease())
	var seen []Status
	l := newLocker(t, cs, "pool", WithIdentity("me"), WithWaitCallback(func(st Status) { seen = append(seen, st) }))
	a := &acquisition{ticket: 5}
	for _, cur := range []*coordinationv1.Lease{full, full, oneLeft} {
		if g, err := l.attempt(context.Background(), a, cur); g != nil || err != nil {
			t.Fatalf("attempt = %v, %v; want to keep waiting", g, err)
		}
	}
	if len(seen) != 2 || len(seen[0].Holders) != 2 || len(seen[1].Holders) != 1 || !seen[1].Queued || seen[1].Ahead < 0 {
		t.Errorf("wait callback saw %d states; want the full semaphore, then one permit held", len(seen))
	}
}

// A queued waiter is told why it does not take the lock as a newcomer would be.
func TestHeldErrorOfQueuedWaiter(t *testing.T) {
	now := time.Now()
	st, err := lease.Read(semaphoreLease(2, "13", permit(1, "a", 11, 0, now), permit(2, "b", 12, 0, now)))
	if err != nil {
		t.Fatal(err)
	}
	if e := heldError(st); !errors.Is(e, ErrHeld) || !strings.Contains(e.Error(), `all 2 permits of the lock are held (by "a", "b"; last token 12)`) {
		t.Errorf("full semaphore: %v", e)
	}
	st, _ = lease.Read(semaphoreLease(2, "13", permit(2, "b", 12, 0, now)))
	if e, ok := heldError(st).(*ReservedError); !ok || e.Pod || !strings.Contains(e.Error(), "waiters are queued") {
		t.Errorf("semaphore with room: %v", e)
	}
	lk := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{locksv1alpha1.TokenAnnotation: "9"}}}
	lk.Spec.HolderIdentity = new("x")
	st, _ = lease.Read(lk)
	if e := heldError(st); e.Error() != `lock is held by "x" with token 9` {
		t.Errorf("held lock: %v", e)
	}
}

// A release starts from the newest Lease the grant's follower has shown, not the grant's own:
// on a semaphore, another permit's release since then would make the grant's own version a
// conflict and a read before the write that counts.
func TestReleaseStartsFromTheFollowedLease(t *testing.T) {
	ctx := context.Background()
	cs := casClientset(t, semaphoreLease(2, "11"))
	take := func(id string) *Grant {
		g, err := newLocker(t, cs, "pool", WithIdentity(id)).TryAcquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	a, b := take("a"), take("b")
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	now, err := cs.CoordinationV1().Leases("ns").Get(ctx, "pool", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f := newFollower("pool", now.ResourceVersion, 0, func() {})
	f.observe(watch.Event{Type: watch.Modified, Object: now})
	a.setFollower(f)
	cs.ClearActions()
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	verbs := make([]string, 0, len(cs.Actions()))
	for _, act := range cs.Actions() {
		verbs = append(verbs, act.GetVerb())
	}
	if !slices.Equal(verbs, []string{"update"}) {
		t.Errorf("a's release after b's, its follower showing b's: requests %v; want one update", verbs)
	}
}

// A Lease at the lock's name without the manager's labels (anyone may create one, with any token
// on it) is nobody's lock: the Locker takes nothing on it and waits for the manager to replace it.
func TestNoGrantOnAForeignLease(t *testing.T) {
	cur := semaphoreLease(2, "14")
	cur.Labels = nil
	cs := casClientset(t, cur, queueLease())
	l := newLocker(t, cs, "pool", WithIdentity("me"))
	g, err := l.attempt(context.Background(), &acquisition{}, cur)
	if err != nil || g != nil {
		t.Fatalf("attempt = %v, %v; want no grant", g, err)
	}
	for _, a := range cs.Actions() {
		if a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			t.Errorf("attempt sent %s %s; want no write", a.GetVerb(), a.GetResource().Resource)
		}
	}
}
