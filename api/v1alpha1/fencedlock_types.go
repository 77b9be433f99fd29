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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// FencedLockSpec defines how a FencedLock's grants behave.
// +kubebuilder:validation:XValidation:rule="!has(self.maxHoldSeconds) || self.maxHoldSeconds >= self.leaseDurationSeconds",message="spec.maxHoldSeconds must be at least spec.leaseDurationSeconds",fieldPath=".maxHoldSeconds"
type FencedLockSpec struct {
	// leaseDurationSeconds is how long a grant stays valid without a renewal, as observed by the
	// controller on its own clock. A holder that neither renews nor releases within this time is
	// revoked and the next acquirer receives a higher token.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	// +kubebuilder:default=15
	// +optional
	LeaseDurationSeconds int32 `json:"leaseDurationSeconds,omitempty"`

	// maxHoldSeconds, when set, bounds how long one grant may be held in total, renewals
	// included. The controller revokes a grant older than this, so a holder stuck in a renew loop
	// cannot starve the waiters. Unset means no bound.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=604800
	// +optional
	MaxHoldSeconds *int32 `json:"maxHoldSeconds,omitempty"`

	// startupSeconds is a granted pod's start-up allowance: for this long after the manager first
	// sees a pod holder not Ready since its grant (pulling its image, running init containers,
	// starting), the pod is not revoked for being not Ready. The allowance ends at the pod's first
	// Ready; from then on, and once it has run out, a pod holder not Ready for leaseDurationSeconds
	// is revoked. Holders that are not pods renew instead and have no allowance. The default, 300,
	// covers a first pull of a large image on a cold node (1 GiB at 5 MB/s takes about 210 s) plus
	// scheduling and init containers, so the lease can stay short; 0 applies the Ready rule from
	// the grant. A value below leaseDurationSeconds changes nothing.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	// +kubebuilder:default=300
	// +optional
	StartupSeconds *int32 `json:"startupSeconds,omitempty"`

	// permits is how many holders the lock admits at once: 1 (the default) makes it a lock, more
	// a semaphore whose every permit is a fenced grant with its own token. Lowering it below the
	// number of permits held revokes nobody: new grants wait until the holders drop below it.
	// Raising it serves the queue at once. At most 100, so that every permit fits on the Lease.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=1
	// +optional
	Permits int32 `json:"permits,omitempty"`

	// fence configures how the admission webhook guards the objects labelled
	// fencedlock.io/fenced-by: <this lock>.
	// +kubebuilder:default={}
	// +optional
	Fence FenceSpec `json:"fence,omitzero"`
}

// FenceMode says where the fence reads the lock's current token from.
// +kubebuilder:validation:Enum=Cached;Strict
type FenceMode string

const (
	// FenceModeCached reads the Lease from the webhook's informer cache: no API call per
	// admission. A token superseded less than the cache's delay ago (typically milliseconds) is
	// still compared with the previous current token; the per-object rule stays exact.
	FenceModeCached FenceMode = "Cached"
	// FenceModeStrict reads the Lease from etcd (a quorum read) on every admission.
	FenceModeStrict FenceMode = "Strict"
)

// FenceSpec configures the fence of one lock.
type FenceSpec struct {
	// mode is Cached (default) or Strict; see FenceMode.
	// +kubebuilder:default=Cached
	// +optional
	Mode FenceMode `json:"mode,omitempty"`

	// holderBinding, when true, admits fenced writes only from the principal holding the lock
	// with the presented token, so a copied token cannot be replayed by someone else. A pod holder
	// must write with its own service-account token (matched by the pod-uid claim); any other
	// holder identity must be the writer's username or start with "<username>/".
	// +optional
	HolderBinding bool `json:"holderBinding,omitempty"`

	// statusWrites is Unfenced (default) or Fenced; see StatusWrites. A write to the status of a
	// fenced object that presents a token with the request (userInfo.extra fencedlock.io/token)
	// is judged by it either way.
	// +kubebuilder:default=Unfenced
	// +optional
	StatusWrites StatusWrites `json:"statusWrites,omitempty"`
}

// StatusWrites says whether writes to the /status of the lock's fenced objects need a token.
// +kubebuilder:validation:Enum=Unfenced;Fenced
type StatusWrites string

const (
	// StatusWritesUnfenced admits a status write that presents no token: controllers that never
	// claimed the lock (kube-controller-manager writing a Deployment's status) keep working.
	StatusWritesUnfenced StatusWrites = "Unfenced"
	// StatusWritesFenced refuses a status write that presents no token with the request: set it
	// when only the lock's holders write the status of its objects (an operator's own resources).
	StatusWritesFenced StatusWrites = "Fenced"
)

// Waiter is one entry of a lock's FIFO queue of waiting holders.
type Waiter struct {
	// identity is the holder identity the waiter will hold the lock under: "pod/<name>/<uid>" for
	// a pod (at most 294 characters). An identity longer than 1024 bytes is shortened as
	// status.holder is.
	// +kubebuilder:validation:MaxLength=1024
	// +required
	Identity string `json:"identity"`

	// pod is the name of the waiting pod, when the waiter is a pod.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Pod string `json:"pod,omitempty"`

	// since is when the waiter started waiting.
	// +optional
	Since metav1.Time `json:"since,omitzero"`
}

