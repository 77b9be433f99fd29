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
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/fencedlock/fencedlock/pkg/lease"
)

// Queue joins: what a join costs when many waiters join at once, in the queue format before
// waiter Leases and in the formats that could have replaced it (docs/design.md, Cost: "Joins conflict with joins"). Waiters
// join over and over for a fixed time, each replacing its previous entry, so the queue stays as
// long as the number of waiters:
//
//   - one document: the queue before waiter Leases, a JSON document in one annotation of the
//     queue Lease, joined as pkg/lock joined it (read, add the entry, compare-and-swap, a jittered
//     doubling pause after a conflict);
//   - one object, a patch: an annotation per entry, added by a merge patch without a
//     resourceVersion, which the API server retries itself when another write lands first
//     (no tickets: what a write that the client never sees conflict costs);
//   - one object, tickets from a policy: the same, with a MutatingAdmissionPolicy giving each new
//     entry the ticket fencedlock.io/next names and advancing it, inside the API server's retry;
//   - a Lease per waiter: each waiter joins by updating its own Lease, which no one else writes;
//     its ticket is that write's resourceVersion (etcd's revision, as etcd's concurrency.Mutex
//     orders waiters by create revision), which a MutatingAdmissionPolicy stamps into annotation
//     fencedlock.io/ticket at the waiter's next write.
//
// Then what each format costs a release, which must read the queue: one Lease read, or the list
// of a lock's waiter Leases by label, from the API server's watch cache, in the benchmark's
// namespace and in one holding a few thousand other Leases.

const (
	joinsLabel    = "bench.fencedlock.io/joins" // "ticket" or "waiter": which of the policies below
	joinsNext     = "fencedlock.io/next"
	joinsTicket   = "fencedlock.io/ticket"
	joinsJoin     = "fencedlock.io/join"
	joinsEntryKey = "fencedlock.io/w-"
)

// joinsTicketPolicy gives every entry a write adds the ticket joinsNext names (an entry's value is
// "<ticket> <rest>"; the joiner writes ticket 0) and advances joinsNext past them.
const joinsTicketPolicy = `
variables.fresh.map(k, JSONPatch{op: "add", path: "/metadata/annotations/" + jsonpatch.escapeKey(k),
  value: string(variables.next + variables.fresh.indexOf(k)) + " " +
    (variables.new[k].indexOf(" ") >= 0 ? variables.new[k].substring(variables.new[k].indexOf(" ") + 1) : variables.new[k])}) +
[JSONPatch{op: "add", path: "/metadata/annotations/" + jsonpatch.escapeKey("` + joinsNext + `"),
  value: string(variables.next + size(variables.fresh))}]`

// joinsStampPolicy keeps a waiter Lease's ticket: a write that changes joinsJoin (a join) clears
// it, so the ticket is that write's resourceVersion, which the next write stamps; every other
// write keeps the stamped one.
const joinsStampPolicy = `
variables.joined ?
  ("` + joinsTicket + `" in variables.new ? [JSONPatch{op: "remove", path: "/metadata/annotations/" + jsonpatch.escapeKey("` + joinsTicket + `")}] : []) :
  [JSONPatch{op: "add", path: "/metadata/annotations/" + jsonpatch.escapeKey("` + joinsTicket + `"),
    value: "` + joinsTicket + `" in variables.old ? variables.old["` + joinsTicket + `"] : oldObject.metadata.resourceVersion}]`

