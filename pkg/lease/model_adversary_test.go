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

// The adversary of the model check (model_test.go): mallory, a principal allowed every verb on
// Leases and no "grant" on fencedlocks, whose writes are those the admission policies admit; the
// manager's upkeep of the lock's Lease that mallory's writes call for (ensureLease); and the
// fence (P9).

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/internal/policyeval"
)

const (
	mcMallory = "mallory"
	// mcForgedToken is issue 42's, mcForgedTicket the highest ticket every format the policies
	// check accepts (fencedlock.io/ticket: 18 digits; a permit's ticket field: 16). Both are above
	// every revision the model reaches, so they rank above all others in every state (the key
	// stays exact).
	mcForgedToken  uint64 = 99999999999
	mcForgedTicket Ticket = 9999999999999999
)

type mcAdvKind uint8

const (
	advDelete mcAdvKind = iota // DELETE the lock's Lease
	// advSquat: CREATE at the free name a Lease without labels, controlled by the lock, holder
	// mallory, a forged token; advCreateOurs: the same, labelled as the manager's.
	advSquat
	advCreateOurs
	advHandover    // hand the held lock to target, with ticket (forged, or the revision now)
	advGrab        // grant a lock with room to mallory, whatever its marks say (a newcomer)
	advClearWaiter // clear the holder of a waiter Lease that waits (the waiter's place)
	// advVersion: stamp the lock's Lease with a protocol version above every party's, which each
	// would refuse to read (a VersionError): a denial of service, if the policies admitted it.
	advVersion
	advKinds
)

var mcAdvNames = [advKinds]string{"delete the lock's Lease", "create an unlabelled Lease at its name",
	"create a labelled Lease at its name", "hand the lock over with a chosen ticket", "take the lock as a newcomer",
	"clear a waiter Lease's holder", "stamp a newer protocol version"}

// mcAdvWrite is one write mallory may try.
type mcAdvWrite struct {
	kind   mcAdvKind
	target string // advHandover: the new holder; advClearWaiter: the waiter
	ticket Ticket // advHandover
}

// advLockWrites are the writes of the lock's Lease mallory may try on version v (nil: the name
// is free); now is the revision issued last. They depend on v and on whether now is v's own
// revision only, so that their admission is cached by v's content (advKey).
func (m *mcModel) advLockWrites(v *mcVer, now uint64) []mcAdvWrite {
	if v == nil {
		return []mcAdvWrite{{kind: advSquat}, {kind: advCreateOurs}}
	}
	if !m.managers(v.l) {
		return nil // mallory's own Lease: the manager replaces it
	}
	out := []mcAdvWrite{{kind: advDelete}, {kind: advVersion}}
	if held := v.st.Permits; len(held) > 0 {
		// To itself, to the first client that does not hold a permit (the clients are alike: one
		// stands for all), or to the pod (which the policies keep for the manager); with the
		// issue's forged ticket, above every ticket, or one just below this write's own revision,
		// which no reader can tell from a handover's.
		targets := []string{mcMallory}
		if i := slices.IndexFunc(m.ids, func(id string) bool { _, holds := v.st.HolderOf(id); return !holds }); i >= 0 {
			targets = append(targets, m.ids[i])
		}
		if m.cfg.pod {
			targets = append(targets, mcPod)
		}
		for _, t := range targets {
			if _, holds := v.st.HolderOf(t); holds {
				continue
			}
			out = append(out, mcAdvWrite{kind: advHandover, target: t, ticket: mcForgedTicket},
				mcAdvWrite{kind: advHandover, target: t, ticket: Ticket(now)})
		}
	}
	if _, holds := v.st.HolderOf(mcMallory); !v.st.Full() && !holds {
		out = append(out, mcAdvWrite{kind: advGrab})
		if v.st.Semaphore { // a permit's ticket field is the grant's to write (a lock's is not)
			out = append(out, mcAdvWrite{kind: advGrab, ticket: mcForgedTicket})
		}
	}
	return out
}

// managers reports whether l is a Lease the manager made: labelled as fencedlock's (only the
// manager creates one: lease-protocol's first validation).
func (m *mcModel) managers(l *coordinationv1.Lease) bool {
	return l.Labels[locksv1alpha1.ManagedByLabel] == locksv1alpha1.ManagedByValue
}

