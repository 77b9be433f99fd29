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
}

func (s state) object(name string) (objState, bool) {
	i, ok := slices.BinarySearchFunc(s.objs, name, func(o objState, n string) int { return cmp.Compare(o.name, n) })
	if !ok {
		return objState{}, false
	}
	return s.objs[i], true
}

func (s state) withIssued(t uint64) state {
	return state{issued: t, objs: s.objs}
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
	return state{issued: s.issued, objs: objs}
}

func (s state) equal(o state) bool {
	return s.issued == o.issued && slices.Equal(s.objs, o.objs)
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
	return h
}

// writeLegal reports whether an accepted write presenting t is legal in s: t is the current
// token (neither superseded nor forged) and not older than the object's last accepted write.
func writeLegal(s state, op Op) bool {
	o, _ := s.object(op.Object)
	return op.Token == s.issued && op.Token >= o.token
}

// step returns every state the partition can be in after op, starting from s; none if op is
// illegal in s.
func step(s state, op Op) []any {
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
