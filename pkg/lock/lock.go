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

// Package lock is the Go client of fencedlock: acquire a FencedLock, receive its fencing token,
// renew and release it, and learn when the grant is lost.
//
// A FencedLock with spec.permits above 1 is a semaphore: Acquire and TryAcquire then take one of
// its permits (Grant.Permit), each a grant with its own token, and wait in the lock's one queue
// when every permit is held. A holder identity holds at most one permit of a lock.
//
// The token, not this package, is what keeps data safe. A process can be paused (GC, SIGSTOP, a
// descheduled VM) at any instruction, including right after it checked that it still holds the
// lock; renewal loops pause with it. Pass Grant.Token with every write to fenced storage (a fenced
// Kubernetes object, a database row with a fence column) and let the storage refuse stale tokens.
package lock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/token"
)

// ErrNoLease means the lock's Lease does not exist (yet): the FencedLock is missing or the
// fencedlock manager has not created its Lease.
var ErrNoLease = errors.New("lock has no Lease: create the FencedLock and make sure the fencedlock manager is running")

// ErrInvalidIdentity is matched (errors.Is) by the error of a Locker built with a holder identity
// it refuses; see ValidateIdentity.
var ErrInvalidIdentity = errors.New("invalid holder identity")

// maxIdentityLen is the longest identity the FencedLock status shows in full (status.holder). It
// leaves room for holderBinding identities, "<username>/...", whose service-account usernames
// alone can exceed 253 bytes.
const maxIdentityLen = 1024

type identityError struct{ msg string }

func (e *identityError) Error() string        { return e.msg }
func (e *identityError) Is(target error) bool { return target == ErrInvalidIdentity }

// ValidateIdentity returns an error matching ErrInvalidIdentity unless id may be used as a holder
// identity: not empty, at most 1024 bytes, and not starting with "pod/", which is reserved for the
// grants the controller makes to queued pods (it releases such a grant at once when no such pod
// exists, and the API server refuses it from anyone but the manager).
func ValidateIdentity(id string) error {
	switch {
	case id == "":
		return &identityError{"holder identity must not be empty"}
	case strings.HasPrefix(id, locksv1alpha1.PodHolderPrefix):
		return &identityError{fmt.Sprintf(
			"identity %q is reserved for pods queued by the controller; choose another identity", id)}
	case len(id) > maxIdentityLen:
		return &identityError{fmt.Sprintf(
			"identity %.40q... is %d bytes long; at most %d are allowed", id, len(id), maxIdentityLen)}
	}
	return nil
}

// minLeaseDuration is the shortest lease a FencedLock allows (spec.leaseDurationSeconds >= 1). A
// Lease that carries no duration (the controller restores it from the FencedLock) is renewed as
// if it were this short: renewing too often costs writes, renewing too late costs the grant.
const minLeaseDuration = time.Second

// Locker acquires one FencedLock under one holder identity.
type Locker struct {
	leases    coordinationv1client.LeaseInterface
	writer    lease.Writer
	namespace string
	name      string
	identity  string
	clock     clock.WithTicker
	onWait    func(lease.State)
	noQueue   bool
	// err is the configuration error every call fails with, before any API call.
	err error

	// last is the latest Lease this Locker wrote or read. A Locker that just released can grant
	// itself again from it with a single write; a stale copy only costs a conflict.
	mu   sync.Mutex
	last *coordinationv1.Lease
}

func (l *Locker) remember(le *coordinationv1.Lease) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last = le
}

// tryLast tries to grant from the remembered Lease if it shows the lock free (a permit of a
// semaphore free). It returns nil, nil when there is nothing to try or the copy was stale.
func (l *Locker) tryLast(ctx context.Context, a *acquisition) (*Grant, error) {
	l.mu.Lock()
	cur := l.last
	l.mu.Unlock()
	if cur == nil {
		return nil, nil
	}
	if st, err := lease.Read(cur); err != nil || st.Full() || !st.Initialized() {
		return nil, nil
	}
	return l.attempt(ctx, a, cur)
}

