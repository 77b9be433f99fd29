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
	"time"
)

// Liveness has one judge and one clock: the manager's. It never compares a timestamp written by
// another machine with its own clock; it times how long it has not seen a sign of life:
//   - a holder shows life by changing spec.renewTime (Renew), at least every third of the lease
//     duration, and is revoked when the manager has not seen a change for one lease duration;
//   - a queued client shows life by moving its entry's beat on (Queue.Beat), every quarter to
//     third of the lease duration (BeatInterval), and is dead when the manager has not seen its
//     beat change for one lease duration (Window): the manager then removes its entry, so no
//     reader of the queue sees it any more (Queue.Head);
//   - a client granted from the queue has shown no life as a holder yet: its last sign of life is
//     its last beat, so its grant expires one lease duration after that beat was seen, not after
//     the grant (LastSignOfLife). A handover to a waiter that died just before the release is
//     therefore revoked, and the next waiter served, at most Window after the release;
//   - a queued pod is alive while it exists and waits (the manager reads the pod);
//   - a pod holder shows life by being Ready (the manager reads the pod): it is revoked when the
//     manager has seen it not Ready for one lease duration, but not during its start-up
//     allowance (PodReadyDeadline).

// Window is how long the manager waits without a sign of life before it judges a queued client
// dead: one lease duration, as for a holder.
func Window(leaseDuration time.Duration) time.Duration { return leaseDuration }

// BeatInterval bounds how often a queued client beats: at least every third of the lease
// duration (so a grant it receives by handover is renewed, a third of the lease after the grant,
// well before its last beat is a Window old) and no more often than every quarter.
func BeatInterval(leaseDuration time.Duration) (lo, hi time.Duration) {
	return leaseDuration / 4, leaseDuration / 3
}

// Seen is what the manager saw of a queued client: its holder, its last beat, and when it first
// saw that beat, on its own clock.
type Seen struct {
	Holder string
	Beat   int64
	At     time.Time
}

// Judgment is the manager's liveness judgment of a queue.
type Judgment struct {
	// Queue is the queue without the entries judged dead and without malformed entries.
	Queue Queue
	// Dead are the client entries judged dead; Gone the pod entries whose pod no longer waits.
	Dead, Gone []Waiter
	// Seen is what to remember for the next judgment: every client entry above the last served
	// ticket seen so far, in the queue or gone from it, and the last served one (for
	// LastSignOfLife).
	Seen map[Ticket]Seen
	// Deadline is when the first live client entry is judged dead if it does not beat; zero if
	// none.
	Deadline time.Time
	// Changed says Queue differs from what was read: the manager writes it.
	Changed bool
}

// Judge judges the queue q of a lock whose last queued grant is served, at now: a client entry
// is dead when its beat has not changed for window since seen (the previous judgment) recorded
// it; a pod entry is gone when podWaits says the pod no longer waits for the lock. Malformed
// entries and entries at or below served are dropped too, and an unreadable queue is replaced by
// the entries judged here (none). A new client entry, or a new beat, is seen at now.
func Judge(q Queue, served Ticket, seen map[Ticket]Seen, podWaits func(holder string) bool,
	window time.Duration, now time.Time) Judgment {
	j := Judgment{Seen: map[Ticket]Seen{}}
	for t, s := range seen {
		// Entries gone from the queue are remembered until the lock serves past them: a release
		// that read the queue before the entry was judged dead can still hand it the lock.
		if t >= served {
			j.Seen[t] = s
		}
	}
	j.Changed = len(q.Malformed) > 0 || q.Unreadable != ""
	for _, w := range q.Waiters {
		if w.Ticket <= served {
			continue // served entries go with the next write; not worth one of their own
		}
		if w.IsPod() {
			if !podWaits(w.Holder) {
				j.Gone, j.Changed = append(j.Gone, w), true
				continue
			}
			j.Queue.Waiters = append(j.Queue.Waiters, w)
			continue
		}
		s, ok := seen[w.Ticket]
		if !ok || s.Beat != w.Beat || s.Holder != w.Holder {
			s = Seen{Holder: w.Holder, Beat: w.Beat, At: now}
		}
		j.Seen[w.Ticket] = s
		if dead := s.At.Add(window); !now.Before(dead) {
			j.Dead, j.Changed = append(j.Dead, w), true
			continue
		} else if j.Deadline.IsZero() || dead.Before(j.Deadline) {
			j.Deadline = dead
		}
		j.Queue.Waiters = append(j.Queue.Waiters, w)
	}
	return j
}

// LastSignOfLife is when the manager last saw the holder of s alive, given when it first saw
// this grant (grantSeen) and whether the grant is new since the previous observation, which
// served then (prevServed). A grant made from the queue to a client (a ticket served that was
// not served before) was written by someone else: its holder's last sign of life is its last
// beat, if the manager saw one. Every other grant was written by its holder, at grantSeen.
func LastSignOfLife(s State, prevServed Ticket, seen map[Ticket]Seen, grantSeen time.Time) time.Time {
	if s.Served == 0 || s.Served == prevServed || (Waiter{Holder: s.Holder}).IsPod() {
		return grantSeen
	}
	if b, ok := seen[s.Served]; ok && b.Holder == s.Holder && b.At.Before(grantSeen) {
		return b.At
	}
	return grantSeen
}

// PodReadyDeadline is when a pod holder that the manager first saw not Ready at notReadySince
// loses its grant for not being Ready: one lease duration later, and, while the pod is starting
// (not seen Ready since its grant, so notReadySince is when its start-up was first seen), no
// earlier than its start-up allowance after that. A pod pulling its image is not Ready for
// reasons that say nothing about its node, and a lease long enough to cover the pull would slow
// every revocation. Zero notReadySince (the pod is Ready, or waits for its other locks): no
// deadline.
func PodReadyDeadline(notReadySince time.Time, starting bool, leaseDuration, startup time.Duration) time.Time {
	if notReadySince.IsZero() {
		return time.Time{}
	}
	wait := leaseDuration
	if starting {
		wait = max(wait, startup)
	}
	return notReadySince.Add(wait)
}
