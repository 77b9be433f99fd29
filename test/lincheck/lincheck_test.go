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
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

const (
	lockA = "ns/a"
	lockB = "ns/b"
	objX  = "configmaps/ns/ledger"
	objY  = "settlementbatches/ns/b1"
)

// Builders for synthetic histories on lockA; call and ret are the operation's interval.

func acquire(c int, t uint64, out Outcome, call, ret int64) Op {
	return Op{Client: c, Kind: Acquire, Lock: lockA, Token: t, Outcome: out, Call: call, Return: ret}
}

func stamp(c int, t uint64, out Outcome, call, ret int64) Op {
	return Op{Client: c, Kind: Stamp, Lock: lockA, Token: t, Outcome: out, Call: call, Return: ret}
}

func release(c int, t uint64, call, ret int64) Op {
	return Op{Client: c, Kind: Release, Lock: lockA, Token: t, Outcome: OK, Call: call, Return: ret}
}

func write(c int, obj string, t uint64, v string, out Outcome, call, ret int64) Op {
	return Op{Client: c, Kind: Write, Lock: lockA, Object: obj, Token: t, Value: v, Outcome: out, Call: call, Return: ret}
}

func read(c int, obj, v string, rt uint64, call, ret int64) Op {
	return Op{Client: c, Kind: Read, Lock: lockA, Object: obj, Value: v, ReadToken: rt, Outcome: OK, Call: call, Return: ret}
}

// onB moves ops to lockB.
func onB(ops ...Op) []Op {
	out := make([]Op, len(ops))
	for i, op := range ops {
		op.Lock = lockB
		out[i] = op
	}
	return out
}

// never marks an Unknown op's Return as garbage the checker must ignore.
const never = -1

