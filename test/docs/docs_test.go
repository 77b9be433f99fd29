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
	"flag"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	// The manager's wiring: importing it registers, into controller-runtime's registry, every
	// metric the manager serves (the controller's, the fence's and controller-runtime's own).
	"github.com/fencedlock/fencedlock/cmd/manager/setup"
	"github.com/fencedlock/fencedlock/test/docs"
)

// The docs that own a subject: every metric and every manager flag is documented in operations.md.
const operationsDoc = "docs/operations.md"

var loaded struct {
	once sync.Once
	root string
	docs []*docs.Doc
	code *codebase
	err  error
}

// load reads the docs and the product's code once for all tests.
func load(t *testing.T) (string, []*docs.Doc, *codebase) {
	t.Helper()
	loaded.once.Do(func() {
		loaded.root, loaded.err = docs.Root()
		if loaded.err != nil {
			return
		}
		if loaded.docs, loaded.err = docs.Load(loaded.root); loaded.err != nil {
			return
		}
		loaded.code, loaded.err = readCodebase(loaded.root)
	})
	if loaded.err != nil {
		t.Fatal(loaded.err)
	}
	return loaded.root, loaded.docs, loaded.code
}

func docNamed(t *testing.T, all []*docs.Doc, name string) *docs.Doc {
	t.Helper()
	i := slices.IndexFunc(all, func(d *docs.Doc) bool { return d.Path == name })
	if i < 0 {
		t.Fatalf("no doc %s", name)
	}
	return all[i]
}

func report(t *testing.T, problems []docs.Problem) {
	t.Helper()
	for _, p := range problems {
		t.Error(p.String())
	}
}

// sectionLine is the line of the first heading of d that contains text, for problems about what
// a section lacks; 1 if there is none.
func sectionLine(d *docs.Doc, text string) int {
	for _, h := range d.Headings {
		if strings.Contains(h.Text, text) {
			return h.Line
		}
	}
	return 1
}

// mentions reports whether d names word (a flag, a metric) anywhere: prose, code spans or blocks.
func mentions(d *docs.Doc, word string) bool {
	return len(d.Find(regexp.MustCompile(`(^|[^A-Za-z0-9_-])`+regexp.QuoteMeta(word)+`($|[^A-Za-z0-9_-])`), true)) > 0
}

type metric struct{ labels []string }

var (
	descName   = regexp.MustCompile(`fqName: "([^"]+)"`)
	descLabels = regexp.MustCompile(`variableLabels: \{([^}]*)\}`)
	// A metric a doc quotes: this project's, or controller-runtime's and client-go's that the
	// manager also serves, with an optional {label,...} or PromQL matcher.
	metricQuote = regexp.MustCompile(`\b((?:fencedlock|controller_runtime|workqueue|rest_client|certwatcher|leader_election)_[a-z0-9_]*[a-z0-9])(\{[^}]*\})?`)
	labelName   = regexp.MustCompile(`^\s*([a-zA-Z_][a-zA-Z0-9_]*)`)
)

// registered returns the metrics in the manager's registry, by name, as their descriptors say.
func registered(t *testing.T) map[string]metric {
	t.Helper()
	c, ok := ctrlmetrics.Registry.(prometheus.Collector)
	if !ok {
		t.Fatalf("controller-runtime's registry (%T) cannot describe its metrics", ctrlmetrics.Registry)
	}
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	out := map[string]metric{}
	for d := range ch {
		s := d.String()
		n := descName.FindStringSubmatch(s)
		if n == nil {
			t.Fatalf("cannot read the name of %s", s)
		}
		var labels []string
		if l := descLabels.FindStringSubmatch(s); l != nil && l[1] != "" {
			for name := range strings.SplitSeq(l[1], ",") {
				labels = append(labels, strings.TrimSuffix(strings.TrimPrefix(name, "c("), ")"))
			}
		}
		out[n[1]] = metric{labels: labels}
	}
	return out
}

// lookupMetric finds a quoted name: a metric, or a histogram's or summary's series of one.
func lookupMetric(reg map[string]metric, name string) (string, metric, bool) {
	if m, ok := reg[name]; ok {
		return name, m, true
	}
	for _, suffix := range []string{"_bucket", "_count", "_sum"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if m, ok := reg[base]; ok {
				return base, m, true
			}
		}
	}
	return "", metric{}, false
}

