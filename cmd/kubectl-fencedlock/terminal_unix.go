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
	"os"
	"os/signal"
	"syscall"
	"unsafe"
)

// foregroundTerminal returns run's controlling terminal if run's process group is its foreground
// group (run was started by an interactive shell), else nil.
func foregroundTerminal() *os.File {
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return nil // no controlling terminal
	}
	var pgrp int32
	if err := ioctl(tty, syscall.TIOCGPGRP, &pgrp); err != nil || int(pgrp) != syscall.Getpgrp() {
		_ = tty.Close()
		return nil
	}
	return tty
}

// reclaimTerminal makes run's process group the terminal's foreground group again once the
// command, which had it, has exited. A background group doing so is sent SIGTTOU, which would stop
// run: it is ignored meanwhile (no command is left to inherit that).
func reclaimTerminal(tty *os.File) {
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	pgrp := int32(syscall.Getpgrp())
	_ = ioctl(tty, syscall.TIOCSPGRP, &pgrp)
}

func ioctl(f *os.File, req uint, arg *int32) error {
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), uintptr(req), uintptr(unsafe.Pointer(arg))); errno != 0 {
		return errno
	}
	return nil
}