func TestCheck(t *testing.T) {
	cases := []struct {
		name    string
		history []Op
		ok      bool
	}{
		{"empty history", nil, true},
		{"sequential grants with increasing tokens", []Op{
			acquire(0, 1, OK, 0, 1), release(0, 1, 2, 3),
			acquire(1, 2, OK, 4, 5), release(1, 2, 6, 7),
			acquire(0, 7, OK, 8, 9),
		}, true},
		{"grant lower than an earlier one", []Op{
			acquire(0, 5, OK, 0, 1), release(0, 5, 2, 3),
			acquire(1, 3, OK, 4, 5),
		}, false},
		{"grant equal to an earlier one", []Op{
			acquire(0, 5, OK, 0, 1), acquire(1, 5, OK, 4, 5),
		}, false},
		{"failed and denied acquires have no effect", []Op{
			acquire(0, 5, OK, 0, 1), acquire(1, 0, Failed, 0, 9), acquire(2, 3, Denied, 2, 3),
			write(0, objX, 5, "a", OK, 4, 5),
		}, true},
		{"paused holder: stale write denied", []Op{
			acquire(0, 10, OK, 0, 1),
			acquire(1, 12, OK, 2, 3),
			write(1, objX, 12, "b", OK, 4, 5),
			write(0, objX, 10, "a", Denied, 6, 7),
			read(1, objX, "b", 12, 8, 9),
		}, true},
		{"paused holder: stale write accepted", []Op{
			acquire(0, 10, OK, 0, 1),
			acquire(1, 12, OK, 2, 3),
			write(1, objX, 12, "b", OK, 4, 5),
			write(0, objX, 10, "a", OK, 6, 7),
		}, false},
		{"paused holder: stale write accepted, unobserved by any read, after a newer grant only", []Op{
			acquire(0, 10, OK, 0, 1),
			acquire(1, 12, OK, 2, 3),
			write(0, objX, 10, "a", OK, 6, 7),
		}, false},
		{"holder's write concurrent with the next grant may precede it", []Op{
			acquire(0, 10, OK, 0, 1),
			write(0, objX, 10, "a", OK, 2, 6),
			acquire(1, 12, OK, 3, 4),
		}, true},
		{"concurrent grants linearize against call order", []Op{
			acquire(0, 12, OK, 0, 10), // called first, granted last
			acquire(1, 10, OK, 1, 3),
		}, true},
		{"write concurrent with its grant linearizes after it", []Op{
			acquire(0, 10, OK, 0, 10),
			write(1, objX, 10, "a", OK, 5, 6),
		}, true},
		{"write before its grant", []Op{
			write(1, objX, 10, "a", OK, 0, 1),
			acquire(0, 10, OK, 2, 3),
		}, false},
		{"overlapping reads around a write: one order works", []Op{
			acquire(0, 10, OK, 0, 1),
			write(0, objX, 10, "a", OK, 2, 12),
			read(1, objX, "", 0, 3, 5),   // before the write
			read(2, objX, "a", 10, 5, 7), // after it
		}, true},
		{"overlapping reads around a write: new value then old value", []Op{
			acquire(0, 10, OK, 0, 1),
			write(0, objX, 10, "a", OK, 2, 12),
			read(1, objX, "a", 10, 3, 4),
			read(2, objX, "", 0, 5, 7),
		}, false},
		{"forged token accepted", []Op{
			acquire(0, 10, OK, 0, 1),
			write(0, objX, 11, "f", OK, 2, 3),
		}, false},
		{"forged token denied", []Op{
			acquire(0, 10, OK, 0, 1),
			write(0, objX, 11, "f", Denied, 2, 3),
			write(0, objX, 10, "a", OK, 4, 5),
		}, true},
		{"write before any grant with token 0 (setup)", []Op{
			write(9, objX, 0, "init", OK, 0, 1),
			acquire(0, 10, OK, 2, 3),
			read(0, objX, "init", 0, 4, 5),
		}, true},
		{"stamp raises the floor, then the old token is accepted", []Op{
			acquire(0, 10, OK, 0, 1),
			stamp(9, 15, OK, 2, 3),
			write(0, objX, 10, "a", OK, 4, 5),
		}, false},
		{"stamp raises the floor, the old token is denied", []Op{
			acquire(0, 10, OK, 0, 1),
			stamp(9, 15, OK, 2, 3),
			write(0, objX, 10, "a", Denied, 4, 5),
			acquire(1, 16, OK, 6, 7),
			write(1, objX, 16, "b", OK, 8, 9),
		}, true},
		{"write concurrent with a stamp linearizes before it", []Op{
			acquire(0, 10, OK, 0, 1),
			stamp(9, 15, OK, 2, 5),
			write(0, objX, 10, "a", OK, 3, 6),
		}, true},
		{"stamp not above the issued token", []Op{
			acquire(0, 10, OK, 0, 1),
			stamp(9, 10, OK, 2, 3),
		}, false},
		{"grant not above a stamp", []Op{
			stamp(9, 15, OK, 0, 1),
			acquire(0, 15, OK, 2, 3),
		}, false},
		{"unknown write observed by a later read", []Op{
			acquire(0, 10, OK, 0, 1),
			write(0, objX, 10, "u", Unknown, 2, never),
			read(1, objX, "u", 10, 5, 6),
		}, true},
		{"unknown write never observed", []Op{
			acquire(0, 10, OK, 0, 1),
			write(0, objX, 10, "u", Unknown, 2, never),
			read(1, objX, "", 0, 5, 6),
			write(0, objX, 10, "a", OK, 7, 8),
			read(1, objX, "a", 10, 9, 10),
		}, true},
		{"unknown write lands after a later accepted write", []Op{
			acquire(0, 10, OK, 0, 1),
			write(0, objX, 10, "u", Unknown, 2, never),
			write(0, objX, 10, "a", OK, 3, 4),
			read(1, objX, "a", 10, 5, 6),
			read(1, objX, "u", 10, 7, 8),
		}, true},
		{"unknown write of a value written twice lands late", []Op{
			acquire(0, 10, OK, 0, 1),
			write(0, objX, 10, "a", OK, 2, 3),
			write(0, objX, 10, "a", Unknown, 4, never),
			read(1, objX, "a", 10, 5, 6),
			write(0, objX, 10, "b", OK, 7, 8),
			read(1, objX, "a", 10, 9, 10), // the unknown write landed after "b"
		}, true},
		{"unknown write observed long after its call", []Op{
			acquire(0, 10, OK, 0, 1),
			write(0, objX, 10, "u", Unknown, 2, never),
			write(0, objX, 10, "a", OK, 3, 4),
			read(1, objX, "a", 10, 5, 6),
			acquire(1, 12, OK, 7, 8),
			write(1, objY, 12, "y", OK, 9, 10),
			read(1, objX, "u", 10, 11, 12), // landed after "a", before anyone wrote x with 12
		}, true},
		{"unknown stale write lands after the newer holder's write", []Op{
			acquire(0, 10, OK, 0, 1),
			write(0, objX, 10, "u", Unknown, 2, never),
			acquire(1, 12, OK, 3, 4),
			write(1, objX, 12, "b", OK, 5, 6),
			read(1, objX, "u", 10, 7, 8),
		}, false},
		{"unknown write observed, then unobserved", []Op{
			acquire(0, 10, OK, 0, 1),
			write(0, objX, 10, "u", Unknown, 2, never),
			read(1, objX, "u", 10, 5, 6),
			read(1, objX, "", 0, 7, 8),
		}, false},
		{"unknown write observed before it was called", []Op{
			acquire(0, 10, OK, 0, 1),
			read(1, objX, "u", 10, 2, 3),
			write(0, objX, 10, "u", Unknown, 4, never),
		}, false},
		{"unknown stale write observed", []Op{
			acquire(0, 10, OK, 0, 1),
			acquire(1, 12, OK, 2, 3),
			write(0, objX, 10, "s", Unknown, 4, never),
			read(1, objX, "s", 10, 6, 7),
		}, false},
		{"unknown grant with a token, then used", []Op{
			acquire(0, 10, OK, 0, 1),
			acquire(1, 12, Unknown, 2, never),
			write(1, objX, 12, "b", OK, 5, 6),
		}, true},
		{"unknown grant with a token, never effective", []Op{
			acquire(0, 10, OK, 0, 1),
			acquire(1, 12, Unknown, 2, never),
			write(0, objX, 10, "a", OK, 5, 6),
			acquire(2, 11, OK, 7, 8),
		}, true},
		{"unknown grant without a token is a no-op", []Op{
			acquire(0, 10, OK, 0, 1),
			acquire(1, 0, Unknown, 2, never),
			write(0, objX, 10, "a", OK, 5, 6),
		}, true},
		{"unknown stamp, then old token accepted", []Op{
			acquire(0, 10, OK, 0, 1),
			stamp(9, 15, Unknown, 2, never),
			write(0, objX, 10, "a", OK, 5, 6),
		}, true},
		{"read of a value never written", []Op{
			acquire(0, 10, OK, 0, 1),
			write(0, objX, 10, "a", OK, 2, 3),
			read(1, objX, "zzz", 10, 4, 5),
		}, false},
		{"read of the right value with the wrong token", []Op{
			acquire(0, 10, OK, 0, 1),
			write(0, objX, 10, "a", OK, 2, 3),
			read(1, objX, "a", 9, 4, 5),
		}, false},
		{"read of an absent object", []Op{read(1, objX, "", 0, 0, 1)}, true},
		{"read failures have no effect", []Op{
			{Client: 1, Kind: Read, Lock: lockA, Object: objX, Value: "junk", ReadToken: 3, Outcome: Failed, Call: 0, Return: 1},
			{Client: 1, Kind: Read, Lock: lockA, Object: objX, Outcome: Unknown, Call: 2, Return: never},
		}, true},
		{"two objects in one partition", []Op{
			acquire(0, 10, OK, 0, 1),
			write(0, objX, 10, "x1", OK, 2, 3),
			write(0, objY, 10, "y1", OK, 4, 5),
			acquire(1, 12, OK, 6, 7),
			write(1, objY, 12, "y2", OK, 8, 9),
			read(2, objX, "x1", 10, 10, 11),
			read(2, objY, "y2", 12, 10, 11),
		}, true},
		{"two objects in one partition: a read sees the other object's value", []Op{
			acquire(0, 10, OK, 0, 1),
			write(0, objX, 10, "x1", OK, 2, 3),
			write(0, objY, 10, "y1", OK, 4, 5),
			read(2, objX, "y1", 10, 10, 11),
		}, false},
		{"two locks, both fine", append(
			[]Op{acquire(0, 10, OK, 0, 1), write(0, objX, 10, "a", OK, 2, 3)},
			onB(acquire(1, 3, OK, 0, 1), write(1, objY, 3, "b", OK, 2, 3))...), true},
		{"large client ids are renumbered", []Op{
			acquire(-5, 10, OK, 0, 1), write(1<<20, objX, 10, "a", OK, 2, 3),
		}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Check(tc.history, 10*time.Second)
			if res.Linearizable != tc.ok || (err == nil) != tc.ok {
				t.Fatalf("Linearizable = %v, err = %v; want linearizable %v", res.Linearizable, err, tc.ok)
			}
			if !tc.ok {
				if !errors.Is(err, ErrNotLinearizable) {
					t.Errorf("error %v does not wrap ErrNotLinearizable", err)
				}
				if len(res.Violations) != 1 || res.Violations[0].Lock != lockA {
					t.Errorf("Violations = %+v, want one on %s", res.Violations, lockA)
				}
				t.Logf("%v", err)
			}
			if res.TimedOut || res.Ops != len(tc.history) {
				t.Errorf("TimedOut = %v, Ops = %d", res.TimedOut, res.Ops)
			}
		})
	}
}

