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

// Command worker is the fault-injection campaign's holder process (test/e2e/chaos_test.go). It
// acquires a lock (or, in a pod, takes the tokens it was granted, one per lock it asked for),
// makes fenced writes to each lock's ConfigMap and custom resource, reads them back, releases,
// and records every operation with its invocation and response times as lincheck.Op JSON lines,
// for the linearizability checker.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lock"
	"github.com/fencedlock/fencedlock/pkg/token"
	"github.com/fencedlock/fencedlock/test/lincheck"
)

var batches = schema.GroupVersionResource{Group: "example.fencedlock.io", Version: "v1", Resource: "settlementbatches"}

type worker struct {
	id         int
	ns, lk     string
	cm, sb     string
	cs         kubernetes.Interface
	dyn        dynamic.Interface
	mu         sync.Mutex
	out        *os.File
	seq        int
	opTimeout  time.Duration
	writeDelay time.Duration
	// permits is the lock's spec.permits when it is a semaphore (above 1): every op of its
	// history says so, and the checker holds it to the semaphore's rule.
	permits int
}

func main() {
	var (
		w          worker
		kubeconfig = flag.String("kubeconfig", "", "Kubeconfig (empty: in-cluster)")
		history    = flag.String("history", "", "File to append operations to (JSON lines)")
		iterations = flag.Int("iterations", 1000000, "Acquire-write-release rounds (client mode)")
		duration   = flag.Duration("duration", time.Minute, "Stop starting rounds after this long (client mode)")
		podMode    = flag.Bool("pod", false, "Pod mode: one round with the tokens the pod was granted, "+
			"$TOKEN_<lock> for each lock of --locks ($FENCING_TOKEN if unset)")
		podLocks = flag.String("locks", "", "Pod mode: the locks the pod holds, comma-separated (default --lock)")
	)
	flag.IntVar(&w.id, "id", 1, "Client id in the history")
	flag.StringVar(&w.ns, "namespace", "default", "Namespace")
	flag.StringVar(&w.lk, "lock", "chaos", "FencedLock")
	flag.StringVar(&w.cm, "configmap", "", "Fenced ConfigMap (default <lock>-cm)")
	flag.StringVar(&w.sb, "batch", "", "Fenced SettlementBatch (default <lock>-sb)")
	flag.DurationVar(&w.opTimeout, "op-timeout", 5*time.Second, "Timeout of one API call")
	flag.DurationVar(&w.writeDelay, "write-delay", 300*time.Millisecond, "Pause between acquiring and writing (room for faults)")
	flag.IntVar(&w.permits, "permits", 1, "The lock's spec.permits: above 1, a semaphore (client mode)")
	flag.Parse()

	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = *kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		fail(err)
	}
	cfg.QPS, cfg.Burst = -1, 0
	cfg.Timeout = w.opTimeout
	w.cs = kubernetes.NewForConfigOrDie(cfg)
	w.dyn = dynamic.NewForConfigOrDie(cfg)
	if w.out, err = os.OpenFile(*history, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err != nil {
		fail(err)
	}
	defer func() { _ = w.out.Close() }()

	if *podMode {
		locks := []string{w.lk}
		if *podLocks != "" {
			locks = strings.Split(*podLocks, ",")
		}
		w.podRound(locks)
		return
	}
	w.use(w.lk, w.cm, w.sb)
	deadline := time.Now().Add(*duration)
	l, err := lock.New(w.cs.CoordinationV1(), w.ns, w.lk, lock.WithIdentity(fmt.Sprintf("worker-%d-%d", w.id, os.Getpid())))
	if err != nil {
		fail(err)
	}
	for i := 0; i < *iterations && time.Now().Before(deadline); i++ {
		w.clientRound(l, deadline)
	}
}

