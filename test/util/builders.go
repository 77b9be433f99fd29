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

package util

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega" //nolint:staticcheck // the builders assert as the suites do

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/lock"
	"github.com/fencedlock/fencedlock/pkg/token"
)

// Kit builds and reads the objects the test suites share (namespaces, FencedLocks, Leases, pods
// and Go clients) against one API server. Its methods fail the running test on errors.
type Kit struct {
	Ctx    context.Context
	Client client.Client
	Leases coordinationv1client.LeasesGetter
	// Prefix starts the name of every namespace it creates ("it-", "ctrl-", "e2e-").
	Prefix string
	// G asserts: nil for the global Gomega of a Ginkgo suite, gomega.NewWithT(t) in a plain test.
	G Gomega
	// ReadyTimeout bounds NewLock's wait for the manager to make a lock Ready (20 s if zero): a
	// real cluster's manager may be restarting.
	ReadyTimeout time.Duration
}

func (k Kit) g() Gomega {
	if k.G != nil {
		return k.G
	}
	return Default
}

// NewNamespace creates a namespace with a generated name and returns the name.
func (k Kit) NewNamespace() string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: k.Prefix}}
	k.g().ExpectWithOffset(1, k.Client.Create(k.Ctx, ns)).To(Succeed())
	return ns.Name
}

// LeaseSeconds sets a FencedLock's spec.leaseDurationSeconds, for NewLock.
func LeaseSeconds(s int32) func(*locksv1alpha1.FencedLock) {
	return func(fl *locksv1alpha1.FencedLock) { fl.Spec.LeaseDurationSeconds = s }
}

// StartupSeconds sets a FencedLock's spec.startupSeconds, for NewLock.
func StartupSeconds(s int32) func(*locksv1alpha1.FencedLock) {
	return func(fl *locksv1alpha1.FencedLock) { fl.Spec.StartupSeconds = &s }
}

// Permits sets a FencedLock's spec.permits, for NewLock.
func Permits(n int32) func(*locksv1alpha1.FencedLock) {
	return func(fl *locksv1alpha1.FencedLock) { fl.Spec.Permits = n }
}

// FenceMode sets a FencedLock's spec.fence.mode, for NewLock.
func FenceMode(m locksv1alpha1.FenceMode) func(*locksv1alpha1.FencedLock) {
	return func(fl *locksv1alpha1.FencedLock) { fl.Spec.Fence.Mode = m }
}

// NewLock creates FencedLock ns/name, changed by the non-nil mutate functions, and waits as
// CreateLock does.
func (k Kit) NewLock(ns, name string, mutate ...func(*locksv1alpha1.FencedLock)) *locksv1alpha1.FencedLock {
	fl := &locksv1alpha1.FencedLock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	for _, m := range mutate {
		if m != nil {
			m(fl)
		}
	}
	return k.createLock(2, fl)
}

// CreateLock creates fl and waits until it is Ready and its Lease is in the format of its
// spec.permits (a semaphore's, with that many permits, for more than one): a client that starts
// then finds the lock as the spec says.
func (k Kit) CreateLock(fl *locksv1alpha1.FencedLock) *locksv1alpha1.FencedLock {
	return k.createLock(2, fl)
}

func (k Kit) createLock(offset int, fl *locksv1alpha1.FencedLock) *locksv1alpha1.FencedLock {
	k.g().ExpectWithOffset(offset, k.Client.Create(k.Ctx, fl)).To(Succeed())
	timeout := k.ReadyTimeout
	if timeout == 0 {
		timeout = 20 * time.Second
	}
	k.g().EventuallyWithOffset(offset, func(g Gomega) {
		g.Expect(k.Client.Get(k.Ctx, client.ObjectKeyFromObject(fl), fl)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(fl.Status.Conditions, locksv1alpha1.ConditionReady)).To(BeTrue(),
			"lock %s/%s is not Ready", fl.Namespace, fl.Name)
		l := &coordinationv1.Lease{}
		g.Expect(k.Client.Get(k.Ctx, client.ObjectKeyFromObject(fl), l)).To(Succeed())
		st, err := lease.Read(l)
		g.Expect(err).NotTo(HaveOccurred())
		n := int(max(fl.Spec.Permits, 1))
		g.Expect(st.Semaphore).To(Equal(n > 1), "the manager writes spec.permits to the Lease")
		g.Expect(max(st.Limit, 1)).To(Equal(n))
	}, timeout, 20*time.Millisecond).Should(Succeed())
	return fl
}

