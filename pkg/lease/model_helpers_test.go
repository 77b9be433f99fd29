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

// The engine of the model check (model_test.go says what is modelled): the state, the steps of
// the clients, the manager and the pod, the properties checked on every write and state, and the
// explorer.

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/token"
)

var (
	mcT0      = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) // every client's clock, and when entries were seen
	mcWindow  = time.Second                                 // lease.Window of the modelled lock
	mcJudgeAt = mcT0.Add(mcWindow)                          // the manager's now: one window after mcT0
	mcLeases  = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
)

const (
	mcPod     = "pod/p/uid1" // the queued pod's holder identity
	mcDead    = "d"          // a client that crashed before the model starts (seed mcSeedDeadHead)
	mcLockUID = "uid-lock"
)

// ---------------------------------------------------------------------------------------------
// Configuration.

type mcSeed int

const (
	mcSeedNone      mcSeed = iota
	mcSeedMalformed        // the queue Lease starts with a malformed entry {"ticket":"x","holder":"evil"}
	mcSeedDeadHead         // the queue's head is mcDead's waiter Lease, and the lock Lease is marked waited for
	// mcSeedMaxTicket: a hostile waiter Lease of "evil" carries ticket annotation 2^64-1 (nobody
	// runs "evil").
	mcSeedMaxTicket
)

// mcMutation puts a deliberately broken transition back, to show the checker has teeth.
type mcMutation int

const (
	_ mcMutation = iota // the protocol as written
	// mcRawHead: the manager serves the queue as stored, before its own judgment (it ignores that
	// it judged the head dead).
	mcRawHead
	// mcGreedyNewcomer: a client takes a free lock although the Lease says waiters are queued.
	mcGreedyNewcomer
	// mcNoMarkLeft: a waiter that gives up clears its waiter Lease but skips lease.MarkLeft.
	mcNoMarkLeft
	// mcLastWriteWins: the API server ignores the resourceVersion precondition of updates.
	mcLastWriteWins
	// mcNoSettle: the manager never serves a free lock (lease.Settle is not written on a free lock).
	mcNoSettle
	// mcServeIgnoresFull: a client's release serves the queue onto the freed permit even when the
	// semaphore has no room (spec.permits was lowered below the permits held): Release is run on
	// a copy whose limit is raised, and the limit written back.
	mcServeIgnoresFull
	// mcReusedToken: a newcomer's grant on a semaphore beside a held permit gives the new permit
	// the lock's last token (another permit's, if it is still held) instead of the resourceVersion
	// it is conditioned on.
	mcReusedToken
	// mcNoAfter: WriteQueue without its "after" field: a queue Lease write that re-adds an entry
	// exactly as it was stored changes nothing, so the API server does not version it.
	mcNoAfter
	// mcDropGoesOn: a manager's drop of a dead waiter that conflicts (the waiter wrote: alive) does
	// not end the reconcile, which serves a judged queue without that waiter.
	mcDropGoesOn
	// mcFenceTrustsOwner: the fence takes tokens from any Lease at the lock's name that the
	// FencedLock controls, labelled or not (lease.CheckLockLease without its label checks).
	mcFenceTrustsOwner
	// mcNoForgedTicket: lease.Read believes every ticket, also one at or above the Lease's own
	// resourceVersion. The test swaps the seam forgedTicket (package state): the model only
	// checks that the seam and this flag agree (initial).
	mcNoForgedTicket
)

type mcClientCfg struct {
	id     string
	cycles int // acquire cycles
	renews int // optional renewals per holding
}

type mcConfig struct {
	name    string
	clients []mcClientCfg // at most 3
	pod     bool          // a pod waits for the lock (the manager queues it)
	seed    mcSeed
	// Failure budgets, shared by all clients.
	crashes, pauses, lost, giveUps int
	lostJoin                       bool // lost responses may hit joins too (not only grants and releases)
	podDeletes                     int
	// podRequeues: how often the pod may lose an earlier lock (a pod asking for several) while it
	// holds this one: the manager releases its grant, and it asks again.
	podRequeues int
	mutation    mcMutation
	// permits is the lock's spec.permits at the start (0 means 1); retarget, when not zero, is a
	// value the user may set spec.permits to once, at any point (the manager then writes it with
	// lease.SetPermits).
	permits, retarget int
	// adversary is mallory's budget: how many writes it may make (model_adversary_test.go).
	adversary int
	// without names policy files of config/policy that the admission of mallory's writes leaves
	// out (a policy reverted).
	without []string
}

// ---------------------------------------------------------------------------------------------
// Lease versions.

// mcVer is one stored version of a Lease. It is never changed once stored: states share it.
type mcVer struct {
	l            *coordinationv1.Lease
	rv           uint64
	st           State    // lock Lease: lease.Read
	q            Queue    // queue Lease: lease.ReadQueue (read-only: clone before changing)
	tok, revoked uint64   // lock Lease: token and revoked-token annotations (revisions)
	ptoks        []uint64 // lock Lease: the held permits' tokens, in permit order
	holder       string   // waiter Lease: spec.holderIdentity
	ticket       Ticket   // waiter Lease: WaiterTicket, 0 if it does not parse
	// lrevs and trevs are the revisions the version carries, ranked in the state's key: the lock
	// Lease's (its resourceVersions, tokens) and the queue's (the queue and waiter Leases'
	// resourceVersions, tickets, a queue's "after"); shape is everything else the model can observe,
	// interned.
	lrevs, trevs []uint64
	shape        uint32
}

func mcRV(l *coordinationv1.Lease) (uint64, error) {
	return strconv.ParseUint(l.ResourceVersion, 10, 64)
}

