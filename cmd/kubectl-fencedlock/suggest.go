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
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// suggestionDistance is how many edits away a flag may be to be suggested, as cobra's default
// for commands.
const suggestionDistance = 2

// flagError adds to an unknown flag's error the flags of the command it was meant for, as cobra
// does for commands: "unknown flag: --identiy; did you mean --identity?". Cobra has no such
// thing for flags, and no pinned dependency exports an edit distance.
func flagError(c *cobra.Command, err error) error {
	name, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok {
		return err
	}
	if others := commandsWithFlag(c.Root(), name); len(others) > 0 { // the right flag, the wrong command
		return fmt.Errorf("%w (%s has it)", err, strings.Join(others, ", "))
	}
	if s := suggestFlags(c.Flags(), name); len(s) > 0 {
		return fmt.Errorf("%w; did you mean %s?", err, strings.Join(s, " or "))
	}
	return err
}

// suggestFlags returns the visible flags of fs whose names are close to name or start with it.
func suggestFlags(fs *pflag.FlagSet, name string) []string {
	var out []string
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden || f.Deprecated != "" {
			return
		}
		if editDistance(name, f.Name) <= suggestionDistance || (len(name) > 1 && strings.HasPrefix(f.Name, name)) {
			out = append(out, "--"+f.Name)
		}
	})
	slices.Sort(out)
	return out
}

// commandsWithFlag names the commands that have a local flag called name.
func commandsWithFlag(root *cobra.Command, name string) []string {
	var out []string
	walkCommands(root, func(c *cobra.Command) {
		if c.LocalFlags().Lookup(name) != nil {
			out = append(out, fmt.Sprintf("%q", c.Name()))
		}
	})
	return out
}

func walkCommands(c *cobra.Command, visit func(*cobra.Command)) {
	visit(c)
	for _, s := range c.Commands() {
		walkCommands(s, visit)
	}
}

// editDistance is the Levenshtein distance between a and b, in bytes (flag names are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
