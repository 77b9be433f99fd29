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
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// Issue 46, point 8: flock(1)'s habits work as typed: -w, and bare seconds.
func TestTimeoutTakesFlockSeconds(t *testing.T) {
	for _, c := range []struct {
		args []string
		want time.Duration
	}{
		{[]string{"-w", "5"}, 5 * time.Second},
		{[]string{"--timeout", "0.5"}, 500 * time.Millisecond},
		{[]string{"--timeout", "30s"}, 30 * time.Second},
		{[]string{"-w", "2m"}, 2 * time.Minute},
		{nil, 0},
	} {
		var w waitOptions
		cmd := &cobra.Command{Use: "acquire"}
		w.addFlags(cmd)
		if err := cmd.ParseFlags(c.args); err != nil || w.timeout != c.want {
			t.Errorf("%v: timeout %s, %v; want %s", c.args, w.timeout, err, c.want)
		}
	}
	for _, bad := range []string{"five", "-3", "5x"} {
		var w waitOptions
		cmd := &cobra.Command{Use: "acquire"}
		w.addFlags(cmd)
		if err := cmd.ParseFlags([]string{"--timeout", bad}); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("--timeout %s: %v; want an error naming it", bad, err)
		}
	}
}
