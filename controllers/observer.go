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

package controllers

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/token"
)

// observation is what the controller saw of a Lease and when, on its own clock. Expiry is judged
// from these local times only (as client-go leaderelection does with observedTime), never by
// comparing a holder's renewTime with this machine's clock.
type observation struct {
	holder string
	token  token.Token
	// renewTime is the holder's last spec.renewTime seen, and renewedAt when this controller first
	// saw it. Only a new renewTime of the same grant is a renewal: any other write to the Lease (a
	// bystander's label, an annotation) must not keep a dead holder's grant alive.
	renewTime *metav1.MicroTime
	renewedAt time.Time
	// acquiredAt is when this controller first saw the current holder with the current token.
	acquiredAt time.Time
	// served is the lock's last served queue ticket as last seen: a grant that serves a new one
	// came from the queue (see lease.LastSignOfLife).
	served lease.Ticket
	// notReadySince is, for a pod holder, when this controller first saw it not Ready since it was
	// granted or last Ready; zero while it is Ready or the holder is not a pod.
	notReadySince time.Time
	// status is the budget of status writes (coalesced on a busy lock), and revoked how many
	// grants this controller revoked since the last status write.
	status  statusBudget
	revoked int
	// ungated is the holder pod this controller last ungated: until the cache shows the patch,
	// the pod still looks gated, and patching it again would be a wasted write.
	ungated types.UID
	// failures counts the reconciles of a held lock that failed in a row (see retryBackoff).
	failures int
}

// observer remembers the last observation of each lock. After a restart every lease gets a fresh
// observation, which can only postpone an expiry, never advance it.
type observer struct {
	mu  sync.Mutex
	obs map[types.NamespacedName]observation
	// seen is what the last judgment of each lock's queue saw of its queued clients (lease.Judge).
	seen map[types.NamespacedName]map[lease.Ticket]lease.Seen
	// held counts the locks whose last observation has a holder (the locks-held gauge).
	held int
}

func newObserver() *observer {
	return &observer{obs: map[types.NamespacedName]observation{}, seen: map[types.NamespacedName]map[lease.Ticket]lease.Seen{}}
}

// observe records the Lease state seen at now and returns the updated observation and the one it
// replaced (zero if none).
func (o *observer) observe(key types.NamespacedName, st lease.State, podReady *bool, now time.Time) (cur, prev observation) {
	o.mu.Lock()
	defer o.mu.Unlock()
	prev = o.obs[key]
	cur = nextObservation(prev, st, podReady, o.seen[key], now)
	o.obs[key] = cur
	o.countHeld(prev, -1)
	o.countHeld(cur, +1)
	return cur, prev
}

// noteUngated records that the holder pod uid was ungated.
func (o *observer) noteUngated(key types.NamespacedName, uid types.UID) {
	o.mu.Lock()
	defer o.mu.Unlock()
	obs := o.obs[key]
	obs.ungated = uid
	o.obs[key] = obs
}

// seenOf returns what the last judgment of the lock's queue saw of its queued clients.
func (o *observer) seenOf(key types.NamespacedName) map[lease.Ticket]lease.Seen {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.seen[key]
}

// setSeen records what a judgment of the lock's queue saw.
func (o *observer) setSeen(key types.NamespacedName, seen map[lease.Ticket]lease.Seen) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(seen) == 0 {
		delete(o.seen, key)
		return
	}
	o.seen[key] = seen
}

// failed counts a failed reconcile of the lock and returns how long to wait before retrying.
func (o *observer) failed(key types.NamespacedName) time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	obs := o.obs[key]
	obs.failures++
	o.obs[key] = obs
	return retryBackoff(obs.failures)
}

// succeeded records a successful reconcile, ending the lock's retry backoff.
func (o *observer) succeeded(key types.NamespacedName) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if obs, ok := o.obs[key]; ok && obs.failures > 0 { // a forgotten lock stays forgotten
		obs.failures = 0
		o.obs[key] = obs
	}
}

// retryBackoff is the wait before retrying after the nth failure in a row: from one second,
// doubling, up to a minute. A lock whose status writes keep failing costs a write a minute.
func retryBackoff(n int) time.Duration {
	const base, limit = time.Second, time.Minute
	if n > 6 { // base<<6 is already past the limit
		return limit
	}
	return min(base<<max(n-1, 0), limit)
}

// noteRevoke counts a revocation made by this controller.
func (o *observer) noteRevoke(key types.NamespacedName) {
	o.mu.Lock()
	defer o.mu.Unlock()
	obs := o.obs[key]
	obs.revoked++
	o.obs[key] = obs
}

// statusWait returns how long a changed status must wait so that status writes of one lock are
// at least minInterval apart; zero means write now.
func (o *observer) statusWait(key types.NamespacedName, now time.Time, minInterval time.Duration) time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.obs[key].status.wait(now, minInterval)
}

// statusWritten records a status write and returns the revocations made since the previous one.
func (o *observer) statusWritten(key types.NamespacedName, now time.Time, minInterval time.Duration) (revoked int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	obs := o.obs[key]
	revoked, obs.revoked = obs.revoked, 0
	obs.status = obs.status.spend(now, minInterval)
	o.obs[key] = obs
	return revoked
}

// forget drops the observation of a lock that no longer exists.
func (o *observer) forget(key types.NamespacedName) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.countHeld(o.obs[key], -1)
	delete(o.obs, key)
	delete(o.seen, key)
}

// countHeld adds d to the locks held if obs has a holder, and publishes the count. Called with
// o.mu held.
func (o *observer) countHeld(obs observation, d int) {
	if obs.holder != "" {
		o.held += d
		setLocksHeld(o.held)
	}
}

// nextObservation is the pure part of observe. podReady is the holder pod's readiness, nil when
// the holder is not a pod; seen is what the last judgment of the queue saw of its clients. A new
// grant counts as renewed at its holder's last sign of life (lease.LastSignOfLife): a client
// handed the lock from the queue has shown none since its last beat.
func nextObservation(prev observation, st lease.State, podReady *bool, seen map[lease.Ticket]lease.Seen,
	now time.Time) observation {
	cur := prev
	cur.served = st.Served
	switch {
	case prev.holder != st.Holder || prev.token != st.Token || prev.acquiredAt.IsZero():
		cur.holder, cur.token, cur.renewTime = st.Holder, st.Token, st.RenewTime.DeepCopy()
		cur.acquiredAt, cur.renewedAt = now, now
		if !prev.acquiredAt.IsZero() && st.Held() {
			cur.renewedAt = lease.LastSignOfLife(st, prev.served, seen, now)
		}
		cur.notReadySince = time.Time{}
	case !sameTime(prev.renewTime, st.RenewTime):
		// The value is the holder's claim on its own clock: only the change counts, observed here.
		cur.renewTime, cur.renewedAt = st.RenewTime.DeepCopy(), now
	}
	switch {
	case podReady == nil || *podReady:
		cur.notReadySince = time.Time{}
	case cur.notReadySince.IsZero():
		cur.notReadySince = now
	}
	return cur
}

// sameTime reports whether two optional times are the same instant (both unset counts as same).
func sameTime(a, b *metav1.MicroTime) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(b)
}
