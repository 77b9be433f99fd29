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
// running as its own process (so its API requests and RSS can be measured), and prints a table.
// Every figure is also given as a ratio to the raw floor measured in the same run: absolute times
// on a shared 2-core machine swing 2x between runs. Run it with `make bench`.
package bench

import (
	"bufio"
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

// row is one line of the results table.
type row struct{ name, value, ratio, target, verdict string }

type report struct{ rows []row }

func (r *report) add(name, value, ratio, target string, ok *bool) {
	verdict := ""
	if ok != nil {
		verdict = map[bool]string{true: "met", false: "MISSED"}[*ok]
	}
	r.rows = append(r.rows, row{name, value, ratio, target, verdict})
	fmt.Printf("  %-62s %-28s %-22s %s %s\n", name, value, ratio, target, verdict)
}

func (r *report) markdown() string {
	var b strings.Builder
	b.WriteString("| measurement | value | ratio to floor | target | |\n|---|---|---|---|---|\n")
	for _, x := range r.rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", x.name, x.value, x.ratio, x.target, x.verdict)
	}
	return b.String()
}

// managerProcess is the fencedlock manager as a separate process against envtest's API server.
type managerProcess struct {
	cmd     *exec.Cmd
	metrics string
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

func startManager(t *testing.T, env *envtest.Environment, cfg *rest.Config) *managerProcess {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "manager")
	build := exec.Command("go", "build", "-o", bin, "./cmd/manager")
	build.Dir = util.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the manager: %v\n%s", err, out)
	}
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

// rssMiB is the manager's resident set size.
func (m *managerProcess) rssMiB(t *testing.T) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", m.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			kb, _ := strconv.ParseFloat(strings.Fields(line)[1], 64)
			return kb / 1024
		}
	}
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
