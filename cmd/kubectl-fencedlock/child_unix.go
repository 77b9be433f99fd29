//go:build linux || darwin

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
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// child is the command run holds the lock for. It leads a process group of its own, so that a
// terminal's Ctrl-C does not reach it besides the copy run forwards, and so that run can signal
// everything it started.
type child struct {
	pid    int
	exited chan struct{} // closed once the command has exited and been reaped
	status childStatus   // how it ended, once exited is closed
}

func startChild(path string, argv, env []string, streams genericiooptions.IOStreams) (*child, error) {
	sys := &syscall.SysProcAttr{Setpgid: true}
	// In an interactive shell run's group has the terminal; the command's group gets it instead, so
	// that the command can read it (a background group would be stopped by SIGTTIN) and receives
	// the terminal's signals itself, once.
	tty := foregroundTerminal()
	if tty != nil {
		sys.Foreground, sys.Ctty = true, int(tty.Fd())
	}
	setParentDeathSignal(sys)
	files := []uintptr{fileOf(streams.In, os.Stdin).Fd(), fileOf(streams.Out, os.Stdout).Fd(), fileOf(streams.ErrOut, os.Stderr).Fd()}

	c := &child{exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// The parent-death signal is sent when the thread that forked the child ends, not the
		// process: this goroutine keeps its thread until the child has been reaped.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{Env: env, Files: files, Sys: sys})
		if err != nil {
			if tty != nil {
				_ = tty.Close()
			}
			started <- err
			return
		}
		c.pid = pid
		started <- nil
		c.status = c.wait(tty != nil, streams)
		if tty != nil {
			reclaimTerminal(tty)
			_ = tty.Close()
		}
		close(c.exited)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return c, nil
}

// wait reaps the command. In a terminal, Ctrl-Z stops it; it is resumed at once, since it would
// keep the lock (run goes on renewing) for as long as it stayed stopped.
func (c *child) wait(inTerminal bool, streams genericiooptions.IOStreams) childStatus {
	for {
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(c.pid, &ws, syscall.WUNTRACED, nil); err != nil {
			if err == syscall.EINTR {
				continue
			}
			fmt.Fprintf(streams.ErrOut, "waiting for the command: %v\n", err)
			return childStatus{code: exitRunFailure}
		}
		switch {
		case ws.Exited():
			return childStatus{code: ws.ExitStatus()}
		case ws.Signaled():
			return childStatus{signal: ws.Signal()}
		case ws.Stopped() && inTerminal && ws.StopSignal() == syscall.SIGTSTP:
			fmt.Fprintln(streams.ErrOut, "kubectl fencedlock: not suspending the command, which holds a lock (Ctrl-C stops it)")
			_ = syscall.Kill(-c.pid, syscall.SIGCONT)
		}
	}
}

// signal sends sig to the command's process group, unless the command has exited.
func (c *child) signal(sig syscall.Signal) {
	select {
	case <-c.exited:
	default:
		_ = syscall.Kill(-c.pid, sig)
	}
}

// dieOf ends run with sig, as the default action of sig would have.
func dieOf(sig syscall.Signal) {
	signal.Reset(sig)
	_ = syscall.Kill(os.Getpid(), sig)
	time.Sleep(time.Second) // delivery is asynchronous; should it be ignored, exit with the code
}

func fileOf(stream any, fallback *os.File) *os.File {
	if f, ok := stream.(*os.File); ok {
		return f
	}
	return fallback
}
