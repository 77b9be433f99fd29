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
	"fmt"
	"io"
	"strconv"
	"syscall"

	"github.com/spf13/cobra"
)

// Exit codes of the plugin itself. run passes its command's exit status through, so its own codes
// follow timeout(1) and the shells (125 for its own failure, 126 and 127 for a command it could
// not execute), and the two lock outcomes sit right below them. --conflict-exit-code and
// --lost-exit-code move those two, like flock(1)'s -E, for commands whose statuses collide.
const (
	exitFailure      = 1   // every subcommand but run: an error
	exitLost         = 123 // run: the lock was lost while the command ran
	exitNotAcquired  = 124 // acquire, run: the lock was held (--no-wait) or still held at --timeout
	exitRunFailure   = 125 // run: it failed itself (flags, unknown lock, API errors)
	exitCannotInvoke = 126 // run: the command exists but could not be executed
	exitNotFound     = 127 // run: the command was not found
)

// exitCodesHelp documents the codes in "run --help" and mirrors docs/cli.md.
const exitCodesHelp = `Exit status:
  the command's  its own exit status, passed through; 128+N if it was killed by
                 signal N (for SIGINT, SIGTERM and SIGHUP run then dies of the
                 same signal, after releasing, as a shell expects)
  123            the lock was lost while the command ran (--lost-exit-code)
  124            the lock was not acquired: it was held and --no-wait was given,
                 or it was still held when --timeout ran out (--conflict-exit-code)
  125            run itself failed: bad flags, no such FencedLock, API errors
  126            the command was found but could not be executed
  127            the command was not found
A command that exits with 123 or 124 itself is told apart by moving those two.`

// failureExitCode, an annotation of a command, is the exit code of its plain errors (default 1).
const failureExitCode = "fencedlock.io/failure-exit-code"

// exitError ends the plugin with code, printing err first unless it is nil. A nonzero reraise
// makes the plugin die of that signal instead, after every deferred cleanup ran, so that a
// calling shell sees its command was interrupted (and stops a loop on Ctrl-C).
type exitError struct {
	code    int
	err     error
	reraise syscall.Signal
}

func (e *exitError) Error() string {
	if e.err != nil {
		return e.err.Error()
	}
	return fmt.Sprintf("exit status %d", e.code)
}

func (e *exitError) Unwrap() error { return e.err }

// exitCode prints err (if any) and returns the code to exit with, or dies of the signal an
// exitError asks to re-raise. cmd is the command that ran, or nil.
func exitCode(w io.Writer, cmd *cobra.Command, err error) int {
	if err == nil {
		return 0
	}
	if e, ok := errors.AsType[*exitError](err); ok {
		if e.err != nil {
			fmt.Fprintln(w, "error:", e.err)
		}
		if e.reraise != 0 {
			dieOf(e.reraise)
		}
		return e.code
	}
	fmt.Fprintln(w, "error:", err)
	if cmd != nil {
		if code, err := strconv.Atoi(cmd.Annotations[failureExitCode]); err == nil {
			return code
		}
	}
	return exitFailure
}
