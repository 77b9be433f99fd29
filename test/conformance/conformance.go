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

// Package conformance reads the protocol's conformance table (pkg/lease/testdata/conformance.yaml),
// which four runners share: the pure transitions (pkg/lease), the API server's policies and the
// shell example of docs/protocol.md (test/integration), and the same policies evaluated
// in-process (internal/policyeval). It also builds a case's Leases: the state installed
// (install.go) and the write sent (writes.go), on the API server or in memory.
package conformance

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// State is a lock Lease as a case gives it.
type State struct {
	ResourceVersion string            `json:"resourceVersion"`
	Holder          string            `json:"holder"`
	Token           string            `json:"token"`
	Annotations     map[string]string `json:"annotations"`
	// Limit is annotation fencedlock.io/permits: 0 for a Lease in the lock format.
	Limit int `json:"limit"`
	// Permits are a semaphore's held permits by number (annotations fencedlock.io/permit-<n>).
	Permits map[string]Permit `json:"permits"`
}

// Permit is a held permit of a semaphore's Lease.
type Permit struct {
	Holder string `json:"holder"`
	// Token is a number before; after, as Outcome.Token ("same": this permit's token before, or
	// "$token": the Lease's token before).
	Token  string `json:"token"`
	Ticket uint64 `json:"ticket"`
	// Granted, Renewed: after, as in Outcome; a permit with neither keeps its times.
	Granted bool `json:"granted"`
	Renewed bool `json:"renewed"`
	// Raw is a value written as it is (raw writes only: a permit that breaks the format).
	Raw string `json:"raw"`
}

// Outcome is the state a write leaves, or the write itself.
type Outcome struct {
	Holder      string            `json:"holder"`
	Token       string            `json:"token"`
	Granted     bool              `json:"granted"`
	Renewed     bool              `json:"renewed"`
	Annotations map[string]string `json:"annotations"`
	QueueRead   *bool             `json:"queueRead"`
	// Waiter is the actor's waiter Lease after a join, beat or leave (or a raw write of it).
	Waiter *WaiterOutcome `json:"waiter"`
	// Limit is annotation fencedlock.io/permits after (0: the lock format); absent: as before.
	Limit *int `json:"limit"`
	// Permits are the permits held after, complete, when the Lease is a semaphore's after.
	Permits map[string]Permit `json:"permits"`
}

// WaiterLease is a waiter Lease of the lock before, as a case gives it.
type WaiterLease struct {
	// Identity is whose Lease it is (its name ends in the hash of it).
	Identity string `json:"identity"`
	// Ticket is its ticket: the resourceVersion of its join (runners (b) and (c) join for real, so
	// a case's tickets are ranks: MapTickets).
	Ticket uint64 `json:"ticket"`
	// Join is annotation fencedlock.io/join (0: "1").
	Join int `json:"join"`
	// Left: no holder (the waiter left, or the manager dropped it).
	Left bool `json:"left"`
}

// JoinCount is annotation fencedlock.io/join of w.
func (w WaiterLease) JoinCount() int { return max(w.Join, 1) }

// WaiterOutcome is a waiter Lease after a write.
type WaiterOutcome struct {
	Holder string `json:"holder"`
	Join   int    `json:"join"`
	// Ticket: "rv" (a join: no fencedlock.io/ticket, the write's own resourceVersion is the
	// ticket), "same" (fencedlock.io/ticket carries the ticket before), or a number (raw writes).
	Ticket  string `json:"ticket"`
	Renewed bool   `json:"renewed"`
}

// Semaphore reports whether the Lease is in the semaphore format after o, from before b.
func (o Outcome) Semaphore(b State) bool {
	if o.Limit != nil {
		return *o.Limit > 0
	}
	return b.Limit > 0
}

// Case is one conformance case (the table's header describes the fields).
type Case struct {
	Name       string        `json:"name"`
	Before     State         `json:"before"`
	Queue      *string       `json:"queue"`
	Waiters    []WaiterLease `json:"waiters"`
	Actor      string        `json:"actor"`
	Transition string        `json:"transition"`
	Args       struct {
		Token   string   `json:"token"`
		Ticket  uint64   `json:"ticket"`
		Revoked bool     `json:"revoked"`
		Gone    []string `json:"gone"`
		// Permits is spec.permits for setPermits; Holder the holder whose permit revoke ends.
		Permits int    `json:"permits"`
		Holder  string `json:"holder"`
	} `json:"args"`
	Write  *Outcome `json:"write"`
	Expect struct {
		Admitted *Outcome `json:"admitted"`
		Refused  *struct {
			Error   string `json:"error"`
			Message string `json:"message"`
			Policy  string `json:"policy"`
		} `json:"refused"`
	} `json:"expect"`
}

// WaiterOf returns the case's waiter Lease of identity, if any.
func (c Case) WaiterOf(identity string) (WaiterLease, bool) {
	for _, w := range c.Waiters {
		if w.Identity == identity {
			return w, true
		}
	}
	return WaiterLease{}, false
}

// WritesWaiter reports whether the case's write is to the actor's waiter Lease.
func (c Case) WritesWaiter() bool {
	switch c.Transition {
	case "join", "beat", "leave":
		return true
	case "raw":
		return c.Write != nil && c.Write.Waiter != nil
	}
	return false
}

