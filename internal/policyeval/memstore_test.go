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

package policyeval_test

import (
	"fmt"
	"strconv"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/internal/policyeval"
)

// memStore is a namespace of Leases in memory for runner (d): it numbers writes as etcd does (one
// resourceVersion per write, rising), refuses stale updates, and sends every write, as the
// manager, through the policies, as the API server does when runner (b) installs a case.
type memStore struct {
	ns     string
	rv     uint64
	leases map[string]*coordinationv1.Lease
	p      *policyeval.Policies
}

var leasesResource = coordinationv1.SchemeGroupVersion.WithResource("leases").GroupResource()

func (s *memStore) Get(name string) (*coordinationv1.Lease, error) {
	l, ok := s.leases[name]
	if !ok {
		return nil, apierrors.NewNotFound(leasesResource, name)
	}
	return l.DeepCopy(), nil
}

func (s *memStore) Create(l *coordinationv1.Lease) error {
	l.Namespace = s.ns
	if _, ok := s.leases[l.Name]; ok {
		return apierrors.NewAlreadyExists(leasesResource, l.Name)
	}
	return s.write(nil, l)
}

func (s *memStore) Update(l *coordinationv1.Lease) error {
	old, ok := s.leases[l.Name]
	if !ok {
		return apierrors.NewNotFound(leasesResource, l.Name)
	}
	if l.ResourceVersion != old.ResourceVersion {
		return apierrors.NewConflict(leasesResource, l.Name, fmt.Errorf("resourceVersion %s, stored %s", l.ResourceVersion, old.ResourceVersion))
	}
	return s.write(old, l)
}

func (s *memStore) write(old, l *coordinationv1.Lease) error {
	if r := s.p.Admit(policyeval.LeaseWrite(old, l, true)); !r.Admitted() {
		return fmt.Errorf("the manager's write of Lease %s: %s", l.Name, r)
	}
	s.rv++
	l.ResourceVersion = strconv.FormatUint(s.rv, 10)
	l.ManagedFields = nil
	s.leases[l.Name] = l.DeepCopy()
	return nil
}

// newLockStore returns a store holding FencedLock name's Leases as the manager leaves a new lock:
// the lock Lease, stamped with its first token, and its queue Lease.
func newLockStore(p *policyeval.Policies, ns, name string) (*memStore, error) {
	s := &memStore{ns: ns, rv: 1000, leases: map[string]*coordinationv1.Lease{}, p: p}
	uid := types.UID("uid-" + name)
	owner := metav1.OwnerReference{APIVersion: locksv1alpha1.SchemeGroupVersion.String(), Kind: locksv1alpha1.Kind,
		Name: name, UID: uid, Controller: new(true), BlockOwnerDeletion: new(true)}
	lock := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{owner},
			Labels: map[string]string{locksv1alpha1.ManagedByLabel: locksv1alpha1.ManagedByValue, locksv1alpha1.LockUIDLabel: string(uid)}},
		Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: new(int32(15))},
	}
	queue := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: locksv1alpha1.QueueLeaseName(uid), OwnerReferences: []metav1.OwnerReference{owner},
			Labels: map[string]string{locksv1alpha1.ManagedByLabel: locksv1alpha1.ManagedByValue,
				locksv1alpha1.RoleLabel: locksv1alpha1.RoleQueue, locksv1alpha1.LockUIDLabel: string(uid)}},
		Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: new(int32(15))},
	}
	if err := s.Create(lock); err != nil {
		return nil, err
	}
	lock.Annotations = map[string]string{locksv1alpha1.TokenAnnotation: lock.ResourceVersion}
	if err := s.Update(lock); err != nil {
		return nil, err
	}
	return s, s.Create(queue)
}