func (m *mcModel) lockVer(l *coordinationv1.Lease) (*mcVer, error) {
	st, err := Read(l)
	if err != nil {
		return nil, err
	}
	rv, err := mcRV(l)
	if err != nil {
		return nil, err
	}
	left, err := parseTicket(l, locksv1alpha1.LeftAnnotation)
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(l.Annotations))
	for k := range l.Annotations {
		switch k {
		case locksv1alpha1.TokenAnnotation, locksv1alpha1.RevokedTokenAnnotation, locksv1alpha1.TicketAnnotation,
			locksv1alpha1.ReservedAnnotation, locksv1alpha1.LeftAnnotation:
			continue // revisions: ranked below
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	b.WriteString(st.Holder)
	for _, k := range slices.Sorted(maps.Keys(l.Labels)) { // a squatter's are not the manager's
		b.WriteString("|label " + k + "=" + l.Labels[k])
	}
	for _, k := range keys {
		if strings.HasPrefix(k, locksv1alpha1.PermitAnnotationPrefix) {
			continue // below, without its token and ticket (ranked in the key) and times
		}
		b.WriteString("|" + k + "=" + l.Annotations[k])
	}
	ptoks := make([]uint64, len(st.Permits))
	lrevs := []uint64{rv, uint64(st.Token), uint64(st.RevokedToken)}
	trevs := []uint64{uint64(st.Served), uint64(st.Reserved), uint64(left), uint64(st.ForgedTicket)}
	for i, p := range st.Permits {
		ptoks[i] = uint64(p.Token)
		lrevs, trevs = append(lrevs, uint64(p.Token)), append(trevs, uint64(p.Ticket))
		if st.Semaphore {
			fmt.Fprintf(&b, "|permit-%d=%s", p.Number, p.Holder)
		}
	}
	// Not encoded: acquireTime, renewTime and leaseTransitions (also a permit's times). No
	// decision of the model reads them (liveness is abstracted), so states that differ only there
	// behave alike.
	return &mcVer{l: l, rv: rv, st: st, tok: uint64(st.Token), revoked: uint64(st.RevokedToken), ptoks: ptoks,
		lrevs: lrevs, trevs: trevs, shape: m.intern(b.String())}, nil
}

func (m *mcModel) queueVer(l *coordinationv1.Lease) (*mcVer, error) {
	rv, err := mcRV(l)
	if err != nil {
		return nil, err
	}
	q := ReadQueue(l)
	var doc struct {
		After uint64 `json:"after"`
	}
	_ = json.Unmarshal([]byte(l.Annotations[locksv1alpha1.QueueAnnotation]), &doc) // an unreadable one has none
	var b strings.Builder
	revs := []uint64{rv, doc.After}
	for _, w := range q.Waiters { // stored with ticket 0 (this version's write added it) or its ticket
		fmt.Fprintf(&b, "%s@%t|", w.Holder, w.Ticket == Ticket(rv))
		revs = append(revs, uint64(w.Ticket))
	}
	for _, mf := range q.Malformed {
		b.WriteString("malformed:" + string(mf.Raw) + "|")
	}
	b.WriteString(q.Unreadable + "|" + l.Annotations[locksv1alpha1.QueueUnreadableAnnotation])
	return &mcVer{l: l, rv: rv, q: q, trevs: revs, shape: m.intern(b.String())}, nil
}

// waiterVer is a version of a waiter Lease. Not encoded: renewTime (a beat: liveness is
// abstracted) and the join counter (a join changes it, by how much decides nothing).
func (m *mcModel) waiterVer(l *coordinationv1.Lease) (*mcVer, error) {
	rv, err := mcRV(l)
	if err != nil {
		return nil, err
	}
	v := &mcVer{l: l, rv: rv}
	if h := l.Spec.HolderIdentity; h != nil {
		v.holder = *h
	}
	shape := "w|" + v.holder
	ta, stamped := l.Annotations[locksv1alpha1.TicketAnnotation]
	if t, err := WaiterTicket(l); err == nil {
		v.ticket = t
		shape += fmt.Sprintf("|stamped=%t", stamped)
	} else {
		shape += "|malformed ticket " + ta // a hostile seed's, not a revision
	}
	v.trevs = []uint64{rv, uint64(v.ticket)}
	v.shape = m.intern(shape)
	return v, nil
}

func cloneQueue(q Queue) Queue {
	q.Waiters, q.Added, q.Malformed = slices.Clone(q.Waiters), slices.Clone(q.Added), slices.Clone(q.Malformed)
	return q
}

// waits reports whether waiter Lease version v shows holder waiting with ticket t (pkg/lock's
// Locker.waits).
func (v *mcVer) waits(holder string, t Ticket) bool {
	return v != nil && v.holder == holder && v.ticket == t && t != 0
}

// mcMerge is the queue a reader assembles (pkg/lock's readQueue, the manager's syncQueue): the
// queue Lease's pods merged with the waiter Leases that wait above served.
func mcMerge(q *mcVer, ws [mcWaiterLeases]*mcVer, served Ticket) Queue {
	var items []coordinationv1.Lease
	for _, w := range ws {
		if w != nil {
			items = append(items, *w.l)
		}
	}
	waiting, _ := Waiters(items, served)
	return cloneQueue(q.q).Merge(waiting)
}

// mcListBasis is the revision a list of the waiter Leases stands for: the highest of theirs.
// A write to one of them is in the list exactly when the list's basis is at or above it.
func mcListBasis(ws [mcWaiterLeases]*mcVer) uint64 {
	var b uint64
	for _, w := range ws {
		if w != nil {
			b = max(b, w.rv)
		}
	}
	return b
}

// ---------------------------------------------------------------------------------------------
// State.

type mcPC uint8

// A client's pc names the API call it makes next (its local decisions are made right after the
// call before, as pkg/lock makes them).
const (
	pcFinished   mcPC = iota // all acquire cycles done
	pcAcqRead                // acquire: read the lock Lease (a list or a watch event), then attempt
	pcGrantCAS               // acquire: write lease.Grant on the copy read (a newcomer)
	pcJoinRead               // join: read its waiter Lease (none known, or the write conflicted)
	pcJoinWrite              // join: create its waiter Lease, or update it (JoinWaiter)
	pcMarkCAS                // write MarkWaiting on the lock copy the join decided from
	pcBeatRead               // beat: its write conflicted: read its waiter Lease
	pcBeatWrite              // beat: update its waiter Lease (a new renewTime, Stamp)
	pcHold                   // holding: next, Renew, or the first call of its release
	pcRenewCAS               // write Renew
	pcRenewRead              // renew conflicted: re-read the lock Lease
	pcRelReadQ               // release: Release asked for the queue: list the lock's Leases (queue and waiter Leases, one snapshot)
	pcRelCAS                 // release: write Release
	pcRelRead                // release conflicted or its response was lost: re-read the lock Lease
	pcLeaveRead              // leave: its write conflicted: read its waiter Lease
	pcLeaveWrite             // leave: clear its waiter Lease's holder (Stamp)
	pcLeftRead               // leave: read the lock Lease
	pcLeftCAS                // leave: write MarkLeft
)

var mcPCNames = [...]string{"finished", "acquire:read", "acquire:grant", "join:read", "join:write",
	"markWaiting", "beat:read", "beat:write", "hold", "renew:write", "renew:read", "release:readQ",
	"release:write", "release:read", "leave:read", "leave:write", "left:read", "left:write"}

// mcWaiterLeases is the number of waiter Lease slots: one per client, and one for a seed's
// (mcDead's, or the hostile one).
const mcWaiterLeases = 4

type mcClient struct {
	pc            mcPC
	cyclesLeft    int8 // acquire cycles still to start after this one
	renewsLeft    int8
	ticket        Ticket // the queue ticket this acquisition waits on (a.ticket)
	owed          Ticket // ghost: ticket owed FIFO (its join landed, then a lock write marked waiting)
	leaveT        Ticket // the ticket being left
	leaving       bool   // running the leave protocol (and releasing a grant served while leaving)
	markAfterJoin bool   // the copy the join decided from showed no waiting mark
	crashed       bool
	paused        bool
	stale         bool   // resumed, and has shown no sign of life since (judgeable dead)
	lock          *mcVer // lock Lease copy: g.lease, or the copy a decision or write is computed from
	q             *mcVer // release: the queue Lease copy read, until the list
	rq            *Queue // release: the queue read (queue Lease and waiter Leases merged), nil if not read
	rqQ, rqW      uint64 // release: the revisions rq stands for (queue Lease, list of waiter Leases)
	w             *mcVer // its waiter Lease as it last wrote it (Locker.mine), nil before its first write
	wo            *mcVer // the waiter Lease copy the pending write is computed from (nil: a create)
	tok           uint64 // belief: the token of the grant this client holds, 0 if none
	unsure        uint64 // token of a grant write whose response was lost
}

type mcMgrPC uint8

const (
	mIdle      mcMgrPC = iota // next: read the lock Lease (a reconcile starts)
	mListW                    // list the waiter Leases
	mReadQ                    // read the queue Lease, merge, judge, plan the queue
	mDrop                     // clear the holder of the next waiter Lease judged dead
	mWriteQ                   // write the queue Lease (pods added or gone, malformed entries dropped)
	mWriteLock                // write the plan (Revoke or Settle)
	// The lock's Lease (controllers/lease.go ensureLease), when its cache shows none (missing, or
	// at the name a Lease without fencedlock's labels, which it does not watch) or an unstamped one.
	mDelForeign // delete the foreign Lease read live, conditioned on its resourceVersion
	mCreate     // create the lock's Lease (labelled, controlled by the lock, unstamped)
	mStamp      // stamp the Lease read: Initialize, ServeIssued of its resourceVersion, SetPermits
)

type mcPlan uint8

const (
	planKeep mcPlan = iota
	planSettle
	planRevoke  // lease.Revoke, revoked=true: a paused, crashed or silent holder
	planRelease // lease.Revoke, revoked=false: a pod holder whose pod is gone (or lost an earlier lock)
	planPermits // lease.SetPermits: spec.permits changed
)

type mcManager struct {
	pc      mcMgrPC
	plan    mcPlan
	lock    *mcVer
	ws      [mcWaiterLeases]*mcVer // the waiter Leases listed
	q       *mcVer                 // the queue Lease read
	read    *Queue                 // the queue as read (merged), before the judgment (mcRawHead)
	judgedQ *Queue                 // the judged queue, what the plan serves (read-only)
	store   *Queue                 // the queue Lease's pods to write, nil if it is not written
	dead    []mcEntry              // clients judged dead whose waiter Lease is still to clear
	gone    []mcEntry              // pods the queue Lease write drops
	added   bool                   // the queue Lease write adds the pod: the reconcile ends with it
	alive   bool                   // a drop conflicted (the waiter wrote): the reconcile ends after the drops
	// basisQ, basisW: the revisions the judged queue stands for: the queue Lease's and the list's,
	// each raised to the manager's own write of it (its plan counts as computed from what it wrote).
	basisQ, basisW uint64
	victim         string // planRevoke, planRelease: the holder of the permit to end
	spec           int8   // planPermits: the spec.permits to write
}

type mcEntry struct {
	holder string
	t      Ticket
}

type mcDrop struct {
	mcEntry
	rev uint64 // queue revision of the write that dropped it
}

type mcPodState struct {
	granted, deleted bool
	lost             bool   // it lost an earlier lock: its grant here is to be released
	owed             Ticket // ghost, as mcClient.owed
}

type mcState struct {
	rev         uint64 // etcd's revision: the last one issued
	lock, queue *mcVer
	wl          [mcWaiterLeases]*mcVer // the waiter Leases (nil: none), client i's at i
	cl          [3]mcClient
	mgr         mcManager
	pod         mcPodState
	// ghost state for the properties
	maxIssued uint64 // highest token granted
	// ended: tokens whose grant ended (released, revoked, handed over), at or above the lowest
	// token held now; one that left the Lease below every held token and comes back is a grant
	// with a token not above maxIssued (P2) all the same.
	ended []uint64
	spec  int8 // the FencedLock's spec.permits
	// bound is the most holders the lock may have now (P8): its limit, or, after spec.permits was
	// lowered below the permits held, the number held then, falling as they end.
	bound   int8
	left    []mcEntry // entries whose owner completed the leave protocol
	dropped []mcDrop  // entries the manager dropped as dead or gone
	// issued: the tokens held now that a grant issued (a write conditioned on that
	// resourceVersion) on this Lease at the lock's name; fenced: the highest token the fence
	// admitted, as the fenced object records it (P9).
	issued []uint64
	fenced uint64
	// budgets left
	crashes, pauses, lost, giveUps, podDeletes, podRequeues, edits, adv int8

	id       int32  // not part of the state: its index in the explorer
	lostUsed bool   // not part of the state: the step applied a write and lost its response
	ev       uint64 // not part of the state: the events (mcEvent) of the step that made it
	viol     string // not part of the state: a property the step that made this state broke
	note     string // not part of the state: what the step did (traces only)
}

func (s *mcState) clone() *mcState {
	ns := *s
	ns.viol, ns.note, ns.lostUsed, ns.ev = "", "", false, 0
	return &ns
}

// ---------------------------------------------------------------------------------------------
// Events: situations the exploration reached, counted to show the model is not vacuous.

type mcEvent uint8

const (
	evNewcomer mcEvent = iota
	evHandover
	evHandoverToJudgeable
	evReserved
	evPodGranted
	evPodReleased
	evRevoked
	evRevokedHandover
	evRevokedUnaware
	evSettleServes
	evSettleMarks
	evSettleClears
	evServed
	evSkipped
	evMarkAgain
	evBeatGone
	evDroppedDead
	evDroppedGone
	evDroppedMalformed
	evLeft
	evServedWhileLeaving
	evLostGrantRecognised
	evLostJoin
	evLostRelease
	evGrantLost
	evTwoHeld
	evServedBeside
	evLoweredWhileHeld
	evFullAfterLowering
	evRaisedWithWaiters
	evBackToLock
	evHoldsUnknowing
	evPodRequeued
	evAdvGrant
	evAdvForgedTicket
	evAdvTicketBelow
	evAdvClearedWaiter
	evAdvDeleted
	evAdvSquat
	evForeignDeleted
	evCreated
	evStamped
	evTicketRepaired
	evCount
)

// s.ev holds one bit per event.
var _ [64 - evCount]struct{}

var mcEventNames = [evCount]string{"newcomer grant", "handover by release", "handover to a judgeable-dead waiter",
	"release kept the lock for the pod", "pod granted", "gone pod's grant released", "revoked",
	"revoked with handover", "revoked a grant its holder did not know of", "settle served the queue",
	"settle set the waiting mark", "settle cleared the waiting mark", "waiter saw it was served",
	"waiter saw it was skipped", "waiter marked again", "beat found its waiter Lease dropped", "dropped a dead waiter",
	"dropped a gone pod", "dropped a malformed entry", "leave completed", "served while leaving, released",
	"lost grant response recognised", "lost join response (orphan waiter Lease)", "lost release response",
	"grant found lost", "two permits held", "queue served onto a permit beside a holder",
	"permits lowered below the permits held", "release left no room (permits lowered)",
	"permits raised with waiters queued", "semaphore back to the lock format",
	"beat found the entry gone after it was served", "pod asked again after its grant was released",
	"mallory granted (handover or newcomer)", "mallory wrote a forged ticket", "mallory wrote a ticket below its revision",
	"mallory cleared a waiter Lease", "mallory deleted the lock's Lease", "mallory created a Lease at the lock's name",
	"manager deleted a foreign Lease", "manager created the lock's Lease", "manager stamped a new Lease",
	"a manager's write repaired a forged ticket"}

func (m *mcModel) hit(s *mcState, e mcEvent) { s.ev |= 1 << e }

// ---------------------------------------------------------------------------------------------
// Model.

type mcModel struct {
	cfg     mcConfig
	ids     []string
	shapes  map[string]uint32
	tracing bool
	seedA   maphash.Seed
	seedB   maphash.Seed
	buf     []byte
	rk      [2][]uint64            // the state's revisions of each domain, ranked (key)
	collect bool                   // key: collecting revisions into rk, not encoding
	ref     *metav1.OwnerReference // the FencedLock, controller of its Leases
	adm     *mcAdmission           // judges mallory's writes (nil without an adversary)
}

func newModel(cfg mcConfig) *mcModel {
	m := &mcModel{cfg: cfg, shapes: map[string]uint32{}, seedA: maphash.MakeSeed(), seedB: maphash.MakeSeed()}
	for _, c := range cfg.clients {
		m.ids = append(m.ids, c.id)
	}
	return m
}

func (m *mcModel) intern(s string) uint32 {
	if id, ok := m.shapes[s]; ok {
		return id
	}
	id := uint32(len(m.shapes) + 1)
	m.shapes[s] = id
	return id
}

func (m *mcModel) clientOf(holder string) int {
	return slices.Index(m.ids, holder)
}

func (m *mcModel) say(s *mcState, format string, args ...any) {
	if m.tracing {
		s.note += fmt.Sprintf(format, args...)
	}
}

func (m *mcModel) fail(s *mcState, format string, args ...any) {
	if s.viol == "" {
		s.viol = fmt.Sprintf(format, args...)
	}
}

func (m *mcModel) initial() (*mcState, error) {
	probe := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "20"}}
	if forgedTicket(probe, 20) == (m.cfg.mutation == mcNoForgedTicket) {
		return nil, errors.New("lease.forgedTicket is swapped exactly when mutation mcNoForgedTicket is not set")
	}
	if m.cfg.adversary > 0 && m.adm == nil {
		judge, err := policyJudge(m.cfg.without)
		if err != nil {
			return nil, err
		}
		m.adm = newAdmission(judge)
	}
	s := &mcState{rev: 10}
	lock := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lock", ResourceVersion: "10",
			Labels: map[string]string{locksv1alpha1.ManagedByLabel: locksv1alpha1.ManagedByValue},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "locks.fencedlock.io/v1alpha1",
				Kind: "FencedLock", Name: "lock", UID: mcLockUID, Controller: new(true)}}},
		Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: new(int32(15))},
	}
	if changed, err := Initialize(lock); err != nil || !changed {
		return nil, fmt.Errorf("Initialize = %v, %v", changed, err)
	}
	s.spec = int8(max(m.cfg.permits, 1))
	if _, err := SetPermits(lock, int(s.spec)); err != nil {
		return nil, err
	}
	ref := LockOf(lock)
	if ref == nil {
		return nil, errors.New("LockOf found no lock for the lock Lease")
	}
	m.ref = ref
	var q Queue
	var seed *coordinationv1.Lease // a waiter Lease nobody modelled runs
	switch m.cfg.seed {
	case mcSeedMalformed:
		q.Malformed = []Malformed{{Raw: json.RawMessage(`{"ticket":"x","holder":"evil"}`)}}
	case mcSeedMaxTicket:
		seed = NewWaiter("ns", locksv1alpha1.WaiterLeaseName(ref.UID, "evil"), ref)
		JoinWaiter(nil, seed, "evil", mcT0)
		setAnnotation(seed, locksv1alpha1.TicketAnnotation, "18446744073709551615")
	case mcSeedDeadHead:
		seed = NewWaiter("ns", locksv1alpha1.WaiterLeaseName(ref.UID, mcDead), ref)
		JoinWaiter(nil, seed, mcDead, mcT0)
	}
	if seed != nil {
		s.rev++
		seed.ResourceVersion = strconv.FormatUint(s.rev, 10)
		v, err := m.waiterVer(seed)
		if err != nil {
			return nil, err
		}
		s.wl[mcWaiterLeases-1] = v
		if m.cfg.seed == mcSeedDeadHead {
			MarkWaiting(lock) // mcDead joined, marked the lock waited for, and crashed
		}
	}
	s.rev++
	lock.ResourceVersion = strconv.FormatUint(s.rev, 10)
	name := QueueOf(lock)
	if name == "" {
		return nil, errors.New("QueueOf found no queue for the lock Lease")
	}
	ql := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	if err := m.writeQueue(ql, q); err != nil {
		return nil, err
	}
	s.rev++
	ql.ResourceVersion = strconv.FormatUint(s.rev, 10)
	var err error
	if s.lock, err = m.lockVer(lock); err != nil {
		return nil, err
	}
	if s.queue, err = m.queueVer(ql); err != nil {
		return nil, err
	}
	s.maxIssued = s.lock.tok // the stamp is the first token
	for i, c := range m.cfg.clients {
		s.cl[i] = mcClient{pc: pcAcqRead, cyclesLeft: int8(c.cycles - 1)}
	}
	s.crashes, s.pauses, s.lost = int8(m.cfg.crashes), int8(m.cfg.pauses), int8(m.cfg.lost)
	s.giveUps, s.podDeletes, s.podRequeues = int8(m.cfg.giveUps), int8(m.cfg.podDeletes), int8(m.cfg.podRequeues)
	s.adv = int8(m.cfg.adversary)
	if m.cfg.retarget != 0 {
		s.edits = 1
	}
	s.bound = s.spec
	return s, nil
}