func (b *bench) joins() {
	leaseUpdates := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{"coordination.k8s.io"}, APIVersions: []string{"v1"}, Resources: []string{"leases"}},
	}}
	annotations := func(o string) admissionregistrationv1.Variable {
		return admissionregistrationv1.Variable{Name: map[string]string{"object": "new", "oldObject": "old"}[o],
			Expression: fmt.Sprintf("has(%[1]s.metadata.annotations) ? %[1]s.metadata.annotations : {}", o)}
	}
	b.mutatingPolicy("bench-joins-ticket", joinsLabel, "ticket", leaseUpdates, []admissionregistrationv1.Variable{
		annotations("object"), annotations("oldObject"),
		{Name: "next", Expression: fmt.Sprintf(`%[1]q in variables.old && variables.old[%[1]q].matches("^[0-9]{1,15}$") ? int(variables.old[%[1]q]) : 1`, joinsNext)},
		{Name: "fresh", Expression: fmt.Sprintf(`variables.new.filter(k, k.startsWith(%q) && !(k in variables.old))`, joinsEntryKey)},
	}, joinsTicketPolicy)
	b.mutatingPolicy("bench-joins-stamp", joinsLabel, "waiter", leaseUpdates, []admissionregistrationv1.Variable{
		annotations("object"), annotations("oldObject"),
		{Name: "joined", Expression: fmt.Sprintf(`(%[1]q in variables.new ? variables.new[%[1]q] : "") != (%[1]q in variables.old ? variables.old[%[1]q] : "")`, joinsJoin)},
	}, joinsStampPolicy)
	leases := b.cs.CoordinationV1().Leases(b.ns)
	b.awaitLeasePolicy("joins-probe-ticket", "ticket", func(l *coordinationv1.Lease) bool { return l.Annotations[joinsNext] != "" })
	b.awaitLeasePolicy("joins-probe-stamp", "waiter", func(l *coordinationv1.Lease) bool { return l.Annotations[joinsTicket] != "" })

	dur := time.Duration(envInt("BENCH_JOIN_SECONDS", 3)) * time.Second
	for _, n := range []int{4, 16, 64} {
		doc := b.joinBurst(n, dur, b.documentJoin(leases, n))
		b.rep.add(fmt.Sprintf("joins/s, %d waiters at once: one document, compare-and-swap (before waiter Leases)", n),
			doc.String(), "", "", nil)
		vsDoc := func(r joinResult) string { return fmt.Sprintf("%.2fx the document's joins/s", r.rate/doc.rate) }
		r := b.joinBurst(n, dur, b.objectJoin(leases, n, ""))
		b.rep.add(fmt.Sprintf("joins/s, %d waiters at once: one object, a patch the API server retries", n),
			r.String(), vsDoc(r), "", nil)
		r = b.joinBurst(n, dur, b.objectJoin(leases, n, "ticket"))
		ok := r.wrong == 0
		b.rep.add(fmt.Sprintf("joins/s, %d waiters at once: one object, tickets from a policy", n),
			fmt.Sprintf("%s; %d tickets given twice", r, r.wrong),
			vsDoc(r), "no ticket twice", &ok)
		r = b.joinBurst(n, dur, b.waiterLeaseJoin(leases, n))
		ok = r.wrong == 0
		b.rep.add(fmt.Sprintf("joins/s, %d waiters at once: a Lease per waiter, ticket its resourceVersion", n),
			fmt.Sprintf("%s; %d stamps wrong", r, r.wrong),
			vsDoc(r), "every stamp its join's", &ok)
	}
	b.queueReads()
}

// joinResult is what a burst of joins measured: joins per second; per join, the conflicts the
// waiters were sent and the Lease updates the API server sent etcd (a patch it retried itself
// counts each attempt); and how many tickets were wrong (given twice, or stamped other than the
// join's resourceVersion).
type joinResult struct {
	rate, conflicts, etcd float64
	wrong                 int
}

// String is the result as the rows give it.
func (r joinResult) String() string {
	return fmt.Sprintf("%.0f joins/s; per join %.2f conflicts sent, %.2f etcd writes", r.rate, r.conflicts, r.etcd)
}

// joiner makes waiter g's next join and returns the conflicts it met; done checks the tickets
// once every waiter stopped and returns how many are wrong.
type joiner struct {
	join func(ctx context.Context, g int) (conflicts int, err error)
	done func() int
}

// joinBurst runs n waiters joining over and over for dur.
func (b *bench) joinBurst(n int, dur time.Duration, j joiner) joinResult {
	ctx, cancel := context.WithTimeout(b.ctx, dur)
	defer cancel()
	var joins, conflicts atomic.Int64
	var wg sync.WaitGroup
	before, start := b.apiMetrics(), time.Now()
	for g := range n {
		wg.Go(func() {
			for ctx.Err() == nil {
				c, err := j.join(context.WithoutCancel(ctx), g) // a join under way completes
				if err != nil {
					b.t.Error(err)
					return
				}
				joins.Add(1)
				conflicts.Add(int64(c))
			}
		})
	}
	wg.Wait()
	el, after := time.Since(start), b.apiMetrics()
	etcd := func(text string) float64 {
		_, c := histogramSums(text, "etcd_request_duration_seconds", `operation="update"`, `resource="leases"`)
		return c
	}
	n64 := float64(max(joins.Load(), 1))
	return joinResult{rate: float64(joins.Load()) / el.Seconds(), conflicts: float64(conflicts.Load()) / n64,
		etcd: (etcd(after) - etcd(before)) / n64, wrong: j.done()}
}