func TestTwoLocksOneViolating(t *testing.T) {
	h := append([]Op{acquire(0, 10, OK, 0, 1), write(0, objX, 10, "a", OK, 2, 3)}, onB(
		acquire(1, 3, OK, 0, 1),
		acquire(2, 4, OK, 2, 3),
		write(1, objY, 3, "stale", OK, 4, 5),
	)...)
	res, err := Check(h, 10*time.Second)
	if err == nil || res.Linearizable || !errors.Is(err, ErrNotLinearizable) {
		t.Fatalf("Check = %+v, %v; want a violation", res, err)
	}
	if res.Partitions != 2 || len(res.Violations) != 1 {
		t.Fatalf("Partitions = %d, Violations = %+v", res.Partitions, res.Violations)
	}
	v := res.Violations[0]
	if v.Lock != lockB || v.Ops != 3 || v.Linearized != 2 {
		t.Errorf("violation = %+v, want lock %s with 2 of 3 ops linearized", v, lockB)
	}
	if len(v.Stuck) != 1 || v.Stuck[0].Value != "stale" {
		t.Errorf("Stuck = %+v, want the stale write", v.Stuck)
	}
	for _, want := range []string{`lock "ns/b"`, "issued=4", "c1 write(settlementbatches/ns/b1, t=3, v=stale) -> ok"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestInvalidHistories(t *testing.T) {
	cases := map[string][]Op{
		"unknown kind":     {{Kind: "frobnicate", Lock: lockA, Outcome: OK}},
		"unknown outcome":  {{Kind: Acquire, Lock: lockA, Token: 1, Outcome: "maybe"}},
		"no lock":          {{Kind: Acquire, Token: 1, Outcome: OK}},
		"write, no object": {{Kind: Write, Lock: lockA, Token: 1, Outcome: OK}},
		"return before call": {
			acquire(0, 1, OK, 5, 4),
		},
		"object under two locks": append([]Op{write(0, objX, 0, "a", OK, 0, 1)},
			onB(read(0, objX, "a", 0, 2, 3))...),
	}
	for name, h := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Check(h, time.Second)
			if err == nil || errors.Is(err, ErrNotLinearizable) || errors.Is(err, ErrTimedOut) {
				t.Fatalf("err = %v, want an invalid-history error", err)
			}
		})
	}
}

