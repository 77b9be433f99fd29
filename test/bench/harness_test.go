//go:build bench

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

// Package bench measures fencedlock on a real kube-apiserver and etcd (envtest), with the manager
// running as its own process (so its API requests and RSS can be measured), and prints its tables;
// with BENCH_WRITE_DOC set (as `make bench` sets it) it writes them into docs/benchmarks.md
// (package benchdoc). Every figure is also given as a ratio to the raw floor measured in the same
// run: absolute times on a shared machine swing between runs. Run it with `make bench`.
package bench

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/fencedlock/fencedlock/test/bench/benchdoc"
	"github.com/fencedlock/fencedlock/test/util"
)

// stats summarizes latencies.
type stats struct {
	n             int
	p50, p99, avg time.Duration
}

func summarize(d []time.Duration) stats {
	if len(d) == 0 {
		return stats{}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	var sum time.Duration
	for _, v := range s {
		sum += v
	}
	pct := func(p float64) time.Duration { return s[min(len(s)-1, int(p*float64(len(s))))] }
	return stats{n: len(s), p50: pct(0.50), p99: pct(0.99), avg: sum / time.Duration(len(s))}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

// report collects the results by section, prints each row as it comes, and gives them to
// benchdoc, which formats them for the console's markdown and for docs/benchmarks.md alike.
type report struct{ sections []benchdoc.Section }

// section starts the section that the next rows belong to (name as BENCH_ONLY names it).
func (r *report) section(name, title string) {
	r.sections = append(r.sections, benchdoc.Section{Name: name, Title: title})
	fmt.Printf("\n%s\n", title)
}

func (r *report) add(name, value, ratio, target string, ok *bool) {
	verdict := ""
	if ok != nil {
		verdict = map[bool]string{true: "met", false: "MISSED"}[*ok]
	}
	if len(r.sections) == 0 {
		panic("report.add before report.section")
	}
	s := &r.sections[len(r.sections)-1]
	s.Rows = append(s.Rows, benchdoc.Row{Name: name, Value: value, Ratio: ratio, Target: target, Verdict: verdict})
	fmt.Printf("  %-62s %-28s %-22s %s %s\n", name, value, ratio, target, verdict)
}

// headline puts the last row added in the run's line of the doc's history, as "label: <ratio>"
// (its value when it has no ratio).
func (r *report) headline(label string) {
	s := &r.sections[len(r.sections)-1]
	x := &s.Rows[len(s.Rows)-1]
	x.Headline = label + ": " + cmp.Or(x.Ratio, x.Value)
}

// headlineFigure is headline with a figure of the caller's.
func (r *report) headlineFigure(label, figure string) {
	s := &r.sections[len(r.sections)-1]
	s.Rows[len(s.Rows)-1].Headline = label + ": " + figure
}

// headlineValue is headline with the row's value.
func (r *report) headlineValue(label string) {
	s := &r.sections[len(r.sections)-1]
	x := &s.Rows[len(s.Rows)-1]
	x.Headline = label + ": " + x.Value
}

func (r *report) markdown() string {
	var b strings.Builder
	for _, s := range r.sections {
		fmt.Fprintf(&b, "### %s\n\n%s\n", s.Title, benchdoc.Table(s.Rows))
	}
	return b.String()
}

// managerProcess is the fencedlock manager as a separate process against envtest's API server.
type managerProcess struct {
	cmd     *exec.Cmd
	metrics string
	pprof   string // its /debug/pprof, when BENCH_PROFILE asks for profiles
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// build builds the command in package pkg (relative to the repository) into dir.
func build(t *testing.T, dir, pkg string) string {
	t.Helper()
	bin := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = util.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", pkg, err, out)
	}
	return bin
}

func startManager(t *testing.T, env *envtest.Environment, cfg *rest.Config) *managerProcess {
	t.Helper()
	dir := t.TempDir()
	bin := build(t, dir, "./cmd/manager")
	kubeconfig, err := util.WriteKubeconfig(env, cfg, "fencedlock-manager", dir)
	if err != nil {
		t.Fatal(err)
	}
	wio := env.WebhookInstallOptions
	metricsPort, probePort := freePort(t), freePort(t)
	m := &managerProcess{metrics: fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)}
	m.cmd = exec.Command(bin, "--kubeconfig", kubeconfig, "--leader-elect=false",
		"--webhook-host", wio.LocalServingHost, "--webhook-port", strconv.Itoa(wio.LocalServingPort),
		"--webhook-cert-path", wio.LocalServingCertDir,
		"--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", metricsPort), "--metrics-secure=false",
		"--health-probe-bind-address", fmt.Sprintf("127.0.0.1:%d", probePort))
	// Diagnosis: BENCH_MANAGER_ARGS adds flags (e.g. --pprof-bind-address=127.0.0.1:8082),
	// BENCH_MANAGER_ENV variables (e.g. GOGC=100) to the manager's command.
	m.cmd.Args = append(m.cmd.Args, strings.Fields(os.Getenv("BENCH_MANAGER_ARGS"))...)
	if os.Getenv("BENCH_PROFILE") != "" {
		addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		m.cmd.Args, m.pprof = append(m.cmd.Args, "--pprof-bind-address="+addr), "http://"+addr+"/debug/pprof"
	}
	m.cmd.Env = append(os.Environ(), strings.Fields(os.Getenv("BENCH_MANAGER_ENV"))...)
	logf, err := os.Create(filepath.Join(os.TempDir(), "fencedlock-bench-manager.log"))
	if err != nil {
		t.Fatal(err)
	}
	m.cmd.Stdout, m.cmd.Stderr = logf, logf
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.cmd.Process.Kill(); _ = m.cmd.Wait(); _ = logf.Close() })
	for i := 0; ; i++ {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", probePort))
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if i > 600 {
			t.Fatalf("manager not ready; see %s", logf.Name())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return m
}

// requests returns the manager's API requests so far by HTTP method (client-go's
// rest_client_requests_total, exported on the manager's metrics endpoint).
func (m *managerProcess) requests(t *testing.T) map[string]float64 {
	t.Helper()
	resp, err := http.Get(m.metrics)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "rest_client_requests_total{") {
			continue
		}
		_, after, ok := strings.Cut(line, `method="`)
		if !ok {
			continue
		}
		method := after
		method = method[:strings.Index(method, `"`)]
		v, _ := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		out[method] += v
	}
	return out
}