// documentJoin joins a queue kept as one JSON document, as pkg/lock did before waiter Leases (a
// ticket one above the last, a compare-and-swap, a jittered doubling pause after a conflict),
// each waiter leaving its previous entry in the same write (as the lock serving it would have).
func (b *bench) documentJoin(leases coordinationv1client.LeaseInterface, n int) joiner {
	name := fmt.Sprintf("joins-doc-%d", n)
	b.createLease(name, nil)
	type entry struct {
		Ticket uint64 `json:"ticket"`
		Holder string `json:"holder"`
	}
	w := lease.TypedWriter{Leases: b.cs.CoordinationV1()}
	return joiner{join: func(ctx context.Context, g int) (int, error) {
		id := fmt.Sprintf("w%d", g)
		for attempt := 0; ; attempt++ {
			if attempt > 0 {
				time.Sleep(wait.Jitter(time.Millisecond<<min(attempt-1, 8), 1))
			}
			cur, err := leases.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return attempt, err
			}
			_, err = lease.CAS(ctx, w, cur, func(next *coordinationv1.Lease) error {
				var q []entry
				_ = json.Unmarshal([]byte(next.Annotations[joinsEntryKey+"doc"]), &q)
				q = slices.DeleteFunc(q, func(e entry) bool { return e.Holder == id })
				t := uint64(1)
				if len(q) > 0 {
					t = q[len(q)-1].Ticket + 1
				}
				b, err := json.Marshal(append(q, entry{Ticket: t, Holder: id}))
				metav1.SetMetaDataAnnotation(&next.ObjectMeta, joinsEntryKey+"doc", string(b))
				return err
			})
			if !apierrors.IsConflict(err) {
				return attempt, err
			}
		}
	}, done: func() int { return 0 }}
}

// objectJoin adds an entry per join to one object with a merge patch and no resourceVersion,
// removing the waiter's previous entry in the same patch; policy "ticket" numbers the entries.
func (b *bench) objectJoin(leases coordinationv1client.LeaseInterface, n int, policy string) joiner {
	name := fmt.Sprintf("joins-object-%s-%d", cmp.Or(policy, "plain"), n)
	var labels map[string]string
	if policy != "" {
		labels = map[string]string{joinsLabel: policy}
	}
	b.createLease(name, labels)
	prev := make([]string, n)
	var mu sync.Mutex
	seen := map[string]bool{}
	wrong := 0
	return joiner{join: func(ctx context.Context, g int) (int, error) {
		key := fmt.Sprintf("%s%d-%d", joinsEntryKey, g, time.Now().UnixNano())
		set := map[string]any{key: fmt.Sprintf("0 w%d", g)}
		if prev[g] != "" {
			set[prev[g]] = nil
		}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": set}})
		out, err := leases.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		if err != nil {
			return 0, err
		}
		prev[g] = key
		if policy != "" {
			t, _, _ := strings.Cut(out.Annotations[key], " ")
			mu.Lock()
			if seen[t] || t == "0" {
				wrong++
			}
			seen[t] = true
			mu.Unlock()
		}
		return 0, nil
	}, done: func() int { return wrong }}
}

// waiterLeaseJoin gives each waiter a Lease of its own; a join changes its joinsJoin, and the
// ticket is the write's resourceVersion. done makes one more write per waiter (a beat, as a
// waiter shows it is alive) and counts the stamps that are not the last join's resourceVersion.
func (b *bench) waiterLeaseJoin(leases coordinationv1client.LeaseInterface, n int) joiner {
	mine := make([]*coordinationv1.Lease, n)
	for g := range mine {
		mine[g] = b.createLease(fmt.Sprintf("joins-waiter-%d-%d", n, g), map[string]string{joinsLabel: "waiter"})
	}
	joined := make([]int, n)
	return joiner{join: func(ctx context.Context, g int) (int, error) {
		joined[g]++
		next := mine[g].DeepCopy()
		metav1.SetMetaDataAnnotation(&next.ObjectMeta, joinsJoin, strconv.Itoa(joined[g]))
		out, err := leases.Update(ctx, next, metav1.UpdateOptions{})
		if err != nil {
			return 0, err
		}
		mine[g] = out
		return 0, nil
	}, done: func() int {
		wrong := 0
		for _, l := range mine {
			now := metav1.NowMicro()
			beat := l.DeepCopy()
			beat.Spec.RenewTime = &now
			out, err := leases.Update(b.ctx, beat, metav1.UpdateOptions{})
			if err != nil {
				b.t.Fatal(err)
			}
			if out.Annotations[joinsTicket] != l.ResourceVersion {
				wrong++
			}
		}
		return wrong
	}}
}

