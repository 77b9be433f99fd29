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

// Exhaustive model check of the lock protocol: a breadth-first search over every interleaving of
// the API calls of the manager, up to three clients ("a", "b", "c"), a pod and an adversary
// ("mallory"), running this package's pure functions on real coordinationv1.Lease objects. The
// engine is model_helpers_test.go, the adversary model_adversary_test.go.
//
// Modelled. The API server: the lock Lease (stamped by Initialize, owned by a FencedLock so
// QueueOf and LockOf find its queue), the queue Lease (the pod's entries, WriteQueue), one waiter
// Lease per client (and one of a seed's), one global revision counter, compare-and-swap updates
// through CAS, creates that fail when the object exists, and updates that change nothing kept at
// their version without a revision (as the API server does); tokens are resourceVersions, and so
// are tickets: a client's is the revision of its join (the create of its waiter Lease, or the
// update moving fencedlock.io/join on), the pod's the revision of the queue Lease write that added
// it (ticket 0 as stored). Each step is one API call (a read returns the current object; a write
// is a CAS on the copy its decision was computed from) with the local decisions after it, so any
// step of another actor can come between a read and the write computed from it. Clients run
// pkg/lock's sequence: attempt() (recognise a grant whose response was lost; Served -> hold;
// Skipped -> queue again; Grant as a newcomer, or join: JoinWaiter on its waiter Lease from the
// copy it wrote last, or read it first when it has none or its write conflicted, then
// MarkWaiting on the lock copy the join decided from, and again whenever a queued waiter sees the
// mark missing), hold (optional Renew), Release through Grant.update (ErrQueueNeeded -> one list of the
// lock's Leases, the queue Lease and the waiter Leases at one revision, merged as readQueue does;
// conflict -> re-read),
// and leave() when giving up (clear its waiter Lease's holder, then MarkLeft until it lands,
// releasing a grant served meanwhile). A beat is one write of its waiter Lease (a new renewTime,
// Stamp) from the copy it wrote last; one that finds the Lease no longer waiting (the manager
// dropped it) leaves the waiter unqueued. The manager runs reconcile: read the lock Lease; list
// the waiter Leases, read the queue Lease, merge them, Judge the queue, add the pod (planQueue);
// clear the holder of each dead client's waiter Lease as listed (a conflict, the waiter alive
// after all, goes on to the next and then ends the reconcile, as dropDead); write the queue Lease if a pod was added or dropped or a malformed entry is there
// (a conflict, or a pod added, ends the reconcile: the write's event brings the next); then one
// lock write of computePlan: Revoke (revoked) an expirable holder, Revoke (released) a gone
// pod's grant or one whose pod lost an earlier lock, else Settle if it changes anything, always
// with the judged queue. Semaphores: a configuration's permits makes the lock a semaphore of that
// many permits (lease.SetPermits on the stamped Lease), and retarget lets the user set
// spec.permits once, at any point; the manager's reconcile then writes lease.SetPermits first
// (2 -> 1 while two are held, 1 -> 2 with waiters queued, and back to the lock format). Every
// check is per permit (State.Permits): the manager revokes one expirable permit per write; a
// client recognises its own permit (HolderOf); and, as pkg/lock, a client that finds it holds a
// permit it does not know of waits for it to end instead of queueing. The pod is queued and
// granted by the manager and may be deleted, or lose an earlier lock (a pod asking for several)
// while it holds this one: the manager releases its grant and queues it again. The adversary
// (issue 42): mallory may update, create and delete Leases but has no "grant" on fencedlocks;
// within its budget (adversary: N writes) it may, at any point, from the current object: delete
// the lock's Lease; create at its free name a Lease without labels, controlled by the lock, with
// holder mallory and a forged token (above every real one), or the same one labelled; hand the
// held lock (a permit) over to itself, to the first client holding none, or to the pod, writing a
// forged ticket (above every ticket) or one just below the write's own revision (indistinguishable
// from a handover's); take a lock with room as a newcomer whatever its marks say (on a semaphore,
// also with a forged ticket in its permit); clear a waiting client's waiter Lease holder. Each
// write happens only if the policies of config/policy admit it, evaluated in-process
// (internal/policyeval; a configuration's without leaves policy files out), so a policy change
// changes the model. Mallory never renews, releases or leaves: a grant of its own is revoked as
// expirable. It does not write the queue Lease (lease-deletion refuses its DELETE as well), squat
// a waiter Lease's name (the client deletes such a Lease), forge a join, nor write fenced
// objects. The manager keeps the lock's Lease as ensureLease does: a missing one is created, a
// foreign one at its name (no fencedlock labels: its cache does not see it) is read live, deleted
// conditioned on that read and created anew, and a new one is stamped (Initialize, ServeIssued of
// its resourceVersion, SetPermits); clients wait for a missing or unstamped Lease and take no
// lock on, nor queue at, one the manager did not make (MadeByManager), and a write to a Lease
// that is gone fails as a conflict (the writer reads it again). The fence is a predicate (P9).
// With an adversary, a running waiter whose waiter Lease was cleared beats (and joins again).
// Failures: crash
// (stop forever), pause (until resumed), lost response of an applied write (grant, release; join
// with lostJoin), give up.
//
// Abstracted. Time: no clock. The manager judges at mcJudgeAt with window mcWindow; an entry whose
// owner is judgeable dead (crashed, paused, silent since it resumed, or no longer waiting on that
// entry) is given to Judge as seen with its current beat a window ago (dead), every other entry is
// unseen (seen now: alive). A holder is expirable when crashed, paused, silent since it resumed, or
// unaware of its grant for good. Timing assumption: an actor running normally is never judged dead
// nor revoked; so only resumed waiters beat. A watch is a read of the current Lease (events
// coalesced, as after a re-list); a waiter whose beat finds its entry gone, and a new acquire
// cycle, start from a fresh read (not from a remembered copy). Reads "not older than" the lock
// copy (the watch cache) and the queue a holder follows (pkg/lock's follower) are reads of the
// current objects; readQueue's second read from etcd, when the first found nobody to serve, is
// left out. acquireTime, renewTime (a Renew's or a beat's is a time no write stored before, so it
// always changes its Lease), leaseTransitions and the join counter are not part of the state
// (nothing decides on them). Not modelled: the manager's deletion of waiter Leases idle for ten
// lease durations (time-based; without a clock nothing ever falls due).
//
// Reductions (all exact): revisions are replaced by their ranks in the state's key, in two
// domains never compared with each other: the lock Lease's (resourceVersions, tokens) and the
// queue's (the queue and waiter Leases' resourceVersions and every ticket, the served, reserved
// and left ones too). lease.Read does compare the lock Lease's ticket with its resourceVersion
// (a forged ticket), but every honest write stores one below it (checked on every write), so
// without an adversary that comparison never depends on the ranks; with one, the two domains are
// ranked as one (the manager's repair also writes a resourceVersion as a ticket), and the forged
// token and ticket are constants above every revision. A write that can only conflict (its
// copy's revision is gone; a create of a waiter Lease that exists) conflicts at once, the waiter
// Lease writes of clients and manager as the others; a copy of a waiter Lease is kept in the key
// as current or stale (a client's copy with a ticket always shows it waiting with that ticket);
// data the next step overwrites before reading is left out of the key.
//
// Bounds: acquire cycles and renewals per client, and budgets of crashes, pauses, lost responses,
// give-ups, pod deletions and the pod's requeues, and mallory's writes, split over the
// configurations of mcConfigs; -short runs smaller ones.
//
// Properties: on every state and write (P1-P6, P8, P9), then over the explored graph (P7):
//
//	P1 no two clients believe they hold the same token; one believing it holds the lock's current
//	   token is the Lease's holder whenever the lock is held (a revoked paused holder may still
//	   believe in the token of a lock left free: nobody else holds it);
//	P2 every grant's token is the resourceVersion its write is conditioned on, above every token
//	   issued before;
//	P3 a token whose grant ended (released, revoked, handed over) is never again a held token;
//	P4 no write serves the ticket of a waiter that completed leaving the queue;
//	P5 no entry the manager dropped (a dead client's waiter Lease cleared, a gone pod's entry) is
//	   served by a write computed from a read of that Lease at or after the drop (the manager's
//	   plan counts as computed from what it wrote);
//	P6 a join that lands queues its waiter (its waiter Lease reads back as waiting); a grant or
//	   reservation from the queue never skips a live waiter (waiter Lease waiting or pod entry
//	   stored, owner running normally, not giving up) with a lower ticket; a newcomer grant happens
//	   only on a Lease with no waiting mark and no reservation, and never while a live waiter is
//	   owed FIFO (its join landed, then a lock write marked the lock waited for). P6 judges honest
//	   writes: mallory's own may grant out of turn (as anyone allowed to update Leases can, once;
//	   a ticket it writes below its revision skips the waiters queued then, who join again), but
//	   every honest grant after it keeps FIFO among live waiters;
//	P7 from every explored state, steps of running actors alone (no crash, pause, resume, lost
//	   response, give-up, deletion of a waiting pod, or write of mallory's) reach a state where no
//	   running client is acquiring and the pod does not wait: live waiters are served, after
//	   mallory's writes too (a forged ticket delays the queue, never ends it).
//	P8 at most spec.permits permits are held, or after spec.permits was lowered below the permits
//	   held, no more than were held then (falling as they end); no grant is made while as many
//	   permits as the limit are held (beside the permit the write ends); one write grants at most
//	   one permit; no two permits share a token or a holder.
//	P9 the fence (webhook/fence.go lock: a token T is admitted iff the Lease at the lock's name
//	   passes CheckLockLease, State.HeldToken(T) holds, and T is not below the highest token the
//	   fenced object recorded, every holder taken to write at once) admits only a token a grant
//	   issued on that Lease (P2) that is held now, and never a forged one.
//
// P1-P6 are stated per permit: "the holder" is the holder of the permit with that token, a grant
// is a permit (holder, token) the Lease did not hold before, an ended grant one it holds no
// longer; P2 orders tokens across permits, P3 keeps the ended tokens (at or above the lowest held
// token: one below every held token that came back would break P2 first), and P6's FIFO spans
// permits (one queue serves them all).
//
// Teeth: TestModelFinds* put one broken transition back each and expect its counterexample;
// TestModelFindsForgedLockLease (the deletion policy left out, and a fence that trusts any Lease
// the lock controls) and TestModelFindsForgedTicket (lease.Read believing every ticket) put
// issue 42's rows back, and explore the same configuration with the fix in place as well.
//
// Found by the model: a semaphore's release could serve a queued waiter a second permit. A waiter
// judged dead while paused had its entry dropped after a release (computed from a queue read
// before the drop) served it; it resumed, found its entry gone and joined again, and the next
// release served the new entry onto the other permit. lease's serve now leaves a head that holds
// a permit waiting until that permit ends (revoked unrenewed, or released).
//
// Found by the model on the waiter Lease format, both fixed: (1) the manager judged a paused
// waiter dead, the waiter resumed and beat, the manager's drop of its waiter Lease conflicted,
// and the reconcile went on to serve its judged queue, which lacked that live waiter: the next
// one was served past it (P6). A conflicting drop now ends the reconcile. (2) A release read the
// queue Lease, then listed the waiter Leases: a pod added between the two reads, then a client
// joining after it, were read as the client alone, which was served past the pod (P6). A release
// now reads both in one list, at one revision.

