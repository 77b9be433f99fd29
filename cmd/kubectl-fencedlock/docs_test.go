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
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/fencedlock/fencedlock/cmd/manager/setup"
	"github.com/fencedlock/fencedlock/config"
	"github.com/fencedlock/fencedlock/controllers"
	"github.com/fencedlock/fencedlock/test/docs"
)

// The docs check of the plugin's flags (test/docs checks the rest): the command lines the docs
// quote (`kubectl fencedlock acquire --hold`, and in cli.md `run --help`) use flags the plugin's
// commands have, a flag quoted alone is the plugin's or the manager's, the defaults quoted are
// the plugin's, and cli.md names every flag of the plugin but kubectl's usual ones.
func TestDocsQuoteThePluginsFlags(t *testing.T) {
	root, err := docs.Root()
	if err != nil {
		t.Fatal(err)
	}
	all, err := docs.Load(root)
	if err != nil {
		t.Fatal(err)
	}
	plugin := newRootCommand(genericiooptions.NewTestIOStreamsDiscard())
	plugin.InitDefaultCompletionCmd()
	manager := flag.NewFlagSet("manager", flag.ContinueOnError)
	setup.BindFlags(manager)

	var problems []docs.Problem
	for _, d := range all {
		problems = append(problems, checkInvocations(d, plugin)...)
		problems = append(problems, checkBareFlags(d, plugin, manager)...)
		problems = append(problems, checkDefaults(d, plugin, manager)...)
	}
	cli := all[slices.IndexFunc(all, func(d *docs.Doc) bool { return d.Path == "docs/cli.md" })]
	problems = append(problems, undocumentedFlags(cli, plugin)...)
	for _, p := range problems {
		t.Error(p.String())
	}
}

// checkInvocations checks the plugin's invocations that d quotes against its commands' flags.
func checkInvocations(d *docs.Doc, plugin *cobra.Command) []docs.Problem {
	var problems []docs.Problem
	cli := d.Path == "docs/cli.md"
	for _, name := range [][]string{{"kubectl", "fencedlock"}, {"kubectl-fencedlock"}} {
		for _, inv := range d.Invocations(name...) {
			problems = append(problems, checkInvocation(d, inv, plugin)...)
		}
	}
	if cli { // cli.md quotes subcommands without the plugin's name: `acquire --hold`
		for _, s := range d.Spans {
			words := docs.Words(s.Text)
			if len(words) > 1 && subcommand(plugin, words[0]) != nil {
				problems = append(problems, checkInvocation(d, docs.Invocation{Line: s.Line, Quote: s.Text, Args: words}, plugin)...)
			}
		}
	}
	return problems
}

// checkBareFlags checks that every flag d quotes alone is the plugin's or the manager's.
func checkBareFlags(d *docs.Doc, plugin *cobra.Command, manager *flag.FlagSet) []docs.Problem {
	var problems []docs.Problem
	cli := d.Path == "docs/cli.md"
	for _, q := range d.BareFlags() {
		name, isLong := strings.CutPrefix(q.Name, "--")
		switch {
		case q.Tool != "":
			continue // another program's
		case d.Path == "docs/operations.md" || (!cli && isLong && manager.Lookup(name) != nil):
			continue // the manager's (test/docs)
		case len(pluginFlags(plugin, q.Name)) > 0:
		case cli && isLong && manager.Lookup(name) != nil:
			continue // "the manager's `--status-renewal-interval`": its default is checked in checkDefaults
		case cli:
			problems = append(problems, docs.Problem{Doc: d.Path, Line: q.Line, Quote: q.Quote,
				Code: fmt.Sprintf("no command of the plugin has %s (another program's flag is quoted after its name, as etcdutl's `--bump-revision`, or with its command)", q.Name)})
		default:
			problems = append(problems, docs.Problem{Doc: d.Path, Line: q.Line, Quote: q.Quote,
				Code: fmt.Sprintf("neither the plugin nor the manager has %s (another program's flag is quoted after its name, as etcdutl's `--bump-revision`, or with its command)", q.Name)})
		}
	}
	return problems
}

