//go:build bench

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

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/lock"
	"github.com/fencedlock/fencedlock/pkg/token"
	"github.com/fencedlock/fencedlock/test/util"
)

// semaphore: grant cycles on a semaphore of 4 permits with 16 clients, beside one lock with 16
// clients in the same run, and the cost of a semaphore-fenced write beside a lock-fenced one.
func (b *bench) semaphore() {
	b.semCycles()
	b.semFence()
}

// semGrant is one grant a client got: its token and the client's clock around it.
type semGrant struct {
	client                 int
	tok                    token.Token
	called, got, releasing time.Time // Acquire called, Acquire returned, Release called
	released               time.Time // Release returned
}

// leaseVersion is one version of the lock's Lease, as its watch delivered it.
type leaseVersion struct{ permits []lease.Permit }

// semCheck is the correctness verdict on a run: at most limit holders at once, and tokens
// increasing in the order of the grants.
type semCheck struct {
	maxLease, maxClients int // most permits one Lease version showed; most client holdings that overlapped
	outOfOrder           int // grants whose token is not above every earlier grant's (in the Lease's write order)
	clientOrder          int // pairs of grants, one returned before the other's Acquire was called, in the wrong token order
	unseen               int // grants the Lease watch never showed
	duplicate            int // tokens granted twice
	ordered              int // grants placed in the write order
}

func (c semCheck) ok(limit int) bool {
	return c.maxLease <= limit && c.maxClients <= limit && c.outOfOrder == 0 && c.clientOrder == 0 &&
		c.unseen == 0 && c.duplicate == 0
}

// checkGrants judges the grants the clients got against the versions of the Lease in write order.
// A grant's place in time is the Lease version that first shows its permit (the write that
// granted it): tokens must rise strictly in that order. Independently of the watch, a grant whose
// Acquire returned before another's Acquire was called was surely granted first, so its token must
// be lower; and the client holdings [Acquire returned, Release called], which lie inside the real
// ones, must never overlap more than limit deep.
func checkGrants(grants []semGrant, versions []leaseVersion) semCheck {
	var c semCheck
	first := map[token.Token]int{} // token -> index of the first Lease version showing its permit
	for i, v := range versions {
		c.maxLease = max(c.maxLease, len(v.permits))
		for _, p := range v.permits {
			if _, ok := first[p.Token]; !ok {
				first[p.Token] = i
			}
		}
	}
	seen := map[token.Token]bool{}
	var placed []semGrant
	for _, g := range grants {
		if seen[g.tok] {
			c.duplicate++
		}
		seen[g.tok] = true
		if _, ok := first[g.tok]; ok {
			placed = append(placed, g)
		} else {
			c.unseen++
		}
	}
	slices.SortStableFunc(placed, func(x, y semGrant) int { return first[x.tok] - first[y.tok] })
	c.ordered = len(placed)
	var top token.Token
	for _, g := range placed {
		if g.tok <= top {
			c.outOfOrder++
		}
		top = max(top, g.tok)
	}

	// Client-side order: sweep the grants by Acquire called, keeping the highest token of the
	// grants already returned by then.
	byCalled := slices.Clone(grants)
	slices.SortFunc(byCalled, func(x, y semGrant) int { return x.called.Compare(y.called) })
	byGot := slices.Clone(grants)
	slices.SortFunc(byGot, func(x, y semGrant) int { return x.got.Compare(y.got) })
	var before token.Token
	j := 0
	for _, g := range byCalled {
		for ; j < len(byGot) && byGot[j].got.Before(g.called); j++ {
			before = max(before, byGot[j].tok)
		}
		if g.tok <= before {
			c.clientOrder++
		}
	}

	// Holders at once: +1 at Acquire returned, -1 at Release called (ends first on ties).
	type edge struct {
		at time.Time
		d  int
	}
	edges := make([]edge, 0, 2*len(grants))
	for _, g := range grants {
		edges = append(edges, edge{g.got, 1}, edge{g.releasing, -1})
	}
	slices.SortFunc(edges, func(x, y edge) int {
		if r := x.at.Compare(y.at); r != 0 {
			return r
		}
		return x.d - y.d
	})
	n := 0
	for _, e := range edges {
		n += e.d
		c.maxClients = max(c.maxClients, n)
	}
	return c
}

