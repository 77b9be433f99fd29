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
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// connCounter follows how many TCP connections a process holds open to one port of the loopback
// address, from /proc, and keeps the most it saw.
type connCounter struct {
	pid, port int
	stop      chan struct{}
	done      sync.WaitGroup
	most      int
}

// countConns samples the manager's connections to the API server every 50 ms until stopped.
func (b *bench) countConns() *connCounter {
	u, err := url.Parse(b.cs.CoreV1().RESTClient().Get().URL().String())
	if err != nil {
		b.t.Fatal(err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		b.t.Fatal(err)
	}
	c := &connCounter{pid: b.mgr.cmd.Process.Pid, port: port, stop: make(chan struct{})}
	c.done.Go(func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			c.most = max(c.most, established(c.pid, c.port))
			select {
			case <-c.stop:
				return
			case <-t.C:
			}
		}
	})
	return c
}

// Most stops the sampling and returns the most connections seen at once.
func (c *connCounter) Most() int {
	close(c.stop)
	c.done.Wait()
	return c.most
}

// established counts pid's established TCP (IPv4 or IPv6) connections to remote port port: the
// sockets among its file descriptors, looked up in its network namespace's tables.
func established(pid, port int) int {
	fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
	inodes := make(map[string]bool, len(fds))
	for _, fd := range fds {
		if l, err := os.Readlink(fd); err == nil {
			if ino, ok := strings.CutPrefix(l, "socket:["); ok {
				inodes[strings.TrimSuffix(ino, "]")] = true
			}
		}
	}
	n := 0
	for _, table := range []string{"tcp", "tcp6"} {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(raw), "\n")[1:] {
			// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "01" || !inodes[f[9]] {
				continue
			}
			_, rport, _ := strings.Cut(f[2], ":")
			if p, err := strconv.ParseInt(rport, 16, 32); err == nil && int(p) == port {
				n++
			}
		}
	}
	return n
}
