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

package conformance

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
)

// Store holds the Leases of a runner's namespace, written as the manager (a cluster admin): the
// API server (runners (b) and (c)) or one in memory that numbers writes as etcd does (runner (d)).
// Create puts the Lease in that namespace; Create and Update set its resourceVersion to that of
// the write.
type Store interface {
	// Get returns the Lease, or an error that apierrors.IsNotFound recognises.
	Get(name string) (*coordinationv1.Lease, error)
	Create(l *coordinationv1.Lease) error
	Update(l *coordinationv1.Lease) error
}

// InstallTickets makes a case's tickets real ones (the table's only rank them): in the order of
// the tickets the case names, it joins each of the case's waiter Leases (a create, as the manager
// may: its resourceVersion is the ticket) and takes a fresh resourceVersion (a write of a scratch
// Lease) for every other ticket. It returns the case with every ticket mapped to its real one.
func InstallTickets(s Store, lockName string, c Case) (Case, error) {
	ref, err := lockRef(s, lockName)
	if err != nil {
		return c, err
	}
	byTicket := map[uint64]WaiterLease{}
	for _, w := range c.Waiters {
		byTicket[w.Ticket] = w
	}
	mapped := map[uint64]uint64{}
	for _, t := range c.Tickets() {
		var rv string
		if w, ok := byTicket[t]; ok {
			rv, err = joinWaiter(s, ref, w)
		} else {
			rv, err = tick(s, "ticket-clock-"+lockName)
		}
		if err != nil {
			return c, fmt.Errorf("ticket %d: %w", t, err)
		}
		n, err := strconv.ParseUint(rv, 10, 64)
		if err != nil {
			return c, fmt.Errorf("ticket %d: %w", t, err)
		}
		mapped[t] = n
	}
	return c.MapTickets(func(t uint64) uint64 { return mapped[t] }), nil
}

func lockRef(s Store, lockName string) (*metav1.OwnerReference, error) {
	l, err := s.Get(lockName)
	if err != nil {
		return nil, err
	}
	ref := lease.LockOf(l)
	if ref == nil {
		return nil, fmt.Errorf("lock %s has no FencedLock owner", lockName)
	}
	return ref, nil
}

// joinWaiter creates w's waiter Lease and returns its resourceVersion, w's ticket.
func joinWaiter(s Store, ref *metav1.OwnerReference, w WaiterLease) (string, error) {
	l := lease.NewWaiter("", locksv1alpha1.WaiterLeaseName(ref.UID, w.Identity), ref)
	l.Annotations = map[string]string{locksv1alpha1.JoinAnnotation: strconv.Itoa(w.JoinCount())}
	if !w.Left {
		l.Spec.HolderIdentity = new(w.Identity)
	}
	now := metav1.NewMicroTime(time.Now())
	l.Spec.RenewTime = &now
	if err := s.Create(l); err != nil {
		return "", err
	}
	return l.ResourceVersion, nil
}

// tick writes scratch Lease name (a create, then updates) and returns the write's
// resourceVersion.
func tick(s Store, name string) (string, error) {
	clock, err := s.Get(name)
	switch {
	case apierrors.IsNotFound(err):
		clock = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}
		err = s.Create(clock)
	case err == nil:
		clock.Spec.LeaseTransitions = new(ptr.Deref(clock.Spec.LeaseTransitions, 0) + 1)
		err = s.Update(clock)
	}
	if err != nil {
		return "", err
	}
	return clock.ResourceVersion, nil
}

// Waiter returns identity's waiter Lease of the lock, nil if it has none.
func Waiter(s Store, lockName, identity string) (*coordinationv1.Lease, error) {
	ref, err := lockRef(s, lockName)
	if err != nil {
		return nil, err
	}
	l, err := s.Get(locksv1alpha1.WaiterLeaseName(ref.UID, identity))
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return l, err
}

