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

// Package benchdoc writes the benchmark harness's results (test/bench) into docs/benchmarks.md,
// so that no figure in that doc is typed by hand.
//
// The doc carries one block per etcd mode and one history block, between marker lines:
//
//	<!-- bench:begin mode=nofsync -->   ... generated sections ...   <!-- bench:end -->
//	<!-- bench:begin mode=fsync -->     ... generated sections ...   <!-- bench:end -->
//	<!-- bench:history -->              ... one line per older run ... <!-- bench:history:end -->
//
// Everything outside the markers is left as written. A run replaces, in its mode's block, only the
// sections it measured; the other sections stay, each labelled with the run it came from. The
// sections it replaces leave one line in the history: the date and mode of the run they came from
// and their headline figures.
package benchdoc

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// HistoryLines is how many older runs the history keeps (the most recent ones).
const HistoryLines = 20

// Mode is the etcd a run measured: its writes cost more when it fsyncs.
type Mode string

const (
	// NoFsync is envtest's etcd, started with --unsafe-no-fsync.
	NoFsync Mode = "nofsync"
	// Fsync is an etcd that fsyncs its writes, as in production.
	Fsync Mode = "fsync"
)

// Title is how the doc names the mode.
func (m Mode) Title() string {
	switch m {
	case NoFsync:
		return "etcd `--unsafe-no-fsync` (envtest's default)"
	case Fsync:
		return "etcd fsyncing (as in production)"
	}
	return string(m)
}

// Row is one measurement.
type Row struct {
	Name, Value, Ratio, Target string
	// Verdict is "met" or "MISSED" against Target, or "" for a row without a target.
	Verdict string
	// Headline, when set, is the row's text in the run's history line (a label and its figure);
	// the verdict is added to it.
	Headline string
}

// Section is the rows of one part of the harness, named as BENCH_ONLY names it.
type Section struct {
	Name  string // the key a later run replaces the section by: floor, handover, cycles, ...
	Title string
	Rows  []Row
}

// Machine is where a run happened.
type Machine struct {
	CPU          string
	Cores        int
	MemoryGiB    float64
	Load         string // the load average (1, 5, 15 min) when the run started: the machine may be shared
	Go, Kernel   string
	ControlPlane string // the kube-apiserver and etcd versions
}

func (m Machine) String() string {
	return fmt.Sprintf("%s, %d cores, %.1f GiB, load %s at the start; %s; Linux %s; %s",
		m.CPU, m.Cores, m.MemoryGiB, m.Load, m.Go, m.Kernel, m.ControlPlane)
}

// Run is one invocation of the harness.
type Run struct {
	Mode    Mode
	Start   time.Time
	Machine Machine
	// Floor is the floor this run's ratios refer to, as measured in it.
	Floor    string
	Sections []Section
	// Order is every section name the harness knows, in the order the doc lists them.
	Order []string
}

func (r Run) id() string { return r.Start.UTC().Format(time.RFC3339) }

// Table is rows as a markdown table.
func Table(rows []Row) string {
	var b strings.Builder
	b.WriteString("| measurement | value | ratio | target | verdict |\n|---|---|---|---|---|\n")
	for _, x := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", cell(x.Name), cell(x.Value), cell(x.Ratio), cell(x.Target), cell(x.Verdict))
	}
	return b.String()
}

// cell escapes what would end a markdown table cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// Update applies run to the doc at path. On any error the file is left as it was.
func Update(path string, run Run) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("benchmark doc: %w", err)
	}
	doc, err := Apply(string(old), run)
	if err != nil {
		return fmt.Errorf("benchmark doc %s: %w", path, err)
	}
	// Write a sibling and rename it over the doc, so that a failed write leaves the doc whole.
	tmp, err := os.CreateTemp(filepath.Dir(path), ".benchmarks-*.md")
	if err != nil {
		return fmt.Errorf("benchmark doc: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.WriteString(doc); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("benchmark doc: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("benchmark doc: %w", err)
	}
	if fi, err := os.Stat(path); err == nil {
		_ = os.Chmod(tmp.Name(), fi.Mode().Perm())
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("benchmark doc: %w", err)
	}
	return nil
}

