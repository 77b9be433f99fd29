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

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/token"
)

// A lock's waiters queue on a second Lease beside the lock's own (locksv1alpha1.QueueLeaseName),
// so that joining the queue never conflicts with the grant, renewal and release writes of the
// lock's Lease: a contended grant costs two writes, the waiter's join and the holder's release,
// which grants the queue's head in the same write (ReleaseTo). Each waiter holds a ticket;
// tickets grow in join order, and the lock's Lease records the ticket of its last queued grant
// (TicketAnnotation), so the waiters still waiting are those with a higher ticket.

// Ticket is a waiter's place in its lock's queue: tickets grow in the order waiters joined.
type Ticket uint64

// String returns the decimal form.
func (t Ticket) String() string { return strconv.FormatUint(uint64(t), 10) }

// Waiter is one entry of a lock's queue.
type Waiter struct {
	// Ticket is the waiter's place in the queue.
	Ticket Ticket `json:"ticket"`
	// Holder is the identity the waiter will hold the lock under.
	Holder string `json:"holder"`
	// Since is when the waiter joined, on the joiner's clock; informational only.
	Since metav1.Time `json:"since,omitzero"`
	// Beat is moved on by a waiting client to show it is alive: the controller removes a client
	// entry whose beat it has not seen change for two lease durations of the lock. Pods do not beat;
	// the controller keeps their entries while the pod waits.
	Beat int64 `json:"beat,omitempty"`
}

// IsPod reports whether the waiter is a pod the controller queued.
func (w Waiter) IsPod() bool { return strings.HasPrefix(w.Holder, locksv1alpha1.PodHolderPrefix) }

// Queue is a lock's queue, as its queue Lease carries it.
type Queue struct {
	// Next is the ticket the next waiter to join gets.
	Next Ticket `json:"next"`
	// Waiters are in ticket order.
	Waiters []Waiter `json:"waiters,omitempty"`
}

// maxQueueBytes bounds the queue annotation well below the API server's 256 KiB for all of an
// object's annotations.
const maxQueueBytes = 200 << 10

// ErrQueueFull is returned (wrapped) when a waiter cannot join because the queue Lease has no
// room left.
var ErrQueueFull = errors.New("lock queue is full")

// ReadQueue parses the queue a queue Lease carries; a Lease without one has an empty queue.
func ReadQueue(l *coordinationv1.Lease) (Queue, error) {
	var q Queue
	v, ok := l.Annotations[locksv1alpha1.QueueAnnotation]
	if !ok || v == "" {
		return q, nil
	}
	if err := json.Unmarshal([]byte(v), &q); err != nil {
		return Queue{}, fmt.Errorf("queue lease %s/%s: annotation %s: %w",
			l.Namespace, l.Name, locksv1alpha1.QueueAnnotation, err)
	}
	return q, nil
}

// WriteQueue stores q on the queue Lease l.
func WriteQueue(l *coordinationv1.Lease, q Queue) error {
	b, err := json.Marshal(q)
	if err != nil {
		return fmt.Errorf("encoding queue: %w", err)
	}
	if len(b) > maxQueueBytes {
		return fmt.Errorf("%w: %d waiters take %d bytes, at most %d fit on the queue Lease",
			ErrQueueFull, len(q.Waiters), len(b), maxQueueBytes)
	}
	setAnnotation(l, locksv1alpha1.QueueAnnotation, string(b))
	return nil
}

// Trim drops the waiters at or below served, the ticket of the lock's last queued grant: they
// were served or skipped.
func (q *Queue) Trim(served Ticket) {
	q.Waiters = slices.DeleteFunc(q.Waiters, func(w Waiter) bool { return w.Ticket <= served })
}

// Join appends holder to the queue (after trimming what served says is done) and returns its
// ticket.
func (q *Queue) Join(holder string, served Ticket, now time.Time) Ticket {
	q.Trim(served)
	q.Next = max(q.Next, served+1, 1)
	t := q.Next
	q.Next++
	q.Waiters = append(q.Waiters, Waiter{Ticket: t, Holder: holder, Since: metav1.NewTime(now.Truncate(time.Second))})
	return t
}

