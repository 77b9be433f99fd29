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

package lock

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
)

// maxIdentityLen is the longest identity the FencedLock status shows in full (status.holder). It
// leaves room for holderBinding identities, "<username>/...", whose service-account usernames
// alone can exceed 253 bytes.
const maxIdentityLen = 1024

type identityError struct{ msg string }

func (e *identityError) Error() string        { return e.msg }
func (e *identityError) Is(target error) bool { return target == ErrInvalidIdentity }

// ValidateIdentity returns an error matching ErrInvalidIdentity unless id may be used as a holder
// identity: not empty, at most 1024 bytes, and not starting with "pod/", which is reserved for the
// grants the controller makes to queued pods (it releases such a grant at once when no such pod
// exists, and the API server refuses it from anyone but the manager).
func ValidateIdentity(id string) error {
	switch {
	case id == "":
		return &identityError{"holder identity must not be empty"}
	case strings.HasPrefix(id, locksv1alpha1.PodHolderPrefix):
		return &identityError{fmt.Sprintf(
			"identity %q is reserved for pods queued by the controller; choose another identity", id)}
	case len(id) > maxIdentityLen:
		return &identityError{fmt.Sprintf(
			"identity %.40q... is %d bytes long; at most %d are allowed", id, len(id), maxIdentityLen)}
	}
	return nil
}

// defaultIdentity is unique per Locker, since two processes must never share an identity:
// hostname, pid and a random suffix.
func defaultIdentity() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
}
