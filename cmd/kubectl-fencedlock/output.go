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
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
)

// printFlags is -o of get and acquire: kubectl's formats, printed by cli-runtime's printers
// (json and yaml without managedFields, name, jsonpath=..., go-template=...), plus the formats
// the command prints itself (own; "" is its default).
type printFlags struct {
	*genericclioptions.PrintFlags
	own []string
}

func newPrintFlags(own ...string) *printFlags {
	return &printFlags{PrintFlags: genericclioptions.NewPrintFlags("").WithTypeSetter(scheme()), own: own}
}

// formats lists what -o accepts, for help and errors.
func (p *printFlags) formats() []string {
	var all []string
	for _, f := range p.own {
		if f != "" {
			all = append(all, f)
		}
	}
	return append(all, p.AllowedFormats()...)
}

// addFlags adds -o (and the printers' --template, --show-managed-fields, ...); defaultOutput says
// what an empty -o prints.
func (p *printFlags) addFlags(cmd *cobra.Command, defaultOutput string) {
	p.AddFlags(cmd)
	cmd.Flags().Lookup("output").Usage = fmt.Sprintf("Output format, one of (%s); empty: %s",
		strings.Join(p.formats(), ", "), defaultOutput)
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(p.formats(), cobra.ShellCompDirectiveNoFileComp))
}

// printer returns the printer for -o, or nil for a format the command prints itself. An unknown
// format is an error, returned before the command does anything.
func (p *printFlags) printer() (printers.ResourcePrinter, error) {
	if slices.Contains(p.own, *p.OutputFormat) {
		return nil, nil
	}
	pr, err := p.ToPrinter()
	if genericclioptions.IsNoCompatiblePrinterError(err) {
		return nil, fmt.Errorf("unknown output format %q: use one of %s", *p.OutputFormat, strings.Join(p.formats(), ", "))
	}
	return pr, err
}

// showLease shows a Lease's state in a FencedLock's status, as the manager writes it: the Lease is
// the source of truth, the status may be a moment behind on a busy lock. A semaphore's holders are
// status.holders (status.holder stays empty) and status.held counts them ("2/3").
func showLease(fl *locksv1alpha1.FencedLock, st lease.State) {
	fl.Status.Holder, fl.Status.Token, fl.Status.RenewTime, fl.Status.AcquireTime = st.Holder, "", nil, nil
	if st.Initialized() {
		fl.Status.Token = st.Token.String()
	}
	if st.Held() {
		fl.Status.AcquireTime, fl.Status.RenewTime = st.AcquireTime, st.RenewTime
	}
	if st.Transitions > 0 {
		fl.Status.LeaseTransitions = st.Transitions
	}
	fl.Status.Holders = nil
	ids := make([]string, 0, len(st.Permits))
	for _, p := range st.Permits {
		fl.Status.Holders = append(fl.Status.Holders, locksv1alpha1.Holder{Permit: int32(p.Number), Identity: p.Holder,
			Token: p.Token.String(), AcquireTime: p.AcquireTime, RenewTime: p.RenewTime})
		ids = append(ids, p.Holder)
	}
	fl.Status.HeldBy = locksv1alpha1.HeldBy(ids)
	fl.Status.Held = fmt.Sprintf("%d/%d", len(st.Permits), fl.Spec.PermitCount())
}
