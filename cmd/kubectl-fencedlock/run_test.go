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
	"slices"
	"syscall"
	"testing"

	"github.com/spf13/cobra"
)

func TestWithEnv(t *testing.T) {
	got := withEnv([]string{"A=1", "FENCING_TOKEN=5", "B=2", holdTokenEnv + "=9", "FENCING_TOKEN=6"},
		"FENCING_TOKEN=7", "FENCEDLOCK_LOCK=l")
	want := []string{"A=1", "B=2", "FENCING_TOKEN=7", "FENCEDLOCK_LOCK=l"}
	if !slices.Equal(got, want) {
		t.Errorf("withEnv = %q, want %q: an outer lock's token must not reach the command", got, want)
	}
}

func TestExitCode(t *testing.T) {
	run := &cobra.Command{Use: "run", Annotations: map[string]string{failureExitCode: "125"}}
	get := &cobra.Command{Use: "get"}
	for _, tc := range []struct {
		cmd  *cobra.Command
		err  error
		want int
	}{
		{get, nil, 0},
		{get, errors.New("boom"), exitFailure},
		{run, errors.New("no such lock"), exitRunFailure},
		{nil, errors.New("unknown command"), exitFailure},
		{run, &exitError{code: 7}, 7},
		{run, fmt.Errorf("wrapped: %w", &exitError{code: exitNotAcquired, err: errors.New("held")}), exitNotAcquired},
	} {
		if got := exitCode(io.Discard, tc.cmd, tc.err); got != tc.want {
			t.Errorf("exitCode(%v, %v) = %d, want %d", tc.cmd, tc.err, got, tc.want)
		}
	}
}

func TestReraisable(t *testing.T) {
	for sig, want := range map[syscall.Signal]syscall.Signal{
		syscall.SIGINT: syscall.SIGINT, syscall.SIGTERM: syscall.SIGTERM, syscall.SIGHUP: syscall.SIGHUP,
		syscall.SIGQUIT: 0, syscall.SIGKILL: 0, syscall.SIGSEGV: 0,
	} {
		if got := reraisable(sig); got != want {
			t.Errorf("reraisable(%v) = %v, want %v", sig, got, want)
		}
	}
}