// writeQueue is WriteQueue, or its mcNoAfter mutation.
func (m *mcModel) writeQueue(l *coordinationv1.Lease, q Queue) error {
	if err := WriteQueue(l, q); err != nil || m.cfg.mutation != mcNoAfter {
		return err
	}
	var doc map[string]json.RawMessage // BROKEN: the version written over is not recorded
	if err := json.Unmarshal([]byte(l.Annotations[locksv1alpha1.QueueAnnotation]), &doc); err != nil {
		return err
	}
	delete(doc, "after")
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	setAnnotation(l, locksv1alpha1.QueueAnnotation, string(b))
	return nil
}

// now is a client's clock for the writes that show it alive (Renew, a beat): a time no write
// stored before, so that such a write always changes its Lease, as in real time.
func (m *mcModel) now(s *mcState) time.Time {
	return mcT0.Add(time.Duration(s.rev+1) * time.Microsecond)
}

// ---------------------------------------------------------------------------------------------
// Writes: the API server's compare-and-swap, through lease.CAS.

type mcObj uint8

const (
	objLock   mcObj = iota
	objQueue        // the queue Lease
	objWaiter       // a waiter Lease
)

type mcWriter struct {
	m      *mcModel
	s      *mcState
	obj    mcObj
	j      int  // objWaiter: its slot
	lost   bool // apply the write but lose its response
	stored *mcVer
	noop   bool  // the write changed nothing: the API server kept the version (and the revision)
	err    error // the stored Lease does not parse: a transition wrote garbage
}

func (w *mcWriter) cur() *mcVer {
	switch w.obj {
	case objLock:
		return w.s.lock
	case objQueue:
		return w.s.queue
	}
	return w.s.wl[w.j]
}

func (w *mcWriter) ver(l *coordinationv1.Lease) (*mcVer, error) {
	switch w.obj {
	case objLock:
		return w.m.lockVer(l)
	case objQueue:
		return w.m.queueVer(l)
	}
	return w.m.waiterVer(l)
}

// mcUnchanged reports whether an update of cur to l changes nothing the API server stores: it
// then answers with cur as stored, without a new resourceVersion.
func mcUnchanged(l, cur *coordinationv1.Lease) bool {
	return maps.Equal(l.Annotations, cur.Annotations) && maps.Equal(l.Labels, cur.Labels) &&
		equality.Semantic.DeepEqual(l.Spec, cur.Spec) && equality.Semantic.DeepEqual(l.OwnerReferences, cur.OwnerReferences)
}

func (w *mcWriter) Update(_ context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	cur := w.cur()
	if cur == nil {
		// The API server answers NotFound; every writer of the model then reads the object again,
		// as after a conflict, and finds it gone (pkg/lock: a grant lost, a waiter waiting for it).
		return nil, apierrors.NewConflict(mcLeases, l.Name, errors.New("the object is gone"))
	}
	if l.ResourceVersion != cur.l.ResourceVersion && w.m.cfg.mutation != mcLastWriteWins {
		return nil, apierrors.NewConflict(mcLeases, l.Name, errors.New("the object has been modified"))
	}
	if mcUnchanged(l, cur.l) {
		w.stored, w.noop = cur, true
		return w.answer()
	}
	return w.store(l)
}

// Create creates waiter Lease w.j.
func (w *mcWriter) Create(l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	if w.cur() != nil {
		return nil, apierrors.NewAlreadyExists(mcLeases, l.Name)
	}
	return w.store(l)
}

// store stores l at the next revision and answers.
func (w *mcWriter) store(l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	w.s.rev++
	l.ResourceVersion = strconv.FormatUint(w.s.rev, 10)
	if w.stored, w.err = w.ver(l); w.err != nil {
		return nil, w.err
	}
	return w.answer()
}

// answer is the API server's answer to a write applied: the Lease as stored, or a lost response.
func (w *mcWriter) answer() (*coordinationv1.Lease, error) {
	if w.lost {
		return nil, apierrors.NewTimeoutError("the response was lost", 1)
	}
	return w.stored.l, nil
}

// mcMeta is what a lock write was decided from, for the properties.
type mcMeta struct {
	// basisQ, basisW: the revisions of the queue Lease and of the list of waiter Leases the served
	// queue was read at (or written at, by the manager)
	basisQ, basisW uint64
	q              *Queue // the queue the write served, nil if none
	// adversary: mallory's write, which may grant out of turn (P6 judges honest writes only)
	adversary bool
}

// casLock writes mutate(copy of from) to the lock Lease, conditioned on from's resourceVersion.
// It reports the stored version when the write was applied (also when its response was lost).
func (m *mcModel) casLock(s *mcState, from *mcVer, lost bool, meta mcMeta,
	mutate func(*coordinationv1.Lease) error) (*mcVer, error) {
	w := &mcWriter{m: m, s: s, obj: objLock, lost: lost}
	_, err := CAS(context.Background(), w, from.l, mutate)
	if w.err != nil {
		m.fail(s, "a write stored a lock Lease that does not parse: %v", w.err)
	}
	if w.stored != nil && !w.noop {
		s.lostUsed = s.lostUsed || lost
		old := s.lock
		s.lock = w.stored
		m.afterLockWrite(s, old, w.stored, meta)
	}
	return w.stored, err
}

// casQueue writes the queue Lease from version from, storing q (m.writeQueue).
func (m *mcModel) casQueue(s *mcState, from *mcVer, q Queue) (*mcVer, error) {
	w := &mcWriter{m: m, s: s, obj: objQueue}
	_, err := CAS(context.Background(), w, from.l, func(next *coordinationv1.Lease) error {
		return m.writeQueue(next, q)
	})
	if w.err != nil {
		m.fail(s, "a write stored a queue Lease that does not parse: %v", w.err)
	}
	if w.stored != nil {
		s.queue = w.stored
	}
	return w.stored, err
}

// casWaiter writes waiter Lease j from version from (CAS), or creates it when from is nil (the
// Lease as NewWaiter makes it, then change). change reports whether to write at all.
func (m *mcModel) casWaiter(s *mcState, j int, from *mcVer, lost bool,
	change func(old, next *coordinationv1.Lease)) (*mcVer, error) {
	w := &mcWriter{m: m, s: s, obj: objWaiter, j: j, lost: lost}
	var err error
	if from == nil {
		next := NewWaiter("ns", locksv1alpha1.WaiterLeaseName(m.ref.UID, m.ids[j]), m.ref)
		change(nil, next)
		_, err = w.Create(next)
	} else {
		_, err = CAS(context.Background(), w, from.l, func(next *coordinationv1.Lease) error {
			change(from.l, next)
			return nil
		})
	}
	if w.err != nil {
		m.fail(s, "a write stored a waiter Lease that does not parse: %v", w.err)
	}
	if w.stored != nil {
		s.lostUsed = s.lostUsed || lost
		s.wl[j] = w.stored
	}
	return w.stored, err
}

// afterLockWrite checks the write old -> nw against the properties and updates the ghost state.
// A grant is a permit (holder, token) the Lease did not hold before; one whose token the old
// Lease held no longer is ended.
//
//nolint:gocyclo // the per-write properties, each a few lines
func (m *mcModel) afterLockWrite(s *mcState, old, nw *mcVer, meta mcMeta) {
	os, ns := old.st, nw.st
	for _, p := range os.Permits {
		if _, ok := ns.Permit(p.Holder, p.Token); !ok {
			s.ended = append(slices.Clip(s.ended), uint64(p.Token)) // that grant ended
			if p.Holder == mcPod && !s.pod.deleted {                // released as it lost an earlier lock: it asks again
				s.pod.granted, s.pod.lost, s.pod.owed = false, false, 0
				m.hit(s, evPodRequeued)
			}
		}
	}
	var granted []Permit
	for _, p := range ns.Permits {
		if _, ok := os.Permit(p.Holder, p.Token); !ok {
			granted = append(granted, p)
		}
	}
	if len(granted) > 1 {
		m.fail(s, "P8 limit: one write granted %d permits (%s)", len(granted), strings.Join(ns.Holders(), ","))
	}
	if t, _ := parseTicket(nw.l, locksv1alpha1.TicketAnnotation); !meta.adversary && t >= Ticket(nw.rv) &&
		t != os.Served+os.ForgedTicket {
		// The key ranks tickets apart from the lock Lease's revisions (or, with an adversary, a
		// forged ticket above all): it relies on this.
		m.fail(s, "model: an honest write stored ticket %d, not below its own resourceVersion %d", t, nw.rv)
	}
	s.issued = slices.DeleteFunc(slices.Clone(s.issued), func(t uint64) bool { return !slices.Contains(nw.ptoks, t) })
	for _, p := range granted {
		tok := uint64(p.Token)
		if tok != old.rv {
			m.fail(s, "P2 token: %s granted token %d, not the resourceVersion %d the write is conditioned on",
				p.Holder, tok, old.rv)
		}
		s.issued = append(s.issued, tok)
		slices.Sort(s.issued)
		if tok <= s.maxIssued {
			m.fail(s, "P2 token order: %s granted token %d, not above the highest token issued before (%d)",
				p.Holder, tok, s.maxIssued)
		}
		if slices.Contains(s.ended, tok) {
			m.fail(s, "P3 ended token: %s holds token %d again, whose grant has ended", p.Holder, tok)
		}
		s.maxIssued = max(s.maxIssued, tok)
		if kept := len(ns.Permits) - len(granted); kept >= os.Limit { // held beside it, by earlier grants
			m.fail(s, "P8 limit: %s granted a permit (token %d) while %d were held and the lock admits %d",
				p.Holder, tok, kept, os.Limit)
		}
		if len(ns.Permits) > 1 {
			m.hit(s, evTwoHeld)
		}
		if meta.adversary {
			m.hit(s, evAdvGrant) // out of turn, as anyone allowed to update Leases may: P6 judges honest writes
		} else if ns.Served != os.Served {
			m.checkQueueGrant(s, p.Holder, ns.Served, os.Served, meta, "granted")
			if m.deadJudgeable(s, Waiter{Ticket: ns.Served, Holder: p.Holder}) && p.Holder != mcPod {
				m.hit(s, evHandoverToJudgeable)
			}
			if len(ns.Permits) > 1 {
				m.hit(s, evServedBeside)
			}
		} else {
			m.hit(s, evNewcomer)
			if os.Waiting || os.Reserved != 0 {
				m.fail(s, "P6 fairness: newcomer %s took the lock although the Lease it read showed waiting=%v reserved=%d",
					p.Holder, os.Waiting, os.Reserved)
			}
			for _, w := range m.liveWaiters(s, true) {
				if w.t > os.Served {
					m.fail(s, "P6 fairness: newcomer %s took the lock while %s (ticket %d) waited in the queue",
						p.Holder, w.holder, w.t)
				}
			}
		}
		if p.Holder == mcPod {
			s.pod.granted = true // the manager ungates it
			m.hit(s, evPodGranted)
		}
	}
	if ns.Reserved != 0 && ns.Reserved != os.Reserved && !meta.adversary {
		holder := "?"
		if meta.q != nil {
			if i := slices.IndexFunc(meta.q.Waiters, func(w Waiter) bool { return w.Ticket == ns.Reserved }); i >= 0 {
				holder = meta.q.Waiters[i].Holder
			}
		}
		m.checkQueueGrant(s, holder, ns.Reserved, os.Served, meta, "reserved the lock for")
		m.hit(s, evReserved)
	}
	// P8: the bound on holders follows the limit; lowering it below the permits held keeps them
	// (nobody is revoked) and the bound falls with them.
	switch held := int8(len(ns.Permits)); {
	case ns.Limit != os.Limit:
		s.bound = max(int8(ns.Limit), int8(len(os.Permits)))
		if ns.Limit < os.Limit && len(os.Permits) > ns.Limit {
			m.hit(s, evLoweredWhileHeld)
		}
		if ns.Limit > os.Limit && os.Waiting {
			m.hit(s, evRaisedWithWaiters)
		}
	default:
		s.bound = max(int8(ns.Limit), min(s.bound, held))
	}
	if os.Semaphore && !ns.Semaphore {
		m.hit(s, evBackToLock)
	}
	if os.ForgedTicket != 0 && ns.ForgedTicket == 0 {
		m.hit(s, evTicketRepaired)
	}
	if len(granted) == 0 && len(ns.Permits) < len(os.Permits) && len(ns.Permits) >= ns.Limit && ns.Waiting {
		m.hit(s, evFullAfterLowering)
	}
	low := uint64(0)
	if len(nw.ptoks) > 0 {
		low = slices.Min(nw.ptoks)
	}
	s.ended = slices.DeleteFunc(slices.Clone(s.ended), func(t uint64) bool { return low == 0 || t < low })
	slices.Sort(s.ended)
	if ns.Served != os.Served { // Served only grows: tickets at or below it are never served again
		s.left = slices.DeleteFunc(slices.Clone(s.left), func(e mcEntry) bool { return e.t <= ns.Served })
		s.dropped = slices.DeleteFunc(slices.Clone(s.dropped), func(d mcDrop) bool { return d.t <= ns.Served })
	}
	if ns.Waiting { // a lock write after their join marks the lock waited for: owed FIFO from now on
		for i := range m.ids {
			c := &s.cl[i]
			if c.ticket != 0 && s.wl[i].waits(m.ids[i], c.ticket) {
				c.owed = c.ticket
			}
		}
		if t, ok := m.podTicket(s); ok && m.podAsking(s) {
			s.pod.owed = t
		}
	}
}

