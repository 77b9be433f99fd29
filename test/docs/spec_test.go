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

package docs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/test/conformance"
	"github.com/fencedlock/fencedlock/test/docs"
	"github.com/fencedlock/fencedlock/test/util"
)

// The specification (docs/protocol.md) against the fixtures, the policies and the shell client:
// issue 44's checks, each failing when the text, the example or the code drifts back.

const fixturesFile = "pkg/lease/testdata/conformance.yaml"

var (
	// ruleStart begins a numbered rule: R<n> of the protocol's core, F<n> of the fence's section,
	// P<n> of the pods' (each family numbered on its own, so sections grow without renumbering).
	ruleStart = regexp.MustCompile(`^- \*\*([RFP])(\d+)\.\*\*`)
	codeSpan  = regexp.MustCompile("`([^`]+)`")
)

// rule is one numbered MUST rule of docs/protocol.md: its text, continuation lines joined.
type rule struct {
	family string
	n      int
	line   int
	text   string
}

func (r rule) id() string { return r.family + strconv.Itoa(r.n) }

// rules returns the numbered rules of d: a line "- **R<n>.** …" and its indented continuation.
func rules(d *docs.Doc) []rule {
	var out []rule
	for i := 0; i < len(d.Lines); i++ {
		m := ruleStart.FindStringSubmatch(d.Lines[i])
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[2])
		r := rule{family: m[1], n: n, line: i + 1, text: strings.TrimSpace(d.Lines[i])}
		for i+1 < len(d.Lines) && strings.HasPrefix(d.Lines[i+1], "  ") {
			i++
			r.text += " " + strings.TrimSpace(d.Lines[i])
		}
		out = append(out, r)
	}
	return out
}

// cited returns the code spans a rule's text lists after label ("Fixtures:", "Tests:").
func cited(text, label string) []string {
	_, after, ok := strings.Cut(text, label)
	if !ok {
		return nil
	}
	var out []string
	for _, m := range codeSpan.FindAllStringSubmatch(after, -1) {
		out = append(out, m[1])
	}
	return out
}

// Every rule of docs/protocol.md is numbered in order (within its family: R, F, P) and cites at
// least one fixture case that exists (or, outside the fixtures' reach, a test file that exists),
// and every fixture case is cited by some rule.
func TestRulesCiteFixtures(t *testing.T) {
	root, all, _ := load(t)
	d := docNamed(t, all, protocolDoc)
	cases, err := conformance.Load(filepath.Join(root, fixturesFile))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, c := range cases {
		names[c.Name] = false
	}
	rs := rules(d)
	if len(rs) < 30 {
		t.Fatalf("%s has %d numbered rules (- **R<n>.** …); the specification states them as such", protocolDoc, len(rs))
	}
	var problems []docs.Problem
	last := map[string]int{}
	for _, r := range rs {
		if r.n != last[r.family]+1 {
			problems = append(problems, docs.Problem{Doc: d.Path, Line: r.line,
				Code: fmt.Sprintf("rule %s follows %s%d: number them in order", r.id(), r.family, last[r.family])})
		}
		last[r.family] = r.n
		fixtures, tests := cited(r.text, "Fixtures:"), cited(r.text, "Tests:")
		if len(fixtures)+len(tests) == 0 {
			problems = append(problems, docs.Problem{Doc: d.Path, Line: r.line,
				Code: fmt.Sprintf("rule %s cites no fixture case (Fixtures: `name`, …) nor test file (Tests: `path`, …)", r.id())})
		}
		for _, f := range fixtures {
			if _, ok := names[f]; !ok {
				problems = append(problems, docs.Problem{Doc: d.Path, Line: r.line, Quote: f,
					Code: fmt.Sprintf("rule %s cites a case %s does not have", r.id(), fixturesFile)})
			}
			names[f] = true
		}
		for _, p := range tests {
			if _, err := os.Stat(filepath.Join(root, p)); err != nil {
				problems = append(problems, docs.Problem{Doc: d.Path, Line: r.line, Quote: p, Code: "no such test file"})
			}
		}
	}
	for _, c := range cases {
		if !names[c.Name] {
			problems = append(problems, docs.Problem{Doc: d.Path, Line: sectionLine(d, "Rules"),
				Code: fmt.Sprintf("no rule cites the fixture case %q of %s", c.Name, fixturesFile)})
		}
	}
	report(t, problems)
}

