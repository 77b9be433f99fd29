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

// Command ledger-worker is fencedlock's example workload, used by `make demo` and the end-to-end
// tests: it acquires a FencedLock (or takes the token a pod was granted), works for a while, then
// writes a fenced ConfigMap with its fencing token and reports what the API server said.
//
// It writes with a server-side apply, forced and without a resourceVersion: a blind write that
// Kubernetes' own resourceVersion checks do not guard, so the fence is the only thing standing
// between a stale holder and newer data. One request creates the ConfigMap or updates it, so the
// holders of a semaphore's permits, writing at once, never race to create it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lock"
	"github.com/fencedlock/fencedlock/pkg/token"
)

// fieldManager owns the fields the worker applies.
const fieldManager = "ledger-worker"

// Exit codes.
const (
	exitOK     = 0
	exitError  = 1
	exitFenced = 3 // the write was refused because the token was stale
)

type config struct {
	kubeconfig, namespace, lockName, configMap, identity, entry string
	work                                                        time.Duration
	tokenFromEnv, tokenFile                                     string
	release                                                     bool
	readyFile                                                   string
	unreadyAfter                                                time.Duration
}

func main() {
	var c config
	flag.StringVar(&c.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "Kubeconfig (empty: in-cluster)")
	flag.StringVar(&c.namespace, "namespace", "default", "Namespace of the lock and the ConfigMap")
	flag.StringVar(&c.lockName, "lock", "ledger", "FencedLock to hold")
	flag.StringVar(&c.configMap, "configmap", "ledger", "Fenced ConfigMap to write")
	flag.StringVar(&c.identity, "identity", "", "Holder identity (default: hostname, pid and a random suffix)")
	flag.StringVar(&c.entry, "entry", "", "Text to write (default: \"written by <identity>\")")
	flag.DurationVar(&c.work, "work", 0, "How long to work between acquiring and writing")
	flag.StringVar(&c.tokenFromEnv, "token-from-env", "", "Do not acquire: use the token in this environment variable (a pod's downward API)")
	flag.StringVar(&c.tokenFile, "token-file", "", "Do not acquire: use the token in this file (a downwardAPI volume)")
	flag.BoolVar(&c.release, "release", true, "Release the lock after writing")
	flag.StringVar(&c.readyFile, "ready-file", "", "Create this file at start (for an exec readiness probe, see --probe)")
	flag.DurationVar(&c.unreadyAfter, "unready-after", 0, "Remove --ready-file after this long: the pod turns not Ready, "+
		"as a pod on a partitioned node would")
	probe := flag.String("probe", "", "Exit 0 if this file exists, 1 otherwise (an exec readiness probe), and do nothing else")
	flag.Parse()
	if *probe != "" {
		if _, err := os.Stat(*probe); err != nil {
			os.Exit(exitError)
		}
		os.Exit(exitOK)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, c))
}

func say(who, format string, args ...any) {
	fmt.Printf("[%s] %-8s %s\n", time.Now().Format("15:04:05.000"), who, fmt.Sprintf(format, args...))
}

func run(ctx context.Context, c config) int {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "loading kubeconfig:", err)
		return exitError
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return exitError
	}
	who := c.identity
	if c.readyFile != "" {
		if err := os.WriteFile(c.readyFile, nil, 0o600); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return exitError
		}
		if c.unreadyAfter > 0 {
			time.AfterFunc(c.unreadyAfter, func() {
				say(who, "turning not Ready (removing %s)", c.readyFile)
				_ = os.Remove(c.readyFile)
			})
		}
	}
	var tok token.Token
	var grant *lock.Grant
	switch {
	case c.tokenFromEnv != "" || c.tokenFile != "":
		if tok, err = tokenGiven(c); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return exitError
		}
		say(who, "was granted lock %s/%s: FENCING_TOKEN=%s (from %s)", c.namespace, c.lockName, tok, tokenSources(c))
	default:
		var keepAlive *lock.KeepAlive
		if grant, keepAlive, err = acquire(ctx, cs, c, &who); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return exitError
		}
		defer keepAlive.Stop()
		tok = grant.Token()
	}
	if c.work > 0 {
		say(who, "working for %s...", c.work)
		select {
		case <-time.After(c.work):
		case <-ctx.Done():
			return exitError
		}
	}
	if grant != nil {
		select {
		case <-grant.Lost():
			// Knowing is not protecting: the write below is what the fence judges.
			say(who, "note: my lease renewals say the lock was lost (%v); writing anyway to show the fence", grant.Err())
		default:
		}
	}
	entry := c.entry
	if entry == "" {
		entry = "written by " + who
	}
	say(who, "writing ConfigMap %s with token %s: %q", c.configMap, tok, entry)
	if err := write(ctx, cs, c, tok, who, entry); err != nil {
		if apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || strings.Contains(err.Error(), "denied the request") {
			say(who, "write REFUSED by the API server:\n    %v", err)
			if grant != nil {
				if rerr := grant.Renew(ctx); errors.Is(rerr, lock.ErrLost) {
					say(who, "I lost the lock: %v", rerr)
				}
			}
			return exitFenced
		}
		say(who, "write failed: %v", err)
		return exitError
	}
	say(who, "write accepted")
	if grant != nil && c.release {
		if err := grant.Release(ctx); err != nil {
			say(who, "release: %v", err)
			return exitError
		}
		say(who, "released lock %s", c.lockName)
	}
	return exitOK
}