import (
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// mcConfigs are the explored configurations. The failure budgets are split over several
// configurations: all of them at once, with three clients and the pod, would take hours.
func mcConfigs(short bool) []mcConfig {
	a := mcClientCfg{id: "a", cycles: 1}
	a2 := mcClientCfg{id: "a", cycles: 2, renews: 1} // acquires again after its release
	b := mcClientCfg{id: "b", cycles: 1}
	c := mcClientCfg{id: "c", cycles: 1}
	ab, abc, a2b, a2bc := []mcClientCfg{a, b}, []mcClientCfg{a, b, c}, []mcClientCfg{a2, b}, []mcClientCfg{a2, b, c}
	// The deletion policy left out: mallory deletes the lock's Lease, and only the fence's check stands.
	noDeletion := []string{"lease_deletion.yaml"}
	if short {
		return []mcConfig{
			{name: "two clients, crash and pause", clients: ab, crashes: 1, pauses: 1},
			{name: "two clients, lost responses and give-up", clients: ab, lost: 1, lostJoin: true, giveUps: 1},
			{name: "two cycles with renewal, crash", clients: a2b, crashes: 1},
			{name: "pod, pause", clients: ab, pod: true, podDeletes: 1, pauses: 1},
			{name: "pod asking again", clients: ab, pod: true, podDeletes: 1, podRequeues: 1},
			{name: "malformed entry, pause and give-up", clients: ab, seed: mcSeedMalformed, pauses: 1, giveUps: 1},
			{name: "dead head, pod, crash", clients: ab, seed: mcSeedDeadHead, pod: true, podDeletes: 1, crashes: 1},
			{name: "semaphore of 2, three clients", clients: abc, permits: 2},
			{name: "semaphore of 2, pod, pause", clients: ab, permits: 2, pod: true, podDeletes: 1, pauses: 1},
			{name: "permits 2 to 1, three clients", clients: abc, permits: 2, retarget: 1},
			{name: "permits 1 to 2, three clients", clients: abc, permits: 1, retarget: 2},
			{name: "adversary, two clients", clients: ab, adversary: 1},
			{name: "adversary, deletion admitted, one client", clients: []mcClientCfg{a}, adversary: 2,
				without: noDeletion},
		}
	}
	return []mcConfig{
		{name: "three clients, crash", clients: abc, crashes: 1},
		{name: "three clients, pause", clients: abc, pauses: 1},
		{name: "three clients, lost responses", clients: abc, lost: 1, lostJoin: true},
		{name: "three clients, give-up", clients: abc, giveUps: 1},
		{name: "two clients, all failures", clients: ab, crashes: 1, pauses: 1, lost: 1, lostJoin: true, giveUps: 1},
		{name: "two cycles with renewal, crash", clients: a2bc, crashes: 1},
		{name: "two cycles with renewal, lost responses and give-up", clients: a2b, lost: 1, lostJoin: true,
			giveUps: 1},
		{name: "three clients and the pod", clients: abc, pod: true, podDeletes: 1, podRequeues: 1},
		{name: "pod, crash and pause", clients: ab, pod: true, podDeletes: 1, crashes: 1, pauses: 1},
		{name: "malformed entry, three clients, give-up", clients: abc, seed: mcSeedMalformed, giveUps: 1},
		{name: "malformed entry, pause and give-up", clients: ab, seed: mcSeedMalformed, pauses: 1, giveUps: 1},
		{name: "dead head, three clients and the pod", clients: abc, seed: mcSeedDeadHead, pod: true, podDeletes: 1},
		{name: "dead head, pod, crash and pause", clients: ab, seed: mcSeedDeadHead, pod: true, podDeletes: 1,
			crashes: 1, pauses: 1},
		{name: "semaphore of 2, three clients, crash", clients: abc, permits: 2, crashes: 1},
		{name: "semaphore of 2, three clients, pause", clients: abc, permits: 2, pauses: 1},
		{name: "semaphore of 2, three clients, lost responses", clients: abc, permits: 2, lost: 1, lostJoin: true},
		{name: "semaphore of 2, three clients, give-up", clients: abc, permits: 2, giveUps: 1},
		{name: "semaphore of 2, pod, crash and pause", clients: ab, permits: 2, pod: true, podDeletes: 1, crashes: 1,
			pauses: 1},
		{name: "permits 2 to 1, three clients, crash", clients: abc, permits: 2, retarget: 1, crashes: 1},
		{name: "permits 2 to 1, two cycles, pod", clients: a2b, permits: 2, retarget: 1, pod: true, podDeletes: 1},
		{name: "permits 1 to 2, three clients, crash", clients: abc, permits: 1, retarget: 2, crashes: 1},
		{name: "permits 1 to 2, pod, give-up", clients: ab, permits: 1, retarget: 2, pod: true, podDeletes: 1,
			giveUps: 1},
		{name: "adversary, two clients", clients: ab, adversary: 1},
		{name: "adversary, three clients", clients: abc, adversary: 1},
		{name: "adversary of 2, two clients", clients: ab, adversary: 2},
		{name: "adversary, pod", clients: []mcClientCfg{a}, pod: true, podDeletes: 1, adversary: 1},
		{name: "adversary, semaphore of 2, two clients", clients: ab, permits: 2, adversary: 1},
		{name: "adversary, deletion admitted, one client", clients: []mcClientCfg{a}, adversary: 2, without: noDeletion},
		{name: "adversary, deletion admitted, pod", clients: []mcClientCfg{a}, pod: true, podDeletes: 1, adversary: 2,
			without: noDeletion},
	}
}

func TestModel(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(400)) // the visited sets are large and live long
	var mu sync.Mutex
	var events [evCount]int
	t.Run("configs", func(t *testing.T) {
		for _, cfg := range mcConfigs(testing.Short() || raceEnabled) {
			t.Run(cfg.name, func(t *testing.T) {
				t.Parallel() // independent models: use every core
				r := newModel(cfg).explore(0)
				t.Logf("%s: %d states, %d transitions, %s (P7 checked from every state; %d with no paused client "+
					"and no crashed holder)", cfg.name, r.states, r.transitions, r.elapsed.Round(time.Millisecond), r.checked)
				if r.admission != "" {
					t.Logf("%s: mallory's writes, as the policies judged them:%s", cfg.name, r.admission)
				}
				if r.violation != "" {
					t.Errorf("%s\ncounterexample:\n%s", r.violation, strings.Join(r.trace, "\n"))
				}
				mu.Lock()
				defer mu.Unlock()
				for e, n := range r.events {
					events[e] += n
				}
			})
		}
	})
	// The exploration is not vacuous: it reached each of these situations.
	var b strings.Builder
	for e, n := range events {
		fmt.Fprintf(&b, "\n  %-45s %8d", mcEventNames[e], n)
		if n == 0 && !t.Failed() {
			t.Errorf("no explored state was reached by %q", mcEventNames[e])
		}
	}
	t.Logf("new states reached by a step with each event:%s", b.String())
}

