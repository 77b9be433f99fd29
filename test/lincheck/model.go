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
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/anishathalye/porcupine"
)

// objState is one fenced register: the token and value of the last accepted write. An object
// that was never written is absent from state.objs.
type objState struct {
	name  string
	token uint64
	value string
}

// state is the state of one lock's partition. It is immutable: step returns new states and
// never modifies the one it is given (objs is copied on write).
type state struct {
	issued uint64     // highest token issued or stamped so far
	objs   []objState // sorted by name
	// A semaphore's permits: held now, in grant (token) order, and the tokens of the permits that
	// ended that some write presents (sorted).
	held  []permit
	ended []uint64
}

// permit is a held permit of a semaphore: its token, and whether some write presents it (its
// end must then be remembered).
type permit struct {
	token   uint64
	written bool
}

func (s state) object(name string) (objState, bool) {
	i, ok := slices.BinarySearchFunc(s.objs, name, func(o objState, n string) int { return cmp.Compare(o.name, n) })
	if !ok {
		return objState{}, false
	}
	return s.objs[i], true
}

func (s state) withIssued(t uint64) state {
	s.issued = t
	return s
}

// holds reports whether the semaphore holds a permit with token t.
func (s state) holds(t uint64) bool {
	return slices.ContainsFunc(s.held, func(p permit) bool { return p.token == t })
}

// granted returns the states after a grant of t on a semaphore of n permits: t is held, and if n
// were held already, one of them (any) ended then.
func (s state) granted(t uint64, written bool, n int) []any {
	g := s.withIssued(t)
	g.held = append(slices.Clip(s.held), permit{token: t, written: written})
	if len(s.held) < n {
		return []any{g}
	}
	out := make([]any, 0, len(s.held))
	for _, p := range s.held {
		out = append(out, g.withEnded(p.token))
	}
	return out
}

// withEnded returns s with the permit of token t ended (s itself if none is held with t).
func (s state) withEnded(t uint64) state {
	i := slices.IndexFunc(s.held, func(p permit) bool { return p.token == t })
	if i < 0 {
		return s
	}
	p := s.held[i]
	s.held = slices.Delete(slices.Clone(s.held), i, i+1)
	if p.written {
		j, _ := slices.BinarySearch(s.ended, t)
		s.ended = slices.Insert(slices.Clone(s.ended), j, t)
	}
	return s
}

// withAllEnded returns s with every permit ended (the Lease was recreated).
func (s state) withAllEnded() state {
	for len(s.held) > 0 {
		s = s.withEnded(s.held[0].token)
	}
	return s
}

func (s state) withObject(o objState) state {
	i, ok := slices.BinarySearchFunc(s.objs, o.name, func(x objState, n string) int { return cmp.Compare(x.name, n) })
	objs := make([]objState, 0, len(s.objs)+1)
	objs = append(objs, s.objs[:i]...)
	objs = append(objs, o)
	if ok {
		i++
	}
	objs = append(objs, s.objs[i:]...)
	s.objs = objs
	return s
}

func (s state) equal(o state) bool {
	return s.issued == o.issued && slices.Equal(s.objs, o.objs) && slices.Equal(s.held, o.held) &&
		slices.Equal(s.ended, o.ended)
}

// hash is FNV-1a over the state's contents; equal states hash equally.
func (s state) hash() uint64 {
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	mix := func(v uint64) {
		for range 8 {
			h ^= v & 0xff
			h *= prime
			v >>= 8
		}
	}
	mixString := func(str string) {
		for i := 0; i < len(str); i++ {
			h ^= uint64(str[i])
			h *= prime
		}
		mix(uint64(len(str)))
	}
	mix(s.issued)
	for _, o := range s.objs {
		mixString(o.name)
		mix(o.token)
		mixString(o.value)
	}
	for _, p := range s.held {
		mix(p.token)
	}
	mix(uint64(len(s.held)))
	for _, t := range s.ended {
		mix(t)
	}
	return h
}

// writeLegal reports whether an accepted write presenting t is legal in s: t is the current
// token (neither superseded nor forged) and not older than the object's last accepted write.
func writeLegal(s state, op Op) bool {
	o, _ := s.object(op.Object)
	if op.Permits > 1 {
		// A semaphore: a held permit's token, in any order; or an ended permit's token that a
		// lagging view could still show held: not below the object's record.
		return s.holds(op.Token) || op.Token >= o.token && slices.Contains(s.ended, op.Token)
	}
	return op.Token == s.issued && op.Token >= o.token
}

// step returns every state the partition can be in after op, starting from s; none if op is
// illegal in s.
func step(s state, op Op) []any {
	if op.Permits > 1 {
		switch op.Kind {
		case Acquire:
			return stepGrant(s, op, func(s state) []any { return s.granted(op.Token, op.written, op.Permits) })
		case Stamp:
			return stepGrant(s, op, func(s state) []any { return []any{s.withAllEnded().withIssued(op.Token)} })
		case Release:
			switch op.Outcome {
			case OK:
				return []any{s.withEnded(op.Token)}
			case Unknown:
				return []any{s, s.withEnded(op.Token)}
			}
			return []any{s}
		}
	}
	switch op.Kind {
	case Acquire, Stamp:
		switch {
		case op.Outcome == OK && op.Token > s.issued:
			return []any{s.withIssued(op.Token)}
		case op.Outcome == OK:
			return nil // grants strictly increase
		case op.Outcome == Unknown && op.Token > s.issued:
			return []any{s, s.withIssued(op.Token)} // may or may not have happened
		default:
			return []any{s}
		}
	case Write:
		switch op.Outcome {
		case OK:
			if !writeLegal(s, op) {
				return nil
			}
			return []any{s.withObject(objState{name: op.Object, token: op.Token, value: op.Value})}
		case Unknown:
			if !writeLegal(s, op) {
				return []any{s} // if it was accepted, it was not accepted here
			}
			return []any{s, s.withObject(objState{name: op.Object, token: op.Token, value: op.Value})}
		default:
			return []any{s} // refused or failed: no effect
		}
	case Read:
		if op.Outcome != OK {
			return []any{s}
		}
		o, exists := s.object(op.Object)
		if exists && o.value == op.Value && o.token == op.ReadToken || !exists && op.Value == "" && op.ReadToken == 0 {
			return []any{s}
		}
		return nil
	default: // Release
		return []any{s}
	}
}

