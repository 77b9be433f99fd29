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
	"bytes"
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
)

// A lock's waiters queue on a second Lease beside the lock's own (locksv1alpha1.QueueLeaseName),
// so that joining never conflicts with the grant, renewal and release writes of the lock's Lease.
// Each waiter holds a ticket; tickets grow in join order, and the lock's Lease records the ticket
// of its last queued grant (State.Served), so the waiters still waiting are those above it.
//
// The queue is written by parties that do not trust each other's code, so it is read tolerantly:
// an entry that does not follow the format (docs/protocol.md, "The queue format") is skipped, never
// fatal, and kept as it is by every writer except the manager, which drops it with an Event.

// Ticket is a waiter's place in its lock's queue: tickets grow in the order waiters joined.
type Ticket uint64

// String returns the decimal form.
func (t Ticket) String() string { return strconv.FormatUint(uint64(t), 10) }

// MaxHolderLen is the longest holder identity a queue entry may carry, in bytes.
const MaxHolderLen = 1024

// MaxTicket is the highest ticket a queue entry may carry: the largest integer a JSON number holds
// exactly in every client (JavaScript, jq), and far from the uint64 limit, so that ticket + 1
// never wraps. Joins add 1: no queue reaches it.
const MaxTicket Ticket = 1<<53 - 1

// Waiter is one entry of a lock's queue.
type Waiter struct {
	// Ticket is the waiter's place in the queue, at least 1.
	Ticket Ticket `json:"ticket"`
	// Holder is the identity the waiter will hold the lock under.
	Holder string `json:"holder"`
	// Since is when the waiter joined, on the joiner's clock; informational only.
	Since metav1.Time `json:"since,omitzero"`
	// Beat is moved on by a waiting client to show it is alive (see Judge). Pods do not beat: the
	// manager keeps their entries while the pod exists and waits.
	Beat int64 `json:"beat,omitempty"`
}

// IsPod reports whether the waiter is a pod the manager queued.
func (w Waiter) IsPod() bool { return strings.HasPrefix(w.Holder, locksv1alpha1.PodHolderPrefix) }

// Is reports whether w is the entry of holder with ticket t: tickets alone can repeat after a
// queue was started afresh, identities alone when a holder queues again.
func (w Waiter) Is(t Ticket, holder string) bool { return w.Ticket == t && w.Holder == holder }

// Queue is a lock's queue: the waiters its queue Lease carries (the manager's, its pods) and, once
// merged (Merge), those of its waiter Leases (clients).
type Queue struct {
	// Waiters are the well-formed entries, in ticket order.
	Waiters []Waiter
	// Added are the entries the next write adds (Add): their ticket is that write's
	// resourceVersion, which nobody knows before it is made, so they are stored with ticket 0. A
	// write adds at most one (WriteQueue): two would share a ticket.
	Added []Waiter
	// Malformed are the entries that do not follow the format, as they were stored, each with
	// why. Readers skip them; writers other than the manager keep them.
	Malformed []Malformed
	// Unreadable is the stored annotation when it was not a queue at all (not a JSON object with
	// a waiters array): the queue then starts afresh, and the value is moved aside
	// (QueueUnreadableAnnotation) by the next write.
	Unreadable string
}

// Malformed is a queue entry that does not follow the format.
type Malformed struct {
	Raw json.RawMessage
	Why string
}

// maxQueueBytes bounds the queue annotation well below the API server's 256 KiB for all of an
// object's annotations.
const maxQueueBytes = 200 << 10

// ErrQueueFull is returned (wrapped) when a waiter cannot join because the queue Lease has no
// room left.
var ErrQueueFull = errors.New("lock queue is full")

// ErrOneAddedPerWrite is returned by WriteQueue for a queue that adds more than one entry: the
// entries a write adds take that write's resourceVersion as their ticket, and tickets are unique.
var ErrOneAddedPerWrite = errors.New("a queue Lease write adds at most one entry")