// Install installs a case's state before, as the manager would write it: the queue Lease's queue
// annotation, then the lock Lease's holder and annotations. A holder is installed by a grant, so
// the installed token is the resourceVersion of that write, whatever the table's number. It
// returns the lock Lease as installed.
func Install(s Store, lockName string, c Case) (*coordinationv1.Lease, error) {
	cur, err := s.Get(lockName)
	if err != nil {
		return nil, err
	}
	if err := installQueue(s, cur, c); err != nil {
		return nil, err
	}
	if c.Before.Limit > 0 {
		return installSemaphore(s, c, cur)
	}
	lock := cur.DeepCopy()
	delete(lock.Annotations, locksv1alpha1.PermitsAnnotation)
	for k := range PermitAnnotations(lock) {
		delete(lock.Annotations, k)
	}
	SetProtocolAnnotations(lock, c.Before.Annotations, "")
	if c.Before.Holder != ptr.Deref(cur.Spec.HolderIdentity, "") {
		if c.Before.Holder == "" {
			lock.Spec.HolderIdentity = nil
		} else {
			t := metav1.NewMicroTime(time.Now())
			lock.Spec.HolderIdentity = new(c.Before.Holder)
			lock.Spec.AcquireTime, lock.Spec.RenewTime = &t, &t
			lock.Spec.LeaseTransitions = new(ptr.Deref(cur.Spec.LeaseTransitions, 0) + 1)
			lock.Annotations[locksv1alpha1.TokenAnnotation] = cur.ResourceVersion
		}
	}
	if err := s.Update(lock); err != nil {
		return nil, fmt.Errorf("installing lock Lease %s: %w", lockName, err)
	}
	return lock, nil
}

// installQueue writes the case's queue annotation on the queue Lease of lock.
func installQueue(s Store, lock *coordinationv1.Lease, c Case) error {
	queue, err := s.Get(lease.QueueOf(lock))
	if err != nil {
		return err
	}
	if queue.Annotations == nil {
		queue.Annotations = map[string]string{}
	}
	delete(queue.Annotations, locksv1alpha1.QueueUnreadableAnnotation)
	if c.Queue != nil {
		queue.Annotations[locksv1alpha1.QueueAnnotation] = *c.Queue
	} else {
		delete(queue.Annotations, locksv1alpha1.QueueAnnotation)
	}
	if err := s.Update(queue); err != nil {
		return fmt.Errorf("installing queue Lease %s: %w", queue.Name, err)
	}
	return nil
}

// installSemaphore installs a semaphore's state before, as the manager would write it: the
// semaphore format with no permit held, then one grant per permit in the order of the table's
// tokens, each with the resourceVersion of its write as token (one write grants one permit).
func installSemaphore(s Store, c Case, cur *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	lock := cur.DeepCopy()
	lock.Spec.HolderIdentity = nil
	for k := range PermitAnnotations(lock) {
		delete(lock.Annotations, k)
	}
	SetProtocolAnnotations(lock, c.Before.Annotations, "")
	lock.Annotations[locksv1alpha1.PermitsAnnotation] = strconv.Itoa(c.Before.Limit)
	if err := s.Update(lock); err != nil {
		return nil, fmt.Errorf("installing semaphore Lease %s: %w", lock.Name, err)
	}
	numbers, err := PermitNumbers(c.Before.Permits)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(numbers, func(a, b int) int {
		x, _ := strconv.ParseUint(c.Before.Permits[strconv.Itoa(a)].Token, 10, 64)
		y, _ := strconv.ParseUint(c.Before.Permits[strconv.Itoa(b)].Token, 10, 64)
		return cmp.Compare(x, y)
	})
	for _, n := range numbers {
		p := c.Before.Permits[strconv.Itoa(n)]
		now := time.Now().UTC().Format(metav1.RFC3339Micro)
		lock.Annotations[locksv1alpha1.PermitAnnotation(n)] = fmt.Sprintf("%s %d %s %s %s", lock.ResourceVersion, p.Ticket, now, now, p.Holder)
		lock.Annotations[locksv1alpha1.TokenAnnotation] = lock.ResourceVersion
		lock.Spec.LeaseTransitions = new(ptr.Deref(lock.Spec.LeaseTransitions, 0) + 1)
		if err := s.Update(lock); err != nil {
			return nil, fmt.Errorf("installing permit %d of %s: %w", n, lock.Name, err)
		}
	}
	return lock, nil
}

// PermitAnnotations are l's permit annotations (fencedlock.io/permit-<n>).
func PermitAnnotations(l *coordinationv1.Lease) map[string]string {
	out := map[string]string{}
	for k, v := range l.Annotations {
		if strings.HasPrefix(k, locksv1alpha1.PermitAnnotationPrefix) {
			out[k] = v
		}
	}
	return out
}
