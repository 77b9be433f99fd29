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
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/fencedlock/fencedlock/pkg/lock"
	"github.com/fencedlock/fencedlock/pkg/token"
)

// "acquire --hold" starts a renewer: this binary again, with the same arguments, detached from the
// terminal and from the caller's pipes, and with the grant in its environment. It keeps the grant
// renewed until release stops it or the grant is lost, so that a script can acquire, work past
// the lease duration, and release.
const (
	holdTokenEnv    = "FENCEDLOCK_HOLD_TOKEN"
	holdIdentityEnv = "FENCEDLOCK_HOLD_IDENTITY"
)

// holdState is what a renewer records, for release (which stops it) and for acquire --hold (which
// will not start a second one): <holdDir>/<namespace>_<lock>_<API server hash>.json, which the
// renewer keeps locked (flock) while it runs, so that a stale file is never taken for a renewer.
type holdState struct {
	Pid       int       `json:"pid"`
	Server    string    `json:"server"`
	Namespace string    `json:"namespace"`
	Lock      string    `json:"lock"`
	Identity  string    `json:"identity"`
	Token     string    `json:"token"`
	Started   time.Time `json:"started"`

	path  string
	alive bool // a renewer runs
}

// holdDir is per user and, with $XDG_RUNTIME_DIR, cleared at logout and reboot, when renewers end.
func holdDir() (string, error) {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "fencedlock"), nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "fencedlock", "holds"), nil
}

// newHold describes a hold of lock name in the current namespace of the current API server.
func newHold(o *options, name string) (*holdState, error) {
	ns, err := o.namespace()
	if err != nil {
		return nil, err
	}
	cfg, err := o.flags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	dir, err := holdDir()
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(cfg.Host))
	return &holdState{Server: cfg.Host, Namespace: ns, Lock: name,
		path: filepath.Join(dir, fmt.Sprintf("%s_%s_%x.json", ns, name, sum[:4]))}, nil
}

// loadHold returns the hold of lock name recorded here, or nil if there is none.
func loadHold(o *options, name string) (*holdState, error) {
	h, err := newHold(o, name)
	if err != nil {
		return nil, nil // no state to look at; the command itself will report the cause
	}
	b, err := os.ReadFile(h.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err == nil {
		err = json.Unmarshal(b, h)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the state of acquire --hold (delete it if it is damaged): %w", err)
	}
	h.alive = renewerRunning(h.path)
	return h, nil
}

func (h *holdState) logPath() string { return strings.TrimSuffix(h.path, ".json") + ".log" }

// stop ends the renewer and waits until it has ended. It reports whether one ran.
func (h *holdState) stop() (bool, error) {
	if !h.alive {
		return false, nil
	}
	if err := signalRenewer(h.Pid, syscall.SIGTERM); err != nil {
		return false, err
	}
	for _, sig := range []syscall.Signal{0, syscall.SIGKILL} {
		if sig != 0 {
			_ = signalRenewer(h.Pid, sig)
		}
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
			if !renewerRunning(h.path) {
				if sig != 0 {
					return true, errors.New("it did not stop on SIGTERM and was killed")
				}
				return true, nil
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return true, errors.New("it did not stop on SIGTERM or SIGKILL")
}

// remove forgets the hold.
func (h *holdState) remove() {
	_ = os.Remove(h.path)
	_ = os.Remove(h.logPath())
}

// startHold starts the renewer of g and returns its pid once it has taken over the grant.
func startHold(o *options, name, identity string, g *lock.Grant) (int, error) {
	if !holdSupported {
		return 0, errors.New("--hold is not supported on this system")
	}
	h, err := newHold(o, name)
	if err != nil {
		return 0, err
	}
	if err := os.MkdirAll(filepath.Dir(h.path), 0o700); err != nil {
		return 0, err
	}
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	logFile, err := os.OpenFile(h.logPath(), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, err
	}
	defer func() { _ = logFile.Close() }()
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		return 0, err
	}
	defer func() { _ = devNull.Close() }()
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer func() { _ = readyR.Close() }()

	cmd := exec.Command(exe, os.Args[1:]...)
	cmd.Env = withEnv(os.Environ(), holdTokenEnv+"="+g.Token().String(), holdIdentityEnv+"="+identity)
	// No stdout or stderr of the caller: $(kubectl fencedlock acquire --hold) would wait for them.
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devNull, logFile, logFile
	cmd.ExtraFiles = []*os.File{readyW} // fd 3: "ready", or why not
	detach(cmd)
	err = cmd.Start()
	_ = readyW.Close()
	if err != nil {
		return 0, err
	}
	said := make(chan string, 1)
	go func() { b, _ := io.ReadAll(readyR); said <- strings.TrimSpace(string(b)) }()
	select {
	case msg := <-said:
		if msg == "ready" {
			pid := cmd.Process.Pid
			_ = cmd.Process.Release()
			return pid, nil
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if msg == "" {
			msg = "it exited; see " + h.logPath()
		}
		return 0, errors.New(strings.TrimPrefix(msg, "error: "))
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return 0, fmt.Errorf("it did not start within 30s; see %s", h.logPath())
	}
}

// runRenewer is the renewer: it attaches to the grant with token tok and renews it until SIGTERM
// (from release) or until the grant is lost. Its stderr is the hold's log file.
func runRenewer(o *options, name, tok string) error {
	ready := os.NewFile(3, "ready")
	defer func() { _ = ready.Close() }()
	fail := func(err error) error {
		fmt.Fprintf(ready, "error: %v\n", err)
		return err
	}
	logf := func(format string, args ...any) {
		fmt.Fprintf(o.streams.ErrOut, time.Now().Format(time.RFC3339)+" "+format+"\n", args...)
	}
	t, err := token.Parse(tok)
	if err != nil {
		return fail(err)
	}
	h, err := newHold(o, name)
	if err != nil {
		return fail(err)
	}
	h.Pid, h.Identity, h.Token, h.Started = os.Getpid(), os.Getenv(holdIdentityEnv), tok, time.Now()
	l, err := o.locker(name, h.Identity)
	if err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	g, err := l.Attach(ctx, t)
	cancel()
	if err != nil {
		return fail(err)
	}
	state, err := claimHold(h)
	if err != nil {
		return fail(err)
	}
	defer func() { _ = state.Close() }() // holds the lock on the state file while this runs

	keepAlive, err := g.KeepAlive(context.Background(), 0)
	if err != nil {
		return fail(err)
	}
	defer keepAlive.Stop()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	fmt.Fprintln(ready, "ready")
	_ = ready.Close()
	logf("renewing %s/%s for %s with token %s every %s", h.Namespace, name, h.Identity, tok, g.Duration()/3)
	select {
	case s := <-sigs:
		logf("stopped by %v", s) // release releases the grant itself
		return nil
	case <-g.Lost():
		logf("stopped: %v", g.Err())
		return g.Err()
	}
}

// claimHold creates and locks the state file of h and writes h to it.
func claimHold(h *holdState) (*os.File, error) {
	f, err := os.OpenFile(h.path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := lockExclusive(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("locking %s: %w", h.path, err)
	}
	b, err := json.Marshal(h)
	if err == nil {
		err = f.Truncate(0)
	}
	if err == nil {
		_, err = f.WriteAt(append(b, '\n'), 0)
	}
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}