// writeCounter counts the Lease updates the clients send, by the call that sends them (Acquire or
// Release), by Lease (the lock's, or the queue's: waiter Leases), and those refused as conflicts.
type writeCounter struct {
	n [2][2][2]atomic.Int64 // [in Release][the queue's][0: all, 1: conflicts]
}

type writeCounts [2][2][2]int64

func (c *writeCounter) load() (out writeCounts) {
	for r := range 2 {
		for q := range 2 {
			for k := range 2 {
				out[r][q][k] = c.n[r][q][k].Load()
			}
		}
	}
	return out
}

func (w writeCounts) minus(v writeCounts) (out writeCounts) {
	for r := range 2 {
		for q := range 2 {
			for k := range 2 {
				out[r][q][k] = w[r][q][k] - v[r][q][k]
			}
		}
	}
	return out
}

// clientLeases is one client's Leases client: it knows whether its client is in Release.
type clientLeases struct {
	coordinationv1client.LeasesGetter
	c         *writeCounter
	releasing atomic.Bool
}

func (cl *clientLeases) Leases(ns string) coordinationv1client.LeaseInterface {
	return writeCounting{cl.LeasesGetter.Leases(ns), cl}
}

type writeCounting struct {
	coordinationv1client.LeaseInterface
	cl *clientLeases
}

func (l writeCounting) Update(ctx context.Context, le *coordinationv1.Lease, o metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	out, err := l.LeaseInterface.Update(ctx, le, o)
	r, q := 0, 0
	if l.cl.releasing.Load() {
		r = 1
	}
	if strings.HasPrefix(le.Name, "fencedlock-queue-") || strings.HasPrefix(le.Name, "fencedlock-wait-") {
		q = 1
	}
	l.cl.c.n[r][q][0].Add(1)
	if apierrors.IsConflict(err) {
		l.cl.c.n[r][q][1].Add(1)
	}
	return out, err
}

// Create counts a waiter's first join, which creates its waiter Lease.
func (l writeCounting) Create(ctx context.Context, le *coordinationv1.Lease, o metav1.CreateOptions) (*coordinationv1.Lease, error) {
	out, err := l.LeaseInterface.Create(ctx, le, o)
	r := 0
	if l.cl.releasing.Load() {
		r = 1
	}
	l.cl.c.n[r][1][0].Add(1)
	return out, err
}

type semResult struct {
	rate, writes, conflicts, reads float64     // grants/s; Lease writes, 409s and Lease reads per grant (API server)
	clientW                        writeCounts // in the measured window, as the clients sent them
	grants                         int64       // in the measured window
	acquire, release               stats       // the calls' durations, whole run
	check                          semCheck
}

// semRun loops clients on the lock name (Acquire -> Release) for warm + dur; the window after the
// warm-up is measured, and every grant of the run is checked.
func (b *bench) semRun(name string, clients int, warm, dur time.Duration) semResult {
	leases := b.cs.CoordinationV1().Leases(b.ns)
	l0, err := leases.Get(b.ctx, name, metav1.GetOptions{})
	if err != nil {
		b.t.Fatal(err)
	}
	w, err := leases.Watch(b.ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: l0.ResourceVersion})
	if err != nil {
		b.t.Fatal(err)
	}
	var versions []leaseVersion
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for ev := range w.ResultChan() {
			l, ok := ev.Object.(*coordinationv1.Lease)
			if !ok {
				continue
			}
			st, err := lease.Read(l)
			if err != nil {
				b.t.Errorf("lease %s: %v", name, err)
				continue
			}
			versions = append(versions, leaseVersion{permits: st.Permits})
		}
	}()

	// Cancelled once the window is measured: the waiters that give up then leave the queue,
	// which is no grant's cost.
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	wc := &writeCounter{}
	var mu sync.Mutex
	var grants []semGrant
	var wg sync.WaitGroup
	for c := range clients {
		cl := &clientLeases{LeasesGetter: b.cs.CoordinationV1(), c: wc}
		l := b.newLocker(cl, name, lock.WithIdentity(fmt.Sprintf("s%d", c)))
		wg.Go(func() {
			for ctx.Err() == nil {
				called := time.Now()
				g, err := l.Acquire(ctx)
				if err != nil {
					return
				}
				got := time.Now()
				releasing := time.Now()
				cl.releasing.Store(true)
				err = g.Release(context.Background())
				cl.releasing.Store(false)
				if err != nil {
					b.t.Error(err)
					return
				}
				released := time.Now()
				mu.Lock()
				grants = append(grants, semGrant{client: c, tok: g.Token(), called: called, got: got, releasing: releasing, released: released})
				mu.Unlock()
			}
		})
	}
	time.Sleep(warm)
	count := func() (n int64) {
		mu.Lock()
		defer mu.Unlock()
		return int64(len(grants))
	}
	api0, n0, t0 := b.apiMetrics(), count(), time.Now()
	w0 := wc.load()
	time.Sleep(dur)
	api1, n1, elapsed := b.apiMetrics(), count(), time.Since(t0)
	w1 := wc.load()
	cancel()
	wg.Wait()
	time.Sleep(200 * time.Millisecond) // the last releases reach the watch
	w.Stop()
	<-watched

	total := n1 - n0
	n := float64(max(total, 1))
	return semResult{rate: float64(total) / elapsed.Seconds(), grants: total,
		writes:    (requestCount(api1, "leases", "", "PUT", "POST", "PATCH") - requestCount(api0, "leases", "", "PUT", "POST", "PATCH")) / n,
		reads:     (requestCount(api1, "leases", "", "GET", "LIST") - requestCount(api0, "leases", "", "GET", "LIST")) / n,
		conflicts: (conflictCount(api1) - conflictCount(api0)) / n,
		clientW:   w1.minus(w0),
		acquire:   summarize(durations(grants, func(g semGrant) time.Duration { return g.got.Sub(g.called) })),
		release:   summarize(durations(grants, func(g semGrant) time.Duration { return g.released.Sub(g.releasing) })),
		check:     checkGrants(grants, versions)}
}

