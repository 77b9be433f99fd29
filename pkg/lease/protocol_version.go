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

package lease

import (
	"errors"
	"fmt"
	"strconv"

	coordinationv1 "k8s.io/api/coordination/v1"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
)

// ProtocolVersion is the version of the protocol (docs/protocol.md, "Versions") this package
// speaks, and writes on the lock's Lease with every transition (annotation
// fencedlock.io/protocol). Version 1 is the protocol before the annotation existed: a Lease
// without it is read as version 1, which version 2 reads unchanged. The version is raised only by
// a change an older party would misread; such a party then stops with a VersionError.
const ProtocolVersion = 2

// VersionError means a lock's Lease was written by a newer protocol version than this party
// speaks: reading it as this version could misread it, so nothing is decided from it. Upgrade the
// client (or the manager) to one that speaks Version.
type VersionError struct {
	Namespace, Name string
	// Version is the Lease's; Supported is this party's (ProtocolVersion).
	Version, Supported int
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("lease %s/%s was written by fencedlock protocol version %d, newer than version %d "+
		"that this client speaks: upgrade it (kubectl fencedlock, pkg/lock, the manager) before using the lock",
		e.Namespace, e.Name, e.Version, e.Supported)
}

// IsNewerProtocol reports whether err says a Lease was written by a newer protocol version.
func IsNewerProtocol(err error) bool { var v *VersionError; return errors.As(err, &v) }

// CheckProtocol returns the protocol version lock Lease l says it was written by (1 when it says
// none), a *VersionError when that is above ProtocolVersion, and an error when the annotation is
// not a version. Every reader of a lock's Lease calls it (Read does), so no party decides on a
// Lease it could misread.
func CheckProtocol(l *coordinationv1.Lease) (int, error) {
	v, ok := l.Annotations[locksv1alpha1.ProtocolAnnotation]
	if !ok {
		return 1, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || strconv.Itoa(n) != v {
		return 0, fmt.Errorf("lease %s/%s: annotation %s: %q is not a protocol version (a decimal from 1)",
			l.Namespace, l.Name, locksv1alpha1.ProtocolAnnotation, v)
	}
	if n > ProtocolVersion {
		return n, &VersionError{Namespace: l.Namespace, Name: l.Name, Version: n, Supported: ProtocolVersion}
	}
	return n, nil
}

// stampProtocol records on l, a lock Lease a transition of this version writes, that this
// version wrote it. Callers have read l (Read), so its version is not above ours: the stamp
// never lowers it.
func stampProtocol(l *coordinationv1.Lease) {
	setAnnotation(l, locksv1alpha1.ProtocolAnnotation, strconv.Itoa(ProtocolVersion))
}
