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

package benchdoc

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

const skeleton = `# benchmarks

Hand-written preamble: how to read the tables.

## etcd without fsync

<!-- bench:begin mode=nofsync -->
<!-- bench:end -->

## etcd fsyncing

<!-- bench:begin mode=fsync -->
<!-- bench:end -->

## History

<!-- bench:history -->
<!-- bench:history:end -->

## After the generated blocks

Hand-written text that must stay.
`

var order = []string{"floor", "handover", "cycles"}

// run is a run at minute m after a fixed start, with the given sections, whose figures carry tag so
// that a test can tell which run a table came from.
func run(mode Mode, m int, tag string, sections ...string) Run {
	r := Run{Mode: mode, Start: time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC).Add(time.Duration(m) * time.Minute),
		Machine: Machine{CPU: "Test CPU", Cores: 2, MemoryGiB: 24, Load: "0.10 0.20 0.30", Go: "go1.26", Kernel: "6.1",
			ControlPlane: "kube-apiserver v1.37.2, etcd 3.7.3"},
		Floor: "raw Lease CAS p50 " + tag, Order: order}
	for _, s := range sections {
		r.Sections = append(r.Sections, Section{Name: s, Title: strings.ToUpper(s[:1]) + s[1:], Rows: []Row{
			{Name: s + " latency", Value: "p50 " + tag, Ratio: s + "-ratio-" + tag, Target: "<= 2x", Verdict: "met", Headline: s + " " + s + "-ratio-" + tag},
			{Name: s + " detail | with a pipe", Value: "v-" + tag},
		}})
	}
	return r
}

func apply(t *testing.T, doc string, r Run) string {
	t.Helper()
	out, err := Apply(doc, r)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return out
}

// between returns the lines strictly between the line start and the next line end.
func between(t *testing.T, doc, start, end string) string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, start+"\n")
	if !ok {
		t.Fatalf("no %q in\n%s", start, doc)
	}
	in, _, ok := strings.Cut(rest, end)
	if !ok {
		t.Fatalf("no %q after %q in\n%s", end, start, doc)
	}
	return in
}

func modeBlock(t *testing.T, doc string, m Mode) string {
	t.Helper()
	return between(t, doc, "<!-- bench:begin mode="+string(m)+" -->", endMarker)
}

func historyLines(t *testing.T, doc string) []string {
	t.Helper()
	var out []string
	for line := range strings.SplitSeq(between(t, doc, historyMarker, historyEndMarker), "\n") {
		if line != "" {
			out = append(out, line)
		}
	}
	return out
}

func TestDocWriterReplacesOneModeAndKeepsTheOther(t *testing.T) {
	doc := apply(t, skeleton, run(NoFsync, 0, "A", "floor", "handover", "cycles"))
	doc = apply(t, doc, run(Fsync, 1, "B", "floor", "handover"))
	fsyncBefore := modeBlock(t, doc, Fsync)
	if !strings.Contains(fsyncBefore, "handover-ratio-B") || strings.Contains(fsyncBefore, "-A") {
		t.Fatalf("the fsync block does not hold run B alone:\n%s", fsyncBefore)
	}

	doc = apply(t, doc, run(NoFsync, 2, "C", "floor", "handover", "cycles"))
	if got := modeBlock(t, doc, Fsync); got != fsyncBefore {
		t.Fatalf("writing the nofsync mode changed the fsync block:\nbefore\n%s\nafter\n%s", fsyncBefore, got)
	}
	nofsync := modeBlock(t, doc, NoFsync)
	if strings.Contains(nofsync, "-A") || !strings.Contains(nofsync, "cycles-ratio-C") {
		t.Fatalf("the nofsync block does not hold run C alone:\n%s", nofsync)
	}
	// Every row, with its value, ratio, target and verdict, and the run's machine and floor.
	for _, want := range []string{"| handover latency | p50 C | handover-ratio-C | <= 2x | met |",
		`| handover detail \| with a pipe | v-C |  |  |  |`, "### Handover (run of 2026-12-04 10:02 UTC)",
		"Test CPU, 2 cores, 24.0 GiB, load 0.10 0.20 0.30 at the start; go1.26; Linux 6.1", "raw Lease CAS p50 C",
		NoFsync.Title()} {
		if !strings.Contains(nofsync, want) {
			t.Errorf("the nofsync block lacks %q:\n%s", want, nofsync)
		}
	}
	// The sections come in the harness's order.
	if f, h, c := strings.Index(nofsync, "### Floor"), strings.Index(nofsync, "### Handover"), strings.Index(nofsync, "### Cycles"); f >= h || h >= c {
		t.Errorf("sections out of order:\n%s", nofsync)
	}
	for _, hand := range []string{"Hand-written preamble: how to read the tables.", "## After the generated blocks\n\nHand-written text that must stay.\n"} {
		if !strings.Contains(doc, hand) {
			t.Errorf("hand-written text %q lost:\n%s", hand, doc)
		}
	}
	// Applying is stable: the same run twice writes the same block.
	again := apply(t, doc, run(NoFsync, 2, "C", "floor", "handover", "cycles"))
	if modeBlock(t, again, NoFsync) != nofsync {
		t.Errorf("the same run written twice gave two blocks")
	}
}

