//go:build !linux && !darwin

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
	"os/exec"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// child is the command run holds the lock for. Without Unix process groups, signals go to the
// command alone, and it outlives a run that is killed.
type child struct {
	cmd    *exec.Cmd
	exited chan struct{}
	status childStatus
}

func startChild(path string, argv, env []string, streams genericiooptions.IOStreams) (*child, error) {
	cmd := &exec.Cmd{Path: path, Args: argv, Env: env, Stdin: streams.In, Stdout: streams.Out, Stderr: streams.ErrOut}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		c.status = childStatus{code: cmd.ProcessState.ExitCode()}
		close(c.exited)
	}()
	return c, nil
}

func (c *child) signal(sig syscall.Signal) {
	select {
	case <-c.exited:
	default:
		if sig == syscall.SIGKILL {
			_ = c.cmd.Process.Kill()
			return
		}
		_ = c.cmd.Process.Signal(sig)
	}
}

// dieOf does nothing here: run exits with 128+N instead.
func dieOf(syscall.Signal) {}
