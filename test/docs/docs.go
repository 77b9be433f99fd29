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

// Package docs reads the Markdown of the repository (README.md and docs/*.md) for the docs check:
// what the text quotes (inline code, code blocks, tables, links, headings), each with the line it
// is on, so that a test can hold every quote against the code and say where a doc went wrong.
// Its tests (docs_test.go) check metric names, the manager's flags, annotation and label keys,
// Event reasons, Go identifiers, paths, links and the README's layout table; the kubectl plugin's
// flags are checked by cmd/kubectl-fencedlock's test, since only that package can build the
// plugin's command tree.
package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Doc is one Markdown file as the checks read it.
type Doc struct {
	// Path is relative to the module root, with slashes: "README.md", "docs/cli.md".
	Path     string
	Lines    []string
	Spans    []Span
	Blocks   []Block
	Tables   []Table
	Links    []Link
	Headings []Heading

	// flat is the text with fenced code blocks blanked and newlines turned into spaces, so that
	// a phrase wrapped over two lines matches one pattern; offsets are those of the file.
	flat       string
	lineStarts []int
}

// Span is an inline code span (`...`) outside code blocks, with newlines as spaces.
type Span struct {
	Text string
	Line int
	// Off and End delimit the span, backticks included, in the doc's flat text.
	Off, End int
}

// Block is a fenced code block.
type Block struct {
	Lang  string
	Line  int // the line of its first content line
	Lines []string
}

// Table is a Markdown table; Section is the heading above it.
type Table struct {
	Line    int
	Section string
	Header  []string
	Rows    []Row
}

// Row is a table row; its cells are the raw Markdown between the pipes, trimmed.
type Row struct {
	Line  int
	Cells []string
}

// Link is the target of an inline link, [text](target).
type Link struct {
	Target string
	Line   int
}

// Heading is a section heading and its anchor as GitHub renders it.
type Heading struct {
	Level int
	Text  string
	Slug  string
	Line  int
}

// Match is a pattern found in a doc: the submatches of its first occurrence on Line.
type Match struct {
	Line   int
	Groups []string
}

// Problem is one quote that does not hold: where, what the doc quotes, and what the code has. A
// problem with no Quote is something the doc leaves out, which Code says.
type Problem struct {
	Doc   string
	Line  int
	Quote string
	Code  string
}

func (p Problem) String() string {
	if p.Quote == "" {
		return fmt.Sprintf("%s:%d: %s", p.Doc, p.Line, p.Code)
	}
	return fmt.Sprintf("%s:%d: quotes %s, but %s", p.Doc, p.Line, p.Quote, p.Code)
}

// Root returns the module root: the nearest directory above the working directory with a go.mod.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the module root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above %s", dir)
		}
		dir = parent
	}
}

// Load reads README.md and every docs/*.md under root.
func Load(root string) ([]*Doc, error) {
	paths, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, fmt.Errorf("listing docs: %w", err)
	}
	slices.Sort(paths)
	paths = append([]string{filepath.Join(root, "README.md")}, paths...)
	docs := make([]*Doc, 0, len(paths))
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("reading doc: %w", err)
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return nil, fmt.Errorf("doc path: %w", err)
		}
		docs = append(docs, Parse(filepath.ToSlash(rel), string(raw)))
	}
	return docs, nil
}

var (
	fenceLine   = regexp.MustCompile("^\\s{0,3}(`{3,}|~{3,})\\s*([^`\\s]*)")
	headingLine = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	tableSep    = regexp.MustCompile(`^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$`)
	linkTarget  = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
)

