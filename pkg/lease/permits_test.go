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

package lease

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestParsePermit(t *testing.T) {
	at := metav1.NewMicroTime(time.Date(2026, 12, 3, 7, 35, 10, 123456000, time.UTC))
	p := Permit{Number: 3, Holder: "worker a/1", Token: 42, Ticket: 7, AcquireTime: &at, RenewTime: &at}
	got, err := ParsePermit("3", p.String())
	if err != nil {
		t.Fatal(err)
	}
	if got.Holder != p.Holder || got.Token != p.Token || got.Ticket != p.Ticket || !got.RenewTime.Equal(&at) {
		t.Fatalf("round trip of %q = %+v", p.String(), got)
	}
	// The highest ticket the lease-protocol policy admits in a permit (16 digits), above
	// MaxTicket: a ticket no queue issued, which serves nobody, and the Lease stays readable.
	forged := "42 9999999999999999 2026-12-03T07:35:10.123456Z 2026-12-03T07:35:10.123456Z mallory"
	if got, err := ParsePermit("3", forged); err != nil || got.Ticket != 9999999999999999 {
		t.Errorf("ParsePermit(%q) = %+v, %v", forged, got, err)
	}
	for _, bad := range []struct{ number, value string }{
		{"101", p.String()}, // above MaxPermits, the API's bound
		{"0", p.String()},
		{"03", p.String()},
		{"3", "42 7 2026-12-03T07:35:10.123456Z 2026-12-03T07:35:10.123456Z"}, // no holder
		{"3", "042x 7 2026-12-03T07:35:10.123456Z 2026-12-03T07:35:10.123456Z a"},
		{"3", "42 7 2026-12-03T07:35:10Z 2026-12-03T07:35:10.123456Z a"}, // not micro
		{"3", "42 -7 2026-12-03T07:35:10.123456Z 2026-12-03T07:35:10.123456Z a"},
	} {
		if _, err := ParsePermit(bad.number, bad.value); err == nil {
			t.Errorf("ParsePermit(%q, %q) accepted", bad.number, bad.value)
		}
	}
}

func TestLostPermitSaysWhat(t *testing.T) {
	l := mk("10", "", "10")
	if _, err := SetPermits(l, 2); err != nil {
		t.Fatal(err)
	}
	l.ResourceVersion = "11"
	tok, err := Grant(l, "a", now)
	if err != nil {
		t.Fatal(err)
	}
	l.ResourceVersion = "12"
	if _, err := Grant(l, "b", now); err != nil {
		t.Fatal(err)
	}
	if _, err := Release(l, "a", tok, nil, now); err != nil {
		t.Fatal(err)
	}
	err = Renew(l, "a", tok, now)
	var lost *LostError
	if !errors.As(err, &lost) || !strings.Contains(err.Error(), "the permit was released or revoked") ||
		strings.Contains(err.Error(), "superseded") {
		t.Fatalf("renewal of a released permit: %v", err)
	}
}

func TestHoldersText(t *testing.T) {
	cases := []struct {
		st   State
		want string
	}{
		{State{Token: 4, Limit: 1}, "the lock is free (granted from the queue next)"},
		{State{Token: 4, Limit: 1, Holder: "a"}, "held by a (token 4)"},
		{State{Token: 9, Limit: 4, Semaphore: true, Permits: []Permit{{Number: 1, Holder: "a", Token: 5},
			{Number: 2, Holder: "b", Token: 6}, {Number: 3, Holder: "c", Token: 7}, {Number: 4, Holder: "d", Token: 9}}},
			"4 of 4 permits held: a (token 5), b (token 6), c (token 7) and 1 more"},
	}
	for _, tc := range cases {
		if got := tc.st.HoldersText(); got != tc.want {
			t.Errorf("HoldersText = %q; want %q", got, tc.want)
		}
	}
}
