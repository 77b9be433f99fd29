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
	"fmt"
	"math"
	"slices"

	"github.com/anishathalye/porcupine"
)

// An Unknown operation never returned: porcupine must let it take effect at any point after
// its Call, or never. Its Return is math.MaxInt64, so it stays a candidate for every position
// in the linearization. That is cheap when the history is linearizable, but when it is not,
// porcupine must rule out every combination of positions of the pending operations, which
// grows exponentially with their number. operations therefore gives an Unknown operation the
// earliest Return that changes no verdict:
//
//   - An operation that has no effect whatever its outcome (a read, a release, an acquire or
//     stamp whose token is unknown) can be placed anywhere: it returns when it was called.
//   - A write no read observed (no read of its object returned its value and token) can be
//     taken as having no effect: an object's token is never above the issued token, so its
//     only trace is its value, and no read saw it. It returns when it was called (the model
//     still lets it take effect there, which changes nothing).
//   - A write that a read observed, and that is the only write of that value and token to
//     that object, took effect before that read returned: it returns by the earliest such
//     read's Return.
//   - Likewise a grant or stamp of a token that no other grant or stamp issued took effect
//     before the first operation that used the token (an accepted write presenting it, or a
//     read returning it) returned, and no effect is needed if no operation used it.
//
// Only Unknown operations that are observed but ambiguous (the same value and token written
// twice, the same token granted twice) keep Return = math.MaxInt64; and on a semaphore, every
// unobserved Unknown write: its record can lower the object's token (holders of different
// permits write in any order), which a later write of an ended permit may need, so it may take
// effect any time after its call. (Grants, stamps and releases of a semaphore only end permits
// and raise the issued token when they take effect: having no effect is never less legal.) TestAgainstBruteForce
// checks these rules against an exhaustive search that gives every Unknown operation an
// infinite Return.

// anyTime is the note of an Unknown operation checked with an infinite Return.
const anyTime = "outcome unknown: may take effect any time after its call, or never"

type valueKey struct {
	object, value string
	token         uint64
}

type tokenKey struct {
	lock  string
	token uint64
}

// bounds computes the Return porcupine sees for each operation, and for each Unknown one a
// note on how it is checked.
func bounds(history []Op) (returns []int64, notes []string) {
	observed := map[valueKey]int{} // the first-returning OK read of each (object, value, token)
	writes := map[valueKey]int{}   // how many writes may have written each
	used := map[tokenKey]int{}     // the first-returning accepted write or read of each token
	grants := map[tokenKey]int{}   // how many grants or stamps may have issued each token
	first := func(m map[valueKey]int, k valueKey, i int) {
		if j, ok := m[k]; !ok || history[i].Return < history[j].Return {
			m[k] = i
		}
	}
	firstUse := func(k tokenKey, i int) {
		if j, ok := used[k]; !ok || history[i].Return < history[j].Return {
			used[k] = i
		}
	}
	for i, op := range history {
		switch {
		case op.Kind == Read && op.Outcome == OK:
			first(observed, valueKey{op.Object, op.Value, op.ReadToken}, i)
			firstUse(tokenKey{op.Lock, op.ReadToken}, i)
		case op.Kind == Write && op.Outcome == OK:
			writes[valueKey{op.Object, op.Value, op.Token}]++
			firstUse(tokenKey{op.Lock, op.Token}, i)
		case op.Kind == Write && op.Outcome == Unknown:
			writes[valueKey{op.Object, op.Value, op.Token}]++
		case (op.Kind == Acquire || op.Kind == Stamp) && (op.Outcome == OK || op.Outcome == Unknown):
			grants[tokenKey{op.Lock, op.Token}]++
		}
	}
	returns = make([]int64, len(history))
	notes = make([]string, len(history))
	for i, op := range history {
		if op.Outcome != Unknown {
			returns[i] = op.Return
			continue
		}
		// By default, an Unknown op is shown until its recorded Return, if any.
		noEffect := max(op.Call, op.Return)
		switch {
		case op.Kind == Write:
			k := valueKey{op.Object, op.Value, op.Token}
			j, seen := observed[k]
			switch {
			case !seen && op.Permits > 1:
				returns[i], notes[i] = math.MaxInt64, anyTime
			case !seen:
				returns[i], notes[i] = noEffect, "outcome unknown: no read observed it, so it is checked as having no effect"
			case writes[k] == 1:
				returns[i] = max(op.Call, history[j].Return)
				notes[i] = fmt.Sprintf("outcome unknown: took effect before the read history[%d] returned", j)
			default:
				returns[i], notes[i] = math.MaxInt64, anyTime
			}
		case (op.Kind == Acquire || op.Kind == Stamp) && op.Token > 0:
			k := tokenKey{op.Lock, op.Token}
			j, seen := used[k]
			switch {
			case !seen:
				returns[i], notes[i] = noEffect, "outcome unknown: no operation used its token, so it is checked as having no effect"
			case grants[k] == 1:
				returns[i] = max(op.Call, history[j].Return)
				notes[i] = fmt.Sprintf("outcome unknown: took effect before history[%d], which used its token, returned", j)
			default:
				returns[i], notes[i] = math.MaxInt64, anyTime
			}
		default:
			returns[i], notes[i] = noEffect, "outcome unknown: no effect either way"
		}
	}
	return returns, notes
}

// operations turns a history into porcupine operations, bounding Unknown ops as bounds says.
// Clients get rows in the visualization; ids outside [0, 1024) are renumbered by rank.
func operations(history []Op) []porcupine.Operation {
	renumber := false
	for _, op := range history {
		if op.Client < 0 || op.Client >= 1024 {
			renumber = true
		}
	}
	row := map[int]int{}
	if renumber {
		var clients []int
		for _, op := range history {
			if _, ok := row[op.Client]; !ok {
				row[op.Client] = 0
				clients = append(clients, op.Client)
			}
		}
		slices.Sort(clients)
		for i, c := range clients {
			row[c] = i
		}
	}
	returns, notes := bounds(history)
	presented := map[tokenKey]bool{} // semaphore tokens some write presents
	for _, op := range history {
		if op.Kind == Write && op.Permits > 1 {
			presented[tokenKey{op.Lock, op.Token}] = true
		}
	}
	ops := make([]porcupine.Operation, len(history))
	for i, op := range history {
		op.written = presented[tokenKey{op.Lock, op.Token}]
		client := op.Client
		if renumber {
			client = row[op.Client]
		}
		ops[i] = porcupine.Operation{
			ClientId: client,
			Input:    op,
			Call:     op.Call,
			Output:   op.Outcome,
			Return:   returns[i],
			Metadata: metadata{index: i, note: op.Note, unknown: notes[i]},
		}
	}
	return ops
}