// acquire waits for c's lock under c's identity (*who is set to the identity used), and keeps
// the grant alive until the returned KeepAlive is stopped.
func acquire(ctx context.Context, cs kubernetes.Interface, c config, who *string) (*lock.Grant, *lock.KeepAlive, error) {
	opts := []lock.Option{lock.WithWaitCallback(func(st lock.Status) {
		switch {
		case st.Permits > 1 && st.Full():
			holders := make([]string, len(st.Holders))
			for i, h := range st.Holders {
				holders[i] = h.Identity
			}
			say(*who, "waiting: all %d permits of %s are held (by %s)", st.Permits, c.lockName, strings.Join(holders, ", "))
		case st.Full():
			say(*who, "waiting: lock %s is held by %s (token %s)", c.lockName, st.Holders[0].Identity, st.Holders[0].Token)
		}
	})}
	if c.identity != "" {
		opts = append(opts, lock.WithIdentity(c.identity))
	}
	l, err := lock.New(cs.CoordinationV1(), c.namespace, c.lockName, opts...)
	if err != nil {
		return nil, nil, err
	}
	*who = l.Identity()
	grant, err := l.Acquire(ctx)
	if err != nil {
		return nil, nil, err
	}
	say(*who, "acquired lock %s/%s with token %s (lease %s, permit %d)", c.namespace, c.lockName, grant.Token(),
		grant.Duration(), grant.Permit())
	keepAlive, err := grant.KeepAlive(ctx, 0)
	if err != nil {
		return nil, nil, err
	}
	return grant, keepAlive, nil
}

// tokenSources describes where the token came from; with both an environment variable and a
// file it also checks they agree.
func tokenSources(c config) string {
	var src []string
	if c.tokenFromEnv != "" {
		src = append(src, fmt.Sprintf("$%s=%s", c.tokenFromEnv, os.Getenv(c.tokenFromEnv)))
	}
	if c.tokenFile != "" {
		b, _ := os.ReadFile(c.tokenFile)
		src = append(src, fmt.Sprintf("%s=%s", c.tokenFile, b))
	}
	return strings.Join(src, ", ")
}

func tokenGiven(c config) (token.Token, error) {
	raw := os.Getenv(c.tokenFromEnv)
	src := "$" + c.tokenFromEnv
	if c.tokenFromEnv == "" {
		b, err := os.ReadFile(c.tokenFile)
		if err != nil {
			return 0, fmt.Errorf("reading token: %w", err)
		}
		raw, src = string(b), c.tokenFile
	}
	t, err := token.Parse(raw)
	if err != nil {
		return 0, fmt.Errorf("token from %s: %w", src, err)
	}
	return t, nil
}

// write sets the ledger's content and token with one forced server-side apply, which creates the
// ConfigMap if it does not exist yet. (A patch followed by a create, when the patch found nothing,
// could lose that create to another permit's holder writing at the same moment: AlreadyExists.)
func write(ctx context.Context, cs kubernetes.Interface, c config, tok token.Token, who, entry string) error {
	cm := corev1ac.ConfigMap(c.configMap, c.namespace).
		WithLabels(map[string]string{locksv1alpha1.FencedByLabel: c.lockName}).
		WithAnnotations(map[string]string{locksv1alpha1.TokenAnnotation: tok.String()}).
		WithData(map[string]string{"entry": entry, "writer": who, "token": tok.String()})
	_, err := cs.CoreV1().ConfigMaps(c.namespace).Apply(ctx, cm, metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
	return err
}
