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
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/token"
)

// observation is what the controller saw of one grant (a permit of the lock, its holder for a
// lock) and when, on its own clock. Expiry is judged from these local times only (as client-go
// leaderelection does with observedTime), never by comparing a holder's renewTime with this
// machine's clock.
type observation struct {
	holder string
	token  token.Token
	// renewTime is the holder's last renewTime seen, and renewedAt when this controller first
	// saw it. Only a new renewTime of the same grant is a renewal: any other write to the Lease (a
	// bystander's label, an annotation, another permit's renewal) must not keep a dead holder's
	// grant alive.
	renewTime *metav1.MicroTime
	renewedAt time.Time
	// acquiredAt is when this controller first saw the current holder with the current token.
	acquiredAt time.Time
	// served is the queue ticket the permit was last seen served from: a grant that serves a new
	// one came from the queue (see lease.LastSignOfLife).
	served lease.Ticket
	// notReadySince is, for a pod holder, when this controller first saw it not Ready since it was
	// granted or last Ready; zero while it is Ready or the holder is not a pod.
	notReadySince time.Time
	// readySeen says this controller saw the pod holder Ready since the grant: its start-up is
	// over (lease.PodReadyDeadline).
	readySeen bool
}

// lockObservation is what the controller keeps of one lock: an observation per held permit, by
// permit number, and the lock's own bookkeeping.
type lockObservation struct {
	grants map[int]observation
	// notedRV is the resourceVersion of the Lease whose renewals noteRenewals noted last, until a
	// reconcile observes one at least as new: one that read an older Lease from the cache (it
	// started before the renewal) must not take the renewal back.
	notedRV uint64
	// status is the budget of status writes (coalesced on a busy lock), and revoked how many
	// grants this controller revoked since the last status write.
	status  statusBudget
	revoked int
	// failures counts the reconciles of the lock that failed in a row (see retryBackoff).
	failures int
	// timer says that the lock's last reconcile left it a wake-up (a deadline it requeued for, or
	// a retry), which nothing since has consumed (see setTimer).
	timer bool
	// served is the highest fencedlock.io/ticket this controller read on the lock's Lease that was
	// not forged: what a forged one is read back to (servedFloor).
	served lease.Ticket
	// ungated are the holder pods this controller ungated, and when: until the cache shows the
	// patch, a pod still looks gated, and patching it again would be a wasted write. An entry
	// goes once its pod holds no permit and the cache has had ungatedMemory to catch up.
	ungated map[types.UID]time.Time
}

// ungatedMemory is how long an ungated pod that the Lease no longer shows as holder is
// remembered: far longer than any cache lag.
const ungatedMemory = time.Minute

// observer remembers the last observation of each lock. After a restart every lease gets a fresh
// observation, which can only postpone an expiry, never advance it.
type observer struct {
	mu  sync.Mutex
	obs map[types.NamespacedName]*lockObservation
	// seen is what the last judgment of each lock's queue saw of its queued clients (lease.Judge).
	seen map[types.NamespacedName]map[lease.Ticket]lease.Seen
	// idle is when each lock's unused waiter Leases were first seen unused (idleWaiters).
	idle map[types.NamespacedName]map[string]idleMark
	// malformed is what the last look at each lock's waiter Leases found malformed, by message
	// (newlyMalformed).
	malformed map[types.NamespacedName]map[string]struct{}
	// held and heldPermits count the locks with a permit held, and the permits held, in the last
	// observation of every lock (the held gauges).
	held, heldPermits int
}

func newObserver() *observer {
	return &observer{obs: map[types.NamespacedName]*lockObservation{}, seen: map[types.NamespacedName]map[lease.Ticket]lease.Seen{},
		idle: map[types.NamespacedName]map[string]idleMark{}, malformed: map[types.NamespacedName]map[string]struct{}{}}
}

// lock returns the lock's observation, creating it; the caller holds mu.
func (o *observer) lock(key types.NamespacedName) *lockObservation {
	lo := o.obs[key]
	if lo == nil {
		lo = &lockObservation{}
		o.obs[key] = lo
	}
	return lo
}

