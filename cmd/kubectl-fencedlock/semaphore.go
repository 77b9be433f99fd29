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

package main

import (
	"fmt"
	"strings"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
)

// What the plugin says of semaphores (FencedLocks with spec.permits above 1). A lock's output is
// as it was before semaphores: these are used only where a semaphore is shown.

// permitNote is what a grant line adds for a permit of a semaphore of permits (zero: unknown,
// the FencedLock could not be read): ", permit 2 of 3". Nothing for a lock.
func permitNote(permit, permits int) string {
	switch {
	case permits <= 1 && permit == 1:
		return ""
	case permits <= 0:
		return fmt.Sprintf(", permit %d", permit)
	}
	return fmt.Sprintf(", permit %d of %d", permit, permits)
}

// heldPermits lists a semaphore's holders with their permits and tokens, marking those that are
// other processes of identity's user and host: `permit 1 "a" (token 5), permit 2 "b" (token 7)`.
func heldPermits(st lease.State, identity string) string {
	held := make([]string, len(st.Permits))
	for i, p := range st.Permits {
		held[i] = fmt.Sprintf("permit %d %q (token %s)%s", p.Number, p.Holder, p.Token, ownNote(identity, p.Holder))
	}
	return strings.Join(held, ", ")
}

// describeSemaphore says why a semaphore cannot be taken by identity now, for the wait's progress
// lines and the error of a wait that timed out.
func describeSemaphore(st lease.State, identity string) string {
	if p, ok := st.HolderOf(identity); ok {
		return fmt.Sprintf("%q holds permit %d already (token %s), and an identity holds one permit at a time: "+
			"waiting for that one to end (use another --identity to hold two)", identity, p.Number, p.Token)
	}
	if st.Full() {
		return fmt.Sprintf("all %d permits held: %s", st.Limit, heldPermits(st, identity))
	}
	return fmt.Sprintf("%d of %d permits held, the free one going to the waiters ahead in its queue (last token %s)",
		len(st.Permits), st.Limit, st.Token)
}

// isSemaphore reports whether a FencedLock is shown as a semaphore: it admits more than one
// holder, or its Lease still carries permits after spec.permits was lowered to 1.
func isSemaphore(fl *locksv1alpha1.FencedLock) bool {
	return fl.Spec.PermitCount() > 1 || (fl.Status.Holder == "" && len(fl.Status.Holders) > 0)
}