// heldLast returns the remembered Lease if it shows the lock held by others (every permit of a
// semaphore, none of them by this identity), nil otherwise.
func (l *Locker) heldLast() *coordinationv1.Lease {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		return nil
	}
	st, err := lease.Read(l.last)
	if _, mine := st.HolderOf(l.identity); err != nil || !st.Full() || mine {
		return nil
	}
	return l.last
}

// Option configures a Locker.
type Option func(*Locker)

// WithIdentity sets the holder identity (default: hostname, pid and a random suffix). Two
// processes must never share one. An identity ValidateIdentity refuses makes every call of the
// Locker fail with that error.
func WithIdentity(id string) Option { return func(l *Locker) { l.identity = id } }

// WithClock sets the clock used for lease timestamps and renewal timing.
func WithClock(c clock.WithTicker) Option { return func(l *Locker) { l.clock = c } }

// WithoutQueue makes Acquire wait without joining the lock's queue, as clients before the queue
// did: it competes with every other unqueued waiter on each release, and queued waiters are
// served first. For comparison and for clients that cannot write the queue Lease.
func WithoutQueue() Option { return func(l *Locker) { l.noQueue = true } }

// WithWaitCallback sets a function Acquire calls whenever it finds the lock held by a new holder
// (a semaphore: its holders or their tokens changed), or not yet initialized, e.g. to show
// progress.
func WithWaitCallback(f func(lease.State)) Option { return func(l *Locker) { l.onWait = f } }

// New returns a Locker for FencedLock namespace/name. If the options are invalid (see
// ValidateIdentity), Err reports why, and every call of the Locker fails with that error without
// calling the API server.
func New(leases coordinationv1client.LeasesGetter, namespace, name string, opts ...Option) *Locker {
	l := configure(namespace, name, opts)
	l.leases, l.writer = leases.Leases(namespace), lease.TypedWriter{Leases: leases}
	return l
}

// configure applies and validates the options.
func configure(namespace, name string, opts []Option) *Locker {
	l := &Locker{namespace: namespace, name: name, identity: defaultIdentity(), clock: clock.RealClock{}}
	for _, o := range opts {
		o(l)
	}
	if err := ValidateIdentity(l.identity); err != nil {
		l.err = fmt.Errorf("lock %s: %w", l.key(), err)
	}
	return l
}

// NewForConfig returns a Locker talking to the API server of cfg, or the error of invalid options.
func NewForConfig(cfg *rest.Config, namespace, name string, opts ...Option) (*Locker, error) {
	if l := configure(namespace, name, opts); l.err != nil {
		return nil, l.err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating client: %w", err)
	}
	return New(cs.CoordinationV1(), namespace, name, opts...), nil
}

// Err returns the configuration error every call of this Locker fails with, or nil.
func (l *Locker) Err() error { return l.err }

// Identity returns the holder identity this Locker acquires under.
func (l *Locker) Identity() string { return l.identity }

func defaultIdentity() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
}

func (l *Locker) key() string { return l.namespace + "/" + l.name }

// TryAcquire acquires the lock if it is free now (a semaphore: one of its free permits). It fails
// with an error satisfying lease.IsHeld if someone holds it (every permit, or this identity holds
// one already), and wraps ErrNoLease if the lock does not exist.
// It makes one attempt: transient API errors are returned, not retried (Acquire retries them).
func (l *Locker) TryAcquire(ctx context.Context) (*Grant, error) {
	if l.err != nil {
		return nil, l.err
	}
	if g, err := l.tryLast(ctx, &acquisition{}); g != nil || err != nil {
		return g, err
	}
	for {
		cur, err := l.getLease(ctx)
		if err != nil {
			return nil, err
		}
		g, err := l.grant(ctx, cur, l.clock.Now())
		if apierrors.IsConflict(err) {
			continue // the Lease changed under us; look again
		}
		return g, err
	}
}