// The marker lines. A line that starts with "<!-- bench:" and matches none of them is an error,
// as is a marker out of place: a misspelt marker must not make a run write in the wrong place.
var (
	beginRe    = regexp.MustCompile(`^<!-- bench:begin mode=([a-z]+) -->$`)
	sectionRe  = regexp.MustCompile(`^<!-- bench:section name=([a-z0-9-]+) run=(\S+)(?: headline: (.*))? -->$`)
	historyRe  = regexp.MustCompile(`^- .* <!-- bench:run (\S+) mode=(nofsync|fsync) -->$`)
	markerLead = "<!-- bench:"
)

const (
	endMarker        = "<!-- bench:end -->"
	historyMarker    = "<!-- bench:history -->"
	historyEndMarker = "<!-- bench:history:end -->"
	notice           = "<!-- bench:generated by `make bench` (test/bench): edits between bench:begin and bench:end are overwritten -->"
)

// block is a span of lines [begin, end] of the doc, markers included.
type block struct{ begin, end int }

// layout is where the markers are.
type layout struct {
	modes   map[Mode]block
	history block
}

// The kinds of marked block parseLayout can be inside of.
const (
	blockMode    = "mode"
	blockHistory = "history"
)

func parseLayout(lines []string) (layout, error) {
	l := layout{modes: map[Mode]block{}, history: block{-1, -1}}
	open, openLine := "", 0 // the block being read: blockMode or blockHistory
	var openMode Mode
	for i, raw := range lines {
		line := strings.TrimSpace(raw)
		if !strings.HasPrefix(line, markerLead) {
			continue
		}
		switch m := beginRe.FindStringSubmatch(line); {
		case m != nil:
			if open != "" {
				return l, fmt.Errorf("line %d: %s inside the block opened at line %d (missing %s?)", i+1, line, openLine, closing(open))
			}
			mode := Mode(m[1])
			if mode != NoFsync && mode != Fsync {
				return l, fmt.Errorf("line %d: unknown mode %q (want %s or %s)", i+1, m[1], NoFsync, Fsync)
			}
			if b, dup := l.modes[mode]; dup {
				return l, fmt.Errorf("line %d: a second block for mode %s (the first opens at line %d)", i+1, mode, b.begin+1)
			}
			open, openLine, openMode = blockMode, i+1, mode
			l.modes[mode] = block{i, -1}
		case line == endMarker:
			if open != blockMode {
				return l, fmt.Errorf("line %d: %s without a bench:begin before it", i+1, endMarker)
			}
			l.modes[openMode] = block{l.modes[openMode].begin, i}
			open = ""
		case line == historyMarker:
			if open != "" {
				return l, fmt.Errorf("line %d: %s inside the block opened at line %d (missing %s?)", i+1, line, openLine, closing(open))
			}
			if l.history.begin >= 0 {
				return l, fmt.Errorf("line %d: a second %s (the first is at line %d)", i+1, historyMarker, l.history.begin+1)
			}
			open, openLine = blockHistory, i+1
			l.history.begin = i
		case line == historyEndMarker:
			if open != blockHistory {
				return l, fmt.Errorf("line %d: %s without %s before it", i+1, historyEndMarker, historyMarker)
			}
			l.history.end = i
			open = ""
		case open == blockMode && (sectionRe.MatchString(line) || line == notice):
		default:
			return l, fmt.Errorf("line %d: unknown or misplaced benchmark marker %q", i+1, raw)
		}
	}
	if open != "" {
		return l, fmt.Errorf("the block opened at line %d has no %s", openLine, closing(open))
	}
	if l.history.begin < 0 {
		return l, fmt.Errorf("no history block: add the lines %s and %s", historyMarker, historyEndMarker)
	}
	return l, nil
}