// observe records the Lease state seen at now (st, of the Lease at resourceVersion rv) and
// returns each held permit's observation now and before, by permit number. podReady says, for a
// permit held by a pod that exists and runs (is not gated waiting for its other locks), whether
// it is Ready (nil otherwise). On a Lease older than the
// one whose renewals were noted last, the grants noted keep their observation.
func (o *observer) observe(key types.NamespacedName, st lease.State, rv string, podReady func(lease.Permit) *bool,
	now time.Time) (cur, prev map[int]observation) {
	o.mu.Lock()
	defer o.mu.Unlock()
	lo, known := o.obs[key]
	if !known {
		lo = o.lock(key)
	}
	prev = lo.grants
	v, err := strconv.ParseUint(rv, 10, 64)
	stale := err == nil && v < lo.notedRV
	if !stale {
		lo.notedRV = 0
	}
	cur = make(map[int]observation, len(st.Permits))
	for _, p := range st.Permits {
		if was, ok := prev[p.Number]; stale && ok && was.holder == p.Holder && was.token == p.Token {
			cur[p.Number] = was
			continue
		}
		cur[p.Number] = nextObservation(prev[p.Number], st.OfPermit(p), podReady(p), o.seen[key], known, now)
	}
	o.count(len(cur), len(prev))
	lo.grants = cur
	for uid, at := range lo.ungated {
		if now.Sub(at) > ungatedMemory && !slices.ContainsFunc(st.Permits, func(p lease.Permit) bool {
			return strings.HasSuffix(p.Holder, "/"+string(uid))
		}) {
			delete(lo.ungated, uid)
		}
	}
	return cur, prev
}

// noteRenewals records the renewals of the lock's Lease at resourceVersion rv, whose state st
// differs from the version before only by them (lease.OnlyRenewed), as observe would, and
// reports whether it did. It does not when the grants renewed are not the ones observed (none
// observed yet, after a start) or are pods' (judged by their pods), or when no timer is set to
// bring the lock's next reconcile (setTimer): the lock is then reconciled.
func (o *observer) noteRenewals(key types.NamespacedName, st lease.State, rv string, now time.Time) bool {
	v, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	lo, ok := o.obs[key]
	if !ok || !lo.timer || len(lo.grants) != len(st.Permits) {
		return false
	}
	for _, p := range st.Permits {
		prev, ok := lo.grants[p.Number]
		if !ok || prev.holder != p.Holder || prev.token != p.Token || prev.acquiredAt.IsZero() ||
			strings.HasPrefix(p.Holder, locksv1alpha1.PodHolderPrefix) {
			return false
		}
	}
	next := make(map[int]observation, len(st.Permits))
	for _, p := range st.Permits {
		next[p.Number] = nextObservation(lo.grants[p.Number], st.OfPermit(p), nil, o.seen[key], true, now)
	}
	lo.grants, lo.notedRV = next, v
	return true
}

// setTimer records whether the lock has a wake-up to come: Reconcile clears it when it starts (the
// workqueue hands the lock out once, whatever timer brought it) and sets it when it requeues the
// lock or fails. A renewal is only noted (noteRenewals) while it is set: a reconcile that ended
// on a Lease write counts on that write's event, and when the write conflicted with a renewal,
// that event is the renewal.
func (o *observer) setTimer(key types.NamespacedName, on bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if lo, ok := o.obs[key]; ok { // a forgotten lock stays forgotten
		lo.timer = on
	}
}

// noteUngated records that the controller ungated pod uid at now.
func (o *observer) noteUngated(key types.NamespacedName, uid types.UID, now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	lo := o.lock(key)
	if lo.ungated == nil {
		lo.ungated = map[types.UID]time.Time{}
	}
	lo.ungated[uid] = now
}

// wasUngated reports whether the controller ungated pod uid already.
func (o *observer) wasUngated(key types.NamespacedName, uid types.UID) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	lo, ok := o.obs[key]
	if !ok {
		return false
	}
	_, done := lo.ungated[uid]
	return done
}

// seenOf returns what the last judgment of the lock's queue saw (lease.Judge).
func (o *observer) seenOf(key types.NamespacedName) map[lease.Ticket]lease.Seen {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.seen[key]
}

// servedFloor returns the ticket the queue of st is to be read above: st.Served, or, when the
// Lease carries a forged ticket (lease.State.ForgedTicket, read as nothing served), the highest
// honest one this controller saw. Without that floor the waiter Leases of clients served long ago,
// which keep their holder and ticket until they go idle, would read as waiting again, and the
// repair would grant them.
func (o *observer) servedFloor(key types.NamespacedName, st lease.State) lease.Ticket {
	o.mu.Lock()
	defer o.mu.Unlock()
	lo := o.lock(key)
	if st.ForgedTicket == 0 {
		lo.served = max(lo.served, st.Served)
		return st.Served
	}
	return lo.served
}

// setSeen records what the judgment of the lock's queue saw.
func (o *observer) setSeen(key types.NamespacedName, seen map[lease.Ticket]lease.Seen) {
	o.mu.Lock()
	defer o.mu.Unlock()
	keepNonEmpty(o.seen, key, seen)
}

// keepNonEmpty sets m[key] to v, or deletes it when v is empty, so that idle locks cost nothing.
func keepNonEmpty[K comparable, MK comparable, MV any](m map[K]map[MK]MV, key K, v map[MK]MV) {
	if len(v) == 0 {
		delete(m, key)
		return
	}
	m[key] = v
}

// failed counts a failed reconcile of the lock and returns how long to wait before the next try.
func (o *observer) failed(key types.NamespacedName) time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	lo := o.lock(key)
	lo.failures++
	return retryBackoff(lo.failures)
}

