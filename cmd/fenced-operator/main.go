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

// Command fenced-operator is fencedlock's sample operator: run two replicas, one leads. Its one
// reconciler keeps writing what a controller writes, round after round: it updates and patches
// ConfigMap ledger, updates the status of Service frontend, creates a ConfigMap for the round and
// deletes the previous round's. Every write is reported on stdout as a JSON line.
//
// With --election=fenced (the default) it leads with fenced leadership (pkg/leader/crleader) on
// FencedLock --lock: a leader paused past its lease is refused every write once its successor
// leads. With --election=stock it uses controller-runtime's stock leader election on a Lease of
// the same name, whose paused leader's writes land until it notices (up to the renew deadline):
// the failure, for comparison.
//
// With --linger, a replica that led keeps writing rounds that long after its manager stopped,
// its writes no longer bound to the manager's context: the worst case for a deposed leader, whose
// writes must still all be refused.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/fencedlock/fencedlock/pkg/leader/crleader"
)

const (
	ledgerName   = "ledger"
	eventStopped = "stopped"
	keyEvent     = "event"
)

type options struct {
	namespace, lock, election, replica string
	interval                           time.Duration
	// linger keeps writing this long after the manager stopped, with writes no longer bound to
	// its context: a process slow to die, whose work outlives its term.
	linger time.Duration
	// stock election's durations (controller-runtime's defaults)
	leaseDuration, renewDeadline, retryPeriod time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.namespace, "namespace", os.Getenv("POD_NAMESPACE"), "namespace of the lock and of what the operator writes")
	flag.StringVar(&o.lock, "lock", "fenced-operator", "FencedLock (fenced) or Lease (stock) to elect the leader with")
	flag.StringVar(&o.election, "election", "fenced", "fenced, or stock for controller-runtime's leader election")
	flag.StringVar(&o.replica, "replica", os.Getenv("HOSTNAME"), "this replica's name, in its identity and its writes")
	flag.DurationVar(&o.interval, "interval", 10*time.Millisecond, "pause between two rounds of writes")
	flag.DurationVar(&o.linger, "linger", 0, "keep writing this long after the manager stopped, writes detached "+
		"from its context (a process slow to die, whose work outlives its term)")
	flag.DurationVar(&o.leaseDuration, "lease-duration", 15*time.Second, "stock: LeaseDuration")
	flag.DurationVar(&o.renewDeadline, "renew-deadline", 10*time.Second, "stock: RenewDeadline")
	flag.DurationVar(&o.retryPeriod, "retry-period", 2*time.Second, "stock: RetryPeriod")
	flag.Parse()
	if err := run(ctrl.SetupSignalHandler(), o); err != nil {
		report(o.replica, map[string]any{keyEvent: eventStopped, "error": err.Error()})
		os.Exit(1)
	}
	report(o.replica, map[string]any{keyEvent: eventStopped})
}

func run(ctx context.Context, o options) error {
	if o.namespace == "" || o.replica == "" {
		return fmt.Errorf("--namespace and --replica are required")
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	opts := ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Cache: cache.Options{DefaultNamespaces: map[string]cache.Config{o.namespace: {}}}}
	var mgr ctrl.Manager
	var l *crleader.Leadership
	switch o.election {
	case "fenced":
		if l, err = crleader.New(ctx, cfg, crleader.Options{Namespace: o.namespace, Name: o.lock}); err != nil {
			return err
		}
		l.Apply(&opts)
		if mgr, err = ctrl.NewManager(l.Config(), opts); err != nil {
			return err
		}
		err = l.SetupWithManager(mgr)
	case "stock":
		opts.LeaderElection, opts.LeaderElectionID, opts.LeaderElectionNamespace = true, o.lock, o.namespace
		opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = &o.leaseDuration, &o.renewDeadline, &o.retryPeriod
		mgr, err = ctrl.NewManager(cfg, opts)
	default:
		return fmt.Errorf("--election=%q: fenced or stock", o.election)
	}
	if err != nil {
		return err
	}
	w := &writer{Client: mgr.GetClient(), o: o, leadership: l}
	kick := make(chan event.GenericEvent, 1)
	kick <- event.GenericEvent{Object: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: o.namespace, Name: ledgerName}}}
	if err := ctrl.NewControllerManagedBy(mgr).Named("writer").
		WatchesRawSource(source.Channel(kick, &handler.EnqueueRequestForObject{})).Complete(w); err != nil {
		return err
	}
	go func() {
		select {
		case <-mgr.Elected():
			report(o.replica, map[string]any{keyEvent: "elected", "token": w.token(), "at": time.Now().UnixNano()})
		case <-ctx.Done():
		}
	}()
	err = mgr.Start(ctx)
	w.lingerOn()
	return err
}