// use points the worker at lock lk and the objects it fences (<lk>-cm and <lk>-sb by default).
func (w *worker) use(lk, cm, sb string) {
	w.lk, w.cm, w.sb = lk, cmp.Or(cm, lk+"-cm"), cmp.Or(sb, lk+"-sb")
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

func now() int64 { return time.Now().UnixNano() }

func (w *worker) record(op lincheck.Op) {
	op.Client, op.Lock = w.id, w.ns+"/"+w.lk
	if w.permits > 1 {
		op.Permits = w.permits
	}
	b, _ := json.Marshal(op)
	w.mu.Lock()
	defer w.mu.Unlock()
	_, _ = w.out.Write(append(b, '\n'))
}

// outcome classifies a write's error: definite refusal by the fence, definite failure before
// anything was stored, or unknown.
func outcome(err error) lincheck.Outcome {
	switch {
	case err == nil:
		return lincheck.OK
	case strings.Contains(err.Error(), `denied the request`):
		return lincheck.Denied
	case strings.Contains(err.Error(), `failed calling webhook`), apierrors.IsNotFound(err):
		// Admission runs before anything is stored: the write did not happen.
		return lincheck.Failed
	}
	return lincheck.Unknown
}

func (w *worker) clientRound(l *lock.Locker, deadline time.Time) {
	ctx, cancel := context.WithDeadline(context.Background(), deadline.Add(10*time.Second))
	defer cancel()
	call := now()
	g, err := l.Acquire(ctx)
	if err != nil {
		w.record(lincheck.Op{Kind: lincheck.Acquire, Outcome: lincheck.Unknown, Call: call, Return: now(), Note: err.Error()})
		time.Sleep(100 * time.Millisecond)
		return
	}
	w.record(lincheck.Op{Kind: lincheck.Acquire, Token: uint64(g.Token()), Outcome: lincheck.OK, Call: call, Return: now()})
	keepAlive, err := g.KeepAlive(ctx, 0)
	if err != nil {
		fail(err)
	}
	time.Sleep(w.writeDelay)
	w.writeAndRead(g.Token())
	keepAlive.Stop()
	call = now()
	rctx, rcancel := context.WithTimeout(context.Background(), w.opTimeout)
	err = g.Release(rctx)
	rcancel()
	out := lincheck.OK
	if err != nil {
		out = lincheck.Unknown
	}
	w.record(lincheck.Op{Kind: lincheck.Release, Token: uint64(g.Token()), Outcome: out, Call: call, Return: now()})
}

// exitMissingToken is a pod's exit status when it was ungated without a token for every lock it
// asked for: the campaign fails on it (all or nothing).
const exitMissingToken = 3

// podRound: the pod was granted each of its locks by the controller between its creation
// (stamped by the campaign in $CREATED_AT) and its start, and ungated only once it held all.
func (w *worker) podRound(locks []string) {
	toks := make([]token.Token, len(locks))
	for i, l := range locks {
		v, ok := os.LookupEnv("TOKEN_" + l)
		if !ok {
			v = os.Getenv("FENCING_TOKEN")
		}
		tok, err := token.Parse(v)
		if err != nil {
			fmt.Fprintf(os.Stderr, "pod %s started without a token for lock %s: %v\n", os.Getenv("POD_NAME"), l, err)
			os.Exit(exitMissingToken)
		}
		toks[i] = tok
	}
	created, _ := strconv.ParseInt(os.Getenv("CREATED_AT"), 10, 64)
	started := now()
	for i, l := range locks {
		w.use(l, "", "")
		w.record(lincheck.Op{Kind: lincheck.Acquire, Token: uint64(toks[i]), Outcome: lincheck.OK, Call: created, Return: started,
			Note: fmt.Sprintf("granted to pod %s (locks %s)", os.Getenv("POD_NAME"), strings.Join(locks, ","))})
	}
	time.Sleep(w.writeDelay)
	for i, l := range locks {
		w.use(l, "", "")
		w.writeAndRead(toks[i])
	}
}

// writeAndRead makes one fenced write to each object (blind merge patches: only the fence
// stands between a stale token and the data) and reads the ConfigMap back.
func (w *worker) writeAndRead(tok token.Token) {
	for _, obj := range []string{"configmaps/" + w.ns + "/" + w.cm, "settlementbatches/" + w.ns + "/" + w.sb} {
		w.seq++
		value := fmt.Sprintf("c%d-p%d-%d", w.id, os.Getpid(), w.seq)
		meta := map[string]any{"annotations": map[string]string{locksv1alpha1.TokenAnnotation: tok.String()}}
		ctx, cancel := context.WithTimeout(context.Background(), w.opTimeout)
		call := now()
		var err error
		if strings.HasPrefix(obj, "configmaps/") {
			p, _ := json.Marshal(map[string]any{"metadata": meta, "data": map[string]string{"v": value}})
			_, err = w.cs.CoreV1().ConfigMaps(w.ns).Patch(ctx, w.cm, types.MergePatchType, p, metav1.PatchOptions{})
		} else {
			p, _ := json.Marshal(map[string]any{"metadata": meta, "spec": map[string]string{"v": value}})
			_, err = w.dyn.Resource(batches).Namespace(w.ns).Patch(ctx, w.sb, types.MergePatchType, p, metav1.PatchOptions{})
		}
		ret := now()
		cancel()
		note := ""
		if err != nil {
			note = err.Error()
		}
		w.record(lincheck.Op{Kind: lincheck.Write, Object: obj, Token: uint64(tok), Value: value,
			Outcome: outcome(err), Call: call, Return: ret, Note: note})
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.opTimeout)
	defer cancel()
	call := now()
	cm, err := w.cs.CoreV1().ConfigMaps(w.ns).Get(ctx, w.cm, metav1.GetOptions{})
	ret := now()
	if err != nil {
		if !errors.Is(err, context.DeadlineExceeded) {
			w.record(lincheck.Op{Kind: lincheck.Read, Object: "configmaps/" + w.ns + "/" + w.cm, Outcome: lincheck.Failed,
				Call: call, Return: ret, Note: err.Error()})
		}
		return
	}
	rt, _ := token.Parse(cm.Annotations[locksv1alpha1.RecordedTokenAnnotation])
	w.record(lincheck.Op{Kind: lincheck.Read, Object: "configmaps/" + w.ns + "/" + w.cm, Value: cm.Data["v"],
		ReadToken: uint64(rt), Outcome: lincheck.OK, Call: call, Return: ret})
}