func durations(grants []semGrant, f func(semGrant) time.Duration) []time.Duration {
	out := make([]time.Duration, len(grants))
	for i, g := range grants {
		out[i] = f(g)
	}
	return out
}

// semCycles: 16 clients on a semaphore of 4 permits and on a lock, in the same run; the write
// bound is the cycles section's: the raw CAS rate over the two writes of a cycle (a grant and a
// release), which a semaphore's one Lease serializes as a lock's does.
func (b *bench) semCycles() {
	bound := b.floorRate / 2
	clients := envInt("BENCH_SEM_CLIENTS", 16)
	dur := time.Duration(envInt("BENCH_SEM_SECONDS", 10)) * time.Second
	warm := time.Duration(envInt("BENCH_CYCLE_WARM_SECONDS", 2)) * time.Second
	const permits = 4
	b.kit.NewLock(b.ns, "sem-cycles", util.LeaseSeconds(15), util.Permits(permits))
	b.kit.NewLock(b.ns, "sem-cycles-lock", util.LeaseSeconds(15), util.Permits(1))
	if f := os.Getenv("BENCH_SEM_PROFILE"); f != "" { // diagnosis: where the clients' CPU goes
		out, err := os.Create(f)
		if err != nil {
			b.t.Fatal(err)
		}
		if err := pprof.StartCPUProfile(out); err != nil {
			b.t.Fatal(err)
		}
		defer func() { pprof.StopCPUProfile(); _ = out.Close() }()
	}
	sem := b.semRun("sem-cycles", clients, warm, dur)
	lk := b.semRun("sem-cycles-lock", clients, warm, dur)
	for _, x := range []struct {
		what  string
		r     semResult
		limit int
	}{{fmt.Sprintf("semaphore of %d permits", permits), sem, permits}, {"one lock", lk, 1}} {
		ok := new(x.r.rate >= 0.8*bound)
		okW := x.r.writes <= 2
		ratio := fmt.Sprintf("%.0f%% of CAS/s / 2", 100*x.r.rate/bound)
		if x.limit > 1 {
			ratio += fmt.Sprintf("; %.2fx the lock", x.r.rate/lk.rate)
		}
		b.rep.add(fmt.Sprintf("grants/s, %s, %d clients", x.what, clients), fmt.Sprintf("%.0f grants/s", x.r.rate),
			ratio, ">= 80% (fsyncing etcd)", ok)
		if x.limit > 1 {
			b.rep.headline(x.what)
		}
		b.rep.add(fmt.Sprintf("API requests per grant, %s, %d clients", x.what, clients),
			fmt.Sprintf("%.2f Lease writes (%.2f of them conflicts), %.2f Lease reads", x.r.writes, x.r.conflicts, x.r.reads),
			"", "<= 2 writes", &okW)
		// Which calls send the writes, and which collide.
		w, g := x.r.clientW, float64(max(x.r.grants, 1))
		f := func(r, q int) string {
			return fmt.Sprintf("%.2f (%.2f 409)", float64(w[r][q][0])/g, float64(w[r][q][1])/g)
		}
		b.rep.add(fmt.Sprintf("client Lease writes per grant, %s: Acquire / Release", x.what),
			fmt.Sprintf("lock Lease %s / %s", f(0, 0), f(1, 0)), fmt.Sprintf("waiter Leases %s / %s", f(0, 1), f(1, 1)), "", nil)
		b.rep.add(fmt.Sprintf("where a cycle's time goes, %s: Acquire / Release calls", x.what),
			fmt.Sprintf("p50 %s / %s", ms(x.r.acquire.p50), ms(x.r.release.p50)),
			fmt.Sprintf("p99 %s / %s", ms(x.r.acquire.p99), ms(x.r.release.p99)), "", nil)
		c := x.r.check
		okC := c.ok(x.limit)
		b.rep.add(fmt.Sprintf("%s: at most %d holders, tokens rise with every grant", x.what, x.limit),
			fmt.Sprintf("most holders at once %d (Lease) / %d (clients); %d of %d grants in write order, %d out of order",
				c.maxLease, c.maxClients, c.ordered, c.ordered+c.unseen, c.outOfOrder),
			fmt.Sprintf("%d unseen by the watch, %d duplicate tokens, %d client-order inversions", c.unseen, c.duplicate, c.clientOrder),
			fmt.Sprintf("<= %d holders, 0 out of order", x.limit), &okC)
	}
}