// Acquire blocks until the lock is granted to this Locker or ctx ends. It waits on a watch of the
// lock's Lease, never by polling, and tries to take the lock the moment an event shows it free.
// A missing Lease is waited for as well. On a semaphore it takes a free permit, or queues in the
// lock's one queue until a release hands it the permit that release frees; an identity that holds
// a permit already waits, unqueued, until that one ends.
//
// An API server that is restarting or overloaded does not end the wait: transient errors of its
// reads, watches and writes (connection refused or reset, timeouts, 429, 5xx) are retried with a
// jittered backoff of at most 1.5 s until ctx ends, and the error then says what failed last. A
// grant write whose response was lost is recognized on the next read (the Lease holds this
// identity with the token that write issued) and returned, rather than waited out. Errors that do
// not heal by retrying (Forbidden, Invalid, a malformed Lease) are returned at once.
func (l *Locker) Acquire(ctx context.Context) (*Grant, error) {
	if l.err != nil {
		return nil, l.err
	}
	a := &acquisition{}
	backoff := retryBackoff()
	g, err := l.tryLast(ctx, a)
	if g == nil && err == nil {
		a.from = l.heldLast() // a Locker that just handed the lock on queues without listing
		g, err = l.acquireOnce(ctx, a)
	}
	defer l.leave(ctx, a) // a waiter that gives up leaves the queue; a served one has nothing to do
	for g == nil {
		if ctx.Err() != nil {
			return nil, l.waitError(ctx, a)
		}
		if err != nil && !retryable(err) {
			return nil, err
		}
		if a.progress { // the API server serves again: start over quickly
			backoff, a.lastErr = retryBackoff(), nil
		}
		if err != nil {
			a.lastErr = err
		}
		// A watch that delivered events and then ended is re-listed at once; anything else waits.
		if err != nil || !a.progress {
			select {
			case <-ctx.Done():
				return nil, l.waitError(ctx, a)
			case <-l.clock.After(backoff.Step()):
			}
		}
		g, err = l.acquireOnce(ctx, a)
	}
	return g, nil
}

// waitError is Acquire's error once ctx ended, with the transient error it was retrying, if any.
func (l *Locker) waitError(ctx context.Context, a *acquisition) error {
	if a.lastErr != nil {
		return fmt.Errorf("lock %s: waiting for the lock: %w (retrying after: %v)", l.key(), ctx.Err(), a.lastErr)
	}
	return fmt.Errorf("lock %s: waiting for the lock: %w", l.key(), ctx.Err())
}

// acquisition is what one Acquire call carries across re-lists.
type acquisition struct {
	// unsure holds the tokens of grant writes whose outcome is unknown (the request failed after it
	// may have reached the API server), with the acquireTime each wrote. A Lease held by this
	// identity with one of them and that exact acquireTime (microseconds) is that write's result:
	// only a write conditioned on that resourceVersion can issue that token, and another process
	// sharing the identity (two scripts of one user on one host) writes another acquireTime.
	unsure map[token.Token]time.Time
	// seen is the last state reported to the wait callback.
	seen lease.State
	// progress is true when the last round's watch delivered an event: the API server serves.
	progress bool
	// lastErr is the last transient error retried, for the error returned when ctx ends.
	lastErr error
	// ticket is this call's place in the lock's queue, zero while it is not queued; queue is the
	// queue Lease it joined; beatDue is when its entry is next shown alive (local clock).
	ticket  lease.Ticket
	queue   string
	beatDue time.Time
	// last is the lock's Lease as last seen, to look at again after a beat found the entry gone.
	last *coordinationv1.Lease
	// from, if set, is where the next round starts instead of listing the Lease.
	from *coordinationv1.Lease
}

// retryBackoff paces Acquire's retries: quick at first, since an API server restart usually
// takes well under a second, then one attempt every 1 to 1.5 s.
func retryBackoff() wait.Backoff {
	return wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.5, Steps: 5, Cap: time.Second}
}

// retryable reports whether err is a transient failure of the API server or the network that a
// later attempt may not meet.
func retryable(err error) bool {
	if err == nil || lease.IsHeld(err) || lease.IsLost(err) || errors.Is(err, lease.ErrNotInitialized) {
		return false
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		_, delay := apierrors.SuggestsClientDelay(err)
		return delay || apierrors.IsServiceUnavailable(err) || apierrors.IsTooManyRequests(err) ||
			apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsInternalError(err) ||
			status.Status().Code >= 500
	}
	// Below the API: the transport's errors. TLS and authentication failures are not among them.
	if _, ok := errors.AsType[*net.OpError](err); ok {
		return true // dial and I/O failures: connection refused, reset, no route to host
	}
	if _, ok := errors.AsType[*net.DNSError](err); ok {
		return true
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, context.DeadlineExceeded) ||
		utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		utilnet.IsHTTP2ConnectionLost(err) || utilnet.IsTimeout(err)
}

