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

// Package fence is the storage-side rule of fencing: a write carrying token t is accepted only if
// t is not lower than the token of the last accepted write (the `fence_token < $token` guard of a
// SQL fence) and not lower than the lock's current token, and refused if t was never issued. The
// admission webhook and the SQL fence both report refusals with these error types.
//
// A semaphore (a lock admitting several holders at once, each permit a grant with its own token)
// is fenced as a whole instead (CheckPermit): t must be the token of a permit held now. Its
// holders write the same objects concurrently, in any order, so the object's last token does not
// order them; a permit that ended never comes back, so a token that is not held now never will be.
package fence

import (
	"fmt"
	"strings"

	"github.com/fencedlock/fencedlock/pkg/token"
)

// StaleTokenError reports a write made with a token lower than the lock's current token or than
// the token the object was last written with.
type StaleTokenError struct {
	// Lock names the lock, as namespace/name.
	Lock string
	// Presented is the writer's token.
	Presented token.Token
	// Current is the token it lost to.
	Current token.Token
	// ByObject is true when Current is the token the object was last written with, false when it
	// is the lock's current token.
	ByObject bool
}

func (e *StaleTokenError) Error() string {
	by := "the lock was re-acquired with token"
	if e.ByObject {
		by = "the object was already written with token"
	}
	return fmt.Sprintf("stale fencing token %s for lock %s: %s %s; re-acquire and retry",
		e.Presented, e.Lock, by, e.Current)
}

// ForgedTokenError reports a token higher than any the lock has issued.
type ForgedTokenError struct {
	Lock      string
	Presented token.Token
	// Current is the lock's current token; for a semaphore, the last token it issued.
	Current token.Token
	// Semaphore is set when Lock is a semaphore.
	Semaphore bool
}

func (e *ForgedTokenError) Error() string {
	if e.Semaphore {
		return fmt.Sprintf("fencing token %s for semaphore %s was never issued (the last token it issued is %s); "+
			"write with the token of the permit you were granted", e.Presented, e.Lock, e.Current)
	}
	return fmt.Sprintf("fencing token %s for lock %s was never issued (the lock's current token is %s); "+
		"write with the token you were granted", e.Presented, e.Lock, e.Current)
}

// NotHeldError reports a write to an object fenced by a semaphore with a token that no permit
// holds now: its permit was released or revoked (or, below the last issued token, it was never a
// permit's token). It never becomes valid again: every later grant has a higher token.
type NotHeldError struct {
	// Lock names the semaphore, as namespace/name.
	Lock      string
	Presented token.Token
	// Written is the token the object was last written with, when it is above Presented; zero
	// otherwise.
	Written token.Token
	// How says how the permit ended when that is known ("revoked by the controller because its
	// lease expired"), empty otherwise.
	How string
	// Held are the tokens of the permits held now, and Limit how many the semaphore admits: what
	// the writer can do instead.
	Held  []token.Token
	Limit int
}

func (e *NotHeldError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "fencing token %s of semaphore %s is no longer held", e.Presented, e.Lock)
	how := e.How
	if how == "" {
		how = "its permit was released or revoked"
	}
	fmt.Fprintf(&b, " (%s)", how)
	if !e.Written.IsZero() {
		fmt.Fprintf(&b, ", and the object was already written with token %s", e.Written)
	}
	switch len(e.Held) {
	case 0:
		fmt.Fprintf(&b, "; none of its %d permits is held now", e.Limit)
	default:
		held := make([]string, len(e.Held))
		for i, t := range e.Held {
			held[i] = t.String()
		}
		fmt.Fprintf(&b, "; %d of %d permits are held now, with tokens %s", len(e.Held), e.Limit, strings.Join(held, ", "))
	}
	return b.String()
}

// Check applies the fence to a write presenting token presented, on an object last written with
// recorded (zero: none) for a lock whose current token is current.
func Check(lock string, presented, recorded, current token.Token) error {
	switch {
	case presented > current:
		return &ForgedTokenError{Lock: lock, Presented: presented, Current: current}
	case presented < current:
		return &StaleTokenError{Lock: lock, Presented: presented, Current: current}
	case presented < recorded:
		return &StaleTokenError{Lock: lock, Presented: presented, Current: recorded, ByObject: true}
	}
	return nil
}

// CheckPermit applies the fence of a semaphore to a write presenting token presented, on an
// object last written with recorded (zero: none), for a semaphore whose last issued token is last;
// held says whether a permit is held with presented now. A token above last was never issued; one
// not held now is refused whatever the object's record. A held token is accepted even below
// recorded: another holder wrote the object meanwhile. held must then come from a view at least as
// new as the write that recorded recorded (the caller reads the semaphore again, live, when it
// cannot tell): a view older than that write may still show a permit revoked since.
func CheckPermit(lock string, presented, recorded, last token.Token, held bool) error {
	switch {
	case presented > last:
		return &ForgedTokenError{Lock: lock, Presented: presented, Current: last, Semaphore: true}
	case !held:
		e := &NotHeldError{Lock: lock, Presented: presented}
		if recorded > presented {
			e.Written = recorded
		}
		return e
	}
	return nil
}
