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

package policyeval_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fencedlock/fencedlock/internal/policyeval"
	"github.com/fencedlock/fencedlock/test/conformance"
)

// Runner (d) of the conformance table pkg/lease/testdata/conformance.yaml: every case runner (b)
// (test/integration/conformance_test.go) sends to the API server is built the same way
// (test/conformance's Install and writes, on a store in memory that numbers writes as etcd does),
// evaluated in-process against config/policy, and held to runner (b)'s expectation: admitted, or
// refused by the policy with the case's expect.refused.policy in its message.
func TestConformance(t *testing.T) {
	cases, err := conformance.Load("../../pkg/lease/testdata/conformance.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := policies(t, "../../config/policy")
	var (
		sent    int
		elapsed time.Duration // in Admit, for the log
	)
	for i, c := range cases {
		if w, _ := conformance.CaseWrite(c); w == nil {
			continue
		}
		sent++
		t.Run(c.Name, func(t *testing.T) {
			c, req, err := caseRequest(p, fmt.Sprintf("case-%02d", i), c)
			if err != nil {
				t.Fatal(err)
			}
			_, admitted := conformance.CaseWrite(c)
			start := time.Now()
			got := p.Admit(req)
			elapsed += time.Since(start)
			expectAnswer(t, c, admitted, got)
		})
	}
	t.Logf("%d of %d cases send a write; Admit took %v on average", sent, len(cases), elapsed/time.Duration(max(sent, 1)))
}

// caseRequest installs the case as runner (b) does and returns it with its tickets mapped to
// real ones (refusals name them), and its write.
func caseRequest(p *policyeval.Policies, name string, c conformance.Case) (conformance.Case, policyeval.Request, error) {
	s, err := newLockStore(p, "conformance", name)
	if err != nil {
		return c, policyeval.Request{}, err
	}
	if c, err = conformance.InstallTickets(s, name, c); err != nil {
		return c, policyeval.Request{}, err
	}
	req, err := installWrite(s, name, c)
	return c, req, err
}

// installWrite installs the case's state and returns its write.
func installWrite(s *memStore, name string, c conformance.Case) (policyeval.Request, error) {
	w, _ := conformance.CaseWrite(c)
	manager := c.Actor == "manager"
	if c.WritesWaiter() {
		before, err := conformance.Waiter(s, name, c.Actor)
		if err != nil {
			return policyeval.Request{}, err
		}
		lock, err := s.Get(name)
		if err != nil {
			return policyeval.Request{}, err
		}
		sent, err := conformance.WaiterWrite(lock, c, before, *w.Waiter, time.Now())
		return policyeval.LeaseWrite(before, sent, manager), err
	}
	lock, err := conformance.Install(s, name, c)
	if err != nil {
		return policyeval.Request{}, err
	}
	sent, err := conformance.LockWrite(c, w, lock, time.Now())
	return policyeval.LeaseWrite(lock, sent, manager), err
}

// expectAnswer holds the answer to runner (b)'s expectation: refused, 403 Forbidden as every
// refusal of the policies (docs/protocol.md, refusals), by the waiter Lease's policy or the lock
// Lease's, with expect.refused.policy in the message; or admitted.
func expectAnswer(t *testing.T, c conformance.Case, admitted bool, got policyeval.Refusal) {
	t.Helper()
	if admitted {
		if !got.Admitted() {
			t.Fatalf("the write of the case was refused: %s", got)
		}
		return
	}
	policy := "lease-protocol"
	if c.WritesWaiter() {
		policy = "waiter-lease"
	}
	want := c.Expect.Refused.Policy
	if got.Policy != policy || !strings.Contains(got.Message, want) {
		t.Fatalf("got %q, want a refusal by %s containing %q", got, policy, want)
	}
	if got.Reason != metav1.StatusReasonForbidden {
		t.Fatalf("reason %s, want %s", got.Reason, metav1.StatusReasonForbidden)
	}
}