func ownMetrics(reg map[string]metric) []string {
	var own []string
	for n := range reg {
		if strings.HasPrefix(n, "fencedlock_") {
			own = append(own, n)
		}
	}
	slices.Sort(own)
	return own
}

// Every metric the docs quote is one the manager registers, with the labels quoted; and every
// fencedlock_ metric it registers is in operations.md.
func TestMetricsQuotedAreRegistered(t *testing.T) {
	_, all, _ := load(t)
	reg := registered(t)
	own := ownMetrics(reg)
	if len(own) == 0 {
		t.Fatal("the manager's registry has no fencedlock_ metric: setup no longer imports the controllers and the webhook?")
	}
	var problems []docs.Problem
	for _, d := range all {
		for _, m := range d.Find(metricQuote, true) {
			quote := m.Groups[0]
			base, reg, ok := lookupMetric(reg, m.Groups[1])
			if !ok {
				problems = append(problems, docs.Problem{Doc: d.Path, Line: m.Line, Quote: quote,
					Code: fmt.Sprintf("the manager registers no metric %s (its own: %s)", m.Groups[1], strings.Join(own, ", "))})
				continue
			}
			if m.Groups[2] == "" {
				continue
			}
			for sel := range strings.SplitSeq(strings.Trim(m.Groups[2], "{}"), ",") {
				l := labelName.FindStringSubmatch(sel)
				if l == nil || l[1] == "le" && strings.HasSuffix(m.Groups[1], "_bucket") {
					continue
				}
				if !slices.Contains(reg.labels, l[1]) {
					problems = append(problems, docs.Problem{Doc: d.Path, Line: m.Line, Quote: quote,
						Code: fmt.Sprintf("%s has labels {%s}, not %s", base, strings.Join(reg.labels, ","), l[1])})
				}
			}
		}
	}
	ops := docNamed(t, all, operationsDoc)
	for _, n := range own {
		if !mentions(ops, n) {
			problems = append(problems, docs.Problem{Doc: ops.Path, Line: sectionLine(ops, "Metrics"),
				Code: "does not name " + n + ", which the manager registers (every fencedlock_ metric is documented here)"})
		}
	}
	report(t, problems)
}

// flagKind is what docs.SameDefault compares a flag's default as.
func flagKind(f *flag.Flag) string {
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return "text"
	}
	switch g.Get().(type) {
	case time.Duration:
		return "duration"
	case int:
		return "int"
	case bool:
		return "bool"
	case string:
		return "string"
	}
	return "text"
}

func managerFlags() *flag.FlagSet {
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	setup.BindFlags(fs)
	return fs
}

// longName returns a quoted flag's name without dashes; shorthands ("-n") are the plugin's, the
// manager has none.
func longName(q string) (string, bool) {
	n, ok := strings.CutPrefix(q, "--")
	return n, ok
}

// The manager's flags the docs quote exist, with the defaults quoted, and operations.md names
// every one. A flag quoted alone belongs to the manager in operations.md, to the plugin in
// cli.md, and elsewhere to the manager if it has one of that name (cmd/kubectl-fencedlock's test
// checks the rest against the plugin).
func TestManagerFlagsQuotedExist(t *testing.T) {
	_, all, _ := load(t)
	fs := managerFlags()
	var problems []docs.Problem
	for _, d := range all {
		if d.Path == "docs/cli.md" {
			continue
		}
		if d.Path == operationsDoc {
			for _, q := range d.BareFlags() {
				name, long := longName(q.Name)
				if q.Tool == "" && (!long || fs.Lookup(name) == nil) {
					problems = append(problems, docs.Problem{Doc: d.Path, Line: q.Line, Quote: q.Quote,
						Code: fmt.Sprintf("the manager has no flag %s (cmd/manager/setup.BindFlags)", q.Name)})
				}
			}
		}
		for _, q := range d.Defaults() {
			for i, name := range q.Flags {
				f := fs.Lookup(name)
				if f == nil {
					continue
				}
				v := q.Values[0]
				switch {
				case len(q.Values) == len(q.Flags):
					v = q.Values[i]
				case len(q.Flags) > 1:
					continue // not a list of their defaults
				}
				if equal, ok := docs.SameDefault(flagKind(f), f.DefValue, v); ok && !equal {
					problems = append(problems, docs.Problem{Doc: d.Path, Line: q.Line, Quote: q.Quote,
						Code: fmt.Sprintf("the manager's --%s defaults to %q", name, f.DefValue)})
				}
			}
		}
	}
	ops := docNamed(t, all, operationsDoc)
	fs.VisitAll(func(f *flag.Flag) {
		if !mentions(ops, "--"+f.Name) {
			problems = append(problems, docs.Problem{Doc: ops.Path, Line: sectionLine(ops, "Flags"),
				Code: fmt.Sprintf("does not name --%s, which the manager has (default %q; every manager flag is documented here)",
					f.Name, f.DefValue)})
		}
	})
	report(t, problems)
}