// Parse reads one Markdown text; path names it in problems.
func Parse(path, text string) *Doc {
	d := &Doc{Path: path, Lines: strings.Split(text, "\n")}
	masked := []byte(text)
	off := 0
	var open *Block
	var fence string
	slugs := map[string]int{}
	section := ""
	for i, line := range d.Lines {
		start := off
		off += len(line) + 1
		d.lineStarts = append(d.lineStarts, start)
		if open != nil {
			if m := fenceLine.FindStringSubmatch(line); m != nil && m[1][0] == fence[0] && len(m[1]) >= len(fence) &&
				strings.TrimSpace(line) == m[1] {
				d.Blocks = append(d.Blocks, *open)
				open = nil
			} else {
				open.Lines = append(open.Lines, line)
			}
			blank(masked, start, start+len(line))
			continue
		}
		if m := fenceLine.FindStringSubmatch(line); m != nil {
			open, fence = &Block{Lang: m[2], Line: i + 2}, m[1]
			blank(masked, start, start+len(line))
			continue
		}
		if m := headingLine.FindStringSubmatch(line); m != nil {
			h := Heading{Level: len(m[1]), Text: m[2], Line: i + 1}
			h.Slug = slug(plain(h.Text))
			if n, dup := slugs[h.Slug]; dup {
				slugs[h.Slug] = n + 1
				h.Slug = fmt.Sprintf("%s-%d", h.Slug, n+1)
			} else {
				slugs[h.Slug] = 0
			}
			d.Headings = append(d.Headings, h)
			section = h.Text
		}
		if strings.HasPrefix(strings.TrimSpace(line), "|") && i+1 < len(d.Lines) && tableSep.MatchString(d.Lines[i+1]) &&
			(i == 0 || !strings.HasPrefix(strings.TrimSpace(d.Lines[i-1]), "|")) {
			t := Table{Line: i + 1, Section: section, Header: cells(line)}
			for j := i + 2; j < len(d.Lines) && strings.HasPrefix(strings.TrimSpace(d.Lines[j]), "|"); j++ {
				t.Rows = append(t.Rows, Row{Line: j + 1, Cells: cells(d.Lines[j])})
			}
			d.Tables = append(d.Tables, t)
		}
	}
	if open != nil { // an unclosed fence runs to the end of the document
		d.Blocks = append(d.Blocks, *open)
	}
	d.flat = strings.ReplaceAll(string(masked), "\n", " ")
	d.Spans = spans(string(masked), d)
	for _, m := range linkTarget.FindAllStringSubmatchIndex(d.flat, -1) {
		if !d.inSpan(m[0]) {
			d.Links = append(d.Links, Link{Target: d.flat[m[2]:m[3]], Line: d.LineAt(m[0])})
		}
	}
	return d
}

func blank(b []byte, from, to int) {
	for i := from; i < to && i < len(b); i++ {
		b[i] = ' '
	}
}

// spans finds the inline code spans of text (fenced blocks already blanked). A span does not
// run past a blank line, nor, in a table row, past its line.
func spans(text string, d *Doc) []Span {
	var out []Span
	for i := 0; i < len(text); {
		if text[i] == '\\' {
			i += 2
			continue
		}
		if text[i] != '`' {
			i++
			continue
		}
		n := run(text, i)
		limit := len(text)
		if p := strings.Index(text[i:], "\n\n"); p >= 0 {
			limit = i + p
		}
		lineStart := strings.LastIndexByte(text[:i], '\n') + 1
		if strings.HasPrefix(strings.TrimSpace(text[lineStart:i]), "|") {
			if p := strings.IndexByte(text[i:], '\n'); p >= 0 {
				limit = i + p
			}
		}
		closeAt := -1
		for j := i + n; j < limit; {
			if text[j] != '`' {
				j++
				continue
			}
			m := run(text, j)
			if m == n {
				closeAt = j
				break
			}
			j += m
		}
		if closeAt < 0 {
			i += n
			continue
		}
		content := strings.ReplaceAll(text[i+n:closeAt], "\n", " ")
		if len(content) > 2 && content[0] == ' ' && content[len(content)-1] == ' ' && strings.TrimSpace(content) != "" {
			content = content[1 : len(content)-1]
		}
		out = append(out, Span{Text: content, Line: d.LineAt(i), Off: i, End: closeAt + n})
		i = closeAt + n
	}
	return out
}

func run(s string, i int) int {
	n := 0
	for i+n < len(s) && s[i+n] == '`' {
		n++
	}
	return n
}

