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

package v1alpha1

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// Well-known labels and annotations. They are the product's contract with workloads, so they
// never change within an API version.
const (
	// TokenAnnotation carries a fencing token as a decimal string: on a Lease, the lock's current
	// token; on a pod, the token it was granted; on a write to a fenced object, the token the
	// writer presents (the API server moves it to RecordedTokenAnnotation before storing).
	TokenAnnotation = "fencedlock.io/token"

	// RecordedTokenAnnotation on a fenced object is the token its last admitted write presented.
	// Admission policy config/policy/token_record.yaml sets it from TokenAnnotation and clears it
	// on a write that presents none, so a stored object never carries a token a later write could
	// inherit; the fence judges writes by it and deletes by the stored object's value.
	RecordedTokenAnnotation = "fencedlock.io/recorded-token"

	// TokenExtra is the userInfo.extra key of a token presented with the request rather than in
	// the object: a client impersonates itself and adds the header
	// Impersonate-Extra-fencedlock.io%2ftoken. It fences writes that carry no usable annotation:
	// /status and other subresources, and DELETE.
	TokenExtra = "fencedlock.io/token"

	// RevokedTokenAnnotation on a Lease records the token of the last grant the controller revoked
	// because it expired, so observers can tell a revocation from a release.
	RevokedTokenAnnotation = "fencedlock.io/revoked-token"

	// TicketAnnotation on a Lease is the queue ticket of the grant made last from the lock's
	// queue: waiters with this ticket or a lower one have been served (or skipped), and a waiter
	// recognises its grant by holder identity and ticket together.
	TicketAnnotation = "fencedlock.io/ticket"
	// JoinAnnotation on a waiter Lease changes with every join: the write that changes it (or
	// creates the Lease) is the join, and its resourceVersion the waiter's ticket, which every
	// later write carries in TicketAnnotation.
	JoinAnnotation = "fencedlock.io/join"
	// ReservedAnnotation on a free Lease is the ticket of the queued pod the lock is kept for: a
	// client's release cannot grant a pod (only the manager grants pods), so nobody takes the
	// free lock before the manager grants that pod.
	ReservedAnnotation = "fencedlock.io/reserved"
	// WaitingAnnotation ("true") on a Lease says waiters may be queued: a release then reads the
	// queue and serves its live head in the same write, and nobody takes the free lock except by
	// serving the queue. The first waiter of a queue sets it; the write that finds the queue
	// empty clears it, so an uncontended lock never pays for reading its queue.
	WaitingAnnotation = "fencedlock.io/waiting"
	// LeftAnnotation on a Lease is the ticket of the last waiter that left the queue. Leaving
	// writes it after removing the entry, so a handover computed from a queue read before the
	// entry went fails its compare-and-swap instead of granting a waiter that left.
	LeftAnnotation = "fencedlock.io/left"
	// QueueAnnotation on a lock's queue Lease (QueueLeaseName) is its FIFO queue of waiters, as
	// JSON: {"after": <the resourceVersion written over>, "waiters": [{"ticket", "holder", "since",
	// "beat"}, ...]}; the manager creates it as {}
	// (docs/protocol.md, "The queue format").
	QueueAnnotation = "fencedlock.io/queue"
	// QueueUnreadableAnnotation on a queue Lease keeps a QueueAnnotation value that was not a
	// queue at all, moved aside by the write that started the queue afresh, until the manager
	// reports it in an Event and removes it.
	QueueUnreadableAnnotation = "fencedlock.io/queue-unreadable"
	// ProtocolAnnotation on a lock's Lease is the version of the protocol (docs/protocol.md) its
	// last transition was written by, as a decimal ("2"; absent: version 1, which predates it). A
	// party that meets a version above its own stops instead of misreading the Lease.
	ProtocolAnnotation = "fencedlock.io/protocol"
	// PermitsAnnotation on a Lease is how many holders its lock admits at once (a semaphore's
	// spec.permits), written by the manager when spec.permits is above 1. Its presence says the
	// Lease carries its holders as permits (PermitAnnotation), not in spec.holderIdentity.
	PermitsAnnotation = "fencedlock.io/permits"
	// PermitAnnotationPrefix starts the annotation of one held permit of a semaphore's Lease,
	// "fencedlock.io/permit-<n>" (see PermitAnnotation); its value is
	// "<token> <ticket> <acquireTime> <renewTime> <holder>" (docs/protocol.md, "Semaphores").
	PermitAnnotationPrefix = "fencedlock.io/permit-"
	// PodPermitAnnotation on a granted pod is the number of the permit it holds, for the
	// downward API ($FENCING_PERMIT); it is set beside TokenAnnotation.
	PodPermitAnnotation = "fencedlock.io/permit"
	// FencedByLabel marks a fenced object; its value is the name of the FencedLock (same
	// namespace) whose tokens guard writes to it.
	FencedByLabel = "fencedlock.io/fenced-by"

	// LockLabel on a pod asks for the named FencedLock (same namespace) before the pod may run.
	LockLabel = "fencedlock.io/lock"
	// LocksAnnotation on a pod asks for several FencedLocks (same namespace), comma-separated
	// ("a,b"), beside or instead of LockLabel: the pod runs only once it holds all of them (the
	// union with the label's lock). The pod gate sets LockLabel to the pod's first lock when the pod
	// has no label, so the manager's label-selected cache and policies see the pod.
	LocksAnnotation = "fencedlock.io/locks"

	// AllowDeleteAnnotation, "true" on a FencedLock, lets it be deleted while held: the
	// ValidatingAdmissionPolicy lock-deletion (config/policy/lock_deletion.yaml) refuses to delete
	// a held lock without it, so that ending its grants is deliberate (kubectl fencedlock delete
	// --force sets it).
	AllowDeleteAnnotation = "fencedlock.io/allow-delete"

	// LeaderElectionID names the Lease the manager's replicas elect their leader with, in the
	// manager's namespace.
	LeaderElectionID = "fencedlock-manager.fencedlock.io"
	// LockTokenAnnotationPrefix starts the annotation that carries a granted pod's token for one of
	// its locks: "token.fencedlock.io/<lock name>" (see LockTokenAnnotation).
	LockTokenAnnotationPrefix = "token.fencedlock.io/"
)