func closing(open string) string {
	if open == blockHistory {
		return historyEndMarker
	}
	return endMarker
}

// storedSection is a section as the doc holds it.
type storedSection struct {
	name, run, headline string
	lines               []string // its marker line and the lines up to the next section
}

// readSections splits a mode block's inside into its sections; what precedes the first one (the
// notice) is regenerated.
func readSections(inside []string) []storedSection {
	var out []storedSection
	for _, line := range inside {
		if m := sectionRe.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			out = append(out, storedSection{name: m[1], run: m[2], headline: m[3]})
		}
		if len(out) > 0 {
			out[len(out)-1].lines = append(out[len(out)-1].lines, line)
		}
	}
	for i := range out { // blank lines between sections are written again
		for len(out[i].lines) > 1 && strings.TrimSpace(out[i].lines[len(out[i].lines)-1]) == "" {
			out[i].lines = out[i].lines[:len(out[i].lines)-1]
		}
	}
	return out
}

// Apply returns doc with run written into its mode's block and the sections it replaced recorded
// in the history. It fails, changing nothing, when the markers are missing or malformed.
func Apply(doc string, run Run) (string, error) {
	if run.Mode != NoFsync && run.Mode != Fsync {
		return "", fmt.Errorf("unknown mode %q", run.Mode)
	}
	if run.Start.IsZero() {
		return "", errors.New("the run has no start time")
	}
	lines := strings.Split(doc, "\n")
	l, err := parseLayout(lines)
	if err != nil {
		return "", err
	}
	blk, ok := l.modes[run.Mode]
	if !ok {
		return "", fmt.Errorf("no block for mode %s: add the lines <!-- bench:begin mode=%s --> and %s where its tables go",
			run.Mode, run.Mode, endMarker)
	}

	kept := readSections(lines[blk.begin+1 : blk.end])
	measured := map[string]bool{}
	for _, s := range run.Sections {
		measured[s.Name] = true
	}
	var displaced []storedSection
	byName := map[string][]string{}
	for _, s := range kept {
		if measured[s.name] {
			displaced = append(displaced, s)
			continue
		}
		byName[s.name] = s.lines
	}
	for _, s := range run.Sections {
		byName[s.Name] = renderSection(run, s)
	}
	// The harness's order, then any section it no longer knows, as the doc had them.
	var names []string
	for _, n := range run.Order {
		if _, ok := byName[n]; ok {
			names = append(names, n)
		}
	}
	for _, s := range kept {
		if !slices.Contains(names, s.name) && !measured[s.name] {
			names = append(names, s.name)
		}
	}
	for _, s := range run.Sections {
		if !slices.Contains(names, s.Name) {
			names = append(names, s.Name)
		}
	}
	inside := []string{notice, ""}
	if len(names) == 0 {
		inside = append(inside, "_No run recorded yet._", "")
	}
	for _, n := range names {
		inside = append(inside, byName[n]...)
		inside = append(inside, "")
	}

	older, err := readHistory(lines[l.history.begin+1 : l.history.end])
	if err != nil {
		return "", err
	}
	for _, s := range displaced {
		if _, err := time.Parse(time.RFC3339, s.run); err != nil {
			return "", fmt.Errorf("section %s of mode %s: run %q is not an RFC 3339 time", s.name, run.Mode, s.run)
		}
	}
	history := updateHistory(older, run.Mode, displaced)

	// Replace from the end of the doc backwards so that the earlier line numbers hold.
	type span struct {
		b     block
		lines []string
	}
	spans := []span{{blk, inside}, {l.history, history}}
	slices.SortFunc(spans, func(x, y span) int { return y.b.begin - x.b.begin })
	for _, s := range spans {
		lines = slices.Concat(lines[:s.b.begin+1], s.lines, lines[s.b.end:])
	}
	return strings.Join(lines, "\n"), nil
}