// cells splits a table row on the pipes that are not inside code spans or escaped.
func cells(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "|")
	if strings.HasSuffix(line, "|") && !strings.HasSuffix(line, "\\|") {
		line = line[:len(line)-1]
	}
	var out []string
	var cur strings.Builder
	inCode := 0
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\\' && i+1 < len(line) && line[i+1] == '|':
			cur.WriteByte('|')
			i++
			continue
		case c == '`':
			n := run(line, i)
			switch {
			case inCode == 0 && strings.Contains(line[i+n:], strings.Repeat("`", n)):
				inCode = n
			case inCode == n:
				inCode = 0
			}
			cur.WriteString(line[i : i+n])
			i += n - 1
			continue
		case c == '|' && inCode == 0:
			out = append(out, strings.TrimSpace(cur.String()))
			cur.Reset()
			continue
		}
		cur.WriteByte(c)
	}
	return append(out, strings.TrimSpace(cur.String()))
}

var (
	inlineLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	emphasis   = regexp.MustCompile(`[*]+|\b_+|_+\b`)
)

// plain is a heading's text as rendered: links as their text, no code or emphasis marks.
func plain(s string) string {
	s = inlineLink.ReplaceAllString(s, "$1")
	s = strings.ReplaceAll(s, "`", "")
	return emphasis.ReplaceAllString(s, "")
}

// slug is GitHub's anchor of a heading: lower case, letters, digits, '_', '-' and spaces kept,
// spaces turned into '-'.
func slug(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case unicode.IsLetter(r), unicode.IsNumber(r), unicode.Is(unicode.Mn, r), r == '_', r == '-':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// LineAt returns the line (from 1) of a byte offset of the doc.
func (d *Doc) LineAt(off int) int {
	i, found := slices.BinarySearch(d.lineStarts, off)
	if found {
		return i + 1
	}
	return i
}

func (d *Doc) inSpan(off int) bool {
	i, _ := slices.BinarySearchFunc(d.Spans, off, func(s Span, off int) int { return s.End - 1 - off })
	return i < len(d.Spans) && d.Spans[i].Off <= off
}

// Find returns every match of re in the doc's prose (lines joined, so a match may wrap) and, with
// blocks, in each line of its code blocks.
func (d *Doc) Find(re *regexp.Regexp, blocks bool) []Match {
	var out []Match
	for _, m := range re.FindAllStringSubmatchIndex(d.flat, -1) {
		out = append(out, Match{Line: d.LineAt(m[0]), Groups: groups(d.flat, m)})
	}
	if blocks {
		for _, b := range d.Blocks {
			for i, line := range b.Lines {
				for _, m := range re.FindAllStringSubmatchIndex(line, -1) {
					out = append(out, Match{Line: b.Line + i, Groups: groups(line, m)})
				}
			}
		}
	}
	return out
}

func groups(s string, m []int) []string {
	g := make([]string, len(m)/2)
	for i := range g {
		if m[2*i] >= 0 {
			g[i] = s[m[2*i]:m[2*i+1]]
		}
	}
	return g
}

// Flat returns the doc's prose between two offsets (spans' Off and End), on one line.
func (d *Doc) Flat(from, to int) string { return d.flat[max(from, 0):min(to, len(d.flat))] }

// HasAnchor reports whether a heading of the doc has the anchor.
func (d *Doc) HasAnchor(anchor string) bool {
	return slices.ContainsFunc(d.Headings, func(h Heading) bool { return h.Slug == anchor })
}

// Words splits a command line as a shell would, roughly: on blanks outside quotes, quotes
// removed; "$(" starts a word of its own, so that the command inside is a word sequence too.
func Words(s string) []string {
	s = strings.ReplaceAll(s, "$(", " $( ")
	var out []string
	var cur strings.Builder
	quote := byte(0)
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote, inWord = c, true
		case c == ' ' || c == '\t':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out
}

// Invocation is a command line a doc quotes, as words from the command's name on.
type Invocation struct {
	Line  int
	Quote string
	// Args are the words after the command's name, up to the end of the command (a pipe, a ';',
	// '&&', '||', a closing ')', a redirection or a comment).
	Args []string
}

// Invocations finds the command lines that run name (its words, e.g. "kubectl", "fencedlock"):
// in inline code spans and in the lines of code blocks, wherever on the line it starts.
func (d *Doc) Invocations(name ...string) []Invocation {
	var out []Invocation
	find := func(line int, text string) {
		words := Words(stripComment(text))
		for i := 0; i+len(name) <= len(words); i++ {
			if !slices.Equal(words[i:i+len(name)], name) || !commandAt(words, i) {
				continue
			}
			inv := Invocation{Line: line, Quote: strings.TrimSpace(text)}
			for _, w := range words[i+len(name):] {
				if w == "|" || w == "||" || w == "&&" || w == ";" || w == "&" || w == "$(" || strings.HasPrefix(w, ">") ||
					strings.HasPrefix(w, "2>") || strings.HasPrefix(w, "<") {
					break
				}
				if before, closed := strings.CutSuffix(w, ")"); closed && !strings.Contains(w, "(") {
					if before != "" {
						inv.Args = append(inv.Args, before)
					}
					break
				}
				inv.Args = append(inv.Args, strings.TrimRight(w, ";"))
			}
			out = append(out, inv)
		}
	}
	for _, s := range d.Spans {
		find(s.Line, s.Text)
	}
	for _, b := range d.Blocks {
		for i, line := range b.Lines {
			find(b.Line+i, line)
		}
	}
	return out
}

var assignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// commandAt reports whether words[i] is in a command's place: first, after a separator, a "$(",
// run's "--" or sudo, or after variable assignments only. ("ln -s kubectl-fencedlock ..." runs ln.)
func commandAt(words []string, i int) bool {
	if i == 0 {
		return true
	}
	switch words[i-1] {
	case "$(", "(", "|", "||", "&&", ";", "--", "exec", "sudo", "time", "then", "do", "!":
		return true
	}
	for _, w := range words[:i] {
		if !assignment.MatchString(w) {
			return false
		}
	}
	return true
}

// stripComment drops a shell comment: a '#' that starts a word outside quotes.
func stripComment(s string) string {
	quote := byte(0)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '#' && (i == 0 || s[i-1] == ' ' || s[i-1] == '\t'):
			return s[:i]
		}
	}
	return s
}