// PermitAnnotation is the annotation of a semaphore's Lease that carries permit n (from 1).
func PermitAnnotation(n int) string { return PermitAnnotationPrefix + strconv.Itoa(n) }

// LockTokenAnnotation is the annotation of a granted pod that carries its token for lock.
func LockTokenAnnotation(lock string) string { return LockTokenAnnotationPrefix + lock }

// Condition types of a FencedLock.
const (
	// ConditionReady is True when the backing Lease exists, is owned by the lock and carries a token.
	ConditionReady = "Ready"
	// ConditionHeld is True while a holder has the lock.
	ConditionHeld = "Held"
)

// Reasons of the FencedLock conditions and of the controller's events. One happening has one name
// wherever it shows: a grant is Granted in the Held condition, in the lock's event and in the
// granted pod's event.
const (
	// Reasons of the Ready condition.
	ReasonLeaseReady    = "LeaseReady"
	ReasonLeaseConflict = "LeaseConflict"

	// ReasonGranted: the lock was granted (Held True; an event on the lock and on a granted pod).
	ReasonGranted = "Granted"
	// ReasonReleased: the holder released the lock, or the controller released it for a finished
	// or deleted pod (Held False; an event on the lock and on the pod).
	ReasonReleased = "Released"
	// ReasonExpired: the controller revoked an expired grant (Held False; a Warning event on the
	// lock).
	ReasonExpired = "Expired"
	// ReasonLeaseDeleted: the Lease was deleted, and recreated, while the lock was held: the grant
	// ended with it (a Warning event on the lock).
	ReasonLeaseDeleted = "LeaseDeleted"
	// ReasonAvailable: the lock was never granted (Held False).
	ReasonAvailable = "Available"

	// ReasonPermitsLowered: spec.permits was lowered below the number of permits held; nobody is
	// revoked, new grants wait (an event on the lock).
	ReasonPermitsLowered = "PermitsLowered"

	// ReasonWaiting: a pod joined the lock's queue (an event on the pod).
	ReasonWaiting = "Waiting"
	// ReasonLockNotFound: a pod asks for a FencedLock that does not exist (a Warning event on the
	// pod). The fence reports a fenced object of a missing lock by the same name
	// (webhook.ReasonLockNotFound is this one).
	ReasonLockNotFound = "LockNotFound"
	// ReasonWaiterDead: the manager dropped a queued client whose beat it had not seen change for
	// one lease duration (an event on the lock).
	ReasonWaiterDead = "WaiterDead"
	// ReasonQueueRepaired: the manager dropped queue entries that do not follow the queue format,
	// started afresh a queue annotation that was not a queue at all, or replaced a forged
	// fencedlock.io/ticket on the lock Lease (a Warning event on the lock, naming what it dropped).
	ReasonQueueRepaired = "QueueRepaired"
)