// semFence: the fenced-write cost on a ConfigMap fenced by a semaphore of 2 permits (both held, one
// by the writer) beside one fenced by a lock, Cached and Strict, with an unfenced ConfigMap as the
// base: the five are written in turn, n times, so that load drift falls on all alike.
func (b *bench) semFence() {
	strict := locksv1alpha1.FenceModeStrict
	b.kit.NewLock(b.ns, "semf-lock", util.LeaseSeconds(15), util.Permits(1))
	b.kit.NewLock(b.ns, "semf-sem", util.LeaseSeconds(15), util.Permits(2))
	b.kit.NewLock(b.ns, "semf-lock-strict", util.LeaseSeconds(15), util.Permits(1), util.FenceMode(strict))
	b.kit.NewLock(b.ns, "semf-sem-strict", util.LeaseSeconds(15), util.Permits(2), util.FenceMode(strict))
	hold := func(name, id string) token.Token {
		g, err := b.kit.Locker(b.ns, name, id).TryAcquire(b.ctx) // a free permit, never a wait
		if err != nil {
			b.t.Fatal(err)
		}
		if _, err := g.KeepAlive(b.ctx, 0); err != nil { // the measurement outlasts a lease duration
			b.t.Fatal(err)
		}
		return g.Token()
	}
	type target struct {
		name, fencedBy string
		tok            token.Token
	}
	targets := make([]target, 1, 5)
	targets[0].name = "semf-plain"
	for _, lk := range []struct {
		name    string
		permits int
	}{{"semf-lock", 1}, {"semf-sem", 2}, {"semf-lock-strict", 1}, {"semf-sem-strict", 2}} {
		targets = append(targets, target{name: lk.name, fencedBy: lk.name, tok: hold(lk.name, "writer")})
		if lk.permits == 2 {
			hold(lk.name, "other") // the second permit is held too
		}
	}
	targets[0].tok = targets[1].tok // the unfenced write sends the same bytes
	cms := make([]*corev1.ConfigMap, len(targets))
	for k, t := range targets {
		cms[k] = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: b.ns, Name: t.name,
			Annotations: map[string]string{locksv1alpha1.TokenAnnotation: t.tok.String()}}}
		if t.fencedBy != "" {
			cms[k].Labels = map[string]string{locksv1alpha1.FencedByLabel: t.fencedBy}
		}
		if err := b.cl.Create(b.ctx, cms[k]); err != nil {
			b.rep.add("fenced ConfigMap create refused", t.name, err.Error(), "", new(false))
			return
		}
	}
	n := envInt("BENCH_FENCE_N", 300)
	d := make([][]time.Duration, len(targets))
	for i := range n {
		for k, t := range targets {
			patch, _ := json.Marshal(map[string]any{"data": map[string]string{"n": strconv.Itoa(i)},
				"metadata": map[string]any{"annotations": map[string]string{locksv1alpha1.TokenAnnotation: t.tok.String()}}})
			t0 := time.Now()
			if err := b.cl.Patch(b.ctx, cms[k], client.RawPatch(types.MergePatchType, patch)); err != nil {
				b.rep.add("fenced ConfigMap update refused", t.name, err.Error(), "", new(false))
				return
			}
			d[k] = append(d[k], time.Since(t0))
		}
	}
	s := make([]stats, len(d))
	for k := range d {
		s[k] = summarize(d[k])
	}
	plain := s[0]
	x := func(v stats) string { return fmt.Sprintf("%.2fx unfenced p50", float64(v.p50)/float64(plain.p50)) }
	val := func(v stats) string { return fmt.Sprintf("p50 %s, p99 %s", ms(v.p50), ms(v.p99)) }
	okSem := float64(s[2].p50) <= 1.3*float64(plain.p50)
	b.rep.add("unfenced ConfigMap update (base of the rows below)", val(plain), "", "", nil)
	b.rep.add("lock-fenced ConfigMap update (Cached)", val(s[1]), x(s[1]), "", nil)
	b.rep.add("semaphore-fenced (2 permits held) ConfigMap update (Cached)", val(s[2]),
		fmt.Sprintf("%s; %.2fx lock-fenced", x(s[2]), float64(s[2].p50)/float64(s[1].p50)), "<= 1.3x unfenced", &okSem)
	b.rep.add("lock-fenced ConfigMap update (Strict)", val(s[3]), x(s[3]), "", nil)
	b.rep.add("semaphore-fenced (2 permits held) ConfigMap update (Strict)", val(s[4]),
		fmt.Sprintf("%s; %.2fx lock-fenced", x(s[4]), float64(s[4].p50)/float64(s[3].p50)), "", nil)
}