func TestDocWriterPartialRunKeepsTheOtherSections(t *testing.T) {
	doc := apply(t, skeleton, run(NoFsync, 0, "A", "floor", "handover", "cycles"))
	doc = apply(t, doc, run(NoFsync, 5, "B", "floor", "handover"))
	block := modeBlock(t, doc, NoFsync)
	for _, want := range []string{"### Floor (run of 2026-12-04 10:05 UTC)", "handover-ratio-B",
		"### Cycles (run of 2026-12-04 10:00 UTC)", "cycles-ratio-A", "raw Lease CAS p50 A", "raw Lease CAS p50 B"} {
		if !strings.Contains(block, want) {
			t.Errorf("the block lacks %q:\n%s", want, block)
		}
	}
	if strings.Contains(block, "handover-ratio-A") {
		t.Errorf("run A's handover was kept beside run B's:\n%s", block)
	}
	if h, c := strings.Index(block, "### Handover"), strings.Index(block, "### Cycles"); h >= c {
		t.Errorf("the kept section moved out of the harness's order:\n%s", block)
	}
	// Run A's floor and handover went to the history; its cycles are still shown.
	h := historyLines(t, doc)
	if len(h) != 1 || !strings.Contains(h[0], "2026-12-04 10:00 UTC") || !strings.Contains(h[0], "floor floor-ratio-A (met)") ||
		!strings.Contains(h[0], "handover handover-ratio-A (met)") || strings.Contains(h[0], "cycles") {
		t.Fatalf("history after a partial run: %q", h)
	}
	// A later run that displaces the rest of run A adds to run A's line, not a second line.
	doc = apply(t, doc, run(NoFsync, 6, "C", "floor", "cycles"))
	h = historyLines(t, doc)
	if len(h) != 2 || !strings.Contains(h[0], "10:05 UTC") || !strings.Contains(h[1], "10:00 UTC") ||
		!strings.Contains(h[1], "handover handover-ratio-A") || !strings.Contains(h[1], "cycles cycles-ratio-A") {
		t.Fatalf("history after displacing the rest of run A: %q", h)
	}
	if block := modeBlock(t, doc, NoFsync); !strings.Contains(block, "handover-ratio-B") || !strings.Contains(block, "cycles-ratio-C") {
		t.Fatalf("the block should hold B's handover and C's cycles:\n%s", block)
	}
}

func TestDocWriterHistoryGrowsByOneLineAndIsCapped(t *testing.T) {
	doc := apply(t, skeleton, run(Fsync, 0, "r0", "floor", "handover"))
	if h := historyLines(t, doc); len(h) != 0 {
		t.Fatalf("the first run displaced nothing, yet the history has %q", h)
	}
	for i := 1; i <= HistoryLines+5; i++ {
		before := historyLines(t, doc)
		doc = apply(t, doc, run(Fsync, i, fmt.Sprintf("r%d", i), "floor", "handover"))
		h := historyLines(t, doc)
		want := min(i, HistoryLines)
		if len(h) != want {
			t.Fatalf("after run %d the history has %d lines, want %d:\n%s", i, len(h), want, strings.Join(h, "\n"))
		}
		// The new line is the run just displaced, first; the others follow unchanged, the oldest
		// dropped once the cap is reached.
		prev := fmt.Sprintf("handover-ratio-r%d (met)", i-1)
		if !strings.Contains(h[0], prev) || !strings.Contains(h[0], Fsync.Title()) {
			t.Fatalf("after run %d the first history line is %q, want run %d's", i, h[0], i-1)
		}
		if kept := h[1:]; strings.Join(kept, "\n") != strings.Join(before[:len(kept)], "\n") {
			t.Fatalf("after run %d the older history lines changed:\nbefore %q\nafter %q", i, before, kept)
		}
	}
	if h := historyLines(t, doc); strings.Contains(strings.Join(h, "\n"), "ratio-r0 ") {
		t.Fatalf("the oldest run was kept past the cap: %q", h)
	}
	// The history is written below the blocks, where the doc has it, and nothing else moved.
	if !strings.HasSuffix(doc, "## After the generated blocks\n\nHand-written text that must stay.\n") {
		t.Fatalf("the doc's tail changed:\n%s", doc)
	}
}

