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
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/leader"
	"github.com/fencedlock/fencedlock/pkg/leader/crleader"
	"github.com/fencedlock/fencedlock/test/util"
)

// leaderSection: fenced leadership's failover, after a resign and after a crash, beside client-go
// leaderelection with controller-runtime's defaults and with its fastest settings, and the cost of
// a fenced controller write.
func (b *bench) leaderSection() {
	probe := b.casProbe()
	resign, cas := b.electorResign(probe)
	ok := float64(resign.p50) <= 2*float64(cas.p50)
	b.rep.add("fenced leadership: Resign called -> the other replica leads", fmt.Sprintf("p50 %s, p99 %s", ms(resign.p50), ms(resign.p99)),
		fmt.Sprintf("%.2fx CAS p50 (in turn with it: %s)", float64(resign.p50)/float64(cas.p50), ms(cas.p50)), "p50 <= 2x CAS", &ok)
	b.rep.headlineFigure("leader resign", fmt.Sprintf("%.2fx CAS p50", float64(resign.p50)/float64(cas.p50)))
	def := b.leaderElection("lr-default", 15*time.Second, 10*time.Second, 2*time.Second, envInt("BENCH_LE_DEFAULT_N", 8))
	fast := b.leaderElection("lr-fast", time.Second, 800*time.Millisecond, 200*time.Millisecond, envInt("BENCH_LE_FAST_N", 30))
	b.rep.add("resign, client-go leaderelection defaults (15s/10s/2s), ReleaseOnCancel", fmt.Sprintf("p50 %s, p99 %s", ms(def.p50), ms(def.p99)),
		fmt.Sprintf("fenced %.0fx faster", float64(def.p50)/float64(resign.p50)), "", nil)
	b.rep.add("resign, client-go leaderelection fastest (1s/800ms/200ms), ReleaseOnCancel", fmt.Sprintf("p50 %s, p99 %s", ms(fast.p50), ms(fast.p99)),
		fmt.Sprintf("fenced %.0fx faster", float64(fast.p50)/float64(resign.p50)), "", nil)

	crash := b.electorCrash()
	okCrash := crash.p99 <= 100*time.Millisecond
	b.rep.add("fenced leadership: leader crashed or paused -> the other leads (lease 1s)", fmt.Sprintf("lease + %s p50, + %s p99", ms(crash.p50), ms(crash.p99)),
		"", "p99 <= lease + 100 ms", &okCrash)
	b.rep.headlineValue("leader crash")
	leCrash := b.leaderElectionCrash("lc-fast", time.Second, 800*time.Millisecond, 200*time.Millisecond, envInt("BENCH_LE_CRASH_N", 10))
	b.rep.add("crash, client-go leaderelection fastest (1s/800ms/200ms): the crash -> the other leads", fmt.Sprintf("lease + %s p50, + %s p99", ms(leCrash.p50), ms(leCrash.p99)),
		"", "", nil)

	fenced, annotated, plain := b.fencedWriteCost()
	okW := float64(fenced.p50) <= 1.1*float64(annotated.p50)
	b.rep.add("a fenced controller write (crleader: the token with the request), ConfigMap patch", fmt.Sprintf("p50 %s, p99 %s", ms(fenced.p50), ms(fenced.p99)),
		fmt.Sprintf("%.2fx the fence's own (the token in the annotation: p50 %s); %.2fx unfenced (p50 %s)",
			float64(fenced.p50)/float64(annotated.p50), ms(annotated.p50), float64(fenced.p50)/float64(plain.p50), ms(plain.p50)),
		"p50 <= 1.1x the fence's own", &okW)
	b.rep.headline("fenced controller write")
}

func (b *bench) elector(lockName, id string, renew time.Duration) *leader.Elector {
	e, err := leader.New(leader.Config{Leases: b.cs.CoordinationV1(), Namespace: b.ns, Name: lockName, Identity: id,
		RenewInterval: renew})
	if err != nil {
		b.t.Fatal(err)
	}
	return e
}

// electorResign times Resign -> the campaigning replica's Campaign returns, with a CAS in turn.
func (b *bench) electorResign(probe func() time.Duration) (stats, stats) {
	b.kit.NewLock(b.ns, "leader-resign", util.LeaseSeconds(15))
	es := [2]*leader.Elector{b.elector("leader-resign", "r0", 0), b.elector("leader-resign", "r1", 0)}
	if _, err := es[0].Campaign(b.ctx); err != nil {
		b.t.Fatal(err)
	}
	n := envInt("BENCH_LEADER_N", 50)
	d, cas := make([]time.Duration, 0, n), make([]time.Duration, 0, n)
	for i := range n {
		cur, next := es[i%2], es[(i+1)%2]
		led := make(chan error, 1)
		go func() { _, err := next.Campaign(b.ctx); led <- err }()
		time.Sleep(20 * time.Millisecond) // next waits on its watch
		cas = append(cas, probe())
		t0 := time.Now()
		if err := cur.Resign(b.ctx); err != nil {
			b.t.Fatal(err)
		}
		if err := <-led; err != nil {
			b.t.Fatal(err)
		}
		d = append(d, time.Since(t0))
	}
	_ = es[n%2].Resign(b.ctx)
	return summarize(d), summarize(cas)
}