var (
	keyQuote = regexp.MustCompile(`\b((?:[a-z0-9-]+\.)*fencedlock\.io/[A-Za-z0-9._<>-]*[A-Za-z0-9_>-])`)
	keyExact = regexp.MustCompile(`^(?:[a-z0-9-]+\.)*fencedlock\.io/[A-Za-z0-9._-]*$`)
)

// keys returns the annotation and label keys of the product: its Go string constants and
// literals that are keys, and the keys its manifests (config/) write.
func keys(t *testing.T, root string, c *codebase) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for v := range c.literals {
		if keyExact.MatchString(v) {
			out[v] = true
		}
	}
	err := filepath.WalkDir(filepath.Join(root, "config"), func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(p, ".yaml") {
			return err
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("reading manifest: %w", err)
		}
		for _, k := range keyQuote.FindAllString(string(raw), -1) {
			if keyExact.MatchString(k) {
				out[k] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Every fencedlock.io key the docs quote is one the code or its manifests use; "<...>" stands for
// a name or a number after a prefix the code declares (token.fencedlock.io/<lock>), and an
// instance of such a prefix (token.fencedlock.io/ledger) counts as well.
func TestKeysQuotedExist(t *testing.T) {
	root, all, c := load(t)
	known := keys(t, root, c)
	domains := map[string]bool{}
	for k := range known {
		domains[k[:strings.Index(k, "/")]] = true
	}
	var problems []docs.Problem
	for _, d := range all {
		for _, m := range d.Find(keyQuote, true) {
			k := m.Groups[1]
			if !domains[k[:strings.Index(k, "/")]] {
				continue // not a key: a resource of the API group (fencedlock.locks.fencedlock.io/<name>)
			}
			if keyKnown(known, k) {
				continue
			}
			var near []string
			for kk := range known {
				if strings.HasPrefix(kk, k[:strings.Index(k, "/")+1]) {
					near = append(near, kk)
				}
			}
			slices.Sort(near)
			problems = append(problems, docs.Problem{Doc: d.Path, Line: m.Line, Quote: k,
				Code: "neither the code nor config/ has that key; they have " + strings.Join(near, ", ")})
		}
	}
	report(t, problems)
}

func keyKnown(known map[string]bool, k string) bool {
	if before, _, placeholder := strings.Cut(k, "<"); placeholder {
		return known[before]
	}
	if known[k] {
		return true
	}
	for kk := range known {
		if (strings.HasSuffix(kk, "/") || strings.HasSuffix(kk, "-")) && strings.HasPrefix(k, kk) && len(k) > len(kk) {
			return true
		}
	}
	return false
}

var (
	reasonBeforeEvent = regexp.MustCompile("`([A-Z][A-Za-z]+)`\\s+(?:(?:Warning|Normal)\\s+)?[Ee]vents?\\b")
	reasonAfterEvent  = regexp.MustCompile("\\b[Ee]vents?\\s+`([A-Z][A-Za-z]+)`")
	reasonList        = regexp.MustCompile("\\breasons?\\s*\\(((?:`[A-Z][A-Za-z]+`(?:,\\s*)?)+)")
	spanWord          = regexp.MustCompile("`([A-Z][A-Za-z]+)`")
)

// Every Event reason the docs quote ("a `WaiterDead` event", "Event `QueueRepaired`"), every name
// in a table of reasons and in a "reason (`A`, `B`, ...)" list is a reason the code declares: the
// controller's (api/v1alpha1) or the fence's (webhook), whose denials are Events too.
func TestReasonsQuotedExist(t *testing.T) {
	_, all, c := load(t)
	reasons := map[string]bool{}
	for _, dir := range []string{"api/v1alpha1", "webhook"} {
		for _, v := range c.constsOf(dir, "Reason") {
			reasons[v] = true
		}
	}
	if !reasons["WaiterDead"] || !reasons["StaleToken"] {
		t.Fatalf("the reasons read from api/v1alpha1 and webhook miss WaiterDead or StaleToken: %v", reasons)
	}
	var problems []docs.Problem
	check := func(d *docs.Doc, line int, quote, reason string) {
		if !reasons[reason] {
			problems = append(problems, docs.Problem{Doc: d.Path, Line: line, Quote: quote,
				Code: fmt.Sprintf("no Reason constant of api/v1alpha1 or webhook is %q", reason)})
		}
	}
	for _, d := range all {
		for _, re := range []*regexp.Regexp{reasonBeforeEvent, reasonAfterEvent} {
			for _, m := range d.Find(re, false) {
				check(d, m.Line, m.Groups[0], m.Groups[1])
			}
		}
		for _, m := range d.Find(reasonList, false) {
			for _, w := range spanWord.FindAllStringSubmatch(m.Groups[1], -1) {
				check(d, m.Line, m.Groups[0], w[1])
			}
		}
		for _, tb := range d.Tables {
			if len(tb.Header) == 0 || tb.Header[0] != "Reason" {
				continue
			}
			for _, r := range tb.Rows {
				for _, w := range spanWord.FindAllStringSubmatch(r.Cells[0], -1) {
					check(d, r.Line, r.Cells[0], w[1])
				}
			}
		}
	}
	report(t, problems)
}

var (
	qualified = regexp.MustCompile(`^\*?([a-z][a-z0-9]*)\.([A-Z][A-Za-z0-9_]*)(?:\(\))?$`)
	member    = regexp.MustCompile(`^([A-Z][A-Za-z0-9]*)\.([A-Z][A-Za-z0-9_]*)(?:\(\))?$`)
)

// The Go names the docs quote exist: `lock.ErrHeld` in package lock, `Grant.KeepAlive` as a method
// or field of a type of the product. (`errors.Is`, and types and packages outside the module, are
// not checked.)
func TestGoNamesQuotedExist(t *testing.T) {
	_, all, c := load(t)
	var problems []docs.Problem
	for _, d := range all {
		for _, s := range d.Spans {
			if m := qualified.FindStringSubmatch(s.Text); m != nil {
				names, ours := c.exported[m[1]]
				if ours && !names[m[2]] {
					problems = append(problems, docs.Problem{Doc: d.Path, Line: s.Line, Quote: "`" + s.Text + "`",
						Code: fmt.Sprintf("package %s declares no %s", m[1], m[2])})
				}
			} else if m := member.FindStringSubmatch(s.Text); m != nil && c.declares(m[1]) {
				if !c.members[m[1]+"."+m[2]] {
					problems = append(problems, docs.Problem{Doc: d.Path, Line: s.Line, Quote: "`" + s.Text + "`",
						Code: fmt.Sprintf("no type of the product has a method or field %s.%s", m[1], m[2])})
				}
			}
		}
	}
	report(t, problems)
}

// built reports whether the Makefile writes path (dist/install.yaml): a build output, not a file
// of the tree.
func built(root, p string) bool {
	raw, err := os.ReadFile(filepath.Join(root, "Makefile"))
	return err == nil && strings.Contains(string(raw), p)
}

func exists(root, p string) bool {
	_, err := os.Stat(filepath.Join(root, filepath.FromSlash(p)))
	return err == nil
}

// The files and directories the docs quote (`config/policy/token_record.yaml`, `hack/cluster-up.sh
// --node`) and link to exist, with the flags quoted for the repository's scripts; links to a
// section of a doc find its heading.
func TestPathsQuotedExist(t *testing.T) {
	root, all, _ := load(t)
	dirs, files, err := topLevel(root)
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string]*docs.Doc{}
	for _, d := range all {
		byPath[d.Path] = d
	}
	var problems []docs.Problem
	for _, d := range all {
		for _, s := range d.Spans {
			words := docs.Words(s.Text)
			if len(words) == 0 {
				continue
			}
			p := strings.TrimRight(words[0], ":,;.")
			if strings.ContainsAny(p, "<>$*~{}[]()=") || strings.Contains(p, "://") {
				continue
			}
			first, _, nested := strings.Cut(p, "/")
			if (!nested || !dirs[first]) && !files[p] {
				continue
			}
			if !exists(root, p) && !built(root, p) {
				problems = append(problems, docs.Problem{Doc: d.Path, Line: s.Line, Quote: "`" + s.Text + "`",
					Code: fmt.Sprintf("the repository has no %s (nor does the Makefile build it)", p)})
				continue
			}
			if first == "hack" || first == ".ci" {
				problems = append(problems, scriptFlags(root, d, s, p, words[1:])...)
			}
		}
		for _, l := range d.Links {
			if strings.Contains(l.Target, "://") || strings.HasPrefix(l.Target, "mailto:") {
				continue
			}
			target, anchor, _ := strings.Cut(l.Target, "#")
			p := d.Path
			if target != "" {
				p = path.Clean(path.Join(path.Dir(d.Path), target))
				if !exists(root, p) && !built(root, p) {
					problems = append(problems, docs.Problem{Doc: d.Path, Line: l.Line, Quote: "link " + l.Target,
						Code: fmt.Sprintf("the repository has no %s", p)})
					continue
				}
			}
			if to, ok := byPath[p]; ok && anchor != "" && !to.HasAnchor(anchor) {
				problems = append(problems, docs.Problem{Doc: d.Path, Line: l.Line, Quote: "link " + l.Target,
					Code: fmt.Sprintf("%s has no heading whose anchor is #%s", p, anchor)})
			}
		}
	}
	report(t, problems)
}

// scriptFlags checks the flags quoted after a script of the repository against its text.
func scriptFlags(root string, d *docs.Doc, s docs.Span, script string, args []string) []docs.Problem {
	raw, err := os.ReadFile(filepath.Join(root, script))
	if err != nil {
		return nil // a directory
	}
	var out []docs.Problem
	for _, a := range args {
		name, _, _ := strings.Cut(a, "=")
		if strings.HasPrefix(name, "--") && !strings.Contains(string(raw), name) {
			out = append(out, docs.Problem{Doc: d.Path, Line: s.Line, Quote: "`" + s.Text + "`",
				Code: fmt.Sprintf("%s does not handle %s", script, name)})
		}
	}
	return out
}

// docs/development.md's layout table names every top-level directory of the repository and every doc.
func TestLayoutTableListsTheTree(t *testing.T) {
	root, all, _ := load(t)
	readme := docNamed(t, all, "docs/development.md")
	i := slices.IndexFunc(readme.Tables, func(tb docs.Table) bool { return tb.Section == "Layout" })
	if i < 0 {
		t.Fatalf("docs/development.md has no table under a heading \"Layout\"")
	}
	table := readme.Tables[i]
	listed := map[string]bool{}
	for _, r := range table.Rows {
		for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(r.Cells[0], -1) {
			p := strings.TrimSuffix(m[1], "/")
			listed[p] = true
			first, _, _ := strings.Cut(p, "/")
			listed[first+"/"] = true
		}
	}
	dirs, _, err := topLevel(root)
	if err != nil {
		t.Fatal(err)
	}
	var problems []docs.Problem
	for dir := range dirs {
		if !listed[dir+"/"] {
			problems = append(problems, docs.Problem{Doc: readme.Path, Line: table.Line,
				Code: "the layout table has no row for " + dir + "/, a top-level directory of the repository"})
		}
	}
	for _, d := range all {
		if strings.HasPrefix(d.Path, "docs/") && !listed[d.Path] {
			problems = append(problems, docs.Problem{Doc: readme.Path, Line: table.Line,
				Code: "the layout table has no row for " + d.Path + ", a doc of the repository"})
		}
	}
	slices.SortFunc(problems, func(a, b docs.Problem) int { return strings.Compare(a.Code, b.Code) })
	report(t, problems)
}
