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

// Package crleader switches a controller-runtime manager from client-go's leader election to
// fenced leadership (package leader) by changing its setup, not its reconcilers:
//
//	mgr, err := crleader.NewManager(ctx, cfg, ctrl.Options{...}, crleader.Options{Namespace: ns, Name: "my-operator"})
//
// The manager's controllers run only while this replica leads FencedLock Namespace/Name, as with
// LeaderElection: true. Every write of the manager's client (create, update, patch, delete, and
// through subresources such as status) presents the current term's token with the request: the
// client impersonates its own user and adds userInfo.extra fencedlock.io/token. Objects it
// creates in the lock's namespace carry label fencedlock.io/fenced-by: <the lock>, so the fence
// refuses a deposed leader's writes to them once a later term was granted, /status and DELETE
// included. Without a term a write is refused locally (ErrNotLeader) and never sent. A lost term
// stops the manager, as a lost lease does with LeaderElection: true, and the token of a later
// term never rides on this manager's requests.
//
// Writes that change no state are sent as they are, without a token: Events, and the
// authentication.k8s.io and authorization.k8s.io reviews (the metrics endpoint's authorization).
//
// Permissions, besides those the reconcilers need and pkg/lock's on Leases (see docs/leader.md
// for the manifests): impersonate the replica's own user (a service account: impersonate on
// serviceaccounts, resourceNames [its name], in its namespace; any other user: impersonate on
// users and on each of its groups, by name) and impersonate on
// authentication.k8s.io userextras/fencedlock.io/token, which only a ClusterRole can grant.
package crleader
