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

// Package lincheck checks recorded histories of fenced-lock operations for linearizability.
//
// A fault-injection harness records every operation its clients make against a lock and the
// objects the lock fences (grants, fenced writes, reads, releases, and Lease recreations that
// raise the token floor) as a []Op, and hands the history to Check. Check runs porcupine
// (github.com/anishathalye/porcupine) against a sequential specification, "a fenced lock plus
// fenced registers", one partition per lock:
//
//   - the lock issues strictly increasing tokens: a grant or a stamp with token t is legal only if
//     t exceeds every token issued or stamped before it;
//   - an accepted write must present the current token (t == issued) and must not be older than
//     the last accepted write on that object; it then sets the object to (t, value);
//   - a read must return the object's last accepted (value, token), or ("", 0) before any write;
//   - refusals (Denied), failures (Failed) and releases have no effect and are always legal: the
//     checker checks safety, not liveness.
//
// A lock whose ops carry Permits = N > 1 is a fenced semaphore of N permits, every permit a grant
// with its own token, and is checked against "a fenced semaphore plus fenced registers" instead
// (the fence rule of docs/protocol.md for objects fenced by a semaphore):
//
//   - grants issue strictly increasing tokens across permits (t exceeds every token issued or
//     stamped before), and at most N permits are held at any instant: a grant while N are held
//     means one of them ended (revoked: the manager's revocations are not in the history), and
//     the checker tries each; a release ends its permit, a stamp ends them all;
//   - an accepted write presenting t is legal iff t is the token of a permit held at that point,
//     or of a permit that ended whose token is not below the object's recorded token (the
//     token of its last accepted write): a fence reading a lagging view may still see the permit
//     held, and only a held token below the record makes it read live. So a write with a token
//     whose permit ended before the write began, on an object a newer token wrote last, must have
//     been refused, as must one with a token no grant issued; holders of different permits may
//     write an object in any order, and an accepted write records its own token, lower or not;
//   - reads, refusals and failures are as for a lock.
//
// Unknown outcomes (timeouts, resets) may or may not have taken effect; see Outcome.
//
// Requirements on the recorded history:
//
//   - Call and Return come from one clock shared by all clients, Call taken before the request
//     is sent and Return after its response arrived. Use a monotonic clock (e.g. a fixed base
//     plus time.Since(start)): a wall-clock step or skew between processes shows up as a false
//     violation.
//   - Every grant and every stamp that can happen must be in the history (as OK, or as Unknown
//     with its Token when the token is known): a write presenting a token the history never
//     issued is reported as a forged token being accepted.
//   - Reads must be linearizable reads (from the API server or database, not an informer cache).
//   - Lock is the partition key: every Write and Read of an Object must carry the same Lock.
//   - Objects start out absent. An object created before the first grant can be recorded as a
//     Write OK with Token 0 placed before any Acquire.
package lincheck

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// Kind is the kind of an operation.
type Kind string

// The kinds of operations.
const (
	Acquire Kind = "acquire" // a grant: Token is the token returned
	Stamp   Kind = "stamp"   // the lock's token floor was raised without a grant (its Lease was recreated); Token is the new floor
	Write   Kind = "write"   // a fenced write of Value to Object, presenting Token
	Read    Kind = "read"    // a read of Object: Value and ReadToken observed (the object's value and recorded token)
	Release Kind = "release" // a release of the grant with Token
)

// Outcome is what the client learned of an operation's effect.
//
// Unknown operations are checked as never having returned (porcupine Return = math.MaxInt64),
// so they may take effect at any point after their Call, or not at all. (Before handing them
// to porcupine, Check bounds their Return where the rest of the history allows it without
// changing the verdict, e.g. by the first read that observed the write's value: see bounds.)
// The model:
//   - a Write Unknown is checked both ways: as a write that took effect (only where it would
//     have been a legal accepted write) and as one that did not;
//   - an Acquire or Stamp Unknown with a Token is checked both ways likewise; with Token 0 (the
//     token was never learned) it is a no-op. Were that grant real, the model misses that it
//     superseded the previous holder, so a later accepted write by that holder goes unflagged:
//     this only weakens the check, it never reports a false violation;
//   - a Read Unknown returned nothing and is a no-op.
type Outcome string