// queueReads times what a release reads to know the queue, from the API server's watch cache:
// the queue Lease (one read by name), or a lock's 16 waiter Leases (a list by label), in the
// benchmark's namespace and in a namespace holding 5000 other Leases as well.
func (b *bench) queueReads() {
	const reps = 300
	crowded := b.ns + "-crowded"
	if err := b.cl.Create(b.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: crowded}}); err != nil {
		b.t.Fatal(err)
	}
	const others = 5000
	b.parallel(others, 8, func(i int) {
		if _, err := b.cs.CoordinationV1().Leases(crowded).Create(b.ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("other-%d", i)}}, metav1.CreateOptions{}); err != nil {
			b.t.Fatal(err)
		}
	})
	for _, ns := range []string{b.ns, crowded} {
		leases := b.cs.CoordinationV1().Leases(ns)
		if ns == crowded {
			for g := range 16 {
				if _, err := leases.Create(b.ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("joins-waiter-16-%d", g),
					Labels: map[string]string{joinsLabel: "waiter-16"}}}, metav1.CreateOptions{}); err != nil {
					b.t.Fatal(err)
				}
			}
		} else {
			b.relabel(leases, "joins-waiter-16-", 16)
		}
		all, err := leases.List(b.ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			b.t.Fatal(err)
		}
		get, list := make([]time.Duration, reps), make([]time.Duration, reps)
		for i := range reps {
			t0 := time.Now()
			if _, err := leases.Get(b.ctx, "joins-waiter-16-0", metav1.GetOptions{ResourceVersion: "0"}); err != nil {
				b.t.Fatal(err)
			}
			get[i] = time.Since(t0)
			t0 = time.Now()
			l, err := leases.List(b.ctx, metav1.ListOptions{LabelSelector: joinsLabel + "=waiter-16", ResourceVersion: "0"})
			if err != nil || len(l.Items) != 16 {
				b.t.Fatalf("listing the 16 waiter Leases: %d found, %v", len(l.Items), err)
			}
			list[i] = time.Since(t0)
		}
		g, l := summarize(get), summarize(list)
		b.rep.add(fmt.Sprintf("a release's queue read, namespace of %d Leases: one Lease / 16 waiters' Leases by label", len(all.Items)),
			fmt.Sprintf("p50 %s / %s", ms(g.p50), ms(l.p50)), fmt.Sprintf("%.2fx the one Lease", float64(l.p50)/float64(g.p50)), "", nil)
	}
}

// relabel gives the n Leases prefix0..prefix(n-1) label joinsLabel=waiter-<n> (out of the
// stamping policy's way: they only stand for a lock's waiters to list).
func (b *bench) relabel(leases coordinationv1client.LeaseInterface, prefix string, n int) {
	for g := range n {
		patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:"waiter-%d"}}}`, joinsLabel, n)
		if _, err := leases.Patch(b.ctx, fmt.Sprintf("%s%d", prefix, g), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			b.t.Fatal(err)
		}
	}
}

// createLease creates a bare Lease in the benchmark's namespace.
func (b *bench) createLease(name string, labels map[string]string) *coordinationv1.Lease {
	l, err := b.cs.CoordinationV1().Leases(b.ns).Create(b.ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	if err != nil {
		b.t.Fatal(err)
	}
	return l
}

// awaitLeasePolicy writes a Lease labelled joinsLabel=value until took says its policy is in
// effect (the API server loads policies asynchronously).
func (b *bench) awaitLeasePolicy(name, value string, took func(*coordinationv1.Lease) bool) {
	l := b.createLease(name, map[string]string{joinsLabel: value})
	b.rewriteUntil(fmt.Sprintf("policy for %s=%s", joinsLabel, value), func() bool { return took(l) }, func(i int) error {
		metav1.SetMetaDataAnnotation(&l.ObjectMeta, "bench.fencedlock.io/probe", strconv.Itoa(i))
		var err error
		l, err = b.cs.CoordinationV1().Leases(b.ns).Update(b.ctx, l, metav1.UpdateOptions{})
		return err
	})
}

// mutatingPolicy creates a MutatingAdmissionPolicy and its binding: objects labelled
// label=value that rules match get the JSON patch expr computes (with vars).
func (b *bench) mutatingPolicy(name, label, value string, rules []admissionregistrationv1.RuleWithOperations,
	vars []admissionregistrationv1.Variable, expr string) {
	fail, never := admissionregistrationv1.Fail, admissionregistrationv1.NeverReinvocationPolicy
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{label: value}}
	if value == "" {
		sel = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: label, Operator: metav1.LabelSelectorOpExists}}}
	}
	named := make([]admissionregistrationv1.NamedRuleWithOperations, len(rules))
	for i, r := range rules {
		named[i].RuleWithOperations = r
	}
	p := &admissionregistrationv1.MutatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			FailurePolicy:      &fail,
			ReinvocationPolicy: never,
			MatchConstraints:   &admissionregistrationv1.MatchResources{ObjectSelector: sel, ResourceRules: named},
			Variables:          vars,
			Mutations: []admissionregistrationv1.Mutation{{PatchType: admissionregistrationv1.PatchTypeJSONPatch,
				JSONPatch: &admissionregistrationv1.JSONPatch{Expression: expr}}},
		},
	}
	if err := b.cl.Create(b.ctx, p); err != nil {
		b.t.Fatal(err)
	}
	pb := &admissionregistrationv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: name}}
	if err := b.cl.Create(b.ctx, pb); err != nil {
		b.t.Fatal(err)
	}
}