// advSteps are mallory's writes: failures in the sense of P7 (nobody relies on them for
// progress), one step of its budget each, each applied from the current object (a stale one
// would only conflict) and only if the admission policies admit it.
func (m *mcModel) advSteps(s *mcState, emit mcEmit) {
	if s.adv == 0 {
		return
	}
	writes := m.advLockWrites(s.lock, s.rev)
	admitted := m.adm.lockWrites(m, s.lock, s.rev, writes)
	for k, w := range writes {
		if admitted&(1<<k) == 0 {
			continue
		}
		ns := s.clone()
		ns.adv--
		m.advApply(ns, w)
		emit(ns, kindFailure)
	}
	for j, id := range m.ids {
		v := s.wl[j]
		if v == nil || v.holder != id || v.ticket == 0 || !m.adm.waiterWrite(v) {
			continue
		}
		ns := s.clone()
		ns.adv--
		m.advApply(ns, mcAdvWrite{kind: advClearWaiter, target: id})
		emit(ns, kindFailure)
	}
}

// advLease builds mallory's write w from the lock's Lease v (nil: none): the Lease it writes (nil
// for a DELETE).
func (m *mcModel) advLease(v *mcVer, w mcAdvWrite) (*coordinationv1.Lease, error) {
	switch w.kind {
	case advDelete:
		return nil, nil
	case advSquat, advCreateOurs:
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lock",
			OwnerReferences: []metav1.OwnerReference{*m.ref},
			Annotations:     map[string]string{locksv1alpha1.TokenAnnotation: strconv.FormatUint(mcForgedToken, 10)}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: new(mcMallory), LeaseDurationSeconds: new(int32(15))}}
		if w.kind == advCreateOurs {
			l.Labels = map[string]string{locksv1alpha1.ManagedByLabel: locksv1alpha1.ManagedByValue}
		}
		return l, nil
	}
	next := v.l.DeepCopy()
	if w.kind == advVersion {
		setAnnotation(next, locksv1alpha1.ProtocolAnnotation, strconv.Itoa(ProtocolVersion+1))
		return next, nil
	}
	st := v.st
	if w.kind == advHandover { // the holder's permit ends, the target's begins: one write
		victim := st.Permits[0]
		clearPermit(next, st, victim)
		st = without(st, victim)
	}
	if _, err := grant(next, st, cmpOr(w.target, mcMallory), w.ticket, mcT0); err != nil {
		return nil, err
	}
	if w.kind == advHandover {
		setAnnotation(next, locksv1alpha1.TicketAnnotation, w.ticket.String())
	}
	return next, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// advApply makes mallory's write w on s.
func (m *mcModel) advApply(s *mcState, w mcAdvWrite) {
	switch w.kind {
	case advDelete:
		m.say(s, "mallory deletes the lock's Lease")
		m.hit(s, evAdvDeleted)
		m.setLock(s, nil)
	case advSquat, advCreateOurs:
		l, _ := m.advLease(nil, w)
		m.say(s, "mallory creates a Lease at the lock's name (%s): holder mallory, token %d", mcAdvNames[w.kind],
			mcForgedToken)
		m.hit(s, evAdvSquat)
		m.createLock(s, l)
	case advClearWaiter:
		j := m.clientOf(w.target)
		v := s.wl[j]
		m.say(s, "mallory clears %s's waiter Lease (ticket %d)", w.target, v.ticket)
		if _, err := m.casWaiter(s, j, v, false, func(old, next *coordinationv1.Lease) {
			_ = LeaveWaiter(old, next, w.target, v.ticket)
		}); err != nil {
			m.fail(s, "unexpected error from mallory's write of %s's waiter Lease: %v", w.target, err)
		}
		m.hit(s, evAdvClearedWaiter)
	default:
		old := s.lock
		m.say(s, "mallory writes: %s to %s, ticket %d", mcAdvNames[w.kind], cmpOr(w.target, mcMallory), w.ticket)
		out, err := m.casLock(s, old, false, mcMeta{adversary: true}, func(next *coordinationv1.Lease) error {
			l, err := m.advLease(old, w)
			if err == nil {
				*next = *l
			}
			return err
		})
		if err != nil {
			m.fail(s, "unexpected error from mallory's write (%s): %v", mcAdvNames[w.kind], err)
			return
		}
		m.say(s, ": %s", m.stateString(out.st))
		if out.st.ForgedTicket != 0 || Ticket(out.rv) <= w.ticket {
			m.hit(s, evAdvForgedTicket)
		} else if w.kind == advHandover {
			m.hit(s, evAdvTicketBelow)
		}
	}
}