// podTicket returns the ticket of the pod's entry in the queue Lease, if it has one.
func (m *mcModel) podTicket(s *mcState) (Ticket, bool) {
	if i := slices.IndexFunc(s.queue.q.Waiters, func(w Waiter) bool { return w.Holder == mcPod }); i >= 0 {
		return s.queue.q.Waiters[i].Ticket, true
	}
	return 0, false
}

// checkQueueGrant checks a write that served the queue entry (holder, t) (P4, P5, P6).
func (m *mcModel) checkQueueGrant(s *mcState, holder string, t, served Ticket, meta mcMeta, what string) {
	if slices.Contains(s.left, mcEntry{holder, t}) {
		m.fail(s, "P4 left: %s %s (ticket %d), which completed leaving the queue", what, holder, t)
	}
	basis := meta.basisW // a client's entry is its waiter Lease, a pod's is in the queue Lease
	if holder == mcPod {
		basis = meta.basisQ
	}
	for _, d := range s.dropped {
		if d.mcEntry == (mcEntry{holder, t}) && basis >= d.rev {
			m.fail(s, "P5 dropped: %s %s (ticket %d), dropped as dead at revision %d, from a queue read at revision %d",
				what, holder, t, d.rev, basis)
		}
	}
	for _, w := range m.liveWaiters(s, false) { // owed or not: tickets are issued in join order
		if w.t > served && w.t < t {
			m.fail(s, "P6 fairness: %s %s (ticket %d), overtaking the live waiter %s (ticket %d)",
				what, holder, t, w.holder, w.t)
		}
	}
}

// liveWaiters lists the live waiters: entry stored (its join landed), owner running normally (not
// crashed, paused or resumed-but-silent), not leaving; with owed, only those owed FIFO: a lock
// write marked the lock waited for after their join landed.
func (m *mcModel) liveWaiters(s *mcState, owed bool) []mcEntry {
	var out []mcEntry
	for i, id := range m.ids {
		c := &s.cl[i]
		if c.crashed || c.paused || c.stale || c.leaving || c.ticket == 0 || owed && c.owed != c.ticket {
			continue
		}
		if s.wl[i].waits(id, c.ticket) {
			out = append(out, mcEntry{id, c.ticket})
		}
	}
	if t, ok := m.podTicket(s); ok && m.podAsking(s) && (!owed || s.pod.owed == t) {
		out = append(out, mcEntry{mcPod, t})
	}
	return out
}

// lockSt is the state of the Lease at the lock's name: the zero State when there is none.
func lockSt(s *mcState) State {
	if s.lock == nil {
		return State{}
	}
	return s.lock.st
}

// checkState checks the properties that hold in every state (P1, P3, P8).
func (m *mcModel) checkState(s *mcState) {
	st := lockSt(s)
	for i, id := range m.ids {
		c := &s.cl[i]
		if c.tok == 0 || c.crashed {
			continue
		}
		if c.tok > uint64(st.Token) && st.Initialized() { // (none, or not stamped: it issued nothing yet)
			m.fail(s, "P1 belief: %s believes it holds token %d, above the lock's token %d", id, c.tok, st.Token)
		}
		for _, p := range st.Permits {
			if uint64(p.Token) == c.tok && p.Holder != id {
				m.fail(s, "P1 belief: %s believes it holds token %d, but the Lease's holder of that token is %s",
					id, c.tok, p.Holder)
			}
		}
		for j := i + 1; j < len(m.ids); j++ {
			if d := &s.cl[j]; !d.crashed && d.tok == c.tok {
				m.fail(s, "P1 belief: %s and %s both believe they hold token %d", id, m.ids[j], c.tok)
			}
		}
	}
	for i, p := range st.Permits {
		if slices.Contains(s.ended, uint64(p.Token)) {
			m.fail(s, "P3 ended token: %s holds token %d, whose grant has ended", p.Holder, p.Token)
		}
		for _, q := range st.Permits[i+1:] {
			if q.Token == p.Token || q.Holder == p.Holder {
				m.fail(s, "P8 permits: permits %d and %d are %s/%d and %s/%d", p.Number, q.Number, p.Holder, p.Token,
					q.Holder, q.Token)
			}
		}
	}
	if n := len(st.Permits); n > int(s.bound) || n > max(m.cfg.permits, m.cfg.retarget, 1) {
		m.fail(s, "P8 limit: %d permits held (%s); the lock admits %d (at most %d now)", n,
			strings.Join(st.Holders(), ","), st.Limit, s.bound)
	}
}

// ---------------------------------------------------------------------------------------------
// Steps.

type mcKind uint8

const (
	kindStep    mcKind = iota // a step of a running actor: used by the progress check
	kindFailure               // crash, pause, resume, lost response, give up, pod deleted while waiting
)

type mcEmit func(ns *mcState, kind mcKind)

func (m *mcModel) successors(s *mcState, emit mcEmit) {
	norm := func(ns *mcState, kind mcKind) {
		m.normalize(ns)
		m.fence(ns)
		emit(ns, kind)
	}
	for i := range m.ids {
		m.clientSteps(s, i, norm)
	}
	m.managerSteps(s, norm)
	m.podSteps(s, norm)
	m.advSteps(s, norm)
	if s.edits > 0 { // the user sets spec.permits (an event from outside: not relied on for progress)
		ns := s.clone()
		ns.edits--
		ns.spec = int8(m.cfg.retarget)
		m.say(ns, "the user sets spec.permits to %d", ns.spec)
		norm(ns, kindFailure)
	}
}

// normalize makes every write that can only conflict now fail at once. A write conditioned on a
// revision that is gone will conflict (revisions never come back), and a conflict (with the
// reads before it) changes nothing anyone else reads: it commutes with every other step. So the
// state with the doomed write pending and the state after its conflict reach the same states;
// keeping only the latter saves most states of a model where every actor can hold stale copies.
func (m *mcModel) normalize(s *mcState) {
	if m.cfg.mutation == mcLastWriteWins {
		return // stale writes succeed
	}
	for i := range m.ids {
		c := &s.cl[i]
		if c.crashed {
			continue
		}
		staleLock := c.lock != nil && (s.lock == nil || c.lock.rv != s.lock.rv)
		// A waiter Lease write from a copy that is gone, or a create of one that exists.
		staleW := c.wo != s.wl[i] && (c.wo == nil || c.wo.rv != s.wl[i].rv)
		var next mcPC
		switch {
		case c.pc == pcGrantCAS && staleLock, c.pc == pcMarkCAS && staleLock:
			next = pcAcqRead
		case c.pc == pcJoinWrite && staleW:
			next = pcJoinRead
		case c.pc == pcBeatWrite && staleW:
			next = pcBeatRead
		case c.pc == pcRenewCAS && staleLock:
			next = pcRenewRead
		case (c.pc == pcRelCAS || c.pc == pcRelReadQ) && staleLock:
			next = pcRelRead
		case c.pc == pcLeaveWrite && staleW:
			next = pcLeaveRead
		case c.pc == pcLeftCAS && staleLock:
			next = pcLeftRead
		default:
			continue
		}
		m.say(s, " [%s's pending %s conflicts]", m.ids[i], mcPCNames[c.pc])
		c.pc, c.q, c.rq, c.rqQ, c.rqW, c.wo = next, nil, nil, 0, 0, nil
	}
	m.normalizeManager(s)
}

// normalizeManager makes the manager's pending write that can only conflict fail at once.
func (m *mcModel) normalizeManager(s *mcState) {
	mg := &s.mgr
	for mg.pc == mDrop && mg.ws[m.deadSlot(mg.dead[0])].rv != s.wl[m.deadSlot(mg.dead[0])].rv {
		m.say(s, " [the manager's pending drop of %s conflicts]", mg.dead[0].holder)
		mg.dead, mg.alive = mg.dead[1:], true
		m.managerNext(s)
	}
	lockGone := mg.lock != nil && (s.lock == nil || mg.lock.rv != s.lock.rv)
	if mg.pc == mWriteQ && mg.q.rv != s.queue.rv || (mg.pc == mWriteLock || mg.pc == mStamp) && lockGone {
		m.say(s, " [the manager's pending write conflicts]")
		m.managerIdle(s)
	}
}

func (m *mcModel) clientSteps(s *mcState, i int, emit mcEmit) {
	c := &s.cl[i]
	id := m.ids[i]
	if c.crashed || c.pc == pcFinished {
		return
	}
	if c.paused { // resume, and take a step at once (a silent client looks paused to the manager)
		r := s.clone()
		r.cl[i].paused, r.cl[i].stale = false, true
		m.say(r, "%s resumes (silent until it renews or beats); ", id)
		m.runningSteps(r, i, func(ns *mcState, _ mcKind) { emit(ns, kindFailure) })
		return
	}
	m.runningSteps(s, i, emit)
	if s.lost > 0 && (c.pc == pcGrantCAS || c.pc == pcRelCAS || c.pc == pcHold || c.pc == pcJoinWrite && m.cfg.lostJoin) {
		ns := s.clone()
		ns.lost--
		m.say(ns, "(lost response) ")
		if m.step(ns, i, true); ns.lostUsed {
			emit(ns, kindFailure)
		}
	}
	if s.giveUps > 0 && c.pc == pcAcqRead && c.ticket != 0 {
		ns := s.clone()
		ns.giveUps--
		nc := &ns.cl[i]
		nc.leaveT, nc.ticket, nc.owed, nc.leaving = nc.ticket, 0, 0, true
		m.say(ns, "%s gives up waiting (ticket %d); ", id, nc.leaveT)
		if nc.w.waits(id, nc.leaveT) { // leave(): decided on the copy it wrote last
			nc.pc, nc.wo = pcLeaveWrite, nc.w
			m.step(ns, i, false)
		} else { // the key keeps its copy as current or stale only: it relies on this
			m.fail(ns, "model: %s's last write of its waiter Lease does not show it waiting with ticket %d", id, nc.leaveT)
		}
		emit(ns, kindFailure)
	}
	if s.crashes > 0 {
		ns := s.clone()
		ns.crashes--
		ns.cl[i] = mcClient{crashed: true}
		m.say(ns, "%s crashes", id)
		emit(ns, kindFailure)
	}
	if s.pauses > 0 {
		ns := s.clone()
		ns.pauses--
		ns.cl[i].paused = true
		m.say(ns, "%s pauses", id)
		emit(ns, kindFailure)
	}
}

// runningSteps are the steps client i may take next when nothing fails.
func (m *mcModel) runningSteps(s *mcState, i int, emit mcEmit) {
	c := &s.cl[i]
	id := m.ids[i]
	ns := s.clone()
	m.step(ns, i, false)
	emit(ns, kindStep)
	// A waiter beats when it resumed (the manager may judge it dead meanwhile), or, with an
	// adversary, once its waiter Lease was cleared by someone: the timing assumption lets a
	// running waiter's beats land in time, so they matter only there.
	cleared := m.cfg.adversary > 0 && !s.wl[i].waits(id, c.ticket)
	if c.pc == pcAcqRead && c.ticket != 0 && (c.stale || cleared) { // its beat timer fired as well
		ns := s.clone()
		m.say(ns, "%s beats: ", id)
		if nc := &ns.cl[i]; nc.w.waits(id, nc.ticket) { // decided on the copy it wrote last
			nc.pc, nc.wo = pcBeatWrite, nc.w
			m.step(ns, i, false)
		} else { // the key keeps its copy as current or stale only: it relies on this
			m.fail(ns, "model: %s's last write of its waiter Lease does not show it waiting with ticket %d", id, nc.ticket)
		}
		emit(ns, kindStep)
	}
	if c.pc == pcHold && c.renewsLeft > 0 {
		ns := s.clone()
		ns.cl[i].pc = pcRenewCAS
		m.step(ns, i, false)
		emit(ns, kindStep)
	}
}

