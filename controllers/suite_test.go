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

package controllers_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fencedlock/fencedlock/test/util"
)

// The controller suite runs the FencedLock controller against a real kube-apiserver and etcd on a
// fake clock, so expiry can be driven step by step.
var (
	ctx        context.Context
	cancel     context.CancelFunc
	testEnv    *envtest.Environment
	cfg        *rest.Config
	k8sClient  client.Client
	clientset  *kubernetes.Clientset
	fakeClock  *clocktesting.FakeClock
	stopManage context.CancelFunc
	// kit builds the suite's namespaces, locks, pods and clients.
	kit util.Kit
)

func TestControllers(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Controller Suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	ctx, cancel = context.WithCancel(context.Background())

	started, err := util.Start()
	Expect(err).NotTo(HaveOccurred())
	testEnv, cfg, k8sClient, clientset = started.Env, started.Cfg, started.Client, started.Clientset
	kit = util.Kit{Ctx: ctx, Client: k8sClient, Leases: clientset.CoordinationV1(), Prefix: "ctrl-"}

	fakeClock = clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	startManager()
})

// startManager starts a fresh manager, as after a process restart: no observations survive.
func startManager() {
	var err error
	stopManage, err = util.StartManager(ctx, cfg, fakeClock, testEnv)
	Expect(err).NotTo(HaveOccurred())
}

var _ = AfterSuite(func() {
	if stopManage != nil {
		stopManage()
	}
	cancel()
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})