// Holder is one held permit of a lock.
type Holder struct {
	// permit is the permit's number, from 1 (a lock's holder holds permit 1).
	// +kubebuilder:validation:Minimum=1
	// +required
	Permit int32 `json:"permit"`

	// identity is the holder's identity, shortened as status.holder is.
	// +kubebuilder:validation:MaxLength=1024
	// +required
	Identity string `json:"identity"`

	// token is the fencing token of the permit's grant, as a decimal string.
	// +kubebuilder:validation:MaxLength=20
	// +required
	Token string `json:"token"`

	// acquireTime is when the permit was granted.
	// +optional
	AcquireTime *metav1.MicroTime `json:"acquireTime,omitempty"`

	// renewTime is when the holder last renewed the permit, as of the last status write (see
	// status.renewTime).
	// +optional
	RenewTime *metav1.MicroTime `json:"renewTime,omitempty"`
}

// FencedLockStatus mirrors the backing Lease, which is the single source of truth.
type FencedLockStatus struct {
	// holder is the identity of the current holder; empty when the lock is free, and for a
	// semaphore (see status.holders). An identity
	// longer than 1024 bytes (only a direct write to the Lease can make one) is shown cut to 1024
	// bytes, ending in "…"; the Lease's spec.holderIdentity keeps it in full.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Holder string `json:"holder,omitempty"`

	// token is the lock's current fencing token as a decimal string: the token of the current
	// holder, or of the last grant when the lock is free. A mirror of the Lease that may lag: a
	// fenced write of a lock presents the Lease's current token while the lock is held. For a
	// semaphore (spec.permits above 1) it is the last token issued on any permit, and a fenced
	// write presents the token of a permit held now (status.holders has each permit's own).
	// +kubebuilder:validation:MaxLength=20
	// +optional
	Token string `json:"token,omitempty"`

	// acquireTime is when the current holder acquired the lock.
	// +optional
	AcquireTime *metav1.MicroTime `json:"acquireTime,omitempty"`

	// renewTime is when the current holder last renewed its grant, as of the last status write. A
	// renewal alone rewrites the status at most once per the manager's --status-renewal-interval
	// (a minute by default), as a Node's status is not rewritten for every heartbeat; any other
	// change writes it at once. The Lease's spec.renewTime has every renewal.
	// +optional
	RenewTime *metav1.MicroTime `json:"renewTime,omitempty"`

	// leaseTransitions counts the grants made on the backing Lease since it was created.
	// +kubebuilder:validation:Minimum=0
	// +optional
	LeaseTransitions int32 `json:"leaseTransitions,omitempty"`

	// holders lists the permits held now, by permit number (for a lock, its one holder).
	// +kubebuilder:validation:MaxItems=100
	// +listType=map
	// +listMapKey=permit
	// +optional
	Holders []Holder `json:"holders,omitempty"`

	// heldBy names the holders for kubectl get: status.holder for a lock, and for a semaphore
	// each permit's holder in permit order, joined by ", " and cut to 1024 bytes ending in "…"
	// (status.holders lists each).
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	HeldBy string `json:"heldBy,omitempty"`

	// held is how many permits are held out of spec.permits, as "2/3" (for kubectl get).
	// +kubebuilder:validation:MaxLength=16
	// +optional
	Held string `json:"held,omitempty"`

	// waitingCount is how many holders are queued for the lock.
	// +kubebuilder:validation:Minimum=0
	// +optional
	WaitingCount int32 `json:"waitingCount,omitempty"`

	// waiters lists the next holders in queue order, at most ten.
	// +kubebuilder:validation:MaxItems=10
	// +listType=atomic
	// +optional
	Waiters []Waiter `json:"waiters,omitempty"`

	// observedGeneration is the metadata.generation this status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions describe the lock: Ready (its Lease exists and is initialized) and Held.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=flock,categories=fencedlock
// The columns show only what the status keeps current: holders, tokens and grants are written
// when they change, a renewal alone at most once per the manager's --status-renewal-interval, so
// a renewal column would read as an expired lease. kubectl fencedlock get shows the Lease's
// renewals (docs/cli.md, "Two views of a lock").
// +kubebuilder:printcolumn:name="Held",type=string,JSONPath=`.status.held`
// +kubebuilder:printcolumn:name="Holder",type=string,JSONPath=`.status.heldBy`,description="The holder, or each permit's holder of a semaphore"
// +kubebuilder:printcolumn:name="Token",type=string,JSONPath=`.status.token`
// +kubebuilder:printcolumn:name="Acquired",type=date,JSONPath=`.status.acquireTime`,description="When the lock's holder was granted it (a semaphore's permits: status.holders)"
// +kubebuilder:printcolumn:name="Waiting",type=integer,JSONPath=`.status.waitingCount`
// +kubebuilder:printcolumn:name="Permits",type=integer,JSONPath=`.spec.permits`,priority=1
// +kubebuilder:printcolumn:name="Lease",type=integer,JSONPath=`.spec.leaseDurationSeconds`,priority=1
// +kubebuilder:printcolumn:name="Startup",type=integer,JSONPath=`.spec.startupSeconds`,priority=1
// +kubebuilder:printcolumn:name="Fence",type=string,JSONPath=`.spec.fence.mode`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// FencedLock is a lock whose every grant carries a strictly increasing fencing token. It is backed
// by a coordination.k8s.io Lease of the same name.
type FencedLock struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is a standard object metadata
	// +optional
	metav1.ObjectMeta `json:"metadata,omitzero"`

	// spec defines how grants of this lock behave.
	// +kubebuilder:default={}
	// +optional
	Spec FencedLockSpec `json:"spec,omitzero"`

	// status mirrors the backing Lease.
	// +optional
	Status FencedLockStatus `json:"status,omitzero"`
}

// +kubebuilder:object:root=true

// FencedLockList contains a list of FencedLock.
type FencedLockList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitzero"`
	Items           []FencedLock `json:"items"`
}

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(SchemeGroupVersion, &FencedLock{}, &FencedLockList{})
		return nil
	})
}
