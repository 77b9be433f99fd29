package integration

import (
	. "github.com/onsi/gomega"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func getLease(ns, name string) *coordinationv1.Lease {
	l := &coordinationv1.Lease{}
	ExpectWithOffset(1, k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, l)).To(Succeed())
	return l
}