// TestModelFindsRawHead and its siblings put a broken transition back and expect the checker to
// report it, with a short counterexample.
func TestModelFindsRawHead(t *testing.T) {
	mcExpectViolation(t, mcConfig{name: "raw head", clients: []mcClientCfg{{id: "a", cycles: 1}},
		seed: mcSeedDeadHead, mutation: mcRawHead}, "P5")
}

func TestModelFindsGreedyNewcomer(t *testing.T) {
	mcExpectViolation(t, mcConfig{name: "greedy newcomer", clients: []mcClientCfg{{id: "a", cycles: 1},
		{id: "b", cycles: 1}, {id: "c", cycles: 1}}, mutation: mcGreedyNewcomer}, "P6")
}

func TestModelFindsMissingMarkLeft(t *testing.T) {
	mcExpectViolation(t, mcConfig{name: "no MarkLeft", clients: []mcClientCfg{{id: "a", cycles: 1},
		{id: "b", cycles: 1}, {id: "c", cycles: 1}}, giveUps: 1, mutation: mcNoMarkLeft}, "P4")
}

func TestModelFindsLastWriteWins(t *testing.T) {
	mcExpectViolation(t, mcConfig{name: "no compare-and-swap", clients: []mcClientCfg{{id: "a", cycles: 1},
		{id: "b", cycles: 1}}, mutation: mcLastWriteWins}, "P2")
}