func writes(r map[string]float64) float64 { return r["POST"] + r["PUT"] + r["PATCH"] + r["DELETE"] }

func diff(a, b map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range b {
		out[k] = v - a[k]
	}
	return out
}

// statusMiB is a size the kernel reports for the manager in /proc/<pid>/status (VmRSS: its
// resident set; RssFile: the part of it that maps files, the binary's pages).
func (m *managerProcess) statusMiB(t *testing.T, field string) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", m.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if strings.HasPrefix(line, field+":") {
			kb, _ := strconv.ParseFloat(strings.Fields(line)[1], 64)
			return kb / 1024
		}
	}
	t.Fatalf("/proc/%d/status has no %s", m.cmd.Process.Pid, field)
	return 0
}

// histogramDelta returns the mean of the observations a histogram gained between two metrics
// texts, over the series whose labels contain every filter string.
func histogramDelta(before, after, name string, filters ...string) time.Duration {
	s0, c0 := histogramSums(before, name, filters...)
	s1, c1 := histogramSums(after, name, filters...)
	if c1 == c0 {
		return 0
	}
	return time.Duration((s1 - s0) / (c1 - c0) * float64(time.Second))
}

// histogramSums returns sum and count of a Prometheus histogram in a metrics text.
func histogramSums(text, name string, filters ...string) (sum, count float64) {
	for line := range strings.SplitSeq(text, "\n") {
		ok := strings.HasPrefix(line, name+"_sum") || strings.HasPrefix(line, name+"_count")
		for _, f := range filters {
			ok = ok && strings.Contains(line, f)
		}
		if !ok {
			continue
		}
		v, _ := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		if strings.HasPrefix(line, name+"_sum") {
			sum += v
		} else {
			count += v
		}
	}
	return sum, count
}

func (m *managerProcess) metricsText(t *testing.T) string {
	t.Helper()
	resp, err := http.Get(m.metrics)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// cpuSeconds is the process's CPU time (process_cpu_seconds_total) in a metrics text.
func cpuSeconds(text string) float64 { return metricValue(text, "process_cpu_seconds_total") }

// metricValue is the value of the unlabelled metric name (a gauge or a counter) in a metrics
// text, 0 if it has none.
func metricValue(text, name string) float64 {
	for line := range strings.SplitSeq(text, "\n") {
		if strings.HasPrefix(line, name+" ") {
			f, _ := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
			return f
		}
	}
	return 0
}

// requestsPer is the API server's requests for a resource (and subresource) over verbs between
// two metrics texts, per one of n things done between them.
func requestsPer(before, after string, n int, resource, subresource string, verbs ...string) float64 {
	return (requestCount(after, resource, subresource, verbs...) - requestCount(before, resource, subresource, verbs...)) / float64(n)
}

// requestCount sums apiserver_request_total for a resource (and subresource) over verbs.
func requestCount(text, resource, subresource string, verbs ...string) float64 {
	var sum float64
	for line := range strings.SplitSeq(text, "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") ||
			!strings.Contains(line, `resource="`+resource+`"`) || !strings.Contains(line, `subresource="`+subresource+`"`) {
			continue
		}
		for _, v := range verbs {
			if strings.Contains(line, `verb="`+v+`"`) {
				f, _ := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
				sum += f
			}
		}
	}
	return sum
}
