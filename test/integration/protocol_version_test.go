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

package integration

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/lock"
	"github.com/fencedlock/fencedlock/pkg/token"
	"github.com/fencedlock/fencedlock/test/util"
)

// The protocol version on the wire (docs/protocol.md, "Versions"), and one identity, one permit
// (issue 44): what an ordinary user may write, and what each client does with a Lease written by
// a newer version.

var _ = Describe("Protocol versions and permits, as an ordinary user", func() {
	var ns string
	BeforeEach(func() { ns = kit.NewNamespace() })

	patchLease := func(c client.Client, name, patch string) error {
		l := &coordinationv1.Lease{}
		l.Namespace, l.Name = ns, name
		return c.Patch(ctx, l, client.RawPatch(types.MergePatchType, []byte(patch)))
	}

	It("every transition writes the version, and the policies refuse a bogus one from anyone but the manager", func() {
		kit.NewLock(ns, "vault", util.LeaseSeconds(15))
		Expect(kit.GetLease(ns, "vault").Annotations).To(HaveKeyWithValue(locksv1alpha1.ProtocolAnnotation,
			strconv.Itoa(lease.ProtocolVersion)), "the manager's stamp writes the version")
		g, err := honestLocker(ns, "alice").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(kit.GetLease(ns, "vault").Annotations[locksv1alpha1.ProtocolAnnotation]).To(Equal("2"))

		mallory, _ := editor(ns, "mallory")
		for _, bogus := range []string{`"3"`, `"1"`, `"x"`, `null`} {
			err := patchLease(mallory, "vault", fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`,
				locksv1alpha1.ProtocolAnnotation, bogus))
			policyDenied(err, "fencedlock-lease-protocol", "is the protocol version that wrote the Lease")
			expectRefused(err, "protocol version "+bogus)
		}
		Expect(g.Release(ctx)).To(Succeed())
	})

	It("a Go client and the shell example stop with a clear error on a Lease of a newer version", func() {
		kit.NewLock(ns, "vault", util.LeaseSeconds(15))
		Expect(patchLease(k8sClient, "vault", fmt.Sprintf(`{"metadata":{"annotations":{%q:"3"}}}`,
			locksv1alpha1.ProtocolAnnotation))).To(Succeed(), "the manager (a cluster admin) may write a newer version")
		before := kit.GetLease(ns, "vault").ResourceVersion

		_, err := honestLocker(ns, "alice").TryAcquire(ctx)
		Expect(lease.IsNewerProtocol(err)).To(BeTrue(), "%v", err)
		var v *lease.VersionError
		Expect(errors.As(err, &v)).To(BeTrue())
		Expect(v.Version).To(Equal(3))
		Expect(err.Error()).To(ContainSubstring("written by fencedlock protocol version 3, newer than version 2"))

		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err = honestLocker(ns, "bob").Acquire(actx)
		Expect(lease.IsNewerProtocol(err)).To(BeTrue(), "Acquire fails at once rather than wait: %v", err)

		out, code := newShell(ns).run("vault", "shell/carol", "acquire")
		Expect(code).To(Equal(5), out)
		Expect(out).To(ContainSubstring("was written by fencedlock protocol version 3, newer than version 2"))
		Expect(kit.GetLease(ns, "vault").ResourceVersion).To(Equal(before), "nobody wrote the newer Lease")

		By("the manager reports it on the lock and leaves the Lease as it is")
		Eventually(func(g Gomega) {
			cond := meta.FindStatusCondition(kit.GetLock(ns, "vault").Status.Conditions, locksv1alpha1.ConditionReady)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(cond.Reason).To(Equal(locksv1alpha1.ReasonLeaseConflict))
			g.Expect(cond.Message).To(ContainSubstring("newer than version 2"))
		}, 10*time.Second, 50*time.Millisecond).Should(Succeed())
		Expect(kit.GetLease(ns, "vault").ResourceVersion).To(Equal(before))
	})

	It("cannot take a second permit of a semaphore under an identity that holds one (issue 44, point 1)", func() {
		kit.NewLock(ns, "vault", util.LeaseSeconds(15), util.Permits(3))
		alice, cs := ordinaryUser(ns, "alice")
		Eventually(func() error { // the authorizer sees a new Role a moment later
			_, err := cs.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
			return err
		}, 10*time.Second, 20*time.Millisecond).Should(Succeed())
		locker := util.NewLocker(cs.CoordinationV1(), ns, "vault", lock.WithIdentity("alice"))
		g, err := locker.TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		cur := kit.GetLease(ns, "vault")
		st, err := lease.Read(cur)
		Expect(err).NotTo(HaveOccurred())
		Expect(st.Permits).To(HaveLen(1))

		By("alice's own principal writes a second permit for alice, as a grant would")
		next := cur.DeepCopy()
		p := st.Permits[0]
		p.Number, p.Ticket = 2, 0
		p.Token, err = token.Parse(cur.ResourceVersion)
		Expect(err).NotTo(HaveOccurred())
		next.Annotations[locksv1alpha1.PermitAnnotation(2)] = p.String()
		next.Annotations[locksv1alpha1.TokenAnnotation] = cur.ResourceVersion
		err = alice.Update(ctx, next)
		policyDenied(err, "fencedlock-lease-protocol", "alice holds a permit of the lock already: one identity holds at most one permit")
		expectRefused(err, "a second permit for alice")

		By("the Go client refuses it before any write, and the shell example's grant says to wait")
		_, err = locker.TryAcquire(ctx)
		Expect(err).To(HaveOccurred())
		out, code := newShell(ns).run("vault", "alice", "grant")
		Expect(code).To(Equal(4), out)
		Expect(out).To(ContainSubstring("alice already holds a permit of vault"))
		Expect(kit.GetLease(ns, "vault").ResourceVersion).To(Equal(cur.ResourceVersion))
		Expect(g.Release(ctx)).To(Succeed())
	})
})