// step makes client i's next API call and the local decisions that follow it: one case per
// step of the client's program, as pkg/lock sequences them.
//
//nolint:gocyclo // one switch over the client program's steps reads better than its pieces
func (m *mcModel) step(s *mcState, i int, lost bool) {
	c := &s.cl[i]
	id := m.ids[i]
	ctx := ""
	if lost {
		ctx = " (the write is applied but its response is lost)"
	}
	switch c.pc {
	case pcAcqRead:
		m.say(s, "%s reads the lock Lease: ", id)
		m.attempt(s, i, s.lock)

	case pcGrantCAS:
		var tok token.Token
		grant := m.grantFn()
		out, err := m.casLock(s, c.lock, lost, mcMeta{}, func(next *coordinationv1.Lease) error {
			var err error
			tok, err = grant(next, id, mcT0)
			return err
		})
		switch {
		case out != nil && !lost:
			m.say(s, "%s writes Grant: holds token %d", id, tok)
			c.lock, c.stale = out, false
			m.hold(s, i, uint64(tok))
		case out != nil:
			m.say(s, "%s writes Grant with token %d%s", id, tok, ctx)
			c.unsure, c.pc = uint64(tok), pcAcqRead
		case apierrors.IsConflict(err):
			m.say(s, "%s writes Grant: conflict", id)
			c.pc = pcAcqRead
		default:
			m.fail(s, "unexpected error from %s's Grant: %v", id, err)
		}

	case pcJoinRead:
		c.wo = s.wl[i]
		m.say(s, "%s joins: reads its waiter Lease %s", id, m.waiterString(c.wo))
		c.pc = pcJoinWrite

	case pcJoinWrite:
		lockCopy := c.lock
		dur := lockCopy.st.Duration
		out, err := m.casWaiter(s, i, c.wo, lost, func(old, next *coordinationv1.Lease) {
			if secs := int32(dur / time.Second); secs > 0 {
				next.Spec.LeaseDurationSeconds = &secs
			}
			JoinWaiter(old, next, id, mcT0)
		})
		verb := "updates"
		if c.wo == nil {
			verb = "creates"
		}
		c.wo = nil
		switch {
		case out != nil && !lost:
			t, _ := WaiterTicket(out.l)
			m.say(s, "%s %s its waiter Lease (join): ticket %d", id, verb, t)
			if w, _ := Waiters([]coordinationv1.Lease{*out.l}, lockSt(s).Served); len(w) != 1 || !w[0].Is(t, id) {
				m.fail(s, "P6 join: %s's join landed, but its waiter Lease (ticket %d) does not read back as a waiter "+
					"(readers skip it): it is not queued", id, t)
			}
			c.w, c.ticket, c.owed, c.stale = out, t, 0, false
			c.pc = pcAcqRead
			if c.markAfterJoin {
				c.pc = pcMarkCAS
			}
		case out != nil: // join returns an error: a.ticket = 0, and Acquire retries from a list
			m.hit(s, evLostJoin)
			m.say(s, "%s %s its waiter Lease (join, ticket %d)%s", id, verb, out.rv, ctx)
			c.pc = pcAcqRead
		case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
			m.say(s, "%s %s its waiter Lease (join): conflict", id, verb)
			c.pc = pcJoinRead
		default:
			m.fail(s, "unexpected error from %s's join: %v", id, err)
		}

	case pcMarkCAS:
		out, err := m.casLock(s, c.lock, false, mcMeta{}, func(next *coordinationv1.Lease) error {
			MarkWaiting(next)
			return nil
		})
		switch {
		case out != nil:
			m.say(s, "%s writes MarkWaiting", id)
			if !c.markAfterJoin {
				m.hit(s, evMarkAgain)
			}
		case apierrors.IsConflict(err):
			m.say(s, "%s writes MarkWaiting: conflict", id)
		default:
			m.fail(s, "unexpected error from %s's MarkWaiting: %v", id, err)
		}
		c.pc = pcAcqRead

	case pcBeatRead:
		c.wo = s.wl[i]
		m.say(s, "%s reads its waiter Lease %s", id, m.waiterString(c.wo))
		if c.wo.waits(id, c.ticket) {
			c.pc = pcBeatWrite
		} else {
			m.beatGone(s, i)
		}

	case pcBeatWrite:
		now := m.now(s)
		out, err := m.casWaiter(s, i, c.wo, false, func(old, next *coordinationv1.Lease) {
			rt := metav1.NewMicroTime(now)
			next.Spec.RenewTime = &rt
			Stamp(old, next)
		})
		c.wo = nil
		switch {
		case out != nil:
			m.say(s, "%s writes its beat", id)
			c.w, c.stale, c.pc = out, false, pcAcqRead
		case apierrors.IsConflict(err):
			m.say(s, "%s writes its beat: conflict", id)
			c.pc = pcBeatRead
		default:
			m.fail(s, "unexpected error from %s's beat: %v", id, err)
		}

	case pcHold: // decides to release, and makes the first call of it
		c.q, c.rq, c.rqQ, c.rqW = nil, nil, 0, 0
		m.decideRelease(s, i)
		if c.pc == pcRelReadQ || c.pc == pcRelCAS {
			m.step(s, i, lost)
		}

	case pcRenewCAS:
		tok := token.Token(c.tok)
		out, err := m.casLock(s, c.lock, false, mcMeta{}, func(next *coordinationv1.Lease) error {
			return Renew(next, id, tok, mcT0)
		})
		switch {
		case out != nil:
			m.say(s, "%s writes Renew", id)
			c.lock, c.stale, c.pc = out, false, pcHold
			c.renewsLeft--
		case apierrors.IsConflict(err):
			m.say(s, "%s writes Renew: conflict", id)
			c.pc = pcRenewRead
		default:
			m.fail(s, "unexpected error from %s's Renew: %v", id, err)
		}

	case pcRenewRead:
		c.lock = s.lock
		if c.lock == nil {
			m.say(s, "%s re-reads the lock Lease: it is gone, and its grant with it", id)
			m.hit(s, evGrantLost)
			m.endCycle(s, i)
		} else if err := Renew(c.lock.l.DeepCopy(), id, token.Token(c.tok), mcT0); IsLost(err) {
			m.say(s, "%s re-reads the lock Lease: its grant is lost", id)
			m.hit(s, evGrantLost)
			m.endCycle(s, i)
		} else if err != nil {
			m.fail(s, "unexpected error from %s's Renew: %v", id, err)
		} else {
			m.say(s, "%s re-reads the lock Lease", id)
			c.pc = pcRenewCAS
		}

	case pcRelReadQ: // one list by the lock's uid label: the queue Lease and the waiter Leases at one revision
		q := mcMerge(s.queue, s.wl, c.lock.st.Served)
		m.say(s, "%s lists the lock's Leases for its release: the queue is %s", id, m.queueEntries(q))
		c.q, c.rq, c.rqQ, c.rqW = nil, &q, s.queue.rv, mcListBasis(s.wl)
		m.decideRelease(s, i)

	case pcRelCAS:
		tok := token.Token(c.tok)
		var q *Queue
		meta := mcMeta{}
		if c.rq != nil {
			qq := cloneQueue(*c.rq)
			q, meta = &qq, mcMeta{basisQ: c.rqQ, basisW: c.rqW, q: &qq}
		}
		var h Handover
		out, err := m.casLock(s, c.lock, lost, meta, func(next *coordinationv1.Lease) error {
			var err error
			h, err = m.release(next, id, tok, q)
			return err
		})
		switch {
		case out != nil && !lost:
			m.say(s, "%s writes Release%s", id, m.handoverString(h))
			if h.To != nil {
				m.hit(s, evHandover)
			}
			c.tok = 0
			m.endCycle(s, i)
		case out != nil: // Release returns an error: the caller calls it again (Grant.update)
			m.hit(s, evLostRelease)
			m.say(s, "%s writes Release%s%s", id, m.handoverString(h), ctx)
			c.pc, c.q, c.rq, c.rqQ, c.rqW = pcRelRead, nil, nil, 0, 0
		case apierrors.IsConflict(err):
			m.say(s, "%s writes Release: conflict", id)
			c.pc, c.q, c.rq, c.rqQ, c.rqW = pcRelRead, nil, nil, 0, 0
		default:
			m.fail(s, "unexpected error from %s's Release: %v", id, err)
		}

	case pcRelRead:
		c.lock, c.q, c.rq, c.rqQ, c.rqW = s.lock, nil, nil, 0, 0
		if c.lock == nil { // Grant.update: a LostError
			m.say(s, "%s re-reads the lock Lease to release: it is gone, and its grant with it", id)
			m.hit(s, evGrantLost)
			m.endCycle(s, i)
			break
		}
		m.say(s, "%s re-reads the lock Lease to release: %s", id, m.stateString(c.lock.st))
		m.decideRelease(s, i)

	case pcLeaveRead:
		c.wo = s.wl[i]
		m.say(s, "%s reads its waiter Lease to leave %s", id, m.waiterString(c.wo))
		if c.wo.waits(id, c.leaveT) {
			c.pc = pcLeaveWrite
		} else {
			m.say(s, ": it waits no more")
			c.wo = nil
			m.afterLeave(s, i)
		}

	case pcLeaveWrite:
		out, err := m.casWaiter(s, i, c.wo, false, func(old, next *coordinationv1.Lease) {
			next.Spec.HolderIdentity = nil
			Stamp(old, next)
		})
		c.wo = nil
		switch {
		case out != nil:
			m.say(s, "%s clears its waiter Lease (leaves ticket %d)", id, c.leaveT)
			c.w = out
			m.afterLeave(s, i)
		case apierrors.IsConflict(err):
			m.say(s, "%s clears its waiter Lease: conflict", id)
			c.pc = pcLeaveRead
		default:
			m.fail(s, "unexpected error from %s's leave: %v", id, err)
		}

	case pcLeftRead:
		m.say(s, "%s reads the lock Lease to mark it left: ", id)
		c.lock = s.lock
		if c.lock == nil { // leave() ends: no Lease serves anyone
			m.say(s, "it is gone: it has left")
			m.endCycle(s, i)
			break
		}
		switch err := MarkLeft(c.lock.l.DeepCopy(), id, c.leaveT); {
		case errors.Is(err, ErrServedWhileLeaving):
			m.say(s, "it was served while leaving; releases that grant. ")
			m.hit(s, evServedWhileLeaving)
			p, _ := c.lock.st.HolderOf(id)
			c.tok, c.q, c.rq, c.rqQ, c.rqW = uint64(p.Token), nil, nil, 0, 0
			m.decideRelease(s, i)
		case err != nil:
			m.fail(s, "unexpected error from %s's MarkLeft: %v", id, err)
		default:
			m.say(s, "next: MarkLeft")
			c.pc = pcLeftCAS
		}

	case pcLeftCAS:
		out, err := m.casLock(s, c.lock, false, mcMeta{}, func(next *coordinationv1.Lease) error {
			return MarkLeft(next, id, c.leaveT)
		})
		switch {
		case out != nil:
			m.say(s, "%s writes MarkLeft (ticket %d): it has left", id, c.leaveT)
			m.hit(s, evLeft)
			m.endCycle(s, i)
		case apierrors.IsConflict(err):
			m.say(s, "%s writes MarkLeft: conflict", id)
			c.pc = pcLeftRead
		default:
			m.fail(s, "unexpected error from %s's MarkLeft: %v", id, err)
		}
	}
}

// beatGone: a beat found its waiter Lease waiting no more (the manager dropped it): the waiter
// is not queued, and attempts again (queues again).
func (m *mcModel) beatGone(s *mcState, i int) {
	c := &s.cl[i]
	m.say(s, "; its waiter Lease waits no more (ticket %d): attempts again", c.ticket)
	m.hit(s, evBeatGone)
	if st := lockSt(s); st.Semaphore && Served(st, m.ids[i], c.ticket) {
		m.hit(s, evHoldsUnknowing) // next, it finds it holds a permit, and waits for it to end
	}
	c.wo, c.ticket, c.owed, c.stale, c.pc = nil, 0, 0, false, pcAcqRead
}

// afterLeave is leave() after its waiter Lease write: MarkLeft on the lock Lease.
func (m *mcModel) afterLeave(s *mcState, i int) {
	c := &s.cl[i]
	if m.cfg.mutation == mcNoMarkLeft { // BROKEN: the leave ends without MarkLeft
		m.endCycle(s, i)
		return
	}
	c.pc = pcLeftRead
}