// ---------------------------------------------------------------------------------------------
// The Lease at the lock's name: created and deleted by mallory, and by the manager.

// setLock replaces the Lease at the lock's name by nw (nil: deleted): the grants it held end
// without a write of theirs (a client learns it when its next write finds another Lease).
func (m *mcModel) setLock(s *mcState, nw *mcVer) {
	if old := s.lock; old != nil {
		for _, p := range old.st.Permits {
			s.ended = append(slices.Clip(s.ended), uint64(p.Token))
			if p.Holder == mcPod && !s.pod.deleted { // it asks again
				s.pod.granted, s.pod.lost, s.pod.owed = false, false, 0
			}
		}
	}
	s.lock, s.issued = nw, nil // no grant issued a token of a Lease just made
	low := uint64(0)
	if nw != nil && len(nw.ptoks) > 0 {
		low = slices.Min(nw.ptoks)
	}
	s.ended = slices.DeleteFunc(slices.Clone(s.ended), func(t uint64) bool { return low == 0 || t < low })
	s.bound = int8(max(lockSt(s).Limit, min(int(s.bound), len(lockSt(s).Permits)), 1))
}

// createLock creates l at the lock's name, which is free.
func (m *mcModel) createLock(s *mcState, l *coordinationv1.Lease) {
	s.rev++
	l.ResourceVersion = strconv.FormatUint(s.rev, 10)
	v, err := m.lockVer(l)
	if err != nil {
		m.fail(s, "a create stored a lock Lease that does not parse: %v", err)
		return
	}
	m.setLock(s, v)
}

// managerEnsure is ensureLease, the start of every reconcile: the manager's cache shows only
// Leases labelled as fencedlock's. A missing one is created (createLease); a foreign one at the
// name (the create finds it) is read live, deleted conditioned on that read and created anew
// (replaceForeignLease); a Lease not stamped yet is stamped (Initialize, ServeIssued of the
// resourceVersion read: every join before has a lower ticket, and those still waiting join
// again, SetPermits). Otherwise the reconcile goes on: the waiter Leases are listed next.
func (m *mcModel) managerEnsure(s *mcState) {
	mg := &s.mgr
	switch mg.pc {
	case mIdle:
		switch l := s.lock; {
		case l == nil:
			m.managerCreate(s)
		case !m.managers(l.l):
			mg.lock, mg.pc = l, mDelForeign
			m.say(s, "manager creates the lock's Lease: it exists; reads it live: not fencedlock's")
		case !l.st.Initialized():
			mg.lock, mg.pc = l, mStamp
			m.say(s, "manager reads the lock Lease: not stamped")
		default:
			mg.lock, mg.pc = l, mListW
			m.say(s, "manager reads the lock Lease: %s", m.stateString(l.st))
		}
	case mDelForeign:
		switch {
		case s.lock != nil && s.lock.rv != mg.lock.rv:
			m.say(s, "manager deletes the foreign Lease: conflict (retries)")
			m.managerIdle(s)
			return
		case s.lock != nil:
			m.say(s, "manager deletes the foreign Lease (holder %q, token %d)", s.lock.st.Holder, s.lock.st.Token)
			m.hit(s, evForeignDeleted)
			m.setLock(s, nil)
		default:
			m.say(s, "manager deletes the foreign Lease: gone already")
		}
		mg.pc = mCreate
	case mCreate:
		m.managerCreate(s)
	case mStamp:
		spec := int(s.spec)
		served, _ := ParseTicket(mg.lock.l.ResourceVersion)
		out, err := m.casLock(s, mg.lock, false, mcMeta{}, func(next *coordinationv1.Lease) error {
			if _, err := Initialize(next); err != nil {
				return err
			}
			ServeIssued(next, served)
			_, err := SetPermits(next, spec)
			return err
		})
		switch {
		case out != nil:
			m.say(s, "manager stamps the lock Lease: %s", m.stateString(out.st))
			m.hit(s, evStamped)
		case apierrors.IsConflict(err):
			m.say(s, "manager stamps the lock Lease: conflict")
		default:
			m.fail(s, "unexpected error from the manager's stamp: %v", err)
		}
		m.managerIdle(s)
	}
}