// succeeded resets the lock's failure count.
func (o *observer) succeeded(key types.NamespacedName) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if lo, ok := o.obs[key]; ok { // a forgotten lock stays forgotten
		lo.failures = 0
	}
}

// retryBackoff is the wait before retrying a lock whose reconcile failed n times in a row:
// exponential from a second, at most a minute.
func retryBackoff(n int) time.Duration {
	const base, limit = time.Second, time.Minute
	if n > 6 { // base<<6 is already past the limit
		return limit
	}
	return min(base<<max(n-1, 0), limit)
}

// noteRevoke counts a revocation made by this controller, reported with the next status write.
func (o *observer) noteRevoke(key types.NamespacedName) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lock(key).revoked++
}

// statusWait returns how long the lock's next status write must wait (zero: write now).
func (o *observer) statusWait(key types.NamespacedName, now time.Time, minInterval time.Duration) time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	if lo, ok := o.obs[key]; ok {
		return lo.status.wait(now, minInterval)
	}
	return statusBudget{}.wait(now, minInterval)
}

// statusWrittenAt is when this controller last wrote the lock's status (zero: not since it
// started).
func (o *observer) statusWrittenAt(key types.NamespacedName) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	if lo, ok := o.obs[key]; ok {
		return lo.status.at
	}
	return time.Time{}
}

// statusWritten spends a status write and returns the revocations made since the last one.
func (o *observer) statusWritten(key types.NamespacedName, now time.Time, minInterval time.Duration) (revoked int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	lo := o.lock(key)
	revoked, lo.revoked = lo.revoked, 0
	lo.status = lo.status.spend(now, minInterval)
	return revoked
}

// forget drops a deleted lock.
func (o *observer) forget(key types.NamespacedName) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if lo, ok := o.obs[key]; ok {
		o.count(0, len(lo.grants))
	}
	delete(o.obs, key)
	delete(o.seen, key)
	delete(o.idle, key)
	delete(o.malformed, key)
}

// newlyMalformed records msgs, what this look at the lock's waiter Leases found malformed, and
// returns those the last look did not find: a malformed Lease is reported (a log line and a
// Warning Event) once, not on every reconcile of its lock, and again if it is mended and breaks
// anew.
func (o *observer) newlyMalformed(key types.NamespacedName, msgs []string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	before := o.malformed[key]
	if len(msgs) == 0 && before == nil {
		return nil // the usual case, on every reconcile: nothing to keep
	}
	now := make(map[string]struct{}, len(msgs))
	var fresh []string
	for _, m := range msgs {
		if _, seen := before[m]; !seen {
			fresh = append(fresh, m)
		}
		now[m] = struct{}{}
	}
	keepNonEmpty(o.malformed, key, now)
	return fresh
}

// idleOf returns the marks of the lock's unused waiter Leases.
func (o *observer) idleOf(key types.NamespacedName) map[string]idleMark {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.idle[key]
}

// setIdle records the marks of the lock's unused waiter Leases.
func (o *observer) setIdle(key types.NamespacedName, marks map[string]idleMark) {
	o.mu.Lock()
	defer o.mu.Unlock()
	keepNonEmpty(o.idle, key, marks)
}

// count updates the held gauges for a lock whose permits held went from before to now.
func (o *observer) count(now, before int) {
	o.heldPermits += now - before
	o.held += min(now, 1) - min(before, 1)
	setHeld(o.held, o.heldPermits)
}

// nextObservation is the observation of one grant after the controller saw it in st (the lock
// as seen by the grant: State.OfPermit) at now. known says the controller observed the lock
// before (not the first look after a start): only then can a grant be new since the last look.
func nextObservation(prev observation, st lease.State, podReady *bool, seen map[lease.Ticket]lease.Seen,
	known bool, now time.Time) observation {
	cur := prev
	cur.served = st.Served
	switch {
	case prev.holder != st.Holder || prev.token != st.Token || prev.acquiredAt.IsZero():
		cur.holder, cur.token, cur.renewTime = st.Holder, st.Token, st.RenewTime.DeepCopy()
		cur.acquiredAt, cur.renewedAt = now, now
		if known && st.Held() {
			cur.renewedAt = lease.LastSignOfLife(st, prev.served, seen, now)
		}
		cur.notReadySince, cur.readySeen = time.Time{}, false
	case !lease.SameTime(prev.renewTime, st.RenewTime):
		// The value is the holder's claim on its own clock: only the change counts, observed here.
		cur.renewTime, cur.renewedAt = st.RenewTime.DeepCopy(), now
	}
	switch {
	case podReady == nil:
		cur.notReadySince = time.Time{}
	case *podReady:
		cur.notReadySince, cur.readySeen = time.Time{}, true
	case cur.notReadySince.IsZero():
		cur.notReadySince = now
	}
	return cur
}
