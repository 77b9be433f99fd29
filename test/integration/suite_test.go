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

// Package integration runs the fencedlock manager and its clients against a real kube-apiserver
// and etcd, on real clocks.
package integration

import (
	"context"
	"path/filepath"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fencedlock/fencedlock/test/util"
)

var (
	ctx       context.Context
	cancel    context.CancelFunc
	testEnv   *envtest.Environment
	cfg       *rest.Config
	k8sClient client.Client
	clientset *kubernetes.Clientset
	// kit builds the suite's namespaces, locks, pods and clients.
	kit util.Kit
	// stopManager stops the running manager.
	stopManager func()
)

func TestIntegration(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Integration Suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	ctx, cancel = context.WithCancel(context.Background())
	started, err := util.Start(filepath.Join("testdata", "crds"))
	Expect(err).NotTo(HaveOccurred())
	testEnv, cfg, k8sClient, clientset = started.Env, started.Cfg, started.Client, started.Clientset
	kit = util.Kit{Ctx: ctx, Client: k8sClient, Leases: clientset.CoordinationV1(), Prefix: "it-"}

	startManager()
})

// startManager (re)starts the manager: the controller and the fence webhook.
func startManager() {
	var err error
	stopManager, err = util.StartManager(ctx, cfg, clock.RealClock{}, testEnv, util.Production)
	Expect(err).NotTo(HaveOccurred())
}

var _ = AfterSuite(func() {
	if stopManager != nil {
		stopManager()
	}
	cancel()
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})