func TestDescriptions(t *testing.T) {
	ops := map[string]Op{
		"c3 write(configmaps/ns/ledger, t=812, v=7) -> ok":       write(3, objX, 812, "7", OK, 0, 1),
		`c3 write(configmaps/ns/ledger, t=8, v="a b") -> denied`: write(3, objX, 8, "a b", Denied, 0, 1),
		"c1 acquire(ns/a, t=12) -> ok":                           acquire(1, 12, OK, 0, 1),
		"c1 acquire(ns/a) -> unknown":                            acquire(1, 0, Unknown, 0, 1),
		"c2 read(configmaps/ns/ledger) -> (t=812, v=7)":          read(2, objX, "7", 812, 0, 1),
		"c0 stamp(ns/a, t=20) -> ok":                             stamp(0, 20, OK, 0, 1),
		"c0 release(ns/a, t=20) -> ok":                           release(0, 20, 0, 1),
	}
	for want, op := range ops {
		if got := Describe(op); got != want {
			t.Errorf("Describe = %q, want %q", got, want)
		}
	}
	s := state{issued: 812}.withObject(objState{name: objX, token: 812, value: "7"})
	if got, want := describeState(s), "issued=812 ledger=(812,7)"; got != want {
		t.Errorf("describeState = %q, want %q", got, want)
	}
	s = s.withObject(objState{name: "secrets/ns/ledger", token: 3, value: ""})
	if got, want := describeState(s), `issued=812 configmaps/ns/ledger=(812,7) secrets/ns/ledger=(3,"")`; got != want {
		t.Errorf("describeState = %q, want %q", got, want)
	}
}