func TestDocWriterRefusesMalformedMarkers(t *testing.T) {
	cases := []struct {
		name, doc, want string
	}{
		{"no block for the mode", strings.Replace(strings.Replace(skeleton, "<!-- bench:begin mode=nofsync -->\n", "", 1),
			"<!-- bench:end -->\n", "", 1), "no block for mode nofsync"},
		{"begin without end", strings.Replace(skeleton, "<!-- bench:end -->\n", "", 1), "(missing <!-- bench:end -->?)"},
		{"begin without end at the end", strings.Replace(skeleton, "<!-- bench:begin mode=fsync -->\n<!-- bench:end -->\n", "", 1) +
			"<!-- bench:begin mode=fsync -->\n", "has no <!-- bench:end -->"},
		{"end without begin", skeleton + "<!-- bench:end -->\n", "without a bench:begin"},
		{"two blocks for one mode", skeleton + "<!-- bench:begin mode=nofsync -->\n<!-- bench:end -->\n", "a second block for mode nofsync"},
		{"begin inside a block", strings.Replace(skeleton, "<!-- bench:begin mode=nofsync -->\n",
			"<!-- bench:begin mode=nofsync -->\n<!-- bench:begin mode=fsync -->\n", 1), "inside the block opened at line"},
		{"unknown mode", strings.Replace(skeleton, "mode=fsync", "mode=slow", 1), `unknown mode "slow"`},
		{"misspelt marker", strings.Replace(skeleton, "<!-- bench:end -->", "<!-- bench:ends -->", 1), "unknown or misplaced benchmark marker"},
		{"no history", strings.Replace(strings.Replace(skeleton, historyMarker+"\n", "", 1), historyEndMarker+"\n", "", 1), "no history block"},
		{"history not closed", strings.Replace(skeleton, historyEndMarker+"\n", "", 1), "has no " + historyEndMarker},
		{"hand-typed line in the history", strings.Replace(skeleton, historyMarker+"\n", historyMarker+"\n- 2026-01-01: 3x faster\n", 1),
			"not a history line"},
		{"section marker outside a block", skeleton + "<!-- bench:section name=floor run=2026-12-04T10:00:00Z -->\n",
			"unknown or misplaced benchmark marker"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Apply(c.doc, run(NoFsync, 0, "A", "floor"))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Apply error %v, want one saying %q", err, c.want)
			}
			// Update leaves the file as it was.
			path := filepath.Join(t.TempDir(), "benchmarks.md")
			if err := os.WriteFile(path, []byte(c.doc), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := Update(path, run(NoFsync, 0, "A", "floor")); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Update error %v, want one saying %q", err, c.want)
			}
			if b, err := os.ReadFile(path); err != nil || string(b) != c.doc {
				t.Fatalf("Update changed the file on error (%v)", err)
			}
			if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".benchmarks-*")); len(left) != 0 {
				t.Fatalf("Update left %v behind", left)
			}
		})
	}
	if err := Update(filepath.Join(t.TempDir(), "missing.md"), run(NoFsync, 0, "A", "floor")); err == nil {
		t.Fatal("Update of a missing doc succeeded")
	}
}

func TestDocWriterUpdatesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "benchmarks.md")
	if err := os.WriteFile(path, []byte(skeleton), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Update(path, run(Fsync, 0, "A", "floor", "cycles")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(modeBlock(t, string(b), Fsync), "cycles-ratio-A") {
		t.Fatalf("the file was not written:\n%s", b)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("the doc's mode changed: %v %v", fi.Mode(), err)
	}
	// Markers the writer wrote parse again, and headlines cannot end their comment.
	r := run(Fsync, 1, "B", "floor")
	r.Sections[0].Rows[0].Headline = "a --> b -- c"
	doc := apply(t, string(b), r)
	if _, err := Apply(doc, run(Fsync, 2, "C", "floor")); err != nil {
		t.Fatalf("the writer's own output does not parse: %v\n%s", err, doc)
	}
	if regexp.MustCompile(`<!--[^\n]*-->[^\n]*-->`).MatchString(doc) {
		t.Fatalf("a headline closed its comment early:\n%s", doc)
	}
}

// TestRepoDocIsGenerated: docs/benchmarks.md carries the markers `make bench` writes between, and
// its hand-written text quotes no figures (digits outside code spans), which could disagree with
// the generated tables.
func TestRepoDocIsGenerated(t *testing.T) {
	path := filepath.Join("..", "..", "..", "docs", "benchmarks.md")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, m := range []Mode{NoFsync, Fsync} {
		if _, err := Apply(doc, run(m, 0, "A", "floor")); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	lines := strings.Split(doc, "\n")
	l, err := parseLayout(lines)
	if err != nil {
		t.Fatal(err)
	}
	generated := map[int]bool{}
	for _, blk := range []block{l.modes[NoFsync], l.modes[Fsync], l.history} {
		for i := blk.begin; i <= blk.end; i++ {
			generated[i] = true
		}
	}
	code := regexp.MustCompile("`[^`]*`")
	digit := regexp.MustCompile(`[0-9]`)
	for i, line := range lines {
		if generated[i] {
			continue
		}
		if d := digit.FindString(code.ReplaceAllString(line, "")); d != "" {
			t.Errorf("%s:%d: a figure typed by hand (only `make bench` writes figures here): %q", path, i+1, line)
		}
	}
}