func TestModelFindsMissingSettle(t *testing.T) {
	mcExpectViolation(t, mcConfig{name: "no settle", clients: []mcClientCfg{{id: "a", cycles: 1},
		{id: "b", cycles: 1}}, mutation: mcNoSettle}, "P7")
}

// TestModelFindsServeIgnoringFull: a release that serves the queue although spec.permits was
// lowered below the permits held grants a permit beyond the limit.
func TestModelFindsServeIgnoringFull(t *testing.T) {
	mcExpectViolation(t, mcConfig{name: "serve ignores Full", clients: []mcClientCfg{{id: "a", cycles: 1},
		{id: "b", cycles: 1}, {id: "c", cycles: 1}}, permits: 2, retarget: 1, mutation: mcServeIgnoresFull}, "P8")
}

// TestModelFindsNoOpQueueWrite: without WriteQueue's "after", the manager's write re-adding the
// pod exactly as it was stored (ticket 0, after its grant was released) changes nothing: the API
// server keeps the version, the pod keeps its served ticket, and it is never granted again.
func TestModelFindsNoOpQueueWrite(t *testing.T) {
	mcExpectViolation(t, mcConfig{name: "no after", clients: []mcClientCfg{{id: "a", cycles: 1}}, pod: true,
		podDeletes: 1, podRequeues: 1, mutation: mcNoAfter}, "P7")
}

