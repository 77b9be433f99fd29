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

// Package leader elects one leader among replicas with a FencedLock, and fences the leader's
// writes with the lock's token.
//
// Guaranteed: at most one replica holds a term of the lock at a time, as the API server orders
// the lock Lease's writes, and each term has its own fencing token, strictly higher than every
// earlier term's. A write that presents its term's token to fenced storage (an object labelled
// fencedlock.io/fenced-by with the lock's name, a database row with a fence column) is refused
// once a later term was granted, however long its replica was paused and whatever its clock says.
//
// Not guaranteed: that only one replica acts as leader. A replica learns that it lost its term
// only when it next renews, or when the lease duration has passed on its own clock without a
// renewal; a replica paused past its lease (GC, SIGSTOP, a descheduled VM) resumes believing it
// leads and acts until then. That is the gap client-go's leaderelection documents ("does not
// guarantee that only one client is acting as a leader (a.k.a. fencing)"); here the fence closes
// it for writes that present the token, and only for those. Side effects outside fenced storage
// (an e-mail, a call to another service) are not fenced.
//
// Timing: loss is judged by observation on the replica's own clock, never by comparing
// timestamps of two machines; the fencedlock manager revokes a term whose holder stopped renewing
// for the lock's lease duration (spec.leaseDurationSeconds). A failover after a crash therefore
// takes about the lease duration plus the manager's expiry check; after Resign, one Lease write
// hands the lock to the next campaigner, which waits on a watch (no polling).
//
// An Elector (New) campaigns for one lock under one holder identity. Its API reads like the
// two models users know: etcd's concurrency.Election (Campaign, Resign, Leader, Observe) and
// client-go's leaderelection (Run, with OnStartedLeading, OnStoppedLeading and OnNewLeader
// callbacks). The lock must be a lock (spec.permits 1), not a semaphore.
//
// Package crleader (below this one) switches a controller-runtime manager to fenced leadership.
package leader