// wireEntry is a queue entry as stored; decoding into it checks every field's JSON type.
type wireEntry struct {
	Ticket *uint64      `json:"ticket"`
	Holder *string      `json:"holder"`
	Since  *metav1.Time `json:"since"`
	Beat   *int64       `json:"beat"`
}

// ReadQueue parses the queue a queue Lease carries. It never fails: a Lease without a queue has
// an empty one, malformed entries are set aside (Queue.Malformed), and a value that is not a
// queue at all gives an empty queue that remembers it (Queue.Unreadable). An entry with ticket 0
// was added by the write that made l's version: its ticket is l's resourceVersion (the writer
// could not know it), and the next write carries it (WriteQueue).
func ReadQueue(l *coordinationv1.Lease) Queue {
	rv, _ := strconv.ParseUint(l.ResourceVersion, 10, 64)
	return ParseQueue(l.Annotations[locksv1alpha1.QueueAnnotation], Ticket(rv))
}

// ParseQueue parses a queue annotation's value, stored at resourceVersion rv; see ReadQueue.
func ParseQueue(v string, rv Ticket) Queue {
	var q Queue
	if v == "" {
		return q
	}
	var doc struct {
		Waiters []json.RawMessage `json:"waiters"`
	}
	if err := json.Unmarshal([]byte(v), &doc); err != nil {
		return Queue{Unreadable: v}
	}
	for _, raw := range doc.Waiters {
		w, why := parseEntry(raw)
		if why == "" && !w.IsPod() {
			why = "a client entry: clients queue on waiter Leases, the queue Lease holds the manager's pods"
		}
		if why == "" && w.Ticket == 0 {
			if w.Ticket = rv; rv == 0 || rv > MaxTicket {
				why = "ticket 0 (added by this version's write) on a version that is not a ticket"
			}
		}
		if why == "" && len(q.Waiters) > 0 && w.Ticket <= q.Waiters[len(q.Waiters)-1].Ticket {
			why = fmt.Sprintf("ticket %d is not above the ticket before it (%d)", w.Ticket, q.Waiters[len(q.Waiters)-1].Ticket)
		}
		if why != "" {
			q.Malformed = append(q.Malformed, Malformed{Raw: raw, Why: why})
			continue
		}
		q.Waiters = append(q.Waiters, w)
	}
	return q
}

// parseEntry decodes one entry and returns why it does not follow the format, "" if it does.
func parseEntry(raw json.RawMessage) (Waiter, string) {
	var e wireEntry
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&e); err != nil {
		return Waiter{}, err.Error()
	}
	switch {
	case e.Ticket == nil:
		return Waiter{}, "ticket missing"
	case Ticket(*e.Ticket) > MaxTicket:
		return Waiter{}, fmt.Sprintf("ticket %d is above %d", *e.Ticket, MaxTicket)
	case e.Holder == nil || *e.Holder == "":
		return Waiter{}, "holder missing or empty"
	case len(*e.Holder) > MaxHolderLen:
		return Waiter{}, fmt.Sprintf("holder is %d bytes long, at most %d are allowed", len(*e.Holder), MaxHolderLen)
	case e.Beat != nil && *e.Beat < 0:
		return Waiter{}, "beat is negative"
	}
	w := Waiter{Ticket: Ticket(*e.Ticket), Holder: *e.Holder}
	if e.Since != nil {
		w.Since = *e.Since
	}
	if e.Beat != nil {
		w.Beat = *e.Beat
	}
	return w, ""
}

