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
package fence

import (
	"fmt"

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
	Current   token.Token
}

func (e *ForgedTokenError) Error() string {
	return fmt.Sprintf("fencing token %s for lock %s was never issued (the lock's current token is %s); "+
		"write with the token you were granted", e.Presented, e.Lock, e.Current)
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