func TestStateIsImmutable(t *testing.T) {
	s0 := state{issued: 10}
	s1 := s0.withObject(objState{name: "b", token: 10, value: "1"})
	s2 := s1.withObject(objState{name: "a", token: 10, value: "2"})
	s3 := s2.withObject(objState{name: "b", token: 10, value: "3"})
	if len(s0.objs) != 0 || len(s1.objs) != 1 || s1.objs[0].value != "1" || len(s2.objs) != 2 {
		t.Fatalf("states changed: %v %v %v", s0, s1, s2)
	}
	if o, _ := s2.object("b"); o.value != "1" {
		t.Errorf("s2 b = %v, want 1", o)
	}
	if o, _ := s3.object("b"); o.value != "3" || len(s3.objs) != 2 {
		t.Errorf("s3 = %v", s3)
	}
	s4 := state{issued: 10}.withObject(objState{name: "a", token: 10, value: "2"}).
		withObject(objState{name: "b", token: 10, value: "1"})
	if !s4.equal(s2) || s4.hash() != s2.hash() || s3.equal(s2) || s3.hash() == s2.hash() {
		t.Errorf("equality/hash: s2=%v s3=%v s4=%v", s2, s3, s4)
	}
}

func TestSaveLoadHistory(t *testing.T) {
	h := []Op{
		acquire(0, 18446744073709551615, OK, 1700000000000000000, 1700000000000000001),
		write(1, objX, 7, `a "quoted" <value>`, Denied, 2, 3),
		{Client: 2, Kind: Read, Lock: lockB, Object: objY, Value: "v", ReadToken: 4, Outcome: Unknown, Call: 5, Return: 0,
			Note: "admission webhook \"fence\" denied the request:\nstale token"},
	}
	path := filepath.Join(t.TempDir(), "history.jsonl")
	if err := SaveHistory(path, h); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(b), "\n"); lines != len(h) {
		t.Errorf("%d lines, want %d:\n%s", lines, len(h), b)
	}
	got, err := LoadHistory(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, h) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, h)
	}
	// Blank lines are skipped; garbage is reported with its line.
	if err := os.WriteFile(path, append(append(b, '\n'), []byte("{nope\n")...), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadHistory(path); err == nil || !strings.Contains(err.Error(), ":5:") {
		t.Errorf("LoadHistory of garbage: %v, want an error at line 5", err)
	}
}