// lingerOn keeps writing rounds for o.linger once the manager stopped, if this replica led.
func (w *writer) lingerOn() {
	w.mu.Lock()
	led := w.round > 0
	w.mu.Unlock()
	for end := time.Now().Add(w.o.linger); led && time.Now().Before(end); time.Sleep(w.o.interval) {
		_, _ = w.Reconcile(context.Background(), reconcile.Request{})
	}
}

// writer writes one round per reconcile and asks for the next.
type writer struct {
	client.Client
	o          options
	leadership *crleader.Leadership
	// busy serializes rounds: a lingering round may start before the last reconcile returned.
	busy  sync.Mutex
	mu    sync.Mutex
	round int
	// created is the round ConfigMap this replica created last and has not deleted yet.
	created string
}

func (w *writer) token() string {
	if w.leadership == nil {
		return ""
	}
	return w.leadership.Elector().Token().String()
}

func (w *writer) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	w.busy.Lock()
	defer w.busy.Unlock()
	if w.o.linger > 0 {
		ctx = context.WithoutCancel(ctx)
	}
	w.mu.Lock()
	w.round++
	n := w.round
	w.mu.Unlock()
	ns, r := w.o.namespace, w.o.replica
	w.do(n, "update", func() error {
		cm := &corev1.ConfigMap{}
		err := w.Get(ctx, types.NamespacedName{Namespace: ns, Name: ledgerName}, cm)
		if apierrors.IsNotFound(err) {
			return w.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ledgerName},
				Data: map[string]string{"writer": r}})
		}
		if err != nil {
			return err
		}
		cm.Data = map[string]string{"writer": r, "round": fmt.Sprint(n)}
		cm.ResourceVersion = "" // a blind write: only the fence stands in the way
		return w.Update(ctx, cm)
	})
	w.do(n, "patch", func() error {
		return w.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ledgerName}},
			client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"data":{"patched":"%s-%d"}}`, r, n)))
	})
	w.do(n, "status", func() error { return w.status(ctx, n) })
	prev := w.created
	w.do(n, "create", func() error {
		err := w.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: roundName(r, n)}})
		if err == nil {
			w.created = roundName(r, n)
		}
		return err
	})
	if prev != "" { // the last round ConfigMap this replica created, once
		w.do(n, "delete", func() error {
			err := w.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: prev}})
			if (err == nil || apierrors.IsNotFound(err)) && w.created == prev {
				w.created = ""
			}
			return err
		})
	}
	return reconcile.Result{RequeueAfter: w.o.interval}, nil
}

// status writes the status of Service frontend, creating it first if needed.
func (w *writer) status(ctx context.Context, n int) error {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: w.o.namespace, Name: "frontend"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80}}}}
	if err := w.Create(ctx, svc); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	patch := fmt.Appendf(nil, `{"status":{"loadBalancer":{"ingress":[{"hostname":"%s-%d.example"}]}}}`, w.o.replica, n)
	return w.Status().Patch(ctx, svc, client.RawPatch(types.MergePatchType, patch))
}

func roundName(replica string, n int) string { return fmt.Sprintf("round-%s-%d", replica, n) }

// do runs one write and reports it: when it started, and whether the API server admitted it.
func (w *writer) do(n int, op string, write func() error) {
	start, tok := time.Now().UnixNano(), w.token()
	err := write()
	line := map[string]any{"op": op, "round": n, "token": tok, "start": start,
		"end": time.Now().UnixNano(), "ok": err == nil}
	if err != nil {
		line["error"] = err.Error()
	}
	report(w.o.replica, line)
}

var reportMu sync.Mutex

// report writes one JSON line: fields, and the replica that reports them.
func report(replica string, fields map[string]any) {
	fields["replica"] = replica
	b, _ := json.Marshal(fields)
	reportMu.Lock()
	defer reportMu.Unlock()
	_, _ = os.Stdout.Write(append(b, '\n'))
}
