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
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"identiy", "identity", 1}, {"idnetity", "identity", 2}, {"kitten", "sitting", 3}, {"", "abc", 3}} {
		if got := editDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

// Issue 46, point 8: mistyped flags got no suggestion (commands had cobra's).
func TestMistypedFlagsAndCommandsGetSuggestions(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"acquire", "x", "--identiy", "a"}, "unknown flag: --identiy; did you mean --identity?"},
		{[]string{"run", "x", "--no-wiat", "--", "true"}, "unknown flag: --no-wiat; did you mean --no-wait?"},
		{[]string{"get", "--namespce", "b"}, "unknown flag: --namespce; did you mean --namespace?"},
		{[]string{"release", "x", "--hold"}, `unknown flag: --hold ("acquire" has it)`},
		{[]string{"aquire", "x"}, "Did you mean this?\n\tacquire"}, //nolint:misspell // the typo is the test
	} {
		root := newRootCommand(genericiooptions.NewTestIOStreamsDiscard())
		root.SetArgs(tc.args)
		_, err := root.ExecuteC()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want it to contain %q", tc.args, err, tc.want)
		}
	}
}