// TestModelFindsDropGoingOn: a manager that goes on after its drop of a dead waiter conflicted
// serves the judged queue, without the waiter that proved alive: the next is served past it.
func TestModelFindsDropGoingOn(t *testing.T) {
	mcExpectViolation(t, mcConfig{name: "drop goes on", clients: []mcClientCfg{{id: "a", cycles: 1},
		{id: "b", cycles: 1}}, pod: true, podDeletes: 1, pauses: 1, mutation: mcDropGoesOn}, "P6")
}

// TestModelFindsReusedToken: a semaphore grant that gives the new permit another permit's token.
func TestModelFindsReusedToken(t *testing.T) {
	mcExpectViolation(t, mcConfig{name: "reused token", clients: []mcClientCfg{{id: "a", cycles: 1},
		{id: "b", cycles: 1}}, permits: 2, mutation: mcReusedToken}, "P2")
}

// TestModelFindsForgedLockLease puts issue 42's first row back: the deletion policy left out,
// mallory deletes the lock's Lease and creates one without labels at its name, controlled by the
// lock, with a forged token; a fence that trusts any Lease the lock controls admits that token.
// Each half of the fix alone holds: the fence's label check with the deletion policy left out,
// and the deletion policy with the fence that trusts any controlled Lease.
func TestModelFindsForgedLockLease(t *testing.T) {
	cfg := mcConfig{name: "forged lock Lease", clients: []mcClientCfg{{id: "a", cycles: 1}}, adversary: 2,
		without: []string{"lease_deletion.yaml"}, mutation: mcFenceTrustsOwner}
	mcExpectViolation(t, cfg, "P9")
	fenceOnly, policyOnly := cfg, cfg
	fenceOnly.mutation, policyOnly.without = 0, nil
	mcExpectNone(t, fenceOnly)
	mcExpectNone(t, policyOnly)
}