// The pod condition of each lock a pod asks for: type PodConditionType(lock), written by the
// manager through pods/status, output only (nothing the manager or the fence decides reads it
// back). Status True: the pod was granted the lock and the manager has not revoked that grant
// (reason ReasonGranted); False: it waits (ReasonWaiting: position, holders, as of when), its lock
// does not exist (ReasonLockNotFound), or its token for the lock is dead (ReasonRevoked).
const (
	// PodConditionTypePrefix starts the type of a pod's condition for one of its locks.
	PodConditionTypePrefix = "lock.fencedlock.io/"
	// ReasonRevoked: the manager revoked the pod's grant of the lock; the pod keeps the token
	// annotation, but the token is dead: the fence refuses writes made with it.
	ReasonRevoked = "Revoked"
)

// PodConditionType is the type of a pod's condition for lock: "lock.fencedlock.io/<lock>", a
// qualified name, as custom pod condition types must be (a pod's lock name is at most 63
// characters).
func PodConditionType(lock string) corev1.PodConditionType {
	return corev1.PodConditionType(PodConditionTypePrefix + lock)
}

// Kind is a FencedLock's kind, as owner references and GroupVersionKinds name it.
const Kind = "FencedLock"

// ManagedByLabel and ManagedByValue mark the Leases fencedlock's controller creates, so the
// manager caches those Leases only and not every Lease of the cluster (node heartbeats, leader
// elections).
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedByValue = "fencedlock"
)

// RoleLabel and RoleQueue mark a lock's queue Lease (QueueLeaseName), so that the API server sends
// its writes to the queue's admission policy (config/policy/queue_lease.yaml) and the lock Lease's
// to the Lease protocol's, by label alone: joins and beats then skip the lock's rules, which
// cannot apply to a Lease without holder or token. Only the manager sets labels on these Leases,
// so nobody can move a Lease from one policy to the other.
const (
	RoleLabel = "fencedlock.io/role"
	RoleQueue = "queue"
	// RoleWaiter marks a waiter Lease (WaiterLeaseName): one waiting identity of a lock.
	RoleWaiter = "waiter"
)

// LockUIDLabel marks both of a lock's Leases, its own and its queue Lease, with the FencedLock's
// UID, so that one watch selects the two (docs/protocol.md, "Release"): the API server delivers
// one resource's watch events in resourceVersion order, so a holder that follows that watch knows
// its queue as of every lock Lease version the watch has shown, without reading it at release.
// Only the manager sets labels on these Leases; a UID, unlike a lock's name, always fits a label
// value.
const LockUIDLabel = "fencedlock.io/lock-uid"

// PodHolderPrefix starts the holder identity of a pod holder: "pod/<pod name>/<pod uid>". The UID
// makes a recreated pod of the same name a different holder.
const PodHolderPrefix = "pod/"

// PodHolderIdentity returns the holder identity of a pod of the lock's namespace.
func PodHolderIdentity(name, uid string) string { return PodHolderPrefix + name + "/" + uid }

// Pod holders.
const (
	// SchedulingGate holds a pod that asked for a lock until it is granted.
	SchedulingGate = "fencedlock.io/lock"
	// EnqueuedAnnotation records when a pod joined its lock's queue (RFC 3339 with nanoseconds), so
	// pods created within the same second keep their order.
	EnqueuedAnnotation = "fencedlock.io/enqueued"
)