func renderSection(run Run, s Section) []string {
	var heads []string
	for _, r := range s.Rows {
		if r.Headline == "" {
			continue
		}
		h := r.Headline
		if r.Verdict != "" {
			h += " (" + r.Verdict + ")"
		}
		heads = append(heads, h)
	}
	marker := fmt.Sprintf("<!-- bench:section name=%s run=%s", s.Name, run.id())
	if len(heads) > 0 {
		marker += " headline: " + commentSafe(strings.Join(heads, "; "))
	}
	out := []string{marker + " -->",
		fmt.Sprintf("### %s (run of %s)", s.Title, run.Start.UTC().Format("2006-01-02 15:04 UTC")),
		"",
		fmt.Sprintf("%s. **Machine:** %s. **Floor of this run**, to which its ratios refer: %s.",
			run.Mode.Title(), run.Machine, run.Floor),
		""}
	if len(s.Rows) == 0 {
		return append(out, "_This section recorded no rows._")
	}
	return append(out, strings.Split(strings.TrimRight(Table(s.Rows), "\n"), "\n")...)
}

// commentSafe keeps text from ending the HTML comment it is put in.
func commentSafe(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	for strings.Contains(s, "--") {
		s = strings.ReplaceAll(s, "--", "-")
	}
	return s
}

// historyEntry is one older run in the history.
type historyEntry struct {
	run   string // its start, RFC 3339
	mode  Mode
	heads []string
}

// readHistory parses the history block's lines.
func readHistory(lines []string) ([]historyEntry, error) {
	var entries []historyEntry
	for _, raw := range lines {
		line := strings.TrimSpace(raw)
		if line == "" {
			continue
		}
		m := historyRe.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("not a history line: %q", raw)
		}
		e := historyEntry{run: m[1], mode: Mode(m[2])}
		t, err := time.Parse(time.RFC3339, e.run)
		if err != nil {
			return nil, fmt.Errorf("history line %q: run %q is not an RFC 3339 time", raw, e.run)
		}
		prefix := historyPrefix(t, e.mode)
		text, ok := strings.CutPrefix(line, prefix)
		if !ok {
			return nil, fmt.Errorf("history line %q does not start with %q", raw, prefix)
		}
		text = strings.TrimSuffix(text, historySuffix(e))
		if text != noHeadline {
			e.heads = strings.Split(text, "; ")
		}
		entries = append(entries, e)
	}
	return entries, nil
}

const noHeadline = "(no headline figures)"

func historyPrefix(t time.Time, m Mode) string {
	return fmt.Sprintf("- %s, %s: ", t.UTC().Format("2006-01-02 15:04 UTC"), m.Title())
}

func historySuffix(e historyEntry) string {
	return fmt.Sprintf(" <!-- bench:run %s mode=%s -->", e.run, e.mode)
}

// updateHistory adds the displaced sections to the history: one line per run they came from
// (merged into that run's line when an earlier partial run already displaced part of it), newest
// first, at most HistoryLines.
func updateHistory(entries []historyEntry, mode Mode, displaced []storedSection) []string {
	for _, s := range displaced {
		i := slices.IndexFunc(entries, func(e historyEntry) bool { return e.run == s.run && e.mode == mode })
		if i < 0 {
			entries = append(entries, historyEntry{run: s.run, mode: mode})
			i = len(entries) - 1
		}
		if s.headline != "" {
			entries[i].heads = append(entries[i].heads, strings.Split(s.headline, "; ")...)
		}
	}
	// RFC 3339 times in UTC sort as text.
	slices.SortStableFunc(entries, func(x, y historyEntry) int { return cmp.Compare(y.run, x.run) })
	entries = entries[:min(len(entries), HistoryLines)]
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		t, _ := time.Parse(time.RFC3339, e.run) // checked by readHistory, or written by Run.id
		text := strings.Join(e.heads, "; ")
		if text == "" {
			text = noHeadline
		}
		out = append(out, historyPrefix(t, e.mode)+text+historySuffix(e))
	}
	return out
}
