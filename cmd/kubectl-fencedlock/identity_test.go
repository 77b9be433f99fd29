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
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lock"
	"github.com/fencedlock/fencedlock/pkg/token"
)

// The default identity names its user and host, is unique to the process (pid and a random
// part), stays the same within it, and is one pkg/lock accepts.
func TestProcessIdentity(t *testing.T) {
	id := processIdentity()
	host, _ := os.Hostname()
	want := regexp.MustCompile(fmt.Sprintf(`^[^/@]+@%s/%d-[0-9a-f]{4}$`, regexp.QuoteMeta(host), os.Getpid()))
	if !want.MatchString(id) {
		t.Errorf("processIdentity() = %q, want it to match %s", id, want)
	}
	if again := processIdentity(); again != id {
		t.Errorf("processIdentity() changed within one process: %q, then %q", id, again)
	}
	if identityOr("") != id || identityOr("runner") != "runner" {
		t.Errorf("identityOr: %q, %q", identityOr(""), identityOr("runner"))
	}
	if err := lock.ValidateIdentity(id); err != nil {
		t.Errorf("the default identity is not valid: %v", err)
	}
}

func TestSameUserHost(t *testing.T) {
	for _, c := range []struct {
		identity, holder string
		want             bool
	}{
		{"alice@db1/12-ab01", "alice@db1/13-cd02", true},
		{"alice@db1/12-ab01", "alice@db1", true}, // a grant of a plugin from before per-process identities
		{"alice@db1/12-ab01", "alice@db1/nightly", true},
		{"alice@db1/12-ab01", "alice@db1/12-ab01", false}, // itself: not another process
		{"alice@db1/12-ab01", "bob@db1/13-cd02", false},
		{"alice@db1/12-ab01", "alice@db2/13-cd02", false},
		{"runner", "runner2", false}, // no user@host: nothing to compare
		{"alice@db1/12-ab01", "pod/ns/job-1/uid", false},
	} {
		if got := sameUserHost(c.identity, c.holder); got != c.want {
			t.Errorf("sameUserHost(%q, %q) = %v, want %v", c.identity, c.holder, got, c.want)
		}
	}
}

// A wait for another process of one's own user and host says so, with the command that ends it.
func TestWaitingForYourself(t *testing.T) {
	t.Setenv("USER", "tester")
	me, other := userHost()+"/1-aaaa", userHost()+"/2-bbbb"
	got := heldMessage("ns", "l", me, 1, &lock.HeldError{Holder: other, Token: 7, Permits: 1}).Error()
	want := fmt.Sprintf(`FencedLock ns/l is held by %q with token 7, another process of %s: if none of yours still needs it, `+
		`release it with "kubectl fencedlock release l -n ns --fencing-token 7"`, other, userHost())
	if got != want {
		t.Errorf("held by another process of mine:\n got %s\nwant %s", got, want)
	}
	if got := heldMessage("ns", "l", me, 1, &lock.HeldError{Holder: "someone", Token: 7, Permits: 1}).Error(); strings.Contains(got, "another process") {
		t.Errorf("held by someone else: %s", got)
	}
	got = heldMessage("ns", "l", me, 2, &lock.HeldError{Holders: []string{"a", other}, Token: 9, Permits: 2}).Error()
	if !strings.Contains(got, fmt.Sprintf(`by "a", %q (another process of %s)`, other, userHost())) {
		t.Errorf("semaphore held by another process of mine: %s", got)
	}
	full := stateOf(t, 2, held(1, "a", 12, 0), held(2, other, 20, 0))
	if got := describeSemaphore(full, me); !strings.Contains(got, fmt.Sprintf(`permit 2 %q (token 20) (another process of`, other)) {
		t.Errorf("full semaphore: %s", got)
	}
}

// get marks a semaphore's waiter that waits while a process of its own user and host holds a
// permit.
func TestPrintWaiterOfSameUserHost(t *testing.T) {
	sem := locksv1alpha1.FencedLock{ObjectMeta: metav1.ObjectMeta{Name: "pool",
		CreationTimestamp: metav1.NewTime(tableNow.Add(-time.Hour))}, Spec: locksv1alpha1.FencedLockSpec{Permits: 2}}
	sem.Status.Waiters = []locksv1alpha1.Waiter{{Identity: "carol@h/3-cccc"}, {Identity: "dave@h/4-dddd"}}
	showLease(&sem, stateOf(t, 2, held(1, "alice@h/1-aaaa", 12, 0), held(2, "carol@h/2-bbbb", 20, 0)))
	var out bytes.Buffer
	list := &locksv1alpha1.FencedLockList{Items: []locksv1alpha1.FencedLock{sem}}
	if err := printLocks(&out, list, false, false, tableNow); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "waiter 1   carol@h/3-cccc (same carol@h as permit 2)\n") ||
		!strings.Contains(out.String(), "waiter 2   dave@h/4-dddd\n") {
		t.Errorf("table:\n%s", out.String())
	}
}

// renew and release find a grant's holder from its token when it is a process of this user and
// host, and refuse anyone else's without --identity.
func TestTokenHolder(t *testing.T) {
	t.Setenv("USER", "tester")
	mine, old := userHost()+"/2-bbbb", userHost()
	st := stateOf(t, 3, held(1, "alice@elsewhere/1-aaaa", 12, 0), held(2, mine, 20, 0), held(3, old, 21, 0))
	for _, c := range []struct {
		tok     token.Token
		want    string
		found   bool
		wantErr string
	}{
		{20, mine, true, ""},
		{21, old, true, ""},
		{12, "", false, `token 12 is held by "alice@elsewhere/1-aaaa", not by a process of ` + old},
		{13, "", false, ""},
	} {
		got, found, err := tokenHolder(st, c.tok)
		if got != c.want || found != c.found || (err == nil) != (c.wantErr == "") ||
			(err != nil && !strings.Contains(err.Error(), c.wantErr)) {
			t.Errorf("tokenHolder(%d) = %q, %v, %v; want %q, %v, %q", c.tok, got, found, err, c.want, c.found, c.wantErr)
		}
	}
}