// checkDefaults checks the plugin's defaults that d quotes.
func checkDefaults(d *docs.Doc, plugin *cobra.Command, manager *flag.FlagSet) []docs.Problem {
	var problems []docs.Problem
	cli := d.Path == "docs/cli.md"
	for _, q := range d.Defaults() {
		for i, name := range q.Flags {
			v := q.Values[0]
			switch {
			case len(q.Values) == len(q.Flags):
				v = q.Values[i]
			case len(q.Flags) > 1:
				continue
			}
			if f := manager.Lookup(name); f != nil && len(pluginFlags(plugin, "--"+name)) == 0 {
				// The manager's: test/docs checks other docs; cli.md quotes the status budget's
				// intervals, which bound how stale kubectl get flock is ("Two views of a lock").
				if equal, ok := docs.SameDefault(goFlagKind(f), f.DefValue, v); cli && ok && !equal {
					problems = append(problems, docs.Problem{Doc: d.Path, Line: q.Line, Quote: q.Quote,
						Code: fmt.Sprintf("the manager's --%s defaults to %q", name, f.DefValue)})
				}
				continue
			}
			for _, f := range pluginFlags(plugin, "--"+name) {
				if equal, ok := docs.SameDefault(f.Value.Type(), f.DefValue, v); ok && !equal {
					problems = append(problems, docs.Problem{Doc: d.Path, Line: q.Line, Quote: q.Quote,
						Code: fmt.Sprintf("the plugin's --%s defaults to %q", name, f.DefValue)})
					break
				}
			}
		}
	}
	return problems
}

// goFlagKind is the kind docs.SameDefault compares a manager flag's default as.
func goFlagKind(f *flag.Flag) string {
	switch f.Value.(flag.Getter).Get().(type) {
	case time.Duration:
		return "duration"
	case int:
		return "int"
	case bool:
		return "bool"
	}
	return "string"
}

// TestDocsQuoteFiguresOfCode checks the figures cli.md quotes from code without a flag: the
// status budget's burst (its intervals are checked as flag defaults) and check's.
func TestDocsQuoteFiguresOfCode(t *testing.T) {
	root, err := docs.Root()
	if err != nil {
		t.Fatal(err)
	}
	cli, err := os.ReadFile(filepath.Join(root, "docs", "cli.md"))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("after a burst of %d writes", controllers.StatusBurst); !strings.Contains(string(cli), want) {
		t.Errorf("docs/cli.md, Two views of a lock: does not say %q (controllers.StatusBurst)", want)
	}
	policies, err := config.Policies()
	if err != nil {
		t.Fatal(err)
	}
	webhooks, err := config.WebhookConfigurations()
	if err != nil {
		t.Fatal(err)
	}
	items := 4 // server version, CRD, leader, fence
	for _, p := range policies {
		if !strings.HasSuffix(p.GetKind(), "Binding") {
			items++
		}
	}
	for _, w := range webhooks {
		hooks, _, _ := unstructured.NestedSlice(w.Object, "webhooks")
		items += len(hooks)
	}
	for _, want := range []string{
		fmt.Sprintf("Kubernetes is 1.%d or later", config.MinKubernetesMinor), // config.MinKubernetesMinor
		fmt.Sprintf("checks again every %s", strings.TrimSuffix(checkRetry.String(), "s")+" s"),
		fmt.Sprintf("1 of %d checks failed", items), // the lines of check
	} {
		if !strings.Contains(string(cli), want) {
			t.Errorf("docs/cli.md, Checking the install: does not say %q", want)
		}
	}
}