// DeleteLock deletes FencedLock ns/name deliberately, as kubectl fencedlock delete --force does:
// annotated fencedlock.io/allow-delete first, which config/policy's lock-deletion asks of a lock
// its status shows held.
func (k Kit) DeleteLock(ns, name string) {
	fl := &locksv1alpha1.FencedLock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, locksv1alpha1.AllowDeleteAnnotation)
	k.g().ExpectWithOffset(1, k.Client.Patch(k.Ctx, fl, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
	k.g().ExpectWithOffset(1, k.Client.Delete(k.Ctx, fl)).To(Succeed())
}

// GetLock reads FencedLock ns/name.
func (k Kit) GetLock(ns, name string) *locksv1alpha1.FencedLock {
	fl := &locksv1alpha1.FencedLock{}
	k.g().ExpectWithOffset(1, k.Client.Get(k.Ctx, client.ObjectKey{Namespace: ns, Name: name}, fl)).To(Succeed())
	return fl
}

// GetLease reads Lease ns/name.
func (k Kit) GetLease(ns, name string) *coordinationv1.Lease {
	l := &coordinationv1.Lease{}
	k.g().ExpectWithOffset(1, k.Client.Get(k.Ctx, client.ObjectKey{Namespace: ns, Name: name}, l)).To(Succeed())
	return l
}

// LeaseState reads the lock state of FencedLock ns/name's Lease.
func (k Kit) LeaseState(ns, name string) lease.State {
	l := &coordinationv1.Lease{}
	k.g().ExpectWithOffset(1, k.Client.Get(k.Ctx, client.ObjectKey{Namespace: ns, Name: name}, l)).To(Succeed())
	st, err := lease.Read(l)
	k.g().ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return st
}

// Locker returns a Go client of FencedLock ns/name under identity id.
func (k Kit) Locker(ns, name, id string, opts ...lock.Option) *lock.Locker {
	l, err := lock.New(k.Leases, ns, name, append([]lock.Option{lock.WithIdentity(id)}, opts...)...)
	k.g().ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return l
}

// NewLocker returns a Go client of FencedLock ns/name that talks through leases.
func NewLocker(leases coordinationv1client.LeasesGetter, ns, name string, opts ...lock.Option) *lock.Locker {
	l, err := lock.New(leases, ns, name, opts...)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return l
}

// KeepAlive starts g's keep-alive, renewing every interval (zero: lock's default), and stops it
// when the spec ends at the latest: none outlives its spec.
func KeepAlive(g *lock.Grant, interval time.Duration) *lock.KeepAlive {
	k, err := g.KeepAlive(context.Background(), interval)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	ginkgo.DeferCleanup(k.Stop)
	return k
}

// Pod returns a pod (not created) that asks for FencedLock lockName through the lock label, or
// for none if lockName is empty. Its one container reads its token through the downward API.
func Pod(ns, name, lockName string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "work", Image: "example.com/worker:1",
				Env: []corev1.EnvVar{{Name: "FENCING_TOKEN", ValueFrom: &corev1.EnvVarSource{
					FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['" +
						locksv1alpha1.TokenAnnotation + "']"}}}}}}}}
	if lockName != "" {
		p.Labels = map[string]string{locksv1alpha1.LockLabel: lockName}
	}
	return p
}

// MultiLockPod returns a pod (not created) that asks for locks, a comma-separated list, through
// the locks annotation.
func MultiLockPod(ns, name, locks string) *corev1.Pod {
	p := Pod(ns, name, "")
	p.Annotations = map[string]string{locksv1alpha1.LocksAnnotation: locks}
	p.Spec.Containers[0].Env = nil // a multi-lock pod has a token per lock
	return p
}

// FencedConfigMap returns a ConfigMap (not created) fenced by lockName, written with token tok,
// that holds data under key balance.
func FencedConfigMap(ns, name, lockName string, tok token.Token, data string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels:      map[string]string{locksv1alpha1.FencedByLabel: lockName},
			Annotations: map[string]string{locksv1alpha1.TokenAnnotation: tok.String()}},
		Data: map[string]string{"balance": data},
	}
}

// CreatePod creates p and returns it.
func (k Kit) CreatePod(p *corev1.Pod) *corev1.Pod {
	k.g().ExpectWithOffset(1, k.Client.Create(k.Ctx, p)).To(Succeed())
	return p
}

// GetPod reads pod ns/name.
func (k Kit) GetPod(ns, name string) *corev1.Pod {
	p := &corev1.Pod{}
	k.g().ExpectWithOffset(1, k.Client.Get(k.Ctx, client.ObjectKey{Namespace: ns, Name: name}, p)).To(Succeed())
	return p
}

// PodTokens returns the per-lock tokens the manager granted pod p (token.fencedlock.io/<lock>),
// by lock. A token that does not parse fails the test: the manager writes none.
func PodTokens(p *corev1.Pod) map[string]token.Token {
	toks := map[string]token.Token{}
	for k, v := range p.Annotations {
		if l, ok := strings.CutPrefix(k, locksv1alpha1.LockTokenAnnotationPrefix); ok {
			t, err := token.Parse(v)
			ExpectWithOffset(1, err).NotTo(HaveOccurred(), "pod %s/%s, annotation %s", p.Namespace, p.Name, k)
			toks[l] = t
		}
	}
	return toks
}

// PodStatusPatch is the strategic merge patch of pods/status with which the tests play the
// kubelet: it sets the pod's phase and, if ready is not nil, its Ready condition, and keeps every
// other condition (the manager's lock.fencedlock.io/<lock> ones among them), as the kubelet does. A
// read-modify-write of the status would conflict with the manager's condition writes.
func PodStatusPatch(phase corev1.PodPhase, ready *bool) []byte {
	status := map[string]any{"phase": phase}
	if ready != nil {
		s := corev1.ConditionFalse
		if *ready {
			s = corev1.ConditionTrue
		}
		status["conditions"] = []corev1.PodCondition{{Type: corev1.PodReady, Status: s, LastTransitionTime: metav1.Now()}}
	}
	b, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		panic(err) // plain maps and API types: cannot fail
	}
	return b
}