// stepGrant is step for a semaphore's grant or stamp: effect gives the states after it.
func stepGrant(s state, op Op, effect func(state) []any) []any {
	switch {
	case op.Outcome == OK && op.Token > s.issued:
		return effect(s)
	case op.Outcome == OK:
		return nil // tokens strictly increase, across permits
	case op.Outcome == Unknown && op.Token > s.issued:
		return append([]any{s}, effect(s)...)
	default:
		return []any{s}
	}
}

// metadata travels with each porcupine operation: the op's index in the checked history, its
// note, and for an Unknown op how it is checked.
type metadata struct {
	index   int
	note    string
	unknown string
}

// partitionByLock splits a history into one partition per lock, sorted by lock name, keeping
// the order of operations within each.
func partitionByLock(history []porcupine.Operation) [][]porcupine.Operation {
	byLock := map[string][]porcupine.Operation{}
	for _, op := range history {
		l := op.Input.(Op).Lock
		byLock[l] = append(byLock[l], op)
	}
	locks := make([]string, 0, len(byLock))
	for l := range byLock {
		locks = append(locks, l)
	}
	slices.Sort(locks)
	parts := make([][]porcupine.Operation, 0, len(locks))
	for _, l := range locks {
		parts = append(parts, byLock[l])
	}
	return parts
}

var nondeterministicModel = porcupine.NondeterministicModel{
	Partition: partitionByLock,
	Init:      func() []any { return []any{state{}} },
	Step: func(s, input, _ any) []any {
		return step(s.(state), input.(Op))
	},
	Equal: func(a, b any) bool { return a.(state).equal(b.(state)) },
	Hash:  func(s any) uint64 { return s.(state).hash() },
	DescribeOperation: func(input, _ any) string {
		return Describe(input.(Op))
	},
	DescribeState: func(s any) string { return describeState(s.(state)) },
	DescribeOperationMetadata: func(m any) string {
		md, ok := m.(metadata)
		if !ok {
			return ""
		}
		parts := []string{fmt.Sprintf("history[%d]", md.index)}
		for _, p := range []string{md.note, md.unknown} {
			if p != "" {
				parts = append(parts, p)
			}
		}
		return strings.Join(parts, "; ")
	},
}

// model is the porcupine model the checker and the visualization use: the nondeterministic
// model through porcupine's power-set construction, so its states are sets of states.
var model = nondeterministicModel.ToModel()

// Model returns the porcupine model Check uses. Its operations' Input is an Op whose Call and
// Return are as porcupine sees them (Unknown ops return at math.MaxInt64); its Output is the
// Op's Outcome.
func Model() porcupine.Model { return model }

// Describe renders an operation for the visualization and for error messages, e.g.
// "c3 write(configmaps/ns/ledger, t=812, v=7) -> ok".
func Describe(op Op) string {
	var args string
	switch op.Kind {
	case Acquire, Stamp, Release:
		if op.Token == 0 && op.Outcome != OK {
			args = op.Lock
		} else {
			args = fmt.Sprintf("%s, t=%d", op.Lock, op.Token)
		}
	case Write:
		args = fmt.Sprintf("%s, t=%d, v=%s", op.Object, op.Token, quote(op.Value))
	case Read:
		args = op.Object
	default:
		args = fmt.Sprintf("%s, t=%d", op.Object, op.Token)
	}
	result := string(op.Outcome)
	if op.Kind == Read && op.Outcome == OK {
		result = fmt.Sprintf("(t=%d, v=%s)", op.ReadToken, quote(op.Value))
	}
	return fmt.Sprintf("c%d %s(%s) -> %s", op.Client, op.Kind, args, result)
}

// describeState renders a state as, e.g., "issued=812 ledger=(812,7)". Objects are named by
// their last path segment unless two of them share it.
func describeState(s state) string {
	var b strings.Builder
	fmt.Fprintf(&b, "issued=%d", s.issued)
	if len(s.held) > 0 || len(s.ended) > 0 {
		held := make([]string, len(s.held))
		for i, p := range s.held {
			held[i] = strconv.FormatUint(p.token, 10)
		}
		fmt.Fprintf(&b, " held=[%s]", strings.Join(held, ","))
		if len(s.ended) > 0 {
			fmt.Fprintf(&b, " ended=%v", s.ended)
		}
	}
	short := map[string]int{}
	for _, o := range s.objs {
		short[lastSegment(o.name)]++
	}
	for _, o := range s.objs {
		name := lastSegment(o.name)
		if short[name] > 1 {
			name = o.name
		}
		fmt.Fprintf(&b, " %s=(%d,%s)", name, o.token, quote(o.value))
	}
	return b.String()
}

func lastSegment(name string) string {
	return name[strings.LastIndexByte(name, '/')+1:]
}

// quote leaves plain values bare and quotes the rest (empty, or containing spaces or punctuation).
func quote(v string) string {
	if v == "" || strings.ContainsAny(v, " \t\n,()=\"'{}") {
		return strconv.Quote(v)
	}
	return v
}
