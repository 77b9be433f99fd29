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
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// checkResult is one line of check: an item verified, and how to fix it when it failed.
type checkResult struct {
	ok   bool
	what string // what was found (OK) or what is wrong (FAIL)
	fix  string // FAIL only
}

func pass(format string, args ...any) checkResult {
	return checkResult{ok: true, what: fmt.Sprintf(format, args...)}
}

func fail(fix, format string, args ...any) checkResult {
	return checkResult{what: fmt.Sprintf(format, args...), fix: fix}
}

func (r checkResult) print(w io.Writer) {
	if r.ok {
		fmt.Fprintf(w, "OK    %s\n", r.what)
		return
	}
	fmt.Fprintf(w, "FAIL  %s\n      fix: %s\n", r.what, r.fix)
}

// checker verifies an install; managerNS is where the manager runs ("": the webhooks' Service's).
type checker struct {
	cl        client.Client
	cs        kubernetes.Interface
	ns        string // where the end-to-end write is tried
	managerNS string
	now       func() time.Time
}

// run verifies every item, in the order a broken install is best mended: the server, the CRD,
// the webhooks, the policies, the manager, and a write the fence must refuse.
func (c *checker) run(ctx context.Context) []checkResult {
	out := []checkResult{c.serverVersion(), c.crd(ctx)}
	webhooks, managerNS := c.webhooks(ctx)
	out = append(out, webhooks...)
	out = append(out, c.policies(ctx)...)
	if c.managerNS != "" {
		managerNS = c.managerNS
	}
	return append(out, c.leader(ctx, managerNS), c.fence(ctx))
}

func newCheckCommand(o *options) *cobra.Command {
	var wait time.Duration
	var managerNS string
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Verify the install: server version, CRD, webhooks and certificates, policies, leader, the fence",
		Long: `Verify that fencedlock is installed and working, one line per item, OK or FAIL with a fix:
the server is recent enough, the FencedLock CRD is established, the webhook configurations exist
with CA certificates that parse and have not expired, every admission policy of the install is
present and bound, the manager has a leader, and a server-side dry-run write that the fence must
refuse is refused by it. Exits 1 if anything failed.`,
		Example: `  kubectl fencedlock check

  # In a script right after installing: retry until everything is OK, for at most 2 minutes
  kubectl fencedlock check --wait 2m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ns, err := o.namespace()
			if err != nil {
				return err
			}
			cl, cs, err := o.clients()
			if err != nil {
				return err
			}
			c := &checker{cl: cl, cs: cs, ns: ns, managerNS: managerNS, now: time.Now}
			return checkUntil(cmd.Context(), o, c, wait)
		},
	}
	cmd.Flags().DurationVar(&wait, "wait", 0, "Retry until every item is OK, for at most this long (0: check once)")
	cmd.Flags().StringVar(&managerNS, "manager-namespace", "", "The manager's namespace (default: the webhooks' Service's, else fencedlock-system)")
	return cmd
}

// checkRetry is how often check --wait checks again.
const checkRetry = 2 * time.Second

// checkUntil checks, again every checkRetry while something fails and wait allows, and prints
// the last round.
func checkUntil(ctx context.Context, o *options, c *checker, wait time.Duration) error {
	deadline := c.now().Add(wait)
	for {
		results := c.run(ctx)
		failed := 0
		for _, r := range results {
			if !r.ok {
				failed++
			}
		}
		if failed == 0 || !c.now().Add(checkRetry).Before(deadline) {
			for _, r := range results {
				r.print(o.streams.Out)
			}
			if failed > 0 {
				return &exitError{code: exitFailure, err: fmt.Errorf("%d of %d checks failed", failed, len(results))}
			}
			return nil
		}
		for _, r := range results {
			if !r.ok {
				fmt.Fprintf(o.streams.ErrOut, "not ready yet: %s\n", r.what)
				break
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(checkRetry):
		}
	}
}
