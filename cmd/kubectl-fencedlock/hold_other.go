//go:build !linux && !darwin

package main

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// holdSupported is false: acquire --hold needs flock(2) and sessions.
const holdSupported = false

var errNoHold = errors.New("--hold is not supported on this system")

func detach(*exec.Cmd)                        {}
func lockExclusive(*os.File) error            { return errNoHold }
func renewerRunning(string) bool              { return false }
func signalRenewer(int, syscall.Signal) error { return errNoHold }
