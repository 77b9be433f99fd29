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

// Package lockhook reaches what pkg/lock does not offer as public API, for this module's own
// tests and benchmarks.
package lockhook

// withoutQueue is package lock's func() lock.Option; typed as any because this package cannot
// import lock, which imports it.
var withoutQueue any

// SetWithoutQueue is called by package lock when it is initialized.
func SetWithoutQueue[O any](f func() O) { withoutQueue = f }

// WithoutQueue returns the option that makes a Locker's Acquire wait without joining the lock's
// queue, as clients before the queue did: it competes with every other unqueued waiter on each
// release, and queued waiters are served first. O is lock.Option:
//
//	lock.New(leases, ns, name, lockhook.WithoutQueue[lock.Option]())
func WithoutQueue[O any]() O { return withoutQueue.(func() O)() }
