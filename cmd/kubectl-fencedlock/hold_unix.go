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
	"errors"
	"os"
	"os/exec"
	"syscall"
)

const holdSupported = true

// detach starts the renewer in a session of its own: no controlling terminal, and no signals
// from the caller's job control (Ctrl-C, a closing terminal).
func detach(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} }

// lockExclusive locks f for as long as it stays open in this process, or fails at once if another
// process has it locked.
func lockExclusive(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return errors.New("another renewer runs")
	}
	return err
}

// renewerRunning reports whether a renewer has the state file at path locked. The kernel drops
// the lock when the renewer ends, however it ends.
func renewerRunning(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer func() { _ = f.Close() }()
	return errors.Is(syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB), syscall.EWOULDBLOCK)
}

func signalRenewer(pid int, sig syscall.Signal) error { return syscall.Kill(pid, sig) }