// FlagQuote is a flag quoted on its own, as a span that starts with it: `--timeout`,
// `--ca-bundle-overlap=0s`, `-E N`. A flag of another tool is quoted with its command
// (`flock -n`, `etcdutl snapshot restore --bump-revision`), and is no FlagQuote.
type FlagQuote struct {
	Line  int
	Quote string
	// Name is the flag as quoted, dashes included: "--timeout", "-E".
	Name string
	// Tool is the program of OtherTools the prose names right before the flag, if any.
	Tool string
}

// OtherTools are the programs besides fencedlock's whose flags the docs quote. A flag quoted
// right after one's name belongs to it: etcd `--unsafe-no-fsync`, etcdutl's `--bump-revision`,
// "envtest starts etcd with `--unsafe-no-fsync`".
var OtherTools = []string{"etcd", "etcdutl", "kube-apiserver", "kubelet", "flock", "go", "kubectl", "helm", "prometheus"}

var (
	flagWord  = regexp.MustCompile(`^(--?[A-Za-z][A-Za-z0-9-]*)(=.*)?$`)
	toolNamed = regexp.MustCompile(`(?:^|[\s(])([a-z][a-z0-9-]*)(?:'s)?\s+(?:with\s+)?$`)
)

// BareFlags returns the spans that start with a flag.
func (d *Doc) BareFlags() []FlagQuote {
	var out []FlagQuote
	for _, s := range d.Spans {
		w := Words(s.Text)
		if len(w) == 0 {
			continue
		}
		if m := flagWord.FindStringSubmatch(w[0]); m != nil {
			q := FlagQuote{Line: s.Line, Quote: "`" + s.Text + "`", Name: m[1]}
			if t := toolNamed.FindStringSubmatch(d.Flat(s.Off-40, s.Off)); t != nil && slices.Contains(OtherTools, t[1]) {
				q.Tool = t[1]
			}
			out = append(out, q)
		}
	}
	return out
}

// DefaultQuote is a doc's claim about the defaults of flags: "`--grace` (default 10s)",
// "`--a`/`--b` (15s and 2s)", "(`--ca-bundle-overlap`, 10m)", or a row of a table with a Flag and
// a Default column whose default is one code span.
type DefaultQuote struct {
	Line   int
	Quote  string
	Flags  []string // long names, without dashes
	Values []string
}

