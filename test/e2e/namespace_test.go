//go:build e2e

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

package e2e

import (
	"context"
	"errors"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fencedlock/fencedlock/test/util"
)

// The namespace controller deletes a namespace's objects in no particular order: the FencedLock
// may go before the objects it fences, whose records are stale or missing by then, and some carry
// finalizers of controllers that know nothing about tokens.
var _ = Describe("Deleting a namespace that holds fenced objects", func() {
	It("always finishes", func() {
		ns := kit.NewNamespace()
		kit.NewLock(ns, "ledger", util.LeaseSeconds(15))
		l := kit.Locker(ns, "ledger", "e2e-writer")
		ctxT, cancelT := context.WithTimeout(ctx, 30*time.Second)
		defer cancelT()
		first, err := l.Acquire(ctxT)
		Expect(err).NotTo(HaveOccurred())
		cm := func(name string, finalizers ...string) *corev1.ConfigMap {
			o := util.FencedConfigMap(ns, name, "ledger", first.Token(), "1")
			o.Finalizers = finalizers
			return o
		}
		for _, o := range []*corev1.ConfigMap{cm("stale-1"), cm("stale-2"), cm("held", "example.com/cleanup")} {
			Expect(k8sClient.Create(ctx, o)).To(Succeed())
		}
		By("the lock moves on: every record is stale, and a finalizer waits for a token-unaware controller")
		Expect(first.Release(ctx)).To(Succeed())
		second, err := l.Acquire(ctxT)
		Expect(err).NotTo(HaveOccurred())
		defer func() { _ = second.Release(ctx) }()

		Expect(k8sClient.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		By("the finalizer's controller removes its finalizer without a token")
		Eventually(func() error {
			held := &corev1.ConfigMap{}
			if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "held"}, held); err != nil {
				return client.IgnoreNotFound(err)
			}
			if held.DeletionTimestamp.IsZero() {
				return errNotYet
			}
			held.Finalizers = nil
			return k8sClient.Update(ctx, held)
		}, 2*time.Minute, 200*time.Millisecond).Should(Succeed())
		Eventually(func() bool {
			err := k8sClient.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
			return apierrors.IsNotFound(err)
		}, 3*time.Minute, time.Second).Should(BeTrue(), "namespace %s is still there", ns)
	})
})

var errNotYet = errors.New("not being deleted yet")