// managerCreate is createLease's create: its watch event brings the next reconcile.
func (m *mcModel) managerCreate(s *mcState) {
	defer m.managerIdle(s)
	if s.lock != nil {
		m.say(s, "manager creates the lock's Lease: it exists (made again at once; retries)")
		return
	}
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lock",
		Labels: map[string]string{locksv1alpha1.ManagedByLabel: locksv1alpha1.ManagedByValue,
			locksv1alpha1.LockUIDLabel: mcLockUID},
		OwnerReferences: []metav1.OwnerReference{*m.ref}},
		Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: new(int32(15))}}
	m.createLock(s, l)
	m.say(s, "manager creates the lock's Lease")
	m.hit(s, evCreated)
}

// ---------------------------------------------------------------------------------------------
// The fence (P9).

// fenceTrusts is the fence's test of the Lease at the lock's name (webhook/fence.go lock):
// lease.CheckLockLease, or under mcFenceTrustsOwner any Lease the lock controls.
func (m *mcModel) fenceTrusts(l *coordinationv1.Lease) bool {
	if m.cfg.mutation == mcFenceTrustsOwner {
		ref := LockOf(l) // BROKEN: labels unchecked
		return ref != nil && ref.UID == mcLockUID
	}
	return CheckLockLease(l, mcLockUID) == nil
}

// fence checks P9 on s and records what the fence admits now: a token T is admitted iff the
// Lease at the lock's name is trusted, holds a permit with T (State.HeldToken), and T is not
// below the highest token the fenced object recorded (s.fenced). Every holder is taken to write
// at once, the worst case for the record.
func (m *mcModel) fence(s *mcState) {
	if s.lock == nil || !m.fenceTrusts(s.lock.l) {
		return
	}
	st := s.lock.st
	for _, p := range st.Permits {
		tok := uint64(p.Token)
		if _, held := st.HeldToken(p.Token); !held || tok < s.fenced {
			continue
		}
		switch {
		case tok == mcForgedToken:
			m.fail(s, "P9 fence: the fence admits the forged token %d of %s", tok, p.Holder)
		case !slices.Contains(s.issued, tok):
			m.fail(s, "P9 fence: the fence admits token %d of %s, which no grant issued", tok, p.Holder)
		}
		s.fenced = max(s.fenced, tok)
	}
}

// ---------------------------------------------------------------------------------------------
// Admission of mallory's writes, cached by content.

// mcJudge answers a write of mallory's as the API server's admission does: "" when admitted,
// else the refusal. old is nil for a CREATE, nw nil for a DELETE.
type mcJudge func(old, nw *coordinationv1.Lease) string

// mcAdmission judges mallory's writes. The answer for a write is cached by the content of the
// version it is made from as the state's key sees it (shape, and its revisions by rank): every
// rule of the policies compares revisions only by equality and order, and the key keeps nothing
// else a rule reads that the model varies.
type mcAdmission struct {
	judge  mcJudge
	cache  map[string]uint64 // lock writes admitted (bit k: the k-th of advLockWrites)
	wcache map[string]bool   // waiter Lease clears admitted
	// tried, admitted: how many distinct writes of each kind were judged, and admitted
	tried, admitted [advKinds]int
	refusals        map[string]int // the policies' refusals, by message (shortened)
}

func newAdmission(judge mcJudge) *mcAdmission {
	return &mcAdmission{judge: judge, cache: map[string]uint64{}, wcache: map[string]bool{}, refusals: map[string]int{}}
}

// advKey is v's content as the key sees it, with extra revisions ranked alongside.
func advKey(v *mcVer, extra ...uint64) string {
	if v == nil {
		return "none"
	}
	vals := slices.Concat(v.lrevs, v.trevs, extra)
	ranks := slices.Compact(slices.Sorted(slices.Values(vals)))
	var b strings.Builder
	fmt.Fprintf(&b, "%d:", v.shape)
	for _, x := range vals {
		i, _ := slices.BinarySearch(ranks, x)
		fmt.Fprintf(&b, "%d,", i)
	}
	return b.String()
}