var (
	defaultAfter  = regexp.MustCompile("((?:`--[a-z0-9-]+`\\s*/\\s*)*`--[a-z0-9-]+`)\\s*\\(([^()]*)\\)")
	defaultInside = regexp.MustCompile("\\(`--([a-z0-9-]+)`,\\s*([^()`]*)\\)")
	flagName      = regexp.MustCompile("`--([a-z0-9-]+)`")
	valueSep      = regexp.MustCompile(`\s*,\s*|\s+and\s+|\s*;\s*`)
)

// Defaults returns the doc's quotes of flag defaults.
func (d *Doc) Defaults() []DefaultQuote {
	var out []DefaultQuote
	for _, m := range defaultAfter.FindAllStringSubmatchIndex(d.flat, -1) {
		g := groups(d.flat, m)
		q := DefaultQuote{Line: d.LineAt(m[0]), Quote: strings.Join(strings.Fields(g[0]), " ")}
		for _, f := range flagName.FindAllStringSubmatch(g[1], -1) {
			q.Flags = append(q.Flags, f[1])
		}
		q.Values = values(g[2])
		out = append(out, q)
	}
	for _, m := range defaultInside.FindAllStringSubmatchIndex(d.flat, -1) {
		g := groups(d.flat, m)
		out = append(out, DefaultQuote{Line: d.LineAt(m[0]), Quote: strings.Join(strings.Fields(g[0]), " "),
			Flags: []string{g[1]}, Values: values(g[2])})
	}
	for _, t := range d.Tables {
		fc, dc := column(t.Header, "Flag"), column(t.Header, "Default")
		if fc < 0 || dc < 0 {
			continue
		}
		for _, r := range t.Rows {
			if dc >= len(r.Cells) || fc >= len(r.Cells) {
				continue
			}
			v, ok := onlySpan(r.Cells[dc])
			if !ok {
				continue // prose, not a value
			}
			for _, f := range flagName.FindAllStringSubmatch(r.Cells[fc], -1) {
				out = append(out, DefaultQuote{Line: r.Line, Quote: "| " + r.Cells[fc] + " | " + r.Cells[dc] + " |",
					Flags: []string{f[1]}, Values: []string{v}})
			}
		}
	}
	return out
}

func values(s string) []string {
	s = strings.TrimSpace(strings.ReplaceAll(s, "`", ""))
	s = strings.TrimPrefix(s, "default ")
	parts := valueSep.Split(s, -1)
	out := make([]string, 0, len(parts))
	for _, v := range parts {
		out = append(out, strings.TrimSpace(strings.TrimPrefix(v, "default ")))
	}
	return out
}

func column(header []string, name string) int {
	return slices.IndexFunc(header, func(h string) bool { return strings.EqualFold(strings.TrimSpace(h), name) })
}

// onlySpan returns the text of a cell that is exactly one code span.
func onlySpan(cell string) (string, bool) {
	if len(cell) < 2 || cell[0] != '`' || cell[len(cell)-1] != '`' {
		return "", false
	}
	inner := strings.Trim(cell, "`")
	if strings.Contains(inner, "`") {
		return "", false
	}
	if inner == `""` {
		return "", true
	}
	return inner, true
}

// SameDefault compares a doc's quoted default with a flag's default value as the flag package
// prints it, for a flag of the kind "duration", "int", "bool" or "string" (other kinds compare as
// text). ok is false when the quote is no value of that kind: prose, not a default.
func SameDefault(kind, defValue, quoted string) (equal, ok bool) {
	switch kind {
	case "duration":
		q, err := time.ParseDuration(strings.ReplaceAll(quoted, " ", ""))
		if err != nil {
			return false, false
		}
		d, err := time.ParseDuration(defValue)
		return err == nil && d == q, true
	case "int":
		q, err := strconv.Atoi(quoted)
		if err != nil {
			return false, false
		}
		return strconv.Itoa(q) == defValue, true
	case "bool":
		q, err := strconv.ParseBool(quoted)
		if err != nil {
			return false, false
		}
		return strconv.FormatBool(q) == defValue, true
	}
	if quoted == `""` {
		quoted = ""
	}
	if strings.ContainsAny(quoted, " \t") {
		return false, false
	}
	return quoted == defValue, true
}