// undocumentedFlags returns a problem for every flag of a plugin command that cli does not name.
func undocumentedFlags(cli *docs.Doc, plugin *cobra.Command) []docs.Problem {
	var problems []docs.Problem
	// kubectl's usual flags (--kubeconfig, -n, --context, ...) are cli-runtime's; cli.md points at
	// them as such. Every other flag of a plugin command is the plugin's, and cli.md names it.
	usual := pflag.NewFlagSet("kubectl", pflag.ContinueOnError)
	genericclioptions.NewConfigFlags(true).AddFlags(usual)
	named := func(f *pflag.Flag) bool {
		for _, s := range cli.Spans {
			for _, w := range docs.Words(s.Text) {
				if n, _, _ := strings.Cut(w, "="); n == "--"+f.Name || (f.Shorthand != "" && n == "-"+f.Shorthand) {
					return true
				}
			}
		}
		return false
	}
	line := 1 // the flags table, where a flag left out belongs
	if i := slices.IndexFunc(cli.Tables, func(t docs.Table) bool { return len(t.Header) > 0 && t.Header[0] == "Flag" }); i >= 0 {
		line = cli.Tables[i].Line
	}
	walk(plugin, func(c *cobra.Command) {
		if c.Name() == "completion" || (c.HasParent() && c.Parent().Name() == "completion") {
			return // cobra's, documented by cobra
		}
		c.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
			if usual.Lookup(f.Name) == nil && f.Name != "help" && !named(f) {
				problems = append(problems, docs.Problem{Doc: cli.Path, Line: line,
					Code: fmt.Sprintf("does not name --%s, which `%s` has (%s; every flag of the plugin is documented here)",
						f.Name, c.CommandPath(), f.Usage)})
			}
		})
	})
	return problems
}

// checkInvocation follows a quoted command line down the plugin's commands and checks each flag
// against the command it is given to (its own flags and those it inherits).
func checkInvocation(d *docs.Doc, inv docs.Invocation, root *cobra.Command) []docs.Problem {
	var out []docs.Problem
	cur := root
	for i := 0; i < len(inv.Args); i++ {
		a := inv.Args[i]
		if a == "--" {
			break // the command run under the lock
		}
		if len(a) < 2 || a[0] != '-' {
			if sub := subcommand(cur, a); sub != nil {
				cur = sub
			}
			continue // an argument (a lock, a shell)
		}
		name, _, hasValue := strings.Cut(a, "=")
		cur.InitDefaultHelpFlag()
		fs := cur.Flags()
		fs.AddFlagSet(cur.InheritedFlags())
		var f *pflag.Flag
		if long, ok := strings.CutPrefix(name, "--"); ok {
			f = fs.Lookup(long)
		} else {
			f = fs.ShorthandLookup(name[1:2])
			hasValue = hasValue || len(name) > 2 // -n<value>
		}
		if f == nil {
			out = append(out, docs.Problem{Doc: d.Path, Line: inv.Line, Quote: "`" + inv.Quote + "`",
				Code: fmt.Sprintf("`%s` has no flag %s", cur.CommandPath(), name)})
			continue
		}
		if !hasValue && f.NoOptDefVal == "" {
			i++ // its value
		}
	}
	return out
}

func subcommand(c *cobra.Command, name string) *cobra.Command {
	for _, s := range c.Commands() {
		if s.Name() == name || slices.Contains(s.Aliases, name) {
			return s
		}
	}
	return nil
}

// pluginFlags returns the flags of that name ("--timeout", "-E") on every command of the plugin.
func pluginFlags(root *cobra.Command, name string) []*pflag.Flag {
	var out []*pflag.Flag
	walk(root, func(c *cobra.Command) {
		var f *pflag.Flag
		if long, ok := strings.CutPrefix(name, "--"); ok {
			f = c.LocalFlags().Lookup(long)
		} else if len(name) == 2 {
			f = c.LocalFlags().ShorthandLookup(name[1:])
		}
		if f != nil {
			out = append(out, f)
		}
	})
	return out
}

func walk(c *cobra.Command, visit func(*cobra.Command)) {
	visit(c)
	for _, s := range c.Commands() {
		walk(s, visit)
	}
}
