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

package fence

import (
	"errors"
	"testing"

	"github.com/fencedlock/fencedlock/pkg/token"
)

func TestCheckPermit(t *testing.T) {
	cases := []struct {
		name                      string
		presented, recorded, last token.Token
		held                      bool
		want                      error // nil: accepted
	}{
		{"held, object unwritten", 120, 0, 130, true, nil},
		{"held, above the object's token", 130, 120, 130, true, nil},
		// Concurrent holders write in any order: the caller confirms held from a view at least as
		// new as the write that recorded 130.
		{"held, below the object's token", 120, 130, 130, true, nil},
		{"above the last issued", 131, 0, 130, false,
			&ForgedTokenError{Lock: "default/pool", Presented: 131, Current: 130, Semaphore: true}},
		{"not held", 110, 110, 130, false, &NotHeldError{Lock: "default/pool", Presented: 110}},
		{"not held, below the object's token", 110, 130, 130, false,
			&NotHeldError{Lock: "default/pool", Presented: 110, Written: 130}},
		{"the last issued, released", 130, 0, 130, false, &NotHeldError{Lock: "default/pool", Presented: 130}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckPermit("default/pool", tc.presented, tc.recorded, tc.last, tc.held)
			switch want := tc.want.(type) {
			case nil:
				if err != nil {
					t.Fatalf("CheckPermit = %v; want nil", err)
				}
			case *ForgedTokenError:
				if got, ok := errors.AsType[*ForgedTokenError](err); !ok || *got != *want {
					t.Fatalf("CheckPermit = %#v; want %#v", err, want)
				}
			case *NotHeldError:
				got, ok := errors.AsType[*NotHeldError](err)
				if !ok || got.Lock != want.Lock || got.Presented != want.Presented || got.Written != want.Written {
					t.Fatalf("CheckPermit = %#v; want %#v", err, want)
				}
			}
		})
	}
}

func TestNotHeldErrorMessage(t *testing.T) {
	e := &NotHeldError{Lock: "default/pool", Presented: 120, How: "revoked by the controller because its lease expired",
		Held: []token.Token{130, 131}, Limit: 3}
	want := "fencing token 120 of semaphore default/pool is no longer held (revoked by the controller because its lease " +
		"expired); 2 of 3 permits are held now, with tokens 130, 131"
	if e.Error() != want {
		t.Fatalf("Error() = %q\nwant      %q", e.Error(), want)
	}
	e = &NotHeldError{Lock: "default/pool", Presented: 120, Written: 140, Limit: 2}
	want = "fencing token 120 of semaphore default/pool is no longer held (its permit was released or revoked), and the " +
		"object was already written with token 140; none of its 2 permits is held now"
	if e.Error() != want {
		t.Fatalf("Error() = %q\nwant      %q", e.Error(), want)
	}
}
