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

package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
)

// serverUser runs PostgreSQL when the tests run as root, which PostgreSQL refuses to run as. The
// Debian package creates it; "nobody" is the fallback.
var serverUsers = []string{"postgres", "nobody"}

// startPostgres starts a throwaway PostgreSQL server for tb, listening on 127.0.0.1 at a free port
// and on a unix socket in its own temporary directory, and returns a connection pool to its
// "postgres" database. The server is a child of the test process (it dies with it) and is stopped,
// and its directory removed, in tb.Cleanup. Durability is off (fsync, synchronous_commit,
// full_page_writes): the data is thrown away anyway.
func startPostgres(tb testing.TB) *sql.DB {
	tb.Helper()
	bin := postgresBin(tb)
	cred := serverCredential(tb)

	dir, err := os.MkdirTemp("", "sqlfence-pg-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			tb.Fatal(err)
		}
	}
	data := filepath.Join(dir, "data")

	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	initdb.Dir = dir
	initdb.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		tb.Fatalf("initdb: %v\n%s", err, out)
	}

	// The free port is found by binding :0 and closing; another process may take it before the
	// server binds, hence the retries.
	for attempt := 1; ; attempt++ {
		db, err := runPostgres(tb, bin, dir, data, cred, freePort(tb))
		if err == nil {
			return db
		}
		if !errors.Is(err, errPortTaken) || attempt == 3 {
			tb.Fatal(err)
		}
	}
}

var errPortTaken = errors.New("port taken")

func runPostgres(tb testing.TB, bin, dir, data string, cred *syscall.Credential, port int) (*sql.DB, error) {
	tb.Helper()
	logPath := filepath.Join(dir, fmt.Sprintf("postgres-%d.log", port))
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer func() { _ = logFile.Close() }() // the child has its own descriptor
	readLog := func() string {
		b, _ := os.ReadFile(logPath)
		return string(b)
	}

	cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", data,
		"-h", "127.0.0.1", "-p", strconv.Itoa(port), "-k", dir,
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Pdeathsig: a test binary killed by a timeout does not leave the server behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting postgres: %w", err)
	}
	exited := make(chan struct{}) // closed once waitErr is set
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()

	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGINT) // fast shutdown
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}

	dsn := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		stop()
		return nil, err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err = db.PingContext(ctx)
		cancel()
		if err == nil {
			break
		}
		select {
		case <-exited:
			_ = db.Close()
			log := readLog()
			if strings.Contains(log, "could not bind") || strings.Contains(log, "already in use") {
				return nil, fmt.Errorf("%w: %d: %s", errPortTaken, port, log)
			}
			return nil, fmt.Errorf("postgres exited before accepting connections (%v):\n%s", waitErr, log)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = db.Close()
			stop()
			return nil, fmt.Errorf("postgres did not accept connections within 60s (last error: %v):\n%s",
				err, readLog())
		}
	}
	tb.Cleanup(func() {
		_ = db.Close()
		stop()
		if tb.Failed() {
			tb.Logf("postgres log:\n%s", readLog())
		}
	})
	return db, nil
}

// postgresBin finds the directory of initdb and postgres: $PG_BIN, else the newest
// /usr/lib/postgresql/*/bin (Debian), else $PATH. Missing binaries fail the test: CI installs
// them, and a skipped fence test would pass for nothing.
func postgresBin(tb testing.TB) string {
	tb.Helper()
	var dirs []string
	if d := os.Getenv("PG_BIN"); d != "" {
		dirs = append(dirs, d)
	}
	debian, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(debian, func(a, b string) int { return pgVersion(b) - pgVersion(a) })
	dirs = append(dirs, debian...)
	if p, err := exec.LookPath("initdb"); err == nil {
		dirs = append(dirs, filepath.Dir(p))
	}
	for _, d := range dirs {
		if isExecutable(filepath.Join(d, "initdb")) && isExecutable(filepath.Join(d, "postgres")) {
			return d
		}
	}
	tb.Fatal("PostgreSQL server binaries (initdb, postgres) not found in $PG_BIN, /usr/lib/postgresql/*/bin " +
		"or $PATH; install them with `apt-get install postgresql` (Debian/Ubuntu), or set PG_BIN " +
		"to the directory holding them")
	return ""
}

func pgVersion(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// serverCredential returns the unprivileged user to run PostgreSQL as when running as root, nil
// otherwise.
func serverCredential(tb testing.TB) *syscall.Credential {
	tb.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	for _, name := range serverUsers {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil || uid == 0 {
			continue
		}
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	tb.Fatalf("running as root, and none of the users %v exists to run PostgreSQL as "+
		"(it refuses to run as root); `apt-get install postgresql` creates the postgres user", serverUsers)
	return nil
}

func freePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}