// TestSemaphoreChecks: the correctness verdict of the semaphore rows can fail.
func TestSemaphoreChecks(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(0, 0).Add(time.Duration(ms) * time.Millisecond) }
	perm := func(toks ...token.Token) []lease.Permit {
		out := make([]lease.Permit, 0, len(toks))
		for i, tk := range toks {
			out = append(out, lease.Permit{Number: i + 1, Token: tk})
		}
		return out
	}
	good := []semGrant{
		{tok: 10, called: at(0), got: at(1), releasing: at(5)},
		{tok: 11, called: at(0), got: at(2), releasing: at(6)},
		{tok: 13, called: at(2), got: at(7), releasing: at(8)},
	}
	goodV := []leaseVersion{{permits: perm(10)}, {permits: perm(10, 11)}, {permits: perm(11)}, {permits: nil}, {permits: perm(13)}}
	if c := checkGrants(good, goodV); !c.ok(2) {
		t.Fatalf("a correct history judged wrong: %+v", c)
	}
	// Three holders of a semaphore of 2, seen by the Lease and by the clients.
	three := append(slices.Clone(good), semGrant{tok: 12, called: at(0), got: at(3), releasing: at(4)})
	threeV := []leaseVersion{{permits: perm(10)}, {permits: perm(10, 11)}, {permits: perm(10, 11, 12)}, {permits: perm(13)}}
	if c := checkGrants(three, threeV); c.ok(2) || c.maxLease != 3 || c.maxClients != 3 {
		t.Fatalf("three holders of 2 permits not caught: %+v", c)
	}
	// A later grant with a lower token, in the Lease's order and in the clients'.
	low := []semGrant{{tok: 10, called: at(0), got: at(1), releasing: at(2)}, {tok: 9, called: at(3), got: at(4), releasing: at(5)}}
	lowV := []leaseVersion{{permits: perm(10)}, {}, {permits: perm(9)}}
	if c := checkGrants(low, lowV); c.ok(2) || c.outOfOrder != 1 || c.clientOrder != 1 {
		t.Fatalf("a decreasing token not caught: %+v", c)
	}
	// A token granted twice, and a grant the Lease never showed.
	dup := []semGrant{{tok: 10, called: at(0), got: at(1), releasing: at(2)}, {tok: 10, called: at(3), got: at(4), releasing: at(5)},
		{tok: 20, called: at(6), got: at(7), releasing: at(8)}}
	if c := checkGrants(dup, []leaseVersion{{permits: perm(10)}}); c.ok(2) || c.duplicate != 1 || c.unseen != 1 {
		t.Fatalf("a duplicate or unseen grant not caught: %+v", c)
	}
}