// electorCrash: the leader stops renewing right after its grant; the other replica leads once the
// manager revoked it. Measured from the grant, minus the lease duration.
func (b *bench) electorCrash() stats {
	b.kit.NewLock(b.ns, "leader-crash", util.LeaseSeconds(1))
	n := envInt("BENCH_LEADER_CRASH_N", 10)
	over := make([]time.Duration, 0, n)
	for i := range n {
		crasher := b.elector("leader-crash", fmt.Sprintf("crasher-%d", i), time.Hour) // never renews
		if _, err := crasher.Campaign(b.ctx); err != nil {
			b.t.Fatal(err)
		}
		granted := time.Now()
		next := b.elector("leader-crash", fmt.Sprintf("next-%d", i), 0)
		if _, err := next.Campaign(b.ctx); err != nil {
			b.t.Fatal(err)
		}
		over = append(over, time.Since(granted)-time.Second)
		if err := next.Resign(b.ctx); err != nil {
			b.t.Fatal(err)
		}
	}
	return summarize(over)
}

// leaderElectionCrash: client-go's leader stops renewing (its context ends, no release); the other
// candidate leads. Measured from the crash, minus the lease duration: the record's renewTime has
// whole seconds only, and the last renewal came up to one retry period before the crash, so this
// understates client-go's failover by up to that period.
func (b *bench) leaderElectionCrash(name string, leaseDur, renew, retry time.Duration, n int) stats {
	over := make([]time.Duration, 0, n)
	for i := range n {
		started := make(chan string, 2)
		lock := func(id string) *resourcelock.LeaseLock {
			return &resourcelock.LeaseLock{LeaseMeta: metav1.ObjectMeta{Namespace: b.ns, Name: fmt.Sprintf("%s-%d", name, i)},
				Client: b.cs.CoordinationV1(), LockConfig: resourcelock.ResourceLockConfig{Identity: id}}
		}
		run := func(ctx context.Context, id string) {
			le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{Lock: lock(id),
				LeaseDuration: leaseDur, RenewDeadline: renew, RetryPeriod: retry,
				Callbacks: leaderelection.LeaderCallbacks{OnStartedLeading: func(context.Context) { started <- id },
					OnStoppedLeading: func() {}}})
			if err != nil {
				b.t.Error(err)
				return
			}
			le.Run(ctx)
		}
		ctxA, crashA := context.WithCancel(b.ctx)
		ctxB, cancelB := context.WithCancel(b.ctx)
		go run(ctxA, "a")
		<-started
		go run(ctxB, "b")
		time.Sleep(retry + retry/2)
		crashA()
		crashed := time.Now()
		<-started
		over = append(over, time.Since(crashed)-leaseDur)
		cancelB()
	}
	return summarize(over)
}

// fencedWriteCost times a ConfigMap patch by a controller-runtime client of crleader (the token
// with the request) beside the same patch presenting the token in the annotation, and unfenced,
// in turn.
func (b *bench) fencedWriteCost() (fenced, annotated, plain stats) {
	b.kit.NewLock(b.ns, "leader-writes", util.LeaseSeconds(120))
	l, err := crleader.New(b.ctx, b.cfg, crleader.Options{Namespace: b.ns, Name: "leader-writes", Identity: "writer"})
	if err != nil {
		b.t.Fatal(err)
	}
	var o ctrl.Options
	l.Apply(&o)
	lc, err := o.NewClient(l.Config(), client.Options{Scheme: util.Scheme()})
	if err != nil {
		b.t.Fatal(err)
	}
	t, err := l.Elector().Campaign(b.ctx)
	if err != nil {
		b.t.Fatal(err)
	}
	defer func() { _ = l.Elector().Resign(b.ctx) }()
	mk := func(name string, cl client.Client, fencedBy bool) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: b.ns, Name: name, Labels: map[string]string{}}}
		if fencedBy {
			cm.Labels[locksv1alpha1.FencedByLabel] = "leader-writes"
			cm.Annotations = map[string]string{locksv1alpha1.TokenAnnotation: t.Token().String()}
		}
		if err := cl.Create(b.ctx, cm); err != nil {
			b.t.Fatal(err)
		}
		return cm
	}
	targets := []struct {
		cm    *corev1.ConfigMap
		cl    client.Client
		token bool
	}{{mk("by-request", lc, false), lc, false}, {mk("by-annotation", b.cl, true), b.cl, true}, {mk("unfenced", b.cl, false), b.cl, false}}
	n := envInt("BENCH_FENCE_N", 300)
	d := make([][]time.Duration, len(targets))
	for i := range n {
		for k, tg := range targets {
			body := map[string]any{"data": map[string]string{"n": strconv.Itoa(i)}}
			if tg.token {
				body["metadata"] = map[string]any{"annotations": map[string]string{locksv1alpha1.TokenAnnotation: t.Token().String()}}
			}
			patch, _ := json.Marshal(body)
			t0 := time.Now()
			if err := tg.cl.Patch(b.ctx, tg.cm, client.RawPatch(types.MergePatchType, patch)); err != nil {
				b.t.Fatal(err)
			}
			d[k] = append(d[k], time.Since(t0))
		}
	}
	return summarize(d[0]), summarize(d[1]), summarize(d[2])
}