// The outcomes.
const (
	OK      Outcome = "ok"      // took effect (write accepted, acquire granted, read returned)
	Denied  Outcome = "denied"  // definitely refused without effect (the fence refused a write as stale/forged)
	Failed  Outcome = "failed"  // definitely no effect for another reason (e.g. acquire gave up)
	Unknown Outcome = "unknown" // may or may not have taken effect (timeout, connection reset, API server down mid-request)
)

// Op is one operation of a history.
type Op struct {
	Client    int     `json:"client"`
	Kind      Kind    `json:"kind"`
	Lock      string  `json:"lock"`             // namespace/name of the lock (the partition key)
	Object    string  `json:"object,omitempty"` // e.g. "configmaps/ns/ledger" or "settlementbatches/ns/b1" (write, read)
	Token     uint64  `json:"token,omitempty"`
	Value     string  `json:"value,omitempty"`
	ReadToken uint64  `json:"readToken,omitempty"`
	Outcome   Outcome `json:"outcome"`
	Call      int64   `json:"call"`           // unix nanoseconds, invocation
	Return    int64   `json:"return"`         // unix nanoseconds, response (ignored for Unknown: treat as never returned)
	Note      string  `json:"note,omitempty"` // free text for the visualization (e.g. the denial message)
	// Permits is the number of permits of a semaphore (above 1), on every op of its lock; zero or
	// one for a lock.
	Permits int `json:"permits,omitempty"`

	// written is set by Check on a semaphore's ops whose token some write of the history
	// presents: only those tokens' ends are kept in the model's state.
	written bool
}

// SaveHistory writes h to path as JSON lines, one Op per line.
func SaveHistory(path string, h []Op) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for i := range h {
		if err := enc.Encode(&h[i]); err != nil {
			return fmt.Errorf("encoding op %d: %w", i, err)
		}
	}
	return w.Flush()
}

// LoadHistory reads a history written by SaveHistory. Blank lines are skipped.
func LoadHistory(path string) ([]Op, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	r := bufio.NewReader(f)
	var h []Op
	for line := 1; ; line++ {
		b, err := r.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		if b = bytes.TrimSpace(b); len(b) > 0 {
			var op Op
			if uerr := json.Unmarshal(b, &op); uerr != nil {
				return nil, fmt.Errorf("%s:%d: %w", path, line, uerr)
			}
			h = append(h, op)
		}
		if err != nil { // io.EOF
			return h, nil
		}
	}
}

// validate rejects histories the checker cannot interpret soundly.
func validate(history []Op) error {
	objectLock := map[string]string{}
	permits := map[string]int{}
	for i, op := range history {
		if n, ok := permits[op.Lock]; ok && n != max(op.Permits, 1) {
			return fmt.Errorf("op %d (%s): lock %q has %d permits here and %d before: every op of a lock "+
				"carries the same Permits", i, op.Kind, op.Lock, max(op.Permits, 1), n)
		}
		permits[op.Lock] = max(op.Permits, 1)
		switch op.Kind {
		case Acquire, Stamp, Release:
		case Write, Read:
			if op.Object == "" {
				return fmt.Errorf("op %d (%s): no object", i, op.Kind)
			}
			if l, ok := objectLock[op.Object]; ok && l != op.Lock {
				return fmt.Errorf("op %d: object %q is used under lock %q and lock %q: "+
					"an object must belong to one lock (the partition key)", i, op.Object, l, op.Lock)
			}
			objectLock[op.Object] = op.Lock
		default:
			return fmt.Errorf("op %d: unknown kind %q", i, op.Kind)
		}
		switch op.Outcome {
		case OK, Denied, Failed:
			if op.Return < op.Call {
				return fmt.Errorf("op %d (%s): returns (%d) before it is called (%d)", i, op.Kind, op.Return, op.Call)
			}
		case Unknown:
		default:
			return fmt.Errorf("op %d (%s): unknown outcome %q", i, op.Kind, op.Outcome)
		}
		if op.Lock == "" {
			return fmt.Errorf("op %d (%s): no lock", i, op.Kind)
		}
	}
	return nil
}
