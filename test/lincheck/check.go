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

package lincheck

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// ErrNotLinearizable is wrapped by Check's error when a partition has no linearization.
var ErrNotLinearizable = errors.New("history is not linearizable")

// ErrTimedOut is wrapped by Check's error when the check did not finish within its timeout.
// The history may be linearizable or not.
var ErrTimedOut = errors.New("linearizability check timed out")

// maxCandidates bounds the operations a Violation lists.
const maxCandidates = 8

// Result is the outcome of Check.
type Result struct {
	// Linearizable is true when every partition has a linearization.
	Linearizable bool
	// Partitions is the number of locks in the history, Ops its number of operations.
	Partitions int
	Ops        int
	// Info is porcupine's record of the (partial) linearizations, for SaveVisualization.
	Info porcupine.LinearizationInfo
	// TimedOut is true when the check hit its timeout before finishing.
	TimedOut bool
	// Violations describes the partitions that are not linearizable, sorted by lock.
	Violations []Violation
}

// Violation describes one lock whose operations cannot be linearized.
type Violation struct {
	Lock string
	// Ops is the number of operations on the lock; Linearized the length of the longest
	// linearizable prefix porcupine found.
	Ops, Linearized int
	// State describes the model state after that prefix (a set of states: several when
	// Unknown operations leave it open).
	State string
	// Stuck are the operations not in that prefix that were candidates to come next (called
	// before the earliest return among the rest); none of them is legal there.
	Stuck []Op
	// MaybeUnfinished is set when the check also timed out: this partition's search may have
	// been cut short rather than exhausted.
	MaybeUnfinished bool
}

func (v Violation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "lock %q: no linearization of its %d ops; the longest linearizable prefix has %d, leaving the state %s",
		v.Lock, v.Ops, v.Linearized, v.State)
	if len(v.Stuck) > 0 {
		b.WriteString("; none of these can come next:")
		for _, op := range v.Stuck {
			fmt.Fprintf(&b, "\n\t%s", Describe(op))
			if op.Note != "" {
				fmt.Fprintf(&b, " [%s]", op.Note)
			}
		}
	}
	if v.MaybeUnfinished {
		b.WriteString("\n\t(the check also timed out: this partition may be unfinished rather than illegal)")
	}
	return b.String()
}

// Check checks a history for linearizability, one partition per Lock. It returns a nil error
// if every partition is linearizable. Otherwise the error describes the first violating
// partition (by lock name) and wraps ErrNotLinearizable, or wraps ErrTimedOut if the check
// did not finish within timeout (0 means no timeout). A malformed history (unknown kind or
// outcome, missing lock or object, Return before Call, an object under two locks) is an error
// wrapping neither.
func Check(history []Op, timeout time.Duration) (Result, error) {
	if err := validate(history); err != nil {
		return Result{}, fmt.Errorf("lincheck: invalid history: %w", err)
	}
	ops := operations(history)
	parts := partitionByLock(ops)
	res := Result{Partitions: len(parts), Ops: len(history)}
	start := time.Now()
	verdict, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
	elapsed := time.Since(start)
	res.Info = info
	switch verdict {
	case porcupine.Ok:
		res.Linearizable = true
		return res, nil
	case porcupine.Unknown:
		res.TimedOut = true
		return res, fmt.Errorf("lincheck: %w after %v (%d ops, %d locks)", ErrTimedOut, elapsed.Round(time.Millisecond),
			res.Ops, res.Partitions)
	}
	// Illegal. Porcupine finishes every partition when it computes the info, unless the
	// timeout cancelled the rest of the search.
	res.TimedOut = timeout > 0 && elapsed >= timeout
	partials := info.PartialLinearizationsOperations()
	for p, part := range parts {
		var longest []porcupine.Operation
		for _, l := range partials[p] {
			if len(l) > len(longest) {
				longest = l
			}
		}
		if len(longest) == len(part) {
			continue
		}
		res.Violations = append(res.Violations, violation(part, longest, res.TimedOut))
	}
	if len(res.Violations) == 0 { // cannot happen: porcupine found an illegal partition
		return res, fmt.Errorf("lincheck: %w (porcupine gave no partial linearization)", ErrNotLinearizable)
	}
	more := ""
	if n := len(res.Violations) - 1; n > 0 {
		more = fmt.Sprintf(" (and %d more locks)", n)
	}
	return res, fmt.Errorf("lincheck: %w: %s%s", ErrNotLinearizable, res.Violations[0], more)
}

// violation describes partition part, whose longest linearizable prefix is longest.
func violation(part, longest []porcupine.Operation, maybeUnfinished bool) Violation {
	v := Violation{Lock: part[0].Input.(Op).Lock, Ops: len(part), Linearized: len(longest), MaybeUnfinished: maybeUnfinished}
	st := model.Init()
	done := map[int]bool{}
	for _, op := range longest {
		_, st = model.Step(st, op.Input, op.Output)
		done[op.Metadata.(metadata).index] = true
	}
	v.State = model.DescribeState(st)
	var rest []porcupine.Operation
	earliest := int64(math.MaxInt64)
	for _, op := range part {
		if !done[op.Metadata.(metadata).index] {
			rest = append(rest, op)
			earliest = min(earliest, op.Return)
		}
	}
	slices.SortStableFunc(rest, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
	for _, op := range rest {
		if op.Call <= earliest && len(v.Stuck) < maxCandidates {
			v.Stuck = append(v.Stuck, op.Input.(Op))
		}
	}
	return v
}

// SaveVisualization writes porcupine's HTML visualization of a checked history to path.
func SaveVisualization(res Result, path string) error {
	return porcupine.VisualizePath(model, res.Info, path)
}