// ticketKeys are the lock Lease annotations whose value is a ticket.
var ticketKeys = []string{"fencedlock.io/ticket", "fencedlock.io/reserved", "fencedlock.io/left"}

var (
	queueTicket = regexp.MustCompile(`"ticket":\s*(\d+)`)
	// textTicket is a ticket in a refusal's text: "ticket 4", "fencedlock.io/ticket (3)", "(above 5)".
	textTicket = regexp.MustCompile(`(ticket |fencedlock\.io/ticket \(|\(above )(\d+)`)
)

// Tickets returns every ticket the case names, in order (0, no ticket, aside): the waiter Leases'
// and the queue's, and those of the annotations, permits and arguments before and after.
func (c Case) Tickets() []uint64 {
	var out []uint64
	c.MapTickets(func(t uint64) uint64 {
		out = append(out, t)
		return t
	})
	slices.Sort(out)
	return slices.Compact(slices.DeleteFunc(out, func(t uint64) bool { return t == 0 }))
}

// MapTickets returns the case with each ticket t it names replaced by m(t) (0 stays 0): a runner
// whose tickets are real resourceVersions maps the table's, which only rank them.
func (c Case) MapTickets(m func(uint64) uint64) Case {
	mt := func(t uint64) uint64 {
		if t == 0 {
			return 0
		}
		return m(t)
	}
	ms := func(v string) string {
		t, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return v
		}
		return strconv.FormatUint(mt(t), 10)
	}
	annotations := func(a map[string]string) map[string]string {
		if a == nil {
			return nil
		}
		out := maps.Clone(a)
		for _, k := range ticketKeys {
			if v, ok := out[k]; ok {
				out[k] = ms(v)
			}
		}
		return out
	}
	permits := func(ps map[string]Permit) map[string]Permit {
		if ps == nil {
			return nil
		}
		out := map[string]Permit{}
		for n, p := range ps {
			p.Ticket = mt(p.Ticket)
			out[n] = p
		}
		return out
	}
	outcome := func(o *Outcome) *Outcome {
		if o == nil {
			return nil
		}
		x := *o
		x.Annotations, x.Permits = annotations(o.Annotations), permits(o.Permits)
		if o.Waiter != nil {
			w := *o.Waiter
			w.Ticket = ms(w.Ticket)
			x.Waiter = &w
		}
		return &x
	}
	c.Before.Annotations, c.Before.Permits = annotations(c.Before.Annotations), permits(c.Before.Permits)
	c.Args.Ticket = mt(c.Args.Ticket)
	if c.Queue != nil {
		q := queueTicket.ReplaceAllStringFunc(*c.Queue, func(s string) string {
			return `"ticket":` + ms(queueTicket.FindStringSubmatch(s)[1])
		})
		c.Queue = &q
	}
	ws := slices.Clone(c.Waiters)
	for i := range ws {
		ws[i].Ticket = mt(ws[i].Ticket)
	}
	c.Waiters = ws
	c.Write, c.Expect.Admitted = outcome(c.Write), outcome(c.Expect.Admitted)
	if r := c.Expect.Refused; r != nil {
		text := func(v string) string {
			return textTicket.ReplaceAllStringFunc(v, func(s string) string {
				m := textTicket.FindStringSubmatch(s)
				return m[1] + ms(m[2])
			})
		}
		x := *r
		x.Message, x.Policy = text(r.Message), text(r.Policy)
		c.Expect.Refused = &x
	}
	return c
}

// Load reads the table at path, refusing fields it does not know.
func Load(path string) ([]Case, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var table struct {
		Cases []Case `json:"cases"`
	}
	if err := yaml.UnmarshalStrict(b, &table); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return table.Cases, nil
}

// Same is the token or ticket spec of a value the write keeps.
const Same = "same"

// Token resolves an outcome's token against the state before: "same" (before), "$token" (the
// Lease's token before: for a permit, "same" is that permit's own token before), "rv" (the
// resourceVersion read: the write is a grant), "rv+N" (a wrong one, for raw writes), or a number
// (runner (a) only: the API server picks its own).
func Token(spec, before, leaseToken, rv string) (string, error) {
	switch {
	case spec == Same:
		if before == "" {
			return "", fmt.Errorf("token same: nothing before")
		}
		return before, nil
	case spec == "$token":
		return leaseToken, nil
	case spec == "rv":
		return rv, nil
	case strings.HasPrefix(spec, "rv+"):
		n, err1 := strconv.ParseUint(rv, 10, 64)
		d, err2 := strconv.ParseUint(strings.TrimPrefix(spec, "rv+"), 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			return "", err
		}
		return strconv.FormatUint(n+d, 10), nil
	}
	if _, err := strconv.ParseUint(spec, 10, 64); err != nil {
		return "", fmt.Errorf("token %q: want same, $token, rv, rv+N or a number", spec)
	}
	return spec, nil
}

// PermitNumbers returns the numbers of ps in order.
func PermitNumbers(ps map[string]Permit) ([]int, error) {
	ns := make([]int, 0, len(ps))
	for k := range ps {
		n, err := strconv.Atoi(k)
		if err != nil {
			return nil, fmt.Errorf("permit %q: not a number", k)
		}
		ns = append(ns, n)
	}
	slices.Sort(ns)
	return ns, nil
}
