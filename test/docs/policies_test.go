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
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fencedlock/fencedlock/test/docs"
	"github.com/fencedlock/fencedlock/test/util"
)

// The doc whose tables quote every refusal of the admission policies, and the column that quotes
// them.
const (
	protocolDoc   = "docs/protocol.md"
	messageColumn = "Message of the refusal"
)

var (
	// placeholder: what a quoted refusal leaves to the request, <value>, and … for a tail left out.
	placeholder = regexp.MustCompile(`<[^<>]*>|…`)
	whitespace  = regexp.MustCompile(`\s+`)
)

// policyMessages returns the message (or messageExpression) of each validation of the
// ValidatingAdmissionPolicies of config/policy, whitespace folded as the docs wrap it, and the
// escaped quotes of CEL string literals unescaped.
func policyMessages(t *testing.T) (static, all []string) {
	t.Helper()
	for f, objs := range policyObjects(t) {
		for _, obj := range objs {
			if obj.GetKind() != "ValidatingAdmissionPolicy" {
				continue
			}
			validations, _, err := unstructured.NestedSlice(obj.Object, "spec", "validations")
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			for _, v := range validations {
				m, _ := v.(map[string]any)
				message, _ := m["message"].(string)
				expression, _ := m["messageExpression"].(string)
				if message != "" {
					static = append(static, fold(message))
				}
				all = append(all, fold(message+expression))
			}
		}
	}
	if len(static) == 0 {
		t.Fatal("config/policy has no ValidatingAdmissionPolicy with a message")
	}
	return static, all
}

// policyObjects returns the policies and bindings of each file of config/policy.
func policyObjects(t *testing.T) map[string][]*unstructured.Unstructured {
	t.Helper()
	files, err := util.PolicyFiles()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]*unstructured.Unstructured{}
	for _, f := range files {
		if out[f], err = util.PolicyObjects(f, ""); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func fold(s string) string {
	return strings.TrimSpace(whitespace.ReplaceAllString(strings.ReplaceAll(s, `\"`, `"`), " "))
}

// Every refusal docs/protocol.md quotes is one the policies give: each of its fixed parts (between
// the placeholders) is in one validation's message. And every message of a policy is quoted (a
// fixed one word for word, one built from the request by its fixed parts), so that a rule added
// to a policy is a rule the doc lists.
func TestPolicyRefusalsQuotedAreTheirs(t *testing.T) {
	_, all, _ := load(t)
	static, messages := policyMessages(t)
	d := docNamed(t, all, protocolDoc)
	var problems []docs.Problem
	var quoted []string
	var quotedParts [][]string
	for _, tb := range d.Tables {
		col := slices.Index(tb.Header, messageColumn)
		if col < 0 {
			continue
		}
		for _, r := range tb.Rows {
			q := fold(strings.Trim(r.Cells[col], "`"))
			quoted = append(quoted, q)
			var parts []string
			for p := range strings.SplitSeq(placeholder.ReplaceAllString(q, "\x00"), "\x00") {
				if p = strings.TrimSpace(p); p != "" {
					parts = append(parts, p)
				}
			}
			quotedParts = append(quotedParts, parts)
			if !slices.ContainsFunc(messages, func(m string) bool {
				return !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(m, p) })
			}) {
				problems = append(problems, docs.Problem{Doc: d.Path, Line: r.Line, Quote: q,
					Code: "no validation of config/policy gives this message"})
			}
		}
	}
	if len(quoted) == 0 {
		t.Fatalf("%s has no table with a %q column", protocolDoc, messageColumn)
	}
	for _, m := range static {
		if !slices.Contains(quoted, m) {
			problems = append(problems, docs.Problem{Doc: protocolDoc, Code: "no table quotes the refusal " + m})
		}
	}
	// A message built from the request (messageExpression) is quoted too: some row's fixed parts
	// are all in it.
	for _, m := range messages {
		if !slices.ContainsFunc(quotedParts, func(parts []string) bool {
			return len(parts) > 0 && !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(m, p) })
		}) {
			problems = append(problems, docs.Problem{Doc: protocolDoc, Code: "no table quotes the refusal " + m})
		}
	}
	report(t, problems)
}