// attempt is pkg/lock's attempt() on the lock copy cur: recognise a grant (a lost response, or a
// handover to this waiter), else take a free lock nobody waits for, else queue and wait.
func (m *mcModel) attempt(s *mcState, i int, cur *mcVer) {
	c := &s.cl[i]
	id := m.ids[i]
	c.lock = cur
	if cur == nil || !MadeByManager(cur.l) {
		// pkg/lock waits for a missing Lease, and takes no lock on, nor queues at, one the
		// manager did not make: it waits for the manager to make or replace it.
		m.say(s, "none of the manager's; waits")
		c.pc = pcAcqRead
		return
	}
	st := cur.st
	m.say(s, "%s", m.stateString(st))
	if _, ok := st.Permit(id, token.Token(c.unsure)); c.unsure != 0 && ok {
		m.say(s, "; recognises its grant (token %d) whose response was lost", c.unsure)
		m.hit(s, evLostGrantRecognised)
		if c.ticket != 0 {
			m.fail(s, "model: %s recognised a lost grant while queued with ticket %d (Acquire would leave the queue "+
				"and release it)", id, c.ticket)
		}
		m.hold(s, i, c.unsure)
		return
	}
	if c.ticket != 0 {
		switch {
		case Served(st, id, c.ticket):
			p, _ := st.HolderOf(id)
			m.say(s, "; served (ticket %d): holds token %d", c.ticket, p.Token)
			m.hit(s, evServed)
			c.ticket, c.owed = 0, 0
			m.hold(s, i, uint64(p.Token))
			return
		case Skipped(st, id, c.ticket):
			m.say(s, "; skipped (ticket %d): queues again", c.ticket)
			m.hit(s, evSkipped)
			c.ticket, c.owed = 0, 0
		}
	}
	if _, holds := st.HolderOf(id); holds && st.Semaphore && c.ticket == 0 {
		// pkg/lock: an identity holds at most one permit, so one that holds a permit it does not
		// know of (its beat found its entry gone after it was served) waits for that permit to
		// end instead of queueing: the queue would serve it a second permit. (The model found it.)
		m.say(s, "; holds a permit already: waits for it to end")
		c.pc = pcAcqRead
		return
	}
	if c.ticket == 0 {
		_, err := m.grantFn()(cur.l.DeepCopy(), id, mcT0)
		switch {
		case err == nil:
			m.say(s, "; next: Grant")
			c.pc = pcGrantCAS
			return
		case errors.Is(err, ErrNotInitialized): // pkg/lock waits for the manager's stamp
			m.say(s, "; not stamped yet: waits")
			c.pc = pcAcqRead
			return
		case !IsHeld(err):
			m.fail(s, "unexpected error from %s's Grant: %v", id, err)
			return
		}
		m.say(s, "; next: join")
		c.markAfterJoin, c.pc, c.wo = !st.Waiting, pcJoinWrite, c.w // from the copy it wrote last
		if c.w == nil {
			c.pc = pcJoinRead // none: read it (a create if there is none)
		}
		return
	}
	if !st.Waiting {
		m.say(s, "; queued, the mark is missing: next: MarkWaiting")
		c.pc, c.markAfterJoin = pcMarkCAS, false
		return
	}
	m.say(s, "; waits")
	c.pc = pcAcqRead
}

func (m *mcModel) hold(s *mcState, i int, tok uint64) {
	c := &s.cl[i]
	c.tok, c.unsure, c.pc = tok, 0, pcHold
	c.renewsLeft = int8(m.cfg.clients[i].renews)
}

// release is lease.Release, or its mcServeIgnoresFull mutation.
func (m *mcModel) release(l *coordinationv1.Lease, holder string, tok token.Token, q *Queue) (Handover, error) {
	if m.cfg.mutation != mcServeIgnoresFull {
		return Release(l, holder, tok, q, mcT0)
	}
	limit, ok := l.Annotations[locksv1alpha1.PermitsAnnotation]
	if ok { // BROKEN: serves as if the semaphore had room for every waiter
		setAnnotation(l, locksv1alpha1.PermitsAnnotation, strconv.Itoa(MaxPermits))
	}
	h, err := Release(l, holder, tok, q, mcT0)
	if ok {
		setAnnotation(l, locksv1alpha1.PermitsAnnotation, limit)
	}
	return h, err
}

// decideRelease makes Grant.update's local decision on the current copies: read the queue
// (ErrQueueNeeded), write Release, or give up the grant as lost.
func (m *mcModel) decideRelease(s *mcState, i int) {
	c := &s.cl[i]
	var q *Queue
	if c.rq != nil {
		qq := cloneQueue(*c.rq)
		q = &qq
	}
	_, err := Release(c.lock.l.DeepCopy(), m.ids[i], token.Token(c.tok), q, mcT0)
	switch {
	case errors.Is(err, ErrQueueNeeded) && q == nil:
		m.say(s, "; next: read the queue")
		c.pc = pcRelReadQ
	case IsLost(err):
		m.say(s, "; its grant (token %d) is lost", c.tok)
		m.hit(s, evGrantLost)
		m.endCycle(s, i)
	case err != nil:
		m.fail(s, "unexpected error from %s's Release: %v", m.ids[i], err)
	default:
		c.pc = pcRelCAS
	}
}

// endCycle ends an acquire cycle (released, lost, or left) and starts the next one, if any.
func (m *mcModel) endCycle(s *mcState, i int) {
	c := &s.cl[i]
	if c.leaving {
		s.left = append(slices.Clip(s.left), mcEntry{m.ids[i], c.leaveT})
	}
	next := mcClient{pc: pcFinished, cyclesLeft: c.cyclesLeft}
	if c.cyclesLeft > 0 {
		next.pc, next.cyclesLeft = pcAcqRead, c.cyclesLeft-1
	}
	*c = next
}

func (m *mcModel) grantFn() func(*coordinationv1.Lease, string, time.Time) (token.Token, error) {
	if m.cfg.mutation == mcReusedToken {
		return func(l *coordinationv1.Lease, holder string, now time.Time) (token.Token, error) {
			s, err := Read(l)
			if err != nil {
				return 0, err
			}
			if tok, err := Grant(l, holder, now); err != nil || !s.Semaphore || !s.Held() {
				return tok, err
			}
			// BROKEN: the new permit gets the lock's last token, and the last token stays.
			ns, err := Read(l)
			if err != nil {
				return 0, err
			}
			p, _ := ns.HolderOf(holder)
			p.Token = s.Token
			setAnnotation(l, locksv1alpha1.PermitAnnotation(p.Number), p.String())
			setAnnotation(l, locksv1alpha1.TokenAnnotation, s.Token.String())
			return p.Token, nil
		}
	}
	if m.cfg.mutation != mcGreedyNewcomer {
		return Grant
	}
	return func(l *coordinationv1.Lease, holder string, now time.Time) (token.Token, error) {
		s, err := Read(l)
		if err != nil {
			return 0, err
		}
		if s.Full() || s.Reserved != 0 { // BROKEN: ignores the waiting mark
			return 0, &HeldError{Holder: s.Holder, Token: s.Token, Reserved: s.Reserved}
		}
		p, err := grant(l, s, holder, 0, now)
		return p.Token, err
	}
}

// ---------------------------------------------------------------------------------------------
// The manager: one reconcile is read lock, list waiter Leases, read queue Lease (judge), clear
// the waiter Leases judged dead, write queue Lease, write lock.

func (m *mcModel) managerSteps(s *mcState, emit mcEmit) {
	ns := s.clone()
	mg := &ns.mgr
	switch mg.pc {
	case mIdle, mDelForeign, mCreate, mStamp:
		m.managerEnsure(ns)
	case mListW:
		mg.ws, mg.basisW, mg.pc = ns.wl, mcListBasis(ns.wl), mReadQ
		m.say(ns, "manager lists the waiter Leases")
	case mReadQ:
		m.managerJudge(ns)
	case mDrop:
		e := mg.dead[0]
		j := m.deadSlot(e)
		out, err := m.casWaiter(ns, j, mg.ws[j], false, func(old, next *coordinationv1.Lease) {
			_ = LeaveWaiter(old, next, e.holder, e.t) // as dropDead: the judged copy shows it waiting
		})
		mg.dead = mg.dead[1:]
		switch {
		case out != nil:
			m.say(ns, "manager clears %s's waiter Lease (dead, ticket %d)", e.holder, e.t)
			ns.dropped = append(slices.Clip(ns.dropped), mcDrop{e, out.rv})
			m.hit(ns, evDroppedDead)
			mg.basisW = out.rv
		case apierrors.IsConflict(err):
			m.say(ns, "manager clears %s's waiter Lease: conflict (it wrote: judged again next time)", e.holder)
			mg.alive = true
		default:
			m.fail(ns, "unexpected error from the manager's drop of %s: %v", e.holder, err)
		}
		m.managerNext(ns)
	case mWriteQ:
		out, err := m.casQueue(ns, mg.q, *mg.store)
		switch {
		case out != nil:
			m.say(ns, "manager writes the queue Lease %s", m.queueString(out))
			for _, e := range mg.gone {
				ns.dropped = append(slices.Clip(ns.dropped), mcDrop{e, out.rv})
				m.hit(ns, evDroppedGone)
			}
			if len(mg.q.q.Malformed) > 0 {
				m.hit(ns, evDroppedMalformed)
			}
			if mg.added { // its event brings the next reconcile: the pod's ticket is this write's
				m.managerIdle(ns)
				break
			}
			mg.basisQ = out.rv
			m.managerPlan(ns)
		case apierrors.IsConflict(err):
			m.say(ns, "manager writes the queue Lease: conflict (waits for the next event)")
			m.managerIdle(ns)
		default:
			m.fail(ns, "unexpected error from the manager's queue write: %v", err)
		}
	case mWriteLock:
		st := mg.lock.st
		q := cloneQueue(*mg.judgedQ)
		if m.cfg.mutation == mcRawHead {
			q = cloneQueue(*mg.read) // BROKEN: serves the queue as read, ignoring the judgment
		}
		var h Handover
		victim, _ := st.HolderOf(mg.victim)
		out, err := m.casLock(ns, mg.lock, false, mcMeta{basisQ: mg.basisQ, basisW: mg.basisW, q: &q}, func(next *coordinationv1.Lease) error {
			var err error
			switch mg.plan {
			case planRevoke, planRelease:
				h, err = Revoke(next, victim.Holder, victim.Token, mg.plan == planRevoke, &q, mcJudgeAt)
			case planPermits:
				_, err = SetPermits(next, int(mg.spec))
			default:
				h, _, err = Settle(next, q, mcJudgeAt)
			}
			return err
		})
		what := map[mcPlan]string{planRevoke: "Revoke " + mg.victim, planRelease: "Revoke (released: pod gone or lost another lock)",
			planSettle: "Settle", planPermits: fmt.Sprintf("SetPermits(%d)", mg.spec)}[mg.plan]
		switch {
		case out != nil:
			m.say(ns, "manager writes %s%s: %s", what, m.handoverString(h), m.stateString(out.st))
			m.managerEvents(ns, victim, st, out.st, h)
		case apierrors.IsConflict(err):
			m.say(ns, "manager writes %s: conflict", what)
		default:
			m.fail(ns, "unexpected error from the manager's %s: %v", what, err)
		}
		m.managerIdle(ns)
	}
	emit(ns, kindStep)
}

func (m *mcModel) managerEvents(s *mcState, victim Permit, before, after State, h Handover) {
	mg := &s.mgr
	switch mg.plan {
	case planRelease:
		m.hit(s, evPodReleased)
	case planRevoke:
		m.hit(s, evRevoked)
		if h.To != nil {
			m.hit(s, evRevokedHandover)
		}
		if i := m.clientOf(victim.Holder); i >= 0 && !s.cl[i].crashed && !s.cl[i].paused && !s.cl[i].stale {
			m.hit(s, evRevokedUnaware)
		}
	case planSettle:
		switch {
		case h.To != nil:
			m.hit(s, evSettleServes)
		case after.Waiting && !before.Waiting:
			m.hit(s, evSettleMarks)
		case !after.Waiting && before.Waiting:
			m.hit(s, evSettleClears)
		}
	}
}

func (m *mcModel) managerIdle(s *mcState) {
	s.mgr = mcManager{}
}

// deadJudgeable reports whether the manager may judge the queue entry w dead now: its owner
// crashed, is paused, has not shown life since it resumed, or no longer waits on this entry.
// Every other client beats in time (the timing assumption).
func (m *mcModel) deadJudgeable(s *mcState, w Waiter) bool {
	i := m.clientOf(w.Holder)
	if i < 0 {
		return true // mcDead, or nobody's
	}
	c := &s.cl[i]
	return c.crashed || c.paused || c.stale || c.ticket != w.Ticket
}

// deadSlot is the waiter Lease slot of a client judged dead.
func (m *mcModel) deadSlot(e mcEntry) int {
	if i := m.clientOf(e.holder); i >= 0 {
		return i
	}
	return mcWaiterLeases - 1 // a seed's
}