// Every validation of the admission policies refuses with 403 Forbidden (issue 44, point 8: three
// waiter-Lease rules answered 422), as docs/protocol.md's refusals section says.
func TestPolicyRefusalsAreForbidden(t *testing.T) {
	_, all, _ := load(t)
	d := docNamed(t, all, protocolDoc)
	if len(d.Find(regexp.MustCompile(`Every refusal of fencedlock's admission policies is 403 Forbidden`), false)) == 0 {
		t.Errorf("%s does not say that every refusal of the policies is 403 Forbidden", protocolDoc)
	}
	for f, objs := range policyObjects(t) {
		for _, obj := range objs {
			if obj.GetKind() != "ValidatingAdmissionPolicy" {
				continue
			}
			vs, _, _ := unstructured.NestedSlice(obj.Object, "spec", "validations")
			for i, v := range vs {
				m, _ := v.(map[string]any)
				if reason, _ := m["reason"].(string); reason != "Forbidden" {
					t.Errorf("%s: %s validation %d: reason %q, want Forbidden (403, as every refusal)", f, obj.GetName(), i, reason)
				}
			}
		}
	}
}

// The waiter Leases the docs show are named as the queue format says: the first 16 hexadecimal
// digits of the SHA-256 of the identity they name (issue 44, point 5).
func TestWaiterLeaseNamesInDocs(t *testing.T) {
	_, all, _ := load(t)
	var problems []docs.Problem
	seen := 0
	for _, d := range all {
		for _, b := range d.Blocks {
			if b.Lang != "yaml" {
				continue
			}
			var l struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name   string            `json:"name"`
					Labels map[string]string `json:"labels"`
				} `json:"metadata"`
				Spec struct {
					HolderIdentity string `json:"holderIdentity"`
				} `json:"spec"`
			}
			if yaml.Unmarshal([]byte(strings.Join(b.Lines, "\n")), &l) != nil || l.Kind != "Lease" ||
				l.Metadata.Labels[locksv1alpha1.RoleLabel] != locksv1alpha1.RoleWaiter {
				continue
			}
			seen++
			uid := l.Metadata.Labels[locksv1alpha1.LockUIDLabel]
			if want := locksv1alpha1.WaiterLeaseName(types.UID(uid), l.Spec.HolderIdentity); l.Metadata.Name != want {
				problems = append(problems, docs.Problem{Doc: d.Path, Line: b.Line, Quote: l.Metadata.Name,
					Code: fmt.Sprintf("the waiter Lease of %q on lock uid %s is named %s", l.Spec.HolderIdentity, uid, want)})
			}
		}
	}
	if seen == 0 {
		t.Errorf("no doc shows a waiter Lease: %s's example is gone", protocolDoc)
	}
	report(t, problems)
}

var leaseVerbs = regexp.MustCompile(`verbs:\s*\[([^\]]*)\]`)

// The client Role the docs give (README.md, docs/protocol.md) grants the verbs on Leases that
// test/util.ClientLeaseVerbs lists, which the shell client's user has in the integration tests
// (issue 44, point 6).
func TestClientRBACAgrees(t *testing.T) {
	_, all, _ := load(t)
	var problems []docs.Problem
	for _, name := range []string{"README.md", protocolDoc} {
		d := docNamed(t, all, name)
		found := false
		for _, b := range d.Blocks {
			text := strings.Join(b.Lines, "\n")
			if b.Lang != "yaml" || !strings.Contains(text, `resources: ["leases"]`) {
				continue
			}
			m := leaseVerbs.FindStringSubmatch(text)
			if m == nil {
				continue
			}
			found = true
			var verbs []string
			for v := range strings.SplitSeq(m[1], ",") {
				verbs = append(verbs, strings.Trim(strings.TrimSpace(v), `"`))
			}
			if !slices.Equal(verbs, util.ClientLeaseVerbs) {
				problems = append(problems, docs.Problem{Doc: d.Path, Line: b.Line, Quote: m[1],
					Code: fmt.Sprintf("a client needs %q on Leases (test/util.ClientLeaseVerbs)", util.ClientLeaseVerbs)})
			}
		}
		if !found {
			problems = append(problems, docs.Problem{Doc: d.Path, Code: "gives no client Role for Leases"})
		}
	}
	report(t, problems)
}

var shellFunc = regexp.MustCompile(`(?m)^([a-z_]+)\(\) \{`)

