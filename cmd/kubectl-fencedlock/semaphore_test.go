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

package main

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/lock"
	"github.com/fencedlock/fencedlock/pkg/token"
)

var tableNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func stateOf(t *testing.T, permits int, held ...lease.Permit) lease.State {
	t.Helper()
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		locksv1alpha1.TokenAnnotation: "20", locksv1alpha1.PermitsAnnotation: strconv.Itoa(permits)}}}
	for _, p := range held {
		l.Annotations[locksv1alpha1.PermitAnnotation(p.Number)] = p.String()
	}
	st, err := lease.Read(l)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func held(n int, holder string, tok token.Token, renewedAgo time.Duration) lease.Permit {
	t := metav1.NewMicroTime(tableNow.Add(-renewedAgo))
	return lease.Permit{Number: n, Holder: holder, Token: tok, AcquireTime: &t, RenewTime: &t}
}

// The table shows a lock as before, and a semaphore as "held/permits" with a row per permit
// (holder, token, renewal) and per waiter.
func TestPrintSemaphore(t *testing.T) {
	created := metav1.NewTime(tableNow.Add(-time.Hour))
	lk := locksv1alpha1.FencedLock{ObjectMeta: metav1.ObjectMeta{Name: "ledger", CreationTimestamp: created}}
	showLease(&lk, lease.State{Holder: "alice", Token: 7, Limit: 1, AcquireTime: &metav1.MicroTime{Time: tableNow},
		RenewTime: &metav1.MicroTime{Time: tableNow.Add(-3 * time.Second)},
		Permits:   []lease.Permit{{Number: 1, Holder: "alice", Token: 7}}})
	sem := locksv1alpha1.FencedLock{ObjectMeta: metav1.ObjectMeta{Name: "pool", CreationTimestamp: created},
		Spec: locksv1alpha1.FencedLockSpec{Permits: 3}}
	sem.Status.WaitingCount = 2
	sem.Status.Waiters = []locksv1alpha1.Waiter{{Identity: "carol"}, {Identity: "pod/ns/job-1/uid", Pod: "job-1"}}
	showLease(&sem, stateOf(t, 3, held(1, "alice", 12, 5*time.Second), held(3, "bob", 20, time.Second)))
	if sem.Status.Held != "2/3" || len(sem.Status.Holders) != 2 || sem.Status.Holders[1].Token != "20" || sem.Status.Holder != "" {
		t.Fatalf("status of the semaphore: %+v", sem.Status)
	}

	var out bytes.Buffer
	list := &locksv1alpha1.FencedLockList{Items: []locksv1alpha1.FencedLock{lk, sem}}
	if err := printLocks(&out, list, false, false, tableNow); err != nil {
		t.Fatal(err)
	}
	want := `NAME         HOLDER   TOKEN   RENEWED   WAITING   AGE
ledger       alice    7       3s ago    0         60m
pool         2/3      20      1s ago    2         60m
  permit 1   alice    12      5s ago
  permit 3   bob      20      1s ago
  waiter 1   carol
  waiter 2   pod job-1
`
	if out.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestPermitNote(t *testing.T) {
	for _, c := range []struct {
		permit, permits int
		want            string
	}{
		{1, 1, ""}, {1, 0, ""}, {2, 3, ", permit 2 of 3"}, {1, 2, ", permit 1 of 2"}, {2, 0, ", permit 2"},
	} {
		if got := permitNote(c.permit, c.permits); got != c.want {
			t.Errorf("permitNote(%d, %d) = %q, want %q", c.permit, c.permits, got, c.want)
		}
	}
}

// A waiter is told who holds every permit, or that it holds one already, or that the free one is
// the queue's.
func TestSemaphoreState(t *testing.T) {
	full := stateOf(t, 2, held(1, "a", 12, 0), held(2, "b", 20, 0))
	if got := describeSemaphore(full, "me"); got != `all 2 permits held: permit 1 "a" (token 12), permit 2 "b" (token 20)` {
		t.Errorf("full: %s", got)
	}
	if got := describeSemaphore(full, "b"); !strings.Contains(got, `"b" holds permit 2 already (token 20)`) {
		t.Errorf("mine: %s", got)
	}
	room := stateOf(t, 2, held(2, "b", 20, 0))
	if got := describeSemaphore(room, "me"); !strings.Contains(got, "1 of 2 permits held, the free one going to the waiters") {
		t.Errorf("room: %s", got)
	}
}

func TestHeldMessage(t *testing.T) {
	for _, c := range []struct {
		permits int
		err     error
		want    string
	}{
		{1, &lock.HeldError{Holder: "x", Token: 7, Permits: 1}, `FencedLock ns/l is held by "x" with token 7`},
		{1, &lock.HeldError{Holder: "me", Token: 7, Permits: 1}, `FencedLock ns/l is held by "me" with token 7`},
		{1, &lock.ReservedError{Token: 7, Permits: 1}, "FencedLock ns/l is free but goes to the waiters in its queue (token 7)"},
		{3, &lock.HeldError{Holders: []string{"a", "b", "c"}, Token: 9, Permits: 3}, `all 3 permits are held (by "a", "b", "c"; last token 9)`},
		{3, &lock.HeldError{Holder: "me", Token: 8}, `"me" holds a permit already (token 8)`},
		{3, &lock.ReservedError{Token: 9, Permits: 3}, "has a free permit, but it goes to the waiters in its queue"},
	} {
		if got := heldMessage("ns", "l", "me", c.permits, c.err).Error(); !strings.Contains(got, c.want) {
			t.Errorf("heldMessage(%d, %+v) = %q, want it to say %q", c.permits, c.err, got, c.want)
		}
	}
}