// managerJudge is syncQueue after its list: read the queue Lease, merge it with the waiter
// Leases listed, judge it (lease.Judge), queue the pod (planQueue).
func (m *mcModel) managerJudge(s *mcState) {
	mg := &s.mgr
	mg.q = s.queue
	st := mg.lock.st
	read := mcMerge(mg.q, mg.ws, st.Served)
	mg.read = &read
	mg.basisQ = mg.q.rv
	// Abstract time: the manager judges at mcJudgeAt with window mcWindow. An entry it may judge
	// dead has been seen with its current beat at mcT0, a full window ago; every other entry is
	// new to it (seen now), so it is alive.
	seen := map[Ticket]Seen{}
	for _, w := range read.Waiters {
		if w.Ticket > st.Served && !w.IsPod() && m.deadJudgeable(s, w) {
			seen[w.Ticket] = Seen{Holder: w.Holder, Beat: w.Beat, At: mcT0}
		}
	}
	podWaits := func(holder string) bool { return holder == mcPod && m.podAsking(s) }
	j := Judge(read, st.Served, seen, podWaits, mcWindow, mcJudgeAt)
	mg.dead, mg.gone = nil, nil
	for _, w := range j.Dead {
		mg.dead = append(mg.dead, mcEntry{w.Holder, w.Ticket})
	}
	for _, w := range j.Gone {
		mg.gone = append(mg.gone, mcEntry{w.Holder, w.Ticket})
	}
	// planQueue: the gated pod that asks and is not queued (nor the holder) is added.
	if _, held := st.HolderOf(mcPod); m.podAsking(s) && !held &&
		!slices.ContainsFunc(j.Queue.Waiters, func(w Waiter) bool { return w.Holder == mcPod }) {
		j.Queue.Add(mcPod, mcT0)
		mg.added = true
	}
	mg.judgedQ = &j.Queue
	mg.store = nil
	if len(j.Gone) > 0 || len(mg.q.q.Malformed) > 0 || mg.q.q.Unreadable != "" || mg.added {
		store := cloneQueue(j.Queue) // the pods: the judged queue without the waiter Leases' clients
		store.Waiters = slices.DeleteFunc(store.Waiters, func(w Waiter) bool { return !w.IsPod() })
		store.Malformed = nil
		mg.store = &store
	}
	m.say(s, "manager reads the queue Lease %s, judges the queue %s", m.queueString(mg.q), m.queueEntries(j.Queue))
	m.managerNext(s)
}

// managerNext is what the reconcile does after its judgment and each drop: clear the next
// waiter Lease judged dead, then write the queue Lease if it changed, then plan the lock write.
func (m *mcModel) managerNext(s *mcState) {
	mg := &s.mgr
	switch {
	case len(mg.dead) > 0:
		mg.pc = mDrop
	case mg.alive && m.cfg.mutation != mcDropGoesOn:
		// dropDead's conflict: nothing is served from a queue that left out a live waiter.
		m.managerIdle(s)
	case mg.store != nil:
		mg.pc, mg.ws = mWriteQ, [mcWaiterLeases]*mcVer{}
	default:
		mg.ws = [mcWaiterLeases]*mcVer{}
		m.managerPlan(s)
	}
}

// managerPlan is computePlan: revoke a silent holder, release a gone pod's grant, else settle.
func (m *mcModel) managerPlan(s *mcState) {
	mg := &s.mgr
	st := mg.lock.st
	q := cloneQueue(*mg.judgedQ)
	if m.cfg.mutation == mcRawHead {
		q = cloneQueue(*mg.read)
	}
	_, settles, err := Settle(mg.lock.l.DeepCopy(), q, mcJudgeAt)
	if err != nil {
		m.fail(s, "unexpected error from the manager's Settle: %v", err)
		return
	}
	plan := planKeep
	if changed, err := SetPermits(mg.lock.l.DeepCopy(), int(s.spec)); err != nil {
		m.fail(s, "unexpected error from the manager's SetPermits: %v", err)
		return
	} else if changed {
		plan, mg.spec = planPermits, s.spec
	}
	for _, p := range st.Permits { // one write ends at most one grant
		switch {
		case plan != planKeep:
		case p.Holder == mcPod:
			if s.pod.deleted || s.pod.lost {
				plan, mg.victim = planRelease, p.Holder
			}
		case m.revocable(s, p):
			plan, mg.victim = planRevoke, p.Holder
		}
	}
	if plan == planKeep && settles && (m.cfg.mutation != mcNoSettle || st.Held()) {
		plan = planSettle
	}
	if plan == planKeep {
		m.say(s, "; nothing to write")
		m.managerIdle(s)
		return
	}
	mg.plan, mg.pc = plan, mWriteLock
}

// revocable reports whether the manager may find the grant p expired now: its holder crashed,
// is paused, or has not renewed since it resumed, or it does not know it holds the grant and will
// not learn it (so it never renews it). A holder running normally renews in time.
func (m *mcModel) revocable(s *mcState, p Permit) bool {
	i := m.clientOf(p.Holder)
	if i < 0 {
		return true
	}
	c := &s.cl[i]
	switch {
	case c.crashed || c.paused || c.stale:
		return true
	case c.tok == uint64(p.Token):
		return false // renews it
	case c.ticket != 0 && c.ticket == p.Ticket:
		return false // will see it was served
	case c.leaving && c.leaveT == p.Ticket:
		return false // will see it was served while leaving, and release it
	case c.unsure == uint64(p.Token):
		return false // will recognise its grant
	}
	return true
}

// ---------------------------------------------------------------------------------------------
// The pod.

func (m *mcModel) podAsking(s *mcState) bool {
	return m.cfg.pod && !s.pod.granted && !s.pod.deleted
}

func (m *mcModel) podSteps(s *mcState, emit mcEmit) {
	if _, held := lockSt(s).HolderOf(mcPod); held && !s.pod.deleted && !s.pod.lost && s.podRequeues > 0 {
		ns := s.clone()
		ns.podRequeues--
		ns.pod.lost = true
		m.say(ns, "the pod loses an earlier lock (it asks for several): this grant is to be released")
		emit(ns, kindFailure)
	}
	if !m.cfg.pod || s.pod.deleted || s.podDeletes == 0 {
		return
	}
	ns := s.clone()
	ns.podDeletes--
	ns.pod.deleted = true
	if _, ok := lockSt(s).HolderOf(mcPod); ok {
		m.say(ns, "the pod finishes and is deleted")
		emit(ns, kindStep) // a holder pod finishes its work: part of progress
		return
	}
	m.say(ns, "the pod is deleted")
	emit(ns, kindFailure)
}

// ---------------------------------------------------------------------------------------------
// Canonical encoding: revisions are replaced by their ranks. Every decision depends only on the
// equality and order of revisions, never on their values, and every new revision is above all
// before; so two states that differ only there behave alike. Revisions fall in two domains that
// are never compared with each other: the lock Lease's (its resourceVersions, tokens) and the
// queue's (the queue and waiter Leases' resourceVersions, tickets: the served, reserved and left
// ones too), each ranked on its own. Without this the state space would not even be finite (a
// waiter and the manager can set and clear the waiting mark forever).

const (
	domLock  = 0 // the lock Lease's revisions: its resourceVersions and tokens
	domQueue = 1 // the queue's: queue and waiter Lease resourceVersions, tickets
)

// copyLive reports whether a later step may read the client's lock copy: not a waiter's, which
// reads the lock Lease afresh next (or beats, then attempts again from a fresh read).
func (m *mcModel) copyLive(c *mcClient) bool {
	return c.pc != pcAcqRead && c.pc != pcBeatRead && c.pc != pcBeatWrite
}

// key encodes s canonically: encode runs twice, collecting the revisions, then writing them as
// ranks.
func (m *mcModel) key(s *mcState) [2]uint64 {
	m.rk[0], m.rk[1], m.collect = m.rk[0][:0], m.rk[1][:0], true
	m.encode(s)
	for d := range m.rk {
		slices.Sort(m.rk[d])
		m.rk[d] = slices.Compact(m.rk[d])
	}
	m.buf, m.collect = m.buf[:0], false
	m.encode(s)
	return [2]uint64{maphash.Bytes(m.seedA, m.buf), maphash.Bytes(m.seedB, m.buf)}
}

func (m *mcModel) put(vs ...uint64) {
	if !m.collect {
		for _, v := range vs {
			m.buf = binary.AppendUvarint(m.buf, v)
		}
	}
}

// rev puts revisions of domain d, as their ranks (0 stays 0). With an adversary, both domains
// are one: lease.Read compares a ticket with the lock Lease's resourceVersion (forged tickets),
// and the manager's repair writes a resourceVersion as a ticket.
func (m *mcModel) rev(d int, vs ...uint64) {
	if m.cfg.adversary > 0 {
		d = domLock
	}
	for _, v := range vs {
		switch {
		case v == 0:
			m.put(0)
		case m.collect:
			m.rk[d] = append(m.rk[d], v)
		default:
			i, _ := slices.BinarySearch(m.rk[d], v)
			m.put(uint64(i + 1))
		}
	}
}

func (m *mcModel) ver(v *mcVer) {
	if v == nil {
		m.put(0)
		return
	}
	m.put(uint64(v.shape), uint64(len(v.lrevs)), uint64(len(v.trevs)))
	m.rev(domLock, v.lrevs...)
	m.rev(domQueue, v.trevs...)
}

// copyOf puts a waiter Lease copy v whose slot holds cur now: whether it is cur (a write from it
// can land) or stale (a write from it conflicts); its content only under mcLastWriteWins, where
// a stale copy's write lands. (A client's copy with a ticket always shows it waiting with that
// ticket: its last write was that join, or a beat after it.)
func (m *mcModel) copyOf(v, cur *mcVer) {
	switch {
	case v == nil:
		m.put(0)
	case cur != nil && v.rv == cur.rv:
		m.put(1)
	case m.cfg.mutation == mcLastWriteWins:
		m.put(2)
		m.ver(v)
	default:
		m.put(3)
	}
}

// queue puts a queue assembled or judged (not stored): its entries' holders and tickets (not
// their beats or since: nothing decides on them), added ones, and malformed ones.
func (m *mcModel) queue(q *Queue) {
	if q == nil {
		m.put(0)
		return
	}
	m.put(uint64(len(q.Waiters)+1), uint64(len(q.Added)), uint64(len(q.Malformed)))
	for _, w := range q.Waiters {
		m.put(uint64(m.intern(w.Holder)))
		m.rev(domQueue, uint64(w.Ticket))
	}
	for _, w := range q.Added {
		m.put(uint64(m.intern(w.Holder)))
	}
	for _, mf := range q.Malformed {
		m.put(uint64(m.intern(string(mf.Raw))))
	}
}

func b2i(bs ...bool) uint64 {
	var v uint64
	for i, x := range bs {
		if x {
			v |= 1 << i
		}
	}
	return v
}

func (m *mcModel) encode(s *mcState) {
	m.ver(s.lock)
	m.ver(s.queue)
	for _, w := range s.wl {
		m.ver(w)
	}
	for i := range m.ids {
		c := &s.cl[i]
		// Dead data is left out: what the next step overwrites before it reads it.
		joining := c.pc == pcJoinRead || c.pc == pcJoinWrite
		m.put(uint64(c.pc), uint64(c.cyclesLeft), uint64(c.renewsLeft),
			b2i(c.leaving, joining && c.markAfterJoin, c.crashed, c.paused, c.stale, c.ticket != 0 && c.owed == c.ticket))
		m.rev(domQueue, uint64(c.ticket), uint64(c.leaveT), c.rqQ, c.rqW)
		m.rev(domLock, c.tok, c.unsure)
		if m.copyLive(c) {
			m.ver(c.lock)
		} else {
			m.put(0)
		}
		m.ver(c.q)
		m.queue(c.rq)
		m.copyOf(c.w, s.wl[i])
		m.copyOf(c.wo, s.wl[i])
	}
	mg := &s.mgr
	m.put(uint64(mg.pc), uint64(mg.plan), uint64(m.intern(mg.victim)), uint64(mg.spec), b2i(mg.added), b2i(mg.alive),
		uint64(len(mg.dead)), uint64(len(mg.gone)))
	m.rev(domQueue, mg.basisQ, mg.basisW)
	for _, e := range slices.Concat(mg.dead, mg.gone) {
		m.put(uint64(m.intern(e.holder)))
		m.rev(domQueue, uint64(e.t))
	}
	m.ver(mg.lock)
	switch mg.pc {
	case mReadQ: // the list: the entries that wait, and whether each is still current
		for j, w := range mg.ws {
			m.copyOf(w, s.wl[j])
			if w != nil {
				m.put(uint64(m.intern(w.holder)))
				m.rev(domQueue, uint64(w.ticket))
			}
		}
	case mDrop: // the copies the drops write from: current or not
		for _, e := range mg.dead {
			j := m.deadSlot(e)
			m.copyOf(mg.ws[j], s.wl[j])
		}
	}
	m.ver(mg.q)
	if m.cfg.mutation == mcRawHead {
		m.queue(mg.read)
	}
	m.queue(mg.judgedQ)
	m.queue(mg.store)
	podOwed := uint64(0)
	if m.podAsking(s) {
		podOwed = uint64(s.pod.owed)
	}
	m.put(b2i(s.pod.granted, s.pod.deleted, s.pod.lost))
	m.rev(domQueue, podOwed)
	m.rev(domLock, s.maxIssued)
	m.put(uint64(len(s.ended)))
	m.rev(domLock, s.ended...)
	m.put(uint64(s.spec), uint64(s.bound), uint64(s.edits))
	m.put(uint64(len(s.left)))
	for _, e := range s.left {
		m.put(uint64(m.intern(e.holder)))
		m.rev(domQueue, uint64(e.t))
	}
	m.put(uint64(len(s.dropped)))
	for _, d := range s.dropped {
		m.put(uint64(m.intern(d.holder)))
		m.rev(domQueue, uint64(d.t), d.rev)
	}
	m.put(uint64(s.crashes), uint64(s.pauses), uint64(s.lost), uint64(s.giveUps), uint64(s.podDeletes),
		uint64(s.podRequeues), uint64(s.adv), uint64(len(s.issued)))
	m.rev(domLock, s.fenced)
	m.rev(domLock, s.issued...)
}

