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

package crleader

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/fencedlock/fencedlock/pkg/leader"
)

// ErrNotLeader is matched by every *NotLeaderError.
var ErrNotLeader = errors.New("this replica does not lead")

// Options configure fenced leadership.
type Options struct {
	// Namespace and Name name the FencedLock the replicas elect a leader with. Required.
	Namespace, Name string
	// Identity is this replica's holder identity. Default: "<its username>/<hostname>-<random>",
	// which spec.fence.holderBinding accepts and which is unique per process.
	Identity string
	// RenewInterval is how often a term is renewed; zero: a third of the lock's lease duration.
	RenewInterval time.Duration
}

// Leadership is one replica's fenced leadership of a controller-runtime manager.
type Leadership struct {
	elector *leader.Elector
	base    *rest.Config
	user    authenticationv1.UserInfo
	lock    string
	ns      string
	name    string
	// lockAdapter tells the manager's leader election what the elector decided.
	lockAdapter *resourceLock
}

// New asks the API server who cfg authenticates as (a SelfSubjectReview) and returns the
// replica's leadership of FencedLock o.Namespace/o.Name. cfg must not impersonate: the writes
// impersonate their own user.
func New(ctx context.Context, cfg *rest.Config, o Options) (*Leadership, error) {
	switch {
	case cfg == nil:
		return nil, errors.New("crleader: nil rest.Config")
	case cfg.Impersonate.UserName != "" || len(cfg.Impersonate.Groups) > 0 || cfg.Impersonate.UID != "":
		return nil, fmt.Errorf("crleader: the rest.Config impersonates %q; fenced writes impersonate their own user, "+
			"and impersonation cannot be chained", cfg.Impersonate.UserName)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("crleader: creating client: %w", err)
	}
	ssr, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{},
		metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("crleader: asking the API server who this replica is (create selfsubjectreviews): %w", err)
	}
	user := ssr.Status.UserInfo
	if o.Identity == "" {
		host, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("crleader: no Options.Identity and no hostname: %w", err)
		}
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		o.Identity = user.Username + "/" + host + "-" + hex.EncodeToString(b)
	}
	el, err := leader.New(leader.Config{Leases: cs.CoordinationV1(), Namespace: o.Namespace, Name: o.Name,
		Identity: o.Identity, RenewInterval: o.RenewInterval})
	if err != nil {
		return nil, fmt.Errorf("crleader: %w", err)
	}
	l := &Leadership{elector: el, base: rest.CopyConfig(cfg), user: user, lock: o.Namespace + "/" + o.Name,
		ns: o.Namespace, name: o.Name}
	l.lockAdapter = newResourceLock(el, l.lock)
	return l, nil
}

// Elector returns the replica's elector: its token, the leader, and an observer of changes.
func (l *Leadership) Elector() *leader.Elector { return l.elector }

// Config returns a copy of the rest.Config whose writes present the current term's token; without
// a term they are refused locally (ErrNotLeader).
func (l *Leadership) Config() *rest.Config {
	c := rest.CopyConfig(l.base)
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return &fencingTransport{next: rt, tokens: l.elector, lock: l.lock, user: l.user.Username,
			groups: impersonationGroups(l.user)}
	})
	return c
}

// The durations of controller-runtime's leader election when it follows the elector: its calls
// are answered from memory, so it may poll often, and it starts the controllers within
// retryPeriod of a term's start.
const (
	leaseDuration = 4 * time.Second
	renewDeadline = 2 * time.Second
	retryPeriod   = 100 * time.Millisecond
)

// Apply sets o so that the manager's controllers run only while this replica leads, and that the
// objects its client creates in the lock's namespace carry the lock's fence label.
func (l *Leadership) Apply(o *ctrl.Options) {
	o.LeaderElection = true
	o.LeaderElectionResourceLockInterface = l.lockAdapter
	o.LeaderElectionReleaseOnCancel = true
	o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = new(leaseDuration), new(renewDeadline), new(retryPeriod)
	newClient := o.NewClient
	if newClient == nil {
		newClient = client.New
	}
	o.NewClient = func(cfg *rest.Config, co client.Options) (client.Client, error) {
		c, err := newClient(cfg, co)
		if err != nil {
			return nil, err
		}
		return &labellingClient{Client: c, namespace: l.ns, lock: l.name}, nil
	}
}

// SetupWithManager adds the campaign to mgr: it runs on every replica, leads one term, and
// stops the manager with the reason when the term is lost.
func (l *Leadership) SetupWithManager(mgr ctrl.Manager) error {
	return mgr.Add(campaigner{l})
}

// campaigner runs the campaign on every replica: the manager's election waits for it.
type campaigner struct{ l *Leadership }

func (c campaigner) Start(ctx context.Context) error { return c.l.campaign(ctx) }

// NeedLeaderElection is false: a runnable that does not say so waits for the election it drives.
func (campaigner) NeedLeaderElection() bool { return false }

var _ manager.LeaderElectionRunnable = campaigner{}

func (l *Leadership) campaign(ctx context.Context) error {
	go l.lockAdapter.observe(ctx)
	t, err := l.elector.Campaign(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("crleader: %w", err)
	}
	select {
	case <-t.Done():
		return fmt.Errorf("crleader: fenced leadership of %s lost: %w", l.lock, t.Err())
	case <-ctx.Done():
		rctx, cancel := context.WithTimeout(context.Background(), renewDeadline)
		defer cancel()
		return l.elector.Resign(rctx)
	}
}

// NewManager is ctrl.NewManager with fenced leadership of o.Namespace/o.Name.
func NewManager(ctx context.Context, cfg *rest.Config, opts ctrl.Options, o Options) (ctrl.Manager, error) {
	l, err := New(ctx, cfg, o)
	if err != nil {
		return nil, err
	}
	l.Apply(&opts)
	mgr, err := ctrl.NewManager(l.Config(), opts)
	if err != nil {
		return nil, err
	}
	if err := l.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	return mgr, nil
}