// The shell client is a file of its own, linked from the spec and never copied into it; the
// functions the spec names exist in it, and its protocol version is the one pkg/lease speaks.
func TestShellClientIsLinkedNotCopied(t *testing.T) {
	root, all, _ := load(t)
	d := docNamed(t, all, protocolDoc)
	b, err := os.ReadFile(filepath.Join(root, util.ExampleScript))
	if err != nil {
		t.Fatal(err)
	}
	script := string(b)
	funcs := shellFunc.FindAllStringSubmatch(script, -1)
	defined := make([]string, 0, len(funcs))
	for _, m := range funcs {
		defined = append(defined, m[1])
	}
	if !slices.ContainsFunc(d.Links, func(l docs.Link) bool { return l.Target == "examples/fencedlock.sh" }) {
		t.Errorf("%s does not link %s", protocolDoc, util.ExampleScript)
	}
	for _, blk := range d.Blocks {
		for _, line := range blk.Lines {
			if m := shellFunc.FindStringSubmatch(line); m != nil {
				t.Errorf("%s:%d copies function %s of %s: link it instead", protocolDoc, blk.Line, m[1], util.ExampleScript)
			}
		}
	}
	for _, fn := range []string{"grant", "renew", "release", "join", "mark_waiting", "beat", "wait_turn", "leave", "acquire"} {
		if !slices.Contains(defined, fn) {
			t.Errorf("%s names function %s, which %s does not define", protocolDoc, fn, util.ExampleScript)
		}
	}
	if want := fmt.Sprintf("\nPROTOCOL=%d ", lease.ProtocolVersion); !strings.Contains(script, want) {
		t.Errorf("%s does not speak protocol version %d (want a line starting %q)", util.ExampleScript, lease.ProtocolVersion, want[1:])
	}
	if want := fmt.Sprintf("# fencedlock protocol (version %d)", lease.ProtocolVersion); d.Lines[0] != want {
		t.Errorf("%s:1: %q, want %q", protocolDoc, d.Lines[0], want)
	}
}

// drift is a phrase a doc or source must not say again, and why (issue 44's contradictions).
type drift struct{ file, phrase, why string }

var drifts = []drift{
	{protocolDoc, "the code is right", "point 4: the spec is the one normative text; a disagreement is a failing fixture"},
	{protocolDoc, "freed permit", "point 2: a handover grants the lowest free permit (R15)"},
	{protocolDoc, "fencedlock-wait-0b5d2a47-1f0e-4c3a-9a56-2f1e8c7d9b10-2c26b46b68ffc68f", "point 5: that is the hash of \"foo\""},
	{"docs/design.md", "the lock's queue of waiters, as JSON", "point 7: the queue Lease holds the pods; clients queue on waiter Leases"},
	{"docs/design.md", "The Go client waits on the lock Lease's watch", "point 7: it waits on the watch of all of the lock's Leases"},
	{"api/v1alpha1/fencedlock_types.go", "must carry a token that is not lower than this one", "point 9: a semaphore admits any held permit's token"},
	{"controllers/queue_sync.go", "queued clients join again at their next beat", "point 10: clients queue on waiter Leases, which an unreadable queue value does not touch"},
}

// None of issue 44's contradictions is said again.
func TestContradictionsStayResolved(t *testing.T) {
	root, _, _ := load(t)
	for _, d := range drifts {
		b, err := os.ReadFile(filepath.Join(root, d.file))
		if err != nil {
			t.Fatal(err)
		}
		if flat := strings.Join(strings.Fields(string(b)), " "); strings.Contains(flat, d.phrase) {
			t.Errorf("%s says %q again (%s)", d.file, d.phrase, d.why)
		}
	}
}

// docs/protocol.md says what the code writes where issue 44 (point 10) found it silent: the pod's
// permit annotation in the grant patch and the pod-grant rules, the bound on status lag, the
// ticket of a recreated Lease's stamp, and the queue Lease's initial value.
func TestSpecStatesWhatTheCodeWrites(t *testing.T) {
	_, all, _ := load(t)
	d := docNamed(t, all, protocolDoc)
	for _, want := range []struct{ re, what string }{
		{`sets annotations .fencedlock\.io/token. and .token\.fencedlock\.io/<lock>. to the token and .fencedlock\.io/permit.`, "the pod grant patch's fencedlock.io/permit"},
		{`annotations fencedlock\.io/token, fencedlock\.io/permit and fencedlock\.io/enqueued of a queued pod`, "the pod-grant rule for fencedlock.io/permit"},
		{`one per .--status-min-interval. \(default 1 s\) after a burst of five, so a change of holder, token or queue is mirrored within that interval`, "the bound on status lag"},
		{`.fencedlock\.io/ticket. = the last ticket the queue issued`, "the stamp's ticket"},
		{"creates it as .\\{\\}.", "the queue Lease's initial value"},
	} {
		if len(d.Find(regexp.MustCompile(strings.ReplaceAll(want.re, " ", `\s+`)), false)) == 0 {
			t.Errorf("%s does not state %s (/%s/)", protocolDoc, want.what, want.re)
		}
	}
}