// WriteQueue stores q on the queue Lease l: its well-formed entries, the one it adds, then its
// malformed ones as they were. An unreadable value q was read from is moved to QueueUnreadableAnnotation, unless
// one is kept there already.
func WriteQueue(l *coordinationv1.Lease, q Queue) error {
	if len(q.Added) > 1 {
		return fmt.Errorf("%w: %d added", ErrOneAddedPerWrite, len(q.Added))
	}
	entries := make([]json.RawMessage, 0, len(q.Waiters)+len(q.Added)+len(q.Malformed))
	for _, w := range slices.Concat(q.Waiters, q.Added) {
		b, err := json.Marshal(w)
		if err != nil {
			return fmt.Errorf("encoding queue entry: %w", err)
		}
		entries = append(entries, b)
	}
	for _, m := range q.Malformed {
		entries = append(entries, m.Raw)
	}
	// "after" is the version this one is written over: it makes every write a change, so that a
	// write re-adding an entry as it was stored (ticket 0, say the same pod queued again after its
	// grant ended) is not a no-op that keeps the old version, and with it the old ticket.
	after, _ := strconv.ParseUint(l.ResourceVersion, 10, 64)
	b, err := json.Marshal(struct {
		After   uint64            `json:"after,omitempty"`
		Waiters []json.RawMessage `json:"waiters,omitempty"`
	}{after, entries})
	if err != nil {
		return fmt.Errorf("encoding queue: %w", err)
	}
	if len(b) > maxQueueBytes {
		return fmt.Errorf("%w: %d waiters take %d bytes, at most %d fit on the queue Lease",
			ErrQueueFull, len(q.Waiters), len(b), maxQueueBytes)
	}
	if q.Unreadable != "" {
		if _, kept := l.Annotations[locksv1alpha1.QueueUnreadableAnnotation]; !kept {
			setAnnotation(l, locksv1alpha1.QueueUnreadableAnnotation, q.Unreadable)
		}
	}
	setAnnotation(l, locksv1alpha1.QueueAnnotation, string(b))
	return nil
}

// Trim drops the waiters at or below served, the ticket of the lock's last queued grant: they
// were served or skipped.
func (q *Queue) Trim(served Ticket) {
	q.Waiters = slices.DeleteFunc(q.Waiters, func(w Waiter) bool { return w.Ticket <= served })
}

// Add appends holder to the queue, at the ticket of the write that stores it (Queue.Added).
func (q *Queue) Add(holder string, now time.Time) {
	q.Added = append(q.Added, Waiter{Holder: holder, Since: metav1.NewTime(now.Truncate(time.Second))})
}

// Merge returns q with waiters (a lock's waiter Leases that wait, Waiters) among its own, in
// ticket order: the lock's whole queue.
func (q Queue) Merge(waiters []Waiter) Queue {
	q.Waiters = slices.SortedFunc(slices.Values(slices.Concat(q.Waiters, waiters)),
		func(a, b Waiter) int { return cmpTicket(a.Ticket, b.Ticket) })
	return q
}

// Waiting returns the waiters still waiting: those above served, in queue order.
func (q Queue) Waiting(served Ticket) []Waiter {
	i, _ := slices.BinarySearchFunc(q.Waiters, served+1, func(w Waiter, t Ticket) int { return cmpTicket(w.Ticket, t) })
	return q.Waiters[i:]
}

// Position returns where holder waits in the queue of a lock whose last queued grant is served:
// its place among the waiters above served, from 1 (0 when it does not wait), and how many they
// are.
func (q Queue) Position(served Ticket, holder string) (pos, of int) {
	w := q.Waiting(served)
	return slices.IndexFunc(w, func(x Waiter) bool { return x.Holder == holder }) + 1, len(w)
}

// Head returns the live head of the queue: its first well-formed entry above served. Every
// party uses this one definition. Liveness is the manager's to judge (Judge): it removes the
// entries of waiters it judged dead, so the stored queue holds only waiters not (yet) judged dead.
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

// QueueOf returns the name of the queue Lease of the lock whose Lease is l, or "" if l has no
// FencedLock controller reference (a Lease written by an older manager, or not a lock's Lease).
func QueueOf(l *coordinationv1.Lease) string {
	ref := metav1.GetControllerOf(l)
	if ref == nil || ref.Kind != locksv1alpha1.Kind || ref.UID == "" {
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