// acquireOnce lists the Lease and follows its watch until the lock is granted, an error occurs,
// or the watch must be restarted (nil, nil).
func (l *Locker) acquireOnce(ctx context.Context, a *acquisition) (*Grant, error) {
	a.progress = false
	sel := fields.OneTermEqualSelector("metadata.name", l.name).String()
	var cur *coordinationv1.Lease
	var rv string
	if a.from != nil { // watch from a Lease this Locker wrote: events since then follow
		cur, rv, a.from = a.from, a.from.ResourceVersion, nil
	} else {
		list, err := l.leases.List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			return nil, fmt.Errorf("lock %s: listing lease: %w", l.key(), err)
		}
		if len(list.Items) > 0 {
			cur = &list.Items[0]
		}
		rv = list.ResourceVersion
	}
	if cur != nil {
		// A free lock is taken before any watch is opened: one read and one write.
		if g, err := l.attempt(ctx, a, cur); g != nil || err != nil {
			return g, err
		}
	}
	w, err := l.leases.Watch(ctx, metav1.ListOptions{
		FieldSelector: sel, ResourceVersion: rv, AllowWatchBookmarks: true,
	})
	if err != nil {
		return nil, fmt.Errorf("lock %s: watching lease: %w", l.key(), err)
	}
	defer w.Stop()
	var beatTimer clock.Timer
	defer func() {
		if beatTimer != nil {
			beatTimer.Stop()
		}
	}()
	for {
		var beat <-chan time.Time
		if a.ticket != 0 { // a queued waiter shows its entry alive
			d := max(a.beatDue.Sub(l.clock.Now()), 0)
			if beatTimer == nil {
				beatTimer = l.clock.NewTimer(d)
			} else {
				beatTimer.Stop()
				beatTimer.Reset(d)
			}
			beat = beatTimer.C()
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-beat:
			if err := l.beat(ctx, a); err != nil {
				return nil, err
			}
			if a.ticket == 0 && a.last != nil { // the entry was gone: queue again
				if g, err := l.attempt(ctx, a, a.last); g != nil || err != nil {
					return g, err
				}
			}
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil, nil // watch ended (timeout, API server restart): re-list
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				a.progress = true
				if cur, isLease := ev.Object.(*coordinationv1.Lease); isLease {
					if g, err := l.attempt(ctx, a, cur); g != nil || err != nil {
						return g, err
					}
				}
			case watch.Error:
				return nil, nil // e.g. 410 Gone: re-list
			default: // deletions, bookmarks: nothing to take
				a.progress = true
			}
		}
	}
}

// attempt tries to take the lock from cur, the Lease as last seen. It returns nil, nil when the
// lock is not free there (after telling the wait callback) or someone else wrote first: the next
// event says more.
func (l *Locker) attempt(ctx context.Context, a *acquisition, cur *coordinationv1.Lease) (*Grant, error) {
	a.last = cur
	st, rerr := lease.Read(cur)
	// This identity's permit, not the lock's last token: on a semaphore other permits may have
	// been granted since the write whose response was lost.
	mine, holds := st.HolderOf(l.identity)
	holds = holds && rerr == nil
	if sent, ok := a.unsure[mine.Token]; ok && holds && sameMicro(mine.AcquireTime, sent) {
		l.remember(cur)
		return l.newGrant(cur, mine.Token, sent), nil
	}
	if rerr == nil && a.ticket != 0 {
		if g := l.served(a, cur, st); g != nil {
			return g, nil
		}
	}
	if holds && st.Semaphore && a.ticket == 0 {
		// This identity holds a permit already (another grant of this Locker, or another process
		// under the same identity). It holds at most one, so it waits for that one to end instead
		// of queueing: the queue would serve it a second permit, and Served could not tell the two
		// apart.
		l.waiting(a, st)
		return nil, nil
	}
	sent := l.clock.Now()
	g, err := l.take(ctx, a, cur, st, sent)
	if lease.IsHeld(err) {
		if err := l.queue(ctx, a, cur, st); err != nil {
			return nil, err
		}
	}
	switch {
	case err == nil:
		return g, nil
	case apierrors.IsConflict(err):
		return nil, nil // someone else wrote first; its event follows
	case lease.IsHeld(err), errors.Is(err, lease.ErrNotInitialized):
		l.waiting(a, st)
		return nil, nil
	case retryable(err):
		// A 429 was refused before it was applied: its outcome is known.
		if tok, terr := token.FromResourceVersion(cur.ResourceVersion); terr == nil && !apierrors.IsTooManyRequests(err) {
			if a.unsure == nil {
				a.unsure = map[token.Token]time.Time{}
			}
			a.unsure[tok] = sent
		}
	}
	return nil, err
}

