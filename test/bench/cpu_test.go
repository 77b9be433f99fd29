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

package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"
)

// Where a measurement's CPU goes, by process: on a machine of few cores the API server, etcd, the
// manager and the benchmark's clients share them, so a cost moved off one process's path still
// slows the others. Read from /proc (utime + stime of every thread, in clock ticks).

// cpuParts are the processes measured, in the order rows name them.
var cpuParts = []string{"kube-apiserver", "etcd", "manager", "bench"}

// clockTick is the kernel's USER_HZ, which /proc/<pid>/stat counts in: 100 on every Linux
// architecture Go supports.
const clockTick = 10 * time.Millisecond

// cpuSample is the CPU time used so far by each of cpuParts.
type cpuSample map[string]time.Duration

// sampleCPU reads the CPU time of this process, the manager (pid) and the control plane this
// process started (its children named kube-apiserver and etcd).
func sampleCPU(manager int) cpuSample {
	s := cpuSample{"bench": procCPU(os.Getpid()), "manager": procCPU(manager)}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, _ := strconv.Atoi(filepath.Base(d))
		comm, ppid, cpu, ok := procStat(pid)
		if !ok || ppid != os.Getpid() {
			continue
		}
		if comm == "kube-apiserver" || comm == "etcd" {
			s[comm] += cpu
		}
	}
	return s
}

// perOp is the CPU each process used between s and later, per one of n operations.
func (s cpuSample) perOp(later cpuSample, n int) string {
	parts := make([]string, 0, len(cpuParts))
	var total time.Duration
	for _, p := range cpuParts {
		d := (later[p] - s[p]) / time.Duration(max(n, 1))
		total += d
		parts = append(parts, fmt.Sprintf("%s %s", p, ms(d)))
	}
	return fmt.Sprintf("%s in all: %s", ms(total), strings.Join(parts, ", "))
}

func procCPU(pid int) time.Duration {
	_, _, cpu, _ := procStat(pid)
	return cpu
}

// procStat reads a process's command name, parent and CPU time (utime + stime) from
// /proc/<pid>/stat, whose second field, the name in parentheses, may itself hold spaces.
func procStat(pid int) (comm string, ppid int, cpu time.Duration, ok bool) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0, 0, false
	}
	open, closing := strings.IndexByte(string(raw), '('), strings.LastIndexByte(string(raw), ')')
	if open < 0 || closing < open {
		return "", 0, 0, false
	}
	// After the name: state(3) ppid(4) ... utime(14) stime(15), counted from field 3.
	f := strings.Fields(string(raw[closing+1:]))
	if len(f) < 13 {
		return "", 0, 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return string(raw[open+1 : closing]), ppid, time.Duration(utime+stime) * clockTick, true
}

// profile, when BENCH_PROFILE names a directory, takes CPU profiles of the API server, the
// manager and this process (the clients) for the BENCH_PROFILE_SECONDS (default 4) from now, in
// the background, into <dir>/<section>-kube-apiserver.pprof, <dir>/<section>-manager.pprof and
// <dir>/<section>-bench.pprof (go tool pprof reads them).
func (b *bench) profile(section string) {
	dir := os.Getenv("BENCH_PROFILE")
	if dir == "" {
		return
	}
	n := envInt("BENCH_PROFILE_SECONDS", 4)
	secs := strconv.Itoa(n)
	save := func(name string, get func(context.Context) ([]byte, error)) {
		defer b.profiles.Done()
		// Not b.ctx: a profile that outlives the test ends, and the control plane stops after it
		// (b.profiles), rather than with a request in flight, which can leave it running.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(b.ctx), time.Duration(n)*time.Second+time.Minute)
		defer cancel()
		raw, err := get(ctx)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, section+"-"+name+".pprof"), raw, 0o644)
		}
		if err != nil {
			fmt.Printf("profile of %s (%s): %v\n", name, section, err)
		}
	}
	b.profiles.Add(3)
	go save("bench", func(ctx context.Context) ([]byte, error) {
		var buf bytes.Buffer
		if err := pprof.StartCPUProfile(&buf); err != nil {
			return nil, err
		}
		select {
		case <-time.After(time.Duration(n) * time.Second):
		case <-ctx.Done():
		}
		pprof.StopCPUProfile()
		return buf.Bytes(), nil
	})
	go save("kube-apiserver", func(ctx context.Context) ([]byte, error) {
		return b.cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", secs).DoRaw(ctx)
	})
	go save("manager", func(ctx context.Context) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.mgr.pprof+"/profile?seconds="+secs, nil)
		if err != nil {
			return nil, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer func() { _ = resp.Body.Close() }()
		return io.ReadAll(resp.Body)
	})
}