// lockWrites returns the writes of advLockWrites(v, now) the policies admit, as a bit set.
func (a *mcAdmission) lockWrites(m *mcModel, v *mcVer, now uint64, writes []mcAdvWrite) uint64 {
	key := advKey(v, now)
	if bits, ok := a.cache[key]; ok {
		return bits
	}
	var bits uint64
	for k, w := range writes {
		nw, err := m.advLease(v, w)
		if err != nil {
			continue // not a write mallory can make of v (lease.grant's own checks)
		}
		var old *coordinationv1.Lease
		if v != nil {
			old = v.l
		}
		if nw != nil && old != nil {
			nw.ResourceVersion = old.ResourceVersion // conditioned on the version read
		}
		a.tried[w.kind]++
		if why := a.judge(old, nw); why != "" {
			a.refusals[shorten(why)]++
			continue
		}
		a.admitted[w.kind]++
		bits |= 1 << k
	}
	a.cache[key] = bits
	return bits
}

// waiterWrite reports whether the policies admit mallory's clearing of waiter Lease v's holder.
func (a *mcAdmission) waiterWrite(v *mcVer) bool {
	key := advKey(v)
	if ok, seen := a.wcache[key]; seen {
		return ok
	}
	next := v.l.DeepCopy()
	_ = LeaveWaiter(v.l, next, v.holder, v.ticket)
	a.tried[advClearWaiter]++
	why := a.judge(v.l, next)
	if why == "" {
		a.admitted[advClearWaiter]++
	} else {
		a.refusals[shorten(why)]++
	}
	a.wcache[key] = why == ""
	return why == ""
}

func shorten(s string) string {
	if len(s) > 110 {
		return s[:110] + "..."
	}
	return s
}

// report says what the policies admitted of mallory's writes.
func (a *mcAdmission) report() string {
	if a == nil {
		return ""
	}
	var b strings.Builder
	for k := range advKinds {
		fmt.Fprintf(&b, "\n  %-45s %d of %d admitted", mcAdvNames[k], a.admitted[k], a.tried[k])
	}
	for _, why := range slices.Sorted(maps.Keys(a.refusals)) {
		fmt.Fprintf(&b, "\n  refused %dx: %s", a.refusals[why], why)
	}
	return b.String()
}

// mcPolicyDir is the admission policies' directory, from this package's.
const mcPolicyDir = "../../config/policy"

var mcLoaded sync.Map // strings.Join(without, ",") -> func() (*policyeval.Policies, error)

// mcPolicies returns config/policy without the files named in without, loaded once per process.
func mcPolicies(without []string) (*policyeval.Policies, error) {
	load, _ := mcLoaded.LoadOrStore(strings.Join(without, ","), sync.OnceValues(func() (*policyeval.Policies, error) {
		if len(without) == 0 {
			return policyeval.Load(mcPolicyDir)
		}
		dir, err := os.MkdirTemp("", "policy")
		if err != nil {
			return nil, err
		}
		defer func() { _ = os.RemoveAll(dir) }()
		files, err := filepath.Glob(filepath.Join(mcPolicyDir, "*.yaml"))
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			if slices.Contains(without, filepath.Base(f)) {
				continue
			}
			b, err := os.ReadFile(f)
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o600)
			}
			if err != nil {
				return nil, err
			}
		}
		return policyeval.Load(dir) // compiled in memory: the copies may go
	}))
	return load.(func() (*policyeval.Policies, error))()
}

// policyJudge judges mallory's writes by the policies of config/policy (without some), evaluated
// in-process as the API server does (internal/policyeval): mallory has no "grant" on fencedlocks.
func policyJudge(without []string) (mcJudge, error) {
	p, err := mcPolicies(without)
	if err != nil {
		return nil, err
	}
	return func(old, nw *coordinationv1.Lease) string {
		if r := p.Admit(policyeval.LeaseWrite(old, nw, false)); !r.Admitted() {
			return r.Policy + ": " + r.Message
		}
		return ""
	}, nil
}