// waiting tells the wait callback about st if its holders or token differ from what it was last
// told.
func (l *Locker) waiting(a *acquisition, st lease.State) {
	if l.onWait == nil || (st.Token == a.seen.Token && slices.EqualFunc(st.Permits, a.seen.Permits, samePermit)) {
		return
	}
	a.seen = st
	l.onWait(st)
}

func samePermit(p, q lease.Permit) bool {
	return p.Number == q.Number && p.Holder == q.Holder && p.Token == q.Token
}

// served returns the grant a handover made to this queued waiter, if cur shows one. A ticket the
// lock has served past without serving this waiter means its entry was dropped (judged dead, or
// malformed): it is forgotten, and the waiter queues again.
func (l *Locker) served(a *acquisition, cur *coordinationv1.Lease, st lease.State) *Grant {
	switch {
	case lease.Served(st, l.identity, a.ticket):
		a.ticket = 0
		l.remember(cur)
		mine, _ := st.HolderOf(l.identity) // its permit's token: the lock's may be a later permit's
		return l.newGrant(cur, mine.Token, l.clock.Now())
	case lease.Skipped(st, l.identity, a.ticket):
		a.ticket = 0
	}
	return nil
}

// take tries to grant the lock from cur to a caller that is not queued (lease.Grant: a free lock
// nobody waits for). A queued waiter never takes the lock: it is handed the lock by the release
// before it, or by the manager, so a free lock wakes no herd.
func (l *Locker) take(ctx context.Context, a *acquisition, cur *coordinationv1.Lease, st lease.State,
	now time.Time) (*Grant, error) {
	if a.ticket != 0 {
		return nil, heldError(st)
	}
	return l.grant(ctx, cur, now)
}

// heldError says why a queued waiter does not take the lock st shows, as lease.Grant says it to
// a newcomer: every permit is held, or the room there is goes to the queue.
func heldError(st lease.State) *lease.HeldError {
	e := &lease.HeldError{Token: st.Token, Reserved: st.Reserved, Waiting: !st.Full(), Limit: st.Limit}
	switch {
	case st.Full() && !st.Semaphore:
		e.Holder = st.Holder
	case st.Full():
		e.Holders = st.Holders()
	}
	return e
}

// queue makes sure a waiter on a lock it could not take is queued, and that the lock's holder
// knows someone waits.
func (l *Locker) queue(ctx context.Context, a *acquisition, cur *coordinationv1.Lease, st lease.State) error {
	if a.ticket == 0 {
		if err := l.join(ctx, a, cur, st); err != nil {
			return err
		}
	}
	if a.ticket != 0 && !st.Waiting {
		return l.markWaiting(ctx, cur)
	}
	return nil
}

// Attach returns the grant this Locker's identity holds with tok, e.g. to renew or release from
// another process than the one that acquired. It fails with a LostError if the lock has another
// holder or token.
func (l *Locker) Attach(ctx context.Context, tok token.Token) (*Grant, error) {
	if l.err != nil {
		return nil, l.err
	}
	cur, err := l.getLease(ctx)
	if err != nil {
		return nil, err
	}
	if err := lease.CheckHolder(cur, l.identity, tok); err != nil {
		return nil, err
	}
	return l.newGrant(cur, tok, l.clock.Now()), nil
}