// Leave removes the waiter with ticket t and reports whether it was there.
func (q *Queue) Leave(t Ticket) bool {
	n := len(q.Waiters)
	q.Waiters = slices.DeleteFunc(q.Waiters, func(w Waiter) bool { return w.Ticket == t })
	return len(q.Waiters) != n
}

// BeatFor moves the beat of the waiter with ticket t on and reports whether it was there.
func (q *Queue) BeatFor(t Ticket) bool {
	for i := range q.Waiters {
		if q.Waiters[i].Ticket == t {
			q.Waiters[i].Beat++
			return true
		}
	}
	return false
}

// Waiting returns the waiters still waiting: those above served, in queue order.
func (q Queue) Waiting(served Ticket) []Waiter {
	i, _ := slices.BinarySearchFunc(q.Waiters, served+1, func(w Waiter, t Ticket) int { return cmpTicket(w.Ticket, t) })
	return q.Waiters[i:]
}

// Head returns the first waiter still waiting, if any.
func (q Queue) Head(served Ticket) (Waiter, bool) {
	if w := q.Waiting(served); len(w) > 0 {
		return w[0], true
	}
	return Waiter{}, false
}

func cmpTicket(a, b Ticket) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// GrantWaiter grants the lock to the queued waiter w: a grant (see Grant) that also records w's
// ticket, which tells w the grant is its own and every waiter at or below it that it was served.
// It ignores a reservation: the caller has decided w is the one to serve.
func GrantWaiter(l *coordinationv1.Lease, w Waiter, now time.Time) (token.Token, error) {
	delete(l.Annotations, locksv1alpha1.ReservedAnnotation)
	tok, err := Grant(l, w.Holder, now)
	if err != nil {
		return 0, err
	}
	SetServed(l, w.Ticket)
	return tok, nil
}

// ReleaseTo ends holder's grant and serves next, the head of the lock's queue, in the same write.
// A client cannot grant a pod (only the manager may), so a pod is served by keeping the free lock
// for it (ReservedAnnotation) until the controller grants it. A nil next just releases. It
// returns the token of the grant to next, zero if it made none.
func ReleaseTo(l *coordinationv1.Lease, holder string, tok token.Token, next *Waiter,
	now time.Time) (token.Token, error) {
	if err := Release(l, holder, tok); err != nil {
		return 0, err
	}
	switch {
	case next == nil:
		return 0, nil
	case next.IsPod():
		setAnnotation(l, locksv1alpha1.ReservedAnnotation, next.Ticket.String())
		return 0, nil
	}
	return GrantWaiter(l, *next, now)
}

// QueueOf returns the name of the queue Lease of the lock whose Lease is l, or "" if l has no
// FencedLock controller reference (a Lease written by an older manager, or not a lock's Lease).
func QueueOf(l *coordinationv1.Lease) string {
	ref := metav1.GetControllerOf(l)
	if ref == nil || ref.Kind != "FencedLock" || ref.UID == "" {
		return ""
	}
	return locksv1alpha1.QueueLeaseName(ref.UID)
}

func parseTicket(l *coordinationv1.Lease, key string) (Ticket, error) {
	v, ok := l.Annotations[key]
	if !ok || v == "" {
		return 0, nil
	}
	t, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("lease %s/%s: annotation %s: %q is not a ticket", l.Namespace, l.Name, key, v)
	}
	return Ticket(t), nil
}

// MarkWaiting sets WaitingAnnotation on the lock's Lease l and reports whether it changed.
func MarkWaiting(l *coordinationv1.Lease) bool {
	if l.Annotations[locksv1alpha1.WaitingAnnotation] == "true" {
		return false
	}
	setAnnotation(l, locksv1alpha1.WaitingAnnotation, "true")
	return true
}

// SetServed records t as the lock's last served ticket on its Lease l.
func SetServed(l *coordinationv1.Lease, t Ticket) {
	setAnnotation(l, locksv1alpha1.TicketAnnotation, t.String())
}