// TestModelFindsForgedTicket puts issue 42's second row back: lease.Read believes a ticket at or
// above the Lease's own resourceVersion. Mallory's handover writes one above every ticket; the
// queued pod's ticket (below it) then counts as served for good, and it is never granted.
func TestModelFindsForgedTicket(t *testing.T) {
	defer func(f func(*coordinationv1.Lease, Ticket) bool) { forgedTicket = f }(forgedTicket)
	cfg := mcConfig{name: "forged ticket", clients: []mcClientCfg{{id: "a", cycles: 1}}, pod: true, podDeletes: 1,
		adversary: 1}
	mcExpectNone(t, cfg)
	forgedTicket = func(*coordinationv1.Lease, Ticket) bool { return false } // BROKEN: every ticket believed
	cfg.mutation = mcNoForgedTicket
	mcExpectViolation(t, cfg, "P6")
}

// mcExpectNone explores cfg, the fix in place, and expects no violation.
func mcExpectNone(t *testing.T, cfg mcConfig) {
	t.Helper()
	r := newModel(cfg).explore(0)
	t.Logf("without the mutation: %d states, %d transitions, %s", r.states, r.transitions, r.elapsed.Round(1e6))
	if r.violation != "" {
		t.Errorf("%s\ncounterexample:\n%s", r.violation, strings.Join(r.trace, "\n"))
	}
}

func mcExpectViolation(t *testing.T, cfg mcConfig, property string) {
	t.Helper()
	r := newModel(cfg).explore(0)
	t.Logf("%d states, %d transitions, %s", r.states, r.transitions, r.elapsed.Round(1e6))
	if !strings.HasPrefix(r.violation, property) {
		t.Fatalf("want a %s violation, got %q", property, r.violation)
	}
	t.Logf("%s\ncounterexample:\n%s", r.violation, strings.Join(r.trace, "\n"))
	if len(r.trace) > 60 {
		t.Errorf("counterexample of %d steps; want a short one", len(r.trace)-1)
	}
}

// TestModelHostileMaxTicket explores a queue seeded with a hostile entry of ticket 2^64-1. Before
// tickets were bounded (MaxTicket), ticket arithmetic overflowed: a later joiner got a ticket below
// the hostile one and its own entry read back as malformed. Now the entry is malformed itself, and
// the exploration checks the same properties as TestModel.
func TestModelHostileMaxTicket(t *testing.T) {
	cfg := mcConfig{name: "hostile max ticket", clients: []mcClientCfg{{id: "a", cycles: 1}, {id: "b", cycles: 1},
		{id: "c", cycles: 1}}, seed: mcSeedMaxTicket}
	r := newModel(cfg).explore(400000)
	t.Logf("%d states, %d transitions, %s", r.states, r.transitions, r.elapsed.Round(time.Millisecond))
	if r.violation != "" {
		t.Errorf("%s\ncounterexample:\n%s", r.violation, strings.Join(r.trace, "\n"))
	}
}
