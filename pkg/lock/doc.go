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

// Package lock is the Go client of fencedlock: acquire a FencedLock, receive its fencing token,
// renew and release it, and learn when the grant is lost.
//
// A Locker (New, NewForConfig) acquires one lock under one holder identity; it does no I/O until
// called. Acquire waits for the lock, TryAcquire takes it only if it is free now; both return a
// Grant, whose Token is fixed for its life. Grant.KeepAlive renews it in the background until
// stopped; Grant.Lost and Grant.Err say when and why it was lost. Every error a call returns is
// classified by this package's sentinels (errors.Is) and types (errors.As): see errors.go.
//
// A FencedLock with spec.permits above 1 is a semaphore: Acquire and TryAcquire then take one of
// its permits (Grant.Permit), each a grant with its own token, and wait in the lock's one queue
// when every permit is held. A holder identity holds at most one permit of a lock.
//
// Permissions: get, list, watch, create and update on Leases of the lock's namespace: the lock's
// Lease (the lock's name), and the lock's queue and waiter Leases (fencedlock-queue-<the
// FencedLock's uid>, fencedlock-wait-<uid>-<hash of the identity>). A waiter creates its own
// waiter Lease, and a release lists the lock's Leases by label. With watch on Leases of the
// namespace, not limited to names, a waiter waits on a watch of all of the lock's Leases and its
// grant follows the queue on it, so its release makes no read (Acquire); limited to names, it
// watches the lock Lease alone and reads the queue at release, one request more.
//
// The token, not this package, is what keeps data safe. A process can be paused (GC, SIGSTOP, a
// descheduled VM) at any instruction, including right after it checked that it still holds the
// lock; renewal loops pause with it. Pass Grant.Token with every write to fenced storage (a fenced
// Kubernetes object, a database row with a fence column) and let the storage refuse stale tokens.
package lock