func TestSaveVisualization(t *testing.T) {
	for name, h := range map[string][]Op{
		"ok": {
			acquire(0, 10, OK, 0, 1),
			write(0, objX, 10, "u", Unknown, 2, never),
			read(1, objX, "u", 10, 5, 6),
		},
		"violation": append([]Op{acquire(0, 10, OK, 0, 1), acquire(1, 12, OK, 2, 3),
			{Client: 0, Kind: Write, Lock: lockA, Object: objX, Token: 10, Value: "a", Outcome: OK, Call: 4, Return: 5,
				Note: "accepted a stale token"}},
			onB(acquire(2, 1, OK, 0, 1))...),
	} {
		t.Run(name, func(t *testing.T) {
			res, _ := Check(h, 10*time.Second)
			if res.Linearizable != (name == "ok") {
				t.Fatalf("Linearizable = %v", res.Linearizable)
			}
			path := filepath.Join(t.TempDir(), "vis.html")
			if err := SaveVisualization(res, path); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			html := string(b)
			for _, want := range []string{"<html", "c0 acquire(ns/a, t=10) -", "issued=10"} {
				if !strings.Contains(html, want) {
					t.Errorf("visualization lacks %q", want)
				}
			}
			if name == "violation" && !strings.Contains(html, "accepted a stale token") {
				t.Errorf("visualization lacks the op's note")
			}
		})
	}
}

// genHistory simulates a lock and its objects sequentially, op i taking effect at time
// i*100, and records each op over an interval around that point, so that neighbours overlap.
// The history is linearizable by construction.
func genHistory(r *rand.Rand, n, clients int) []Op {
	var (
		issued uint64
		holder = -1
		tokens = make([]uint64, clients) // the last token each client was granted
		objs   = map[string]objState{}
		h      = make([]Op, 0, n)
		names  = []string{objX, objY}
	)
	for i := range n {
		at := int64(i) * 100
		op := Op{Client: r.IntN(clients), Lock: lockA, Call: at - r.Int64N(250), Return: at + r.Int64N(250), Outcome: OK}
		if holder >= 0 && r.IntN(3) > 0 {
			op.Client = holder // the holder does most of the work
		}
		c := op.Client
		switch p := r.IntN(100); {
		case p < 12: // grant
			op.Kind, op.Token = Acquire, issued+1+r.Uint64N(3)
			issued, holder, tokens[c] = op.Token, c, op.Token
		case p < 14:
			op.Kind, op.Outcome = Acquire, Failed
		case p < 16: // a grant whose answer was lost: the token is not known
			op.Kind, op.Outcome = Acquire, Unknown
			if r.IntN(2) == 0 {
				issued, holder = issued+1+r.Uint64N(3), -1
			}
		case p < 18:
			op.Kind, op.Token = Stamp, issued+1+r.Uint64N(3)
			issued, holder = op.Token, -1
		case p < 20 && tokens[c] > 0:
			op.Kind, op.Token = Release, tokens[c]
		case p < 55 || p < 65 && tokens[c] == 0: // a write presenting the client's token
			op.Kind, op.Object, op.Token, op.Value = Write, names[r.IntN(2)], tokens[c], fmt.Sprintf("v%d", i)
			old := objs[op.Object]
			accepted := tokens[c] == issued && tokens[c] > 0
			if accepted {
				objs[op.Object] = objState{token: op.Token, value: op.Value}
			} else {
				op.Outcome = Denied
			}
			if r.IntN(20) == 0 { // the answer is lost; a denied write stays denied
				op.Outcome = Unknown
				if accepted && r.IntN(2) == 0 {
					objs[op.Object] = old // it never landed
				}
			}
		default:
			op.Kind, op.Object = Read, names[r.IntN(2)]
			if r.IntN(50) == 0 {
				op.Outcome = Unknown
			} else {
				o := objs[op.Object]
				op.Value, op.ReadToken = o.value, o.token
			}
		}
		h = append(h, op)
	}
	return h
}

