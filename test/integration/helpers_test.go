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
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fencedlock/fencedlock/test/util"
)

// impersonating returns a client of the API server that acts as who.
func impersonating(who rest.ImpersonationConfig) client.Client {
	c := rest.CopyConfig(cfg)
	c.Impersonate = who
	cl, err := client.New(c, client.Options{Scheme: k8sClient.Scheme()})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return cl
}

// as returns a client that acts as user, in group system:masters: RBAC allows it everything, so
// only a fence (its holder binding) can refuse it.
func as(user string) client.Client {
	return impersonating(rest.ImpersonationConfig{UserName: user, Groups: []string{"system:masters"}})
}

// buildWithKubeconfig builds the program at pkg and writes a kubeconfig for it (as user), for
// tests that run it as a separate OS process against the real API server.
func buildWithKubeconfig(pkg, user string) (bin, kubeconfig string) {
	bin, err := gexec.Build(pkg)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	DeferCleanup(gexec.CleanupBuildArtifacts)
	kubeconfig, err = util.WriteKubeconfig(testEnv, nil, user, GinkgoT().TempDir())
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return bin, kubeconfig
}
