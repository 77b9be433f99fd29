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

// Package token defines fencing tokens: strictly increasing integers, written as decimal strings
// so they can be used verbatim in annotations and environment variables.
//
// A token is a Lease resourceVersion, which the API server derives from etcd's global revision.
// Since Kubernetes 1.35 (KEP-5504) resourceVersions are documented to be comparable as integers;
// the parser follows the same well-formedness rules as
// k8s.io/apimachinery/pkg/util/resourceversion and additionally bounds tokens to 64 bits.
package token

import (
	"errors"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/util/resourceversion"
)

// Token is a fencing token. The zero Token is never issued and means "no token".
type Token uint64

// ErrMalformed is returned (wrapped) by Parse for anything that is not a well-formed token.
var ErrMalformed = errors.New("malformed fencing token")

// maxLen is the number of decimal digits of the largest uint64.
const maxLen = 20

// Parse parses a token: a positive decimal integer without sign, spaces or leading zeros, at most
// 2^64-1.
func Parse(s string) (Token, error) {
	if s == "" {
		return 0, fmt.Errorf("%w: empty; expected a positive decimal integer", ErrMalformed)
	}
	if len(s) > maxLen {
		return 0, fmt.Errorf("%w: %.24q... is longer than %d digits", ErrMalformed, s, maxLen)
	}
	// CompareResourceVersion validates both sides; "1" is a well-formed reference.
	if _, err := resourceversion.CompareResourceVersion(s, "1"); err != nil {
		return 0, fmt.Errorf("%w: %q: expected a positive decimal integer without sign, spaces or leading zeros",
			ErrMalformed, s)
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %q does not fit in 64 bits", ErrMalformed, s)
	}
	return Token(v), nil
}

// FromResourceVersion turns a resourceVersion into the token it denotes.
func FromResourceVersion(rv string) (Token, error) {
	t, err := Parse(rv)
	if err != nil {
		return 0, fmt.Errorf("resourceVersion %q cannot be a fencing token "+
			"(requires Kubernetes >= 1.36 with etcd storage): %w", rv, err)
	}
	return t, nil
}

// String returns the decimal form, or "" for the zero Token.
func (t Token) String() string {
	if t == 0 {
		return ""
	}
	return strconv.FormatUint(uint64(t), 10)
}

// IsZero reports whether t is the zero ("no token") value.
func (t Token) IsZero() bool { return t == 0 }