func TestRandomValidHistoryPerformance(t *testing.T) {
	const timeout = 60 * time.Second
	r := rand.New(rand.NewPCG(1, 2))
	h := genHistory(r, 2000, 4)
	start := time.Now()
	res, err := Check(h, timeout)
	elapsed := time.Since(start)
	outcomes := map[Outcome]int{}
	for _, op := range h {
		outcomes[op.Outcome]++
	}
	t.Logf("%d ops (%v) checked in %v", len(h), outcomes, elapsed)
	if err != nil || !res.Linearizable {
		t.Fatalf("Check = %v", err)
	}
	if elapsed > timeout/10 {
		t.Errorf("took %v, want well under the %v timeout", elapsed, timeout)
	}

	// The same history with one stale write accepted after everything else returned.
	last := int64(0)
	for _, op := range h {
		last = max(last, op.Return, op.Call)
	}
	bad := append(slices.Clip(h), write(0, objX, 1, "stale", OK, last+1, last+2))
	start = time.Now()
	res, err = Check(bad, timeout)
	t.Logf("violation found in %v", time.Since(start))
	if !errors.Is(err, ErrNotLinearizable) || res.Linearizable {
		t.Fatalf("Check of a corrupted history = %v", err)
	}
}

func TestViolationInTheMiddleOfALongHistory(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	h := genHistory(r, 2000, 4)
	mid := h[1000]
	bad := append(h[:1000:1000], write(1, objY, 1, "stale", OK, mid.Return+1, mid.Return+2))
	bad = append(bad, h[1000:]...)
	start := time.Now()
	res, err := Check(bad, time.Minute)
	t.Logf("violation found in %v: %v", time.Since(start), err)
	if !errors.Is(err, ErrNotLinearizable) || res.Linearizable {
		t.Fatalf("Check = %v", err)
	}
	if v := res.Violations[0]; len(v.Stuck) == 0 || !slices.ContainsFunc(v.Stuck, func(op Op) bool { return op.Value == "stale" }) {
		t.Errorf("Stuck = %+v, want it to include the stale write", v.Stuck)
	}
}

type bfObject struct {
	token uint64
	value string
}

// bfState is bruteForce's state: a plain map, copied on write.
type bfState struct {
	issued uint64
	objs   map[string]bfObject
}

func (s bfState) with(name string, o bfObject) bfState {
	m := map[string]bfObject{name: o}
	for k, v := range s.objs {
		if k != name {
			m[k] = v
		}
	}
	return bfState{s.issued, m}
}

// bfNext restates the model's rules: every state op can leave s in.
func bfNext(s bfState, op Op) []bfState {
	switch op.Kind {
	case Acquire, Stamp:
		raised := bfState{op.Token, s.objs}
		if op.Outcome == OK {
			if op.Token > s.issued {
				return []bfState{raised}
			}
			return nil
		}
		if op.Outcome == Unknown && op.Token > s.issued {
			return []bfState{s, raised}
		}
	case Write:
		cur := s.objs[op.Object]
		legal := op.Token == s.issued && op.Token >= cur.token
		written := s.with(op.Object, bfObject{op.Token, op.Value})
		switch {
		case op.Outcome == OK && legal:
			return []bfState{written}
		case op.Outcome == OK:
			return nil
		case op.Outcome == Unknown && legal:
			return []bfState{s, written}
		}
	case Read:
		if op.Outcome != OK {
			return []bfState{s}
		}
		cur, ok := s.objs[op.Object]
		if ok && cur.value == op.Value && cur.token == op.ReadToken || !ok && op.Value == "" && op.ReadToken == 0 {
			return []bfState{s}
		}
		return nil
	}
	return []bfState{s}
}

