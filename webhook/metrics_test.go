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

package webhook

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strings"
	"testing"
)

// TestDecisionReasonsListed keeps the decision metric's Help complete: every Reason constant of
// decision.go (a string literal, or one defined in the API package) is listed in metrics.go as
// admitted or denied, and only those, each once. Names are compared, so a reason defined
// elsewhere counts as declared here.
func TestDecisionReasonsListed(t *testing.T) {
	fset := token.NewFileSet()
	decision, err := parser.ParseFile(fset, "decision.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var declared []string
	for _, d := range decision.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			for _, n := range s.(*ast.ValueSpec).Names {
				if strings.HasPrefix(n.Name, "Reason") {
					declared = append(declared, n.Name)
				}
			}
		}
	}
	metrics, err := parser.ParseFile(fset, "metrics.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	ast.Inspect(metrics, func(n ast.Node) bool {
		v, ok := n.(*ast.ValueSpec)
		if !ok || len(v.Names) != len(v.Values) {
			return true
		}
		for i, name := range v.Names {
			if name.Name != "admittedReasons" && name.Name != "deniedReasons" {
				continue
			}
			for _, e := range v.Values[i].(*ast.CompositeLit).Elts {
				listed = append(listed, e.(*ast.Ident).Name)
			}
		}
		return true
	})
	slices.Sort(declared)
	slices.Sort(listed)
	if len(declared) == 0 || !slices.Equal(declared, listed) {
		t.Fatalf("decision.go declares reasons %v; metrics.go lists %v", declared, listed)
	}
	if values := slices.Compact(slices.Sorted(slices.Values(slices.Concat(admittedReasons, deniedReasons)))); len(values) != len(listed) {
		t.Errorf("reasons share a value: %v", slices.Concat(admittedReasons, deniedReasons))
	}
}