// ---------------------------------------------------------------------------------------------
// Exploration.

type mcResult struct {
	states, transitions int
	elapsed             time.Duration
	violation           string
	trace               []string // the steps from the initial state to the violation
	// progress (P7)
	stuck, checked int          // eligible states from which no step sequence serves every live waiter
	events         [evCount]int // new states reached by a step with each event
	admission      string       // what the policies admitted of mallory's writes
}

// explore runs a breadth-first search over every interleaving, checking P1-P6 on every state and
// write; if none is broken, it checks P7 by reverse reachability over the explored graph.
func (m *mcModel) explore(limit int) mcResult {
	start := time.Now()
	var r mcResult
	init, err := m.initial()
	if err != nil {
		r.violation = "initial state: " + err.Error()
		return r
	}
	ids := map[[2]uint64]int32{m.key(init): 0}
	parent, choice := []int32{-1}, []uint16{0}
	goal, eligible := []bool{m.goal(init)}, []bool{m.eligible(init)}
	var from, to []int32
	frontier := []*mcState{init}
	for len(frontier) > 0 && r.violation == "" {
		var next []*mcState
		for _, s := range frontier {
			k := -1
			m.successors(s, func(ns *mcState, kind mcKind) {
				k++
				if r.violation != "" {
					return
				}
				r.transitions++
				if ns.viol == "" {
					m.checkState(ns)
				}
				if ns.viol != "" {
					r.violation = ns.viol
					r.trace = m.replay(append(m.path(parent, choice, s.id), uint16(k)))
					return
				}
				key := m.key(ns)
				nid, seen := ids[key]
				if !seen {
					nid = int32(len(parent))
					ids[key] = nid
					parent, choice = append(parent, s.id), append(choice, uint16(k))
					goal, eligible = append(goal, m.goal(ns)), append(eligible, m.eligible(ns))
					ns.id = nid
					next = append(next, ns)
					for e := range evCount {
						if ns.ev&(1<<e) != 0 {
							r.events[e]++
						}
					}
				}
				if kind == kindStep {
					from, to = append(from, s.id), append(to, nid)
				}
			})
			if r.violation != "" {
				break
			}
		}
		frontier = next
		if limit > 0 && len(parent) > limit {
			r.violation = fmt.Sprintf("state limit %d exceeded", limit)
			break
		}
	}
	r.states = len(parent)
	if r.violation == "" {
		m.progress(&r, parent, choice, goal, eligible, from, to)
	}
	r.elapsed = time.Since(start)
	r.admission = m.adm.report()
	return r
}

// goal: every live waiter has been served — no running client is acquiring, and the pod does not
// wait.
func (m *mcModel) goal(s *mcState) bool {
	for i := range m.ids {
		c := &s.cl[i]
		if c.crashed || c.paused {
			continue
		}
		switch c.pc {
		case pcAcqRead, pcGrantCAS, pcJoinRead, pcJoinWrite, pcMarkCAS, pcBeatRead, pcBeatWrite:
			return false
		}
	}
	return !m.podAsking(s)
}

// eligible: the states the brief's P7 is about: no client is paused, and no crashed client holds
// the lock. P7 is checked from every state; these are counted apart, and reported first.
func (m *mcModel) eligible(s *mcState) bool {
	for i := range m.ids {
		c := &s.cl[i]
		if _, held := lockSt(s).HolderOf(m.ids[i]); c.paused || c.crashed && held {
			return false
		}
	}
	return true
}

// progress checks P7: from every explored state, steps of running actors (no crash, pause,
// resume, lost response, give-up, or pod deletion while it waits) reach a goal state.
func (m *mcModel) progress(r *mcResult, parent []int32, choice []uint16, goal, eligible []bool, from, to []int32) {
	n := len(parent)
	// reverse adjacency, compressed
	start := make([]int32, n+1)
	for _, t := range to {
		start[t+1]++
	}
	for i := range n {
		start[i+1] += start[i]
	}
	pos := slices.Clone(start)
	rev := make([]int32, len(to))
	for e, t := range to {
		rev[pos[t]] = from[e]
		pos[t]++
	}
	ok := slices.Clone(goal)
	var work []int32
	for i, g := range goal {
		if g {
			work = append(work, int32(i))
		}
	}
	for len(work) > 0 {
		t := work[len(work)-1]
		work = work[:len(work)-1]
		for _, f := range rev[start[t]:start[t+1]] {
			if !ok[f] {
				ok[f] = true
				work = append(work, f)
			}
		}
	}
	first, firstAny := -1, -1
	for i := range n {
		if ok[i] {
			continue
		}
		if firstAny < 0 {
			firstAny = i
		}
		if eligible[i] {
			r.stuck++
			if first < 0 {
				first = i
			}
		}
	}
	for i := range n {
		if eligible[i] {
			r.checked++
		}
	}
	if first < 0 && firstAny >= 0 {
		// A state outside the brief's set is stuck: report it as well (it would be a liveness bug
		// that needs a paused client to resume, or a crashed holder).
		first = firstAny
		r.violation = "P7 progress (in a state with a paused client or a crashed holder): no sequence of steps of " +
			"running actors serves every live waiter from the last state"
	} else if first >= 0 {
		r.violation = fmt.Sprintf("P7 progress: %d state(s) from which no sequence of steps of running actors "+
			"serves every live waiter; the first found is the last state of the trace", r.stuck)
	}
	if first >= 0 {
		r.trace = m.replay(m.path(parent, choice, int32(first)))
		r.trace = append(r.trace, m.lasso(m.path(parent, choice, int32(first)))...)
	}
}

// lasso continues a progress counterexample from its last state with steps of running actors
// (each to a state not shown yet) until none is left: every state it shows is stuck too.
func (m *mcModel) lasso(p []uint16) []string {
	s := m.stateAt(p)
	m.tracing = true
	defer func() { m.tracing = false }()
	out := []string{"continued with steps of running actors only (every state below is stuck as well):"}
	shown := map[[2]uint64]bool{m.key(s): true}
	for range 40 {
		var next *mcState
		m.successors(s, func(ns *mcState, kind mcKind) {
			if next == nil && kind == kindStep && !shown[m.key(ns)] {
				next = ns
			}
		})
		if next == nil {
			return append(out, "   every step of a running actor now leads back to a state above")
		}
		shown[m.key(next)] = true
		out = append(out, fmt.Sprintf("  + %s\n      => %s", next.note, m.describe(next)))
		s = next
	}
	return out
}

// stateAt replays the choices p from the initial state.
func (m *mcModel) stateAt(p []uint16) *mcState {
	s, _ := m.initial()
	for _, k := range p {
		i := -1
		m.successors(s, func(ns *mcState, _ mcKind) {
			if i++; i == int(k) {
				s = ns
			}
		})
	}
	return s
}

func (m *mcModel) path(parent []int32, choice []uint16, id int32) []uint16 {
	var p []uint16
	for ; id > 0; id = parent[id] {
		p = append(p, choice[id])
	}
	slices.Reverse(p)
	return p
}

// replay re-runs the choices from the initial state with notes on, and describes each step.
func (m *mcModel) replay(p []uint16) []string {
	m.tracing = true
	defer func() { m.tracing = false }()
	s, _ := m.initial()
	out := []string{"initial: " + m.describe(s)}
	for n, k := range p {
		var got *mcState
		i := -1
		m.successors(s, func(ns *mcState, _ mcKind) {
			if i++; i == int(k) {
				got = ns
			}
		})
		if got == nil {
			return append(out, "(replay failed)")
		}
		if got.viol == "" {
			m.checkState(got)
		}
		line := fmt.Sprintf("%2d. %s\n      => %s", n+1, got.note, m.describe(got))
		if got.viol != "" {
			line += "\n      VIOLATION: " + got.viol
		}
		out = append(out, line)
		s = got
	}
	return out
}

// ---------------------------------------------------------------------------------------------
// Descriptions for traces.

func (m *mcModel) stateString(st State) string {
	if !m.tracing {
		return ""
	}
	s := fmt.Sprintf("{holder=%q token=%d served=%d", st.Holder, st.Token, st.Served)
	if st.Semaphore {
		s = fmt.Sprintf("{permits=%d token=%d served=%d", st.Limit, st.Token, st.Served)
		for _, p := range st.Permits {
			s += fmt.Sprintf(" permit-%d=%s/%d@%d", p.Number, p.Holder, p.Token, p.Ticket)
		}
	}
	if st.Reserved != 0 {
		s += fmt.Sprintf(" reserved=%d", st.Reserved)
	}
	if st.Waiting {
		s += " waiting"
	}
	if st.RevokedToken != 0 {
		s += fmt.Sprintf(" revoked=%d", st.RevokedToken)
	}
	return s + "}"
}

func (m *mcModel) queueEntries(q Queue) string {
	if !m.tracing {
		return ""
	}
	var b strings.Builder
	b.WriteString("[")
	for i, w := range q.Waiters {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%d:%s", w.Ticket, w.Holder)
		if w.Beat != 0 {
			fmt.Fprintf(&b, "(beat %d)", w.Beat)
		}
	}
	for _, w := range q.Added {
		fmt.Fprintf(&b, " 0:%s", w.Holder)
	}
	for _, mf := range q.Malformed {
		fmt.Fprintf(&b, " malformed:%s", mf.Raw)
	}
	b.WriteString("]")
	return b.String()
}

func (m *mcModel) waiterString(v *mcVer) string {
	switch {
	case !m.tracing:
		return ""
	case v == nil:
		return "(none)"
	case v.holder == "":
		return fmt.Sprintf("rv%d{no holder, ticket %d}", v.rv, v.ticket)
	}
	return fmt.Sprintf("rv%d{%s, ticket %d}", v.rv, v.holder, v.ticket)
}

func (m *mcModel) queueString(v *mcVer) string {
	if !m.tracing {
		return ""
	}
	return fmt.Sprintf("rv%d%s", v.rv, m.queueEntries(v.q))
}

func (m *mcModel) handoverString(h Handover) string {
	if !m.tracing {
		return ""
	}
	switch {
	case h.To != nil:
		return fmt.Sprintf(" (hands over to %s, ticket %d, token %d)", h.To.Holder, h.To.Ticket, h.Token)
	case h.Reserved != 0:
		return fmt.Sprintf(" (keeps the lock for the pod, ticket %d)", h.Reserved)
	}
	return ""
}

func (m *mcModel) describe(s *mcState) string {
	var b strings.Builder
	switch {
	case s.lock == nil:
		b.WriteString("no lock Lease")
	case CheckLockLease(s.lock.l, mcLockUID) != nil:
		fmt.Fprintf(&b, "lock Lease rv%d not the manager's %s", s.lock.rv, m.stateString(s.lock.st))
	default:
		fmt.Fprintf(&b, "lock rv%d %s", s.lock.rv, m.stateString(s.lock.st))
	}
	fmt.Fprintf(&b, "; queue %s", m.queueString(s.queue))
	for j, w := range s.wl {
		if w != nil {
			who := mcDead + "/evil"
			if j < len(m.ids) {
				who = m.ids[j]
			}
			fmt.Fprintf(&b, "; %s's waiter Lease %s", who, m.waiterString(w))
		}
	}
	for i, id := range m.ids {
		c := &s.cl[i]
		fmt.Fprintf(&b, "; %s:", id)
		switch {
		case c.crashed:
			b.WriteString("crashed")
			continue
		case c.paused:
			b.WriteString("paused,")
		case c.stale:
			b.WriteString("silent,")
		}
		b.WriteString(mcPCNames[c.pc])
		if c.ticket != 0 {
			fmt.Fprintf(&b, ",ticket=%d", c.ticket)
		}
		if c.leaving {
			fmt.Fprintf(&b, ",leaving=%d", c.leaveT)
		}
		if c.tok != 0 {
			fmt.Fprintf(&b, ",holds=%d", c.tok)
		}
	}
	if m.cfg.pod {
		fmt.Fprintf(&b, "; pod:")
		switch {
		case s.pod.deleted:
			b.WriteString("deleted")
		case s.pod.granted:
			b.WriteString("granted")
		default:
			b.WriteString("asking")
		}
	}
	return b.String()
}