// bruteForce decides linearizability of a single-lock history by trying every order that
// respects real time, giving every Unknown op an infinite Return and both outcomes.
func bruteForce(h []Op) bool {
	ret := func(op Op) int64 {
		if op.Outcome == Unknown {
			return math.MaxInt64
		}
		return op.Return
	}
	// mustPrecede[j] is the set of ops that returned before op j was called.
	mustPrecede := make([]int, len(h))
	for j := range h {
		for i := range h {
			if i != j && ret(h[i]) < h[j].Call {
				mustPrecede[j] |= 1 << i
			}
		}
	}
	var search func(done int, s bfState) bool
	search = func(done int, s bfState) bool {
		if done == 1<<len(h)-1 {
			return true
		}
		for j, op := range h {
			if done&(1<<j) != 0 || mustPrecede[j]&^done != 0 {
				continue
			}
			for _, ns := range bfNext(s, op) {
				if search(done|1<<j, ns) {
					return true
				}
			}
		}
		return false
	}
	return search(0, bfState{objs: map[string]bfObject{}})
}

// randomTinyHistory makes a history of a few random operations on one lock, some legal, some not.
func randomTinyHistory(r *rand.Rand) []Op {
	n := 2 + r.IntN(6)
	h := make([]Op, n)
	kinds := []Kind{Acquire, Acquire, Stamp, Write, Write, Write, Read, Read, Read, Release}
	values := []string{"", "a", "b"}
	for i := range h {
		call := r.Int64N(10)
		op := Op{Client: r.IntN(3), Kind: kinds[r.IntN(len(kinds))], Lock: lockA, Call: call, Return: call + r.Int64N(5)}
		switch p := r.IntN(20); {
		case p < 11:
			op.Outcome = OK
		case p < 16:
			op.Outcome = Unknown
			op.Return = []int64{-1, 0, call, call + 100}[r.IntN(4)] // to be ignored
		case p < 18:
			op.Outcome = Denied
		default:
			op.Outcome = Failed
		}
		switch op.Kind {
		case Acquire, Stamp, Release:
			op.Token = r.Uint64N(4)
		case Write:
			op.Object, op.Token, op.Value = []string{objX, objY}[r.IntN(4)/3], r.Uint64N(4), values[1+r.IntN(2)]
		case Read:
			op.Object = []string{objX, objY}[r.IntN(4)/3]
			if r.IntN(3) > 0 {
				op.Value, op.ReadToken = values[1+r.IntN(2)], r.Uint64N(4)
			}
		}
		h[i] = op
	}
	return h
}

func TestAgainstBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	counts := map[bool]int{}
	for i := range 20000 {
		h := randomTinyHistory(r)
		want := bruteForce(h)
		res, err := Check(h, 10*time.Second)
		if res.TimedOut || res.Linearizable != want || (err == nil) != want {
			t.Fatalf("history %d: Check = %v (%v), brute force = %v\n%s", i, res.Linearizable, err, want, dump(h))
		}
		counts[want]++
	}
	t.Logf("%d linearizable, %d not", counts[true], counts[false])
	if counts[true] < 1000 || counts[false] < 1000 {
		t.Errorf("unbalanced sample: %v", counts)
	}
}

func dump(h []Op) string {
	var b strings.Builder
	for i, op := range h {
		fmt.Fprintf(&b, "%d: [%d,%d] %s\n", i, op.Call, op.Return, Describe(op))
	}
	return b.String()
}

func TestTimeout(t *testing.T) {
	h := genHistory(rand.New(rand.NewPCG(7, 8)), 2000, 4)
	res, err := Check(h, time.Nanosecond)
	if !errors.Is(err, ErrTimedOut) || !res.TimedOut || res.Linearizable {
		t.Fatalf("Check = %+v, %v; want a timeout", res.TimedOut, err)
	}
}