// getLease reads the lock's Lease; a missing one is an error wrapping ErrNoLease.
func (l *Locker) getLease(ctx context.Context) (*coordinationv1.Lease, error) {
	cur, err := l.leases.Get(ctx, l.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("lock %s: %w", l.key(), ErrNoLease)
	}
	if err != nil {
		return nil, fmt.Errorf("lock %s: reading lease: %w", l.key(), err)
	}
	return cur, nil
}

// grant tries one compare-and-swap from cur. Conflicts are returned unwrapped.
func (l *Locker) grant(ctx context.Context, cur *coordinationv1.Lease, now time.Time) (*Grant, error) {
	return l.grantBy(ctx, cur, func(next *coordinationv1.Lease) (token.Token, error) {
		return lease.Grant(next, l.identity, now)
	})
}

// grantBy writes the grant transition makes from cur, in one compare-and-swap, and returns the
// Grant. Conflicts are returned unwrapped.
func (l *Locker) grantBy(ctx context.Context, cur *coordinationv1.Lease,
	transition func(*coordinationv1.Lease) (token.Token, error)) (*Grant, error) {
	var tok token.Token
	out, err := lease.CAS(ctx, l.writer, cur, func(next *coordinationv1.Lease) error {
		var err error
		tok, err = transition(next)
		return err
	})
	if err != nil {
		if apierrors.IsConflict(err) {
			return nil, err
		}
		return nil, fmt.Errorf("lock %s: %w", l.key(), err)
	}
	l.remember(out)
	return l.newGrant(out, tok, l.clock.Now()), nil
}

// newGrant is the one constructor of a Grant: tok held as the Lease le shows, last written or
// confirmed at renewedAt on this process's clock.
func (l *Locker) newGrant(le *coordinationv1.Lease, tok token.Token, renewedAt time.Time) *Grant {
	g := &Grant{locker: l, Token: tok, lease: le, renewedAt: renewedAt, lost: make(chan struct{}), permit: 1}
	g.notePermit(le)
	return g
}

// Grant is one holding of the lock. Its Token is fixed for its whole life.
type Grant struct {
	// Token is the fencing token to present with every write made under this grant.
	Token token.Token

	locker *Locker

	mu        sync.Mutex
	lease     *coordinationv1.Lease // last state this grant wrote or read
	renewedAt time.Time             // local time of the last successful write
	lost      chan struct{}
	lostErr   error
	released  bool
	permit    int // the permit's number as le last showed it
}

// Holder returns the identity the grant is held under.
func (g *Grant) Holder() string { return g.locker.identity }

// Permit returns the number of the permit the grant holds, from 1 to the lock's spec.permits
// (always 1 for a lock), as its Lease last showed it. Only the token identifies a grant: a
// permit's number is reused by later grants, and a semaphore turned back into a lock
// (spec.permits: 1) numbers its one holder 1.
func (g *Grant) Permit() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.permit
}

// notePermit records the grant's permit number from le, if le shows the grant; g.mu is held or
// g is not shared yet.
func (g *Grant) notePermit(le *coordinationv1.Lease) {
	st, err := lease.Read(le)
	if err != nil {
		return
	}
	if p, ok := st.Permit(g.locker.identity, g.Token); ok {
		g.permit = p.Number
	}
}

// Duration returns the lease duration the grant must be renewed within, as its Lease last showed
// it; a Lease without one counts as the shortest a FencedLock allows, 1 s.
func (g *Grant) Duration() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	st, _ := lease.Read(g.lease)
	return max(st.Duration, minLeaseDuration)
}

// Lost is closed when the grant is known to be lost: a renewal found another holder or token, or
// the KeepAlive loop could not renew within the lease duration. Err then says why.
func (g *Grant) Lost() <-chan struct{} { return g.lost }

// Err returns why the grant was lost, or nil.
func (g *Grant) Err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lostErr
}

func (g *Grant) markLost(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.lostErr == nil && !g.released {
		g.lostErr = err
		close(g.lost)
	}
}

// update runs one transition against the Lease with compare-and-swap, re-reading the Lease on
// conflicts (the controller may have written it, e.g. to change the lease duration). A transition
// that needs the lock's queue (lease.ErrQueueNeeded) is run again with the queue, read after the
// Lease it is computed from.
func (g *Grant) update(ctx context.Context, transition func(next *coordinationv1.Lease, q *lease.Queue) error) error {
	l := g.locker
	g.mu.Lock()
	cur := g.lease
	g.mu.Unlock()
	var q *lease.Queue
	for {
		out, err := lease.CAS(ctx, l.writer, cur, func(next *coordinationv1.Lease) error { return transition(next, q) })
		if err == nil {
			g.mu.Lock()
			g.lease, g.renewedAt = out, l.clock.Now()
			g.notePermit(out)
			g.mu.Unlock()
			l.remember(out)
			return nil
		}
		if errors.Is(err, lease.ErrQueueNeeded) && q == nil {
			if q, err = l.readQueue(ctx, cur); err != nil {
				return err
			}
			continue
		}
		if !apierrors.IsConflict(err) {
			return err
		}
		q = nil
		cur, err = l.getLease(ctx)
		if errors.Is(err, ErrNoLease) {
			return &lease.LostError{Holder: l.identity, Token: g.Token}
		}
		if err != nil {
			return err
		}
	}
}

// Renew extends the grant. It fails with an error satisfying lease.IsLost if the lock has another
// holder or token now; the grant is then lost for good.
func (g *Grant) Renew(ctx context.Context) error {
	l := g.locker
	err := g.update(ctx, func(next *coordinationv1.Lease, _ *lease.Queue) error {
		return lease.Renew(next, l.identity, g.Token, l.clock.Now())
	})
	if lease.IsLost(err) {
		g.markLost(err)
	}
	return err
}

// Release frees the lock. If waiters are queued, the same write grants the lock to the live head
// of the queue (or, for a pod, keeps it for the manager to grant): a handover costs one write.
// Releasing a grant that was lost returns the LostError.
func (g *Grant) Release(ctx context.Context) error {
	l := g.locker
	err := g.update(ctx, func(next *coordinationv1.Lease, q *lease.Queue) error {
		_, err := lease.Release(next, l.identity, g.Token, q, l.clock.Now())
		return err
	})
	if lease.IsLost(err) {
		g.markLost(err)
		return err
	}
	if err == nil {
		g.mu.Lock()
		g.released = true
		g.mu.Unlock()
	}
	return err
}

// KeepAlive renews the grant every interval (zero: a third of the lease duration, following
// changes of the duration) until ctx ends, the grant is released, or it is lost. It returns at
// once; watch Lost() for the outcome.
// Transient renewal errors are retried until the lease duration has passed on this process's
// clock since the last successful renewal; then the grant is declared lost, since the controller
// will have revoked it by then.
//
// A watchdog cannot make a paused process safe: it pauses too. The fencing token is what
// protects the data.
func (g *Grant) KeepAlive(ctx context.Context, interval time.Duration) {
	go func() {
		for {
			every := interval
			if every <= 0 {
				every = g.Duration() / 3 // never zero: Duration has a floor
			}
			t := g.locker.clock.NewTimer(every)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-g.lost:
				t.Stop()
				return
			case <-t.C():
			}
			g.mu.Lock()
			released, renewedAt := g.released, g.renewedAt
			g.mu.Unlock()
			if released {
				return
			}
			err := g.Renew(ctx)
			if err == nil || lease.IsLost(err) || ctx.Err() != nil {
				continue
			}
			if g.locker.clock.Since(renewedAt) >= g.Duration() {
				g.markLost(fmt.Errorf("grant with token %s presumed lost: could not renew within the lease duration: %w",
					g.Token, err))
			}
		}
	}()
}

// sameMicro reports whether stored, a MicroTime read back from the API server, is t as written.
func sameMicro(stored *metav1.MicroTime, t time.Time) bool {
	return stored != nil && stored.UTC().Format(metav1.RFC3339Micro) == t.UTC().Format(metav1.RFC3339Micro)
}
