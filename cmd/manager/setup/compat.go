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

package setup

import (
	"errors"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/fencedlock/fencedlock/config"
)

// Requirement is one API the install or the manager uses, and what for.
type Requirement struct {
	// GroupVersion and Resource name it as discovery lists it ("pods/status" for a subresource).
	GroupVersion, Resource string
	// For says what fencedlock uses it for.
	For string
}

// admissionV1 is the group version of the install's admission policies and webhook
// configurations.
const admissionV1 = "admissionregistration.k8s.io/v1"

// Requirements are the APIs fencedlock needs the API server to serve. Pod scheduling gates (GA
// in 1.30) and webhook matchConditions (GA in 1.30) are fields, not APIs: the minimum version
// covers them.
var Requirements = []Requirement{
	{"locks.fencedlock.io/v1alpha1", "fencedlocks", "the FencedLock CRD (install it first)"},
	{"locks.fencedlock.io/v1alpha1", "fencedlocks/status", "the locks' status"},
	{"coordination.k8s.io/v1", "leases", "the locks' Leases, their queues and waiters"},
	{"v1", "pods", "pods that ask for a lock, held behind scheduling gate fencedlock.io/lock"},
	{"v1", "pods/status", "the pods' lock conditions, which say why they wait"},
	{"events.k8s.io/v1", "events", "Events on locks and pods"},
	{admissionV1, "validatingadmissionpolicies", "the Lease protocol and pod-grant policies (config/policy)"},
	{admissionV1, "validatingadmissionpolicybindings", "binding those policies"},
	{admissionV1, "mutatingadmissionpolicies", "the token record (config/policy/token_record.yaml)"},
	{admissionV1, "mutatingadmissionpolicybindings", "binding the token record"},
	{admissionV1, "mutatingwebhookconfigurations", "the pod gate, and its CA bundle kept by the manager"},
	{admissionV1, "validatingwebhookconfigurations", "the fence, and its CA bundle kept by the manager"},
}

// CheckServer asks the API server of cfg, through discovery, whether it serves what fencedlock
// needs (checkServer).
func CheckServer(cfg *rest.Config) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating a discovery client: %w", err)
	}
	return checkDiscovery(dc)
}

// checkDiscovery is CheckServer with the discovery client dc.
func checkDiscovery(dc discovery.DiscoveryInterface) error {
	info, err := dc.ServerVersion()
	if err != nil {
		return fmt.Errorf("reading the API server's version: %w", err)
	}
	_, lists, err := dc.ServerGroupsAndResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return fmt.Errorf("discovering the API server's resources: %w", err)
	}
	// A group that failed discovery (an aggregated API whose server is down) is not one of ours
	// unless a requirement goes missing: checkServer names it then.
	return checkServer(info, lists, err)
}

// checkServer says what the API server of version info, serving lists, lacks of what fencedlock
// needs, with the minimum version and what each missing API is for; nil if nothing.
// discoveryErr is a partial discovery failure, quoted when something is missing. A version that
// does not parse, or reads 0.x (a development build: v0.0.0-master), is judged by its APIs alone.
func checkServer(info *version.Info, lists []*metav1.APIResourceList, discoveryErr error) error {
	var problems []string
	if v, err := utilversion.ParseGeneric(info.GitVersion); err == nil && v.Major() > 0 &&
		!v.AtLeast(utilversion.MajorMinor(1, config.MinKubernetesMinor)) {
		problems = append(problems, fmt.Sprintf("Kubernetes %s is older than 1.%d, the oldest fencedlock runs on",
			info.GitVersion, config.MinKubernetesMinor))
	}
	served := map[string]bool{}
	for _, l := range lists {
		for _, r := range l.APIResources {
			served[l.GroupVersion+" "+r.Name] = true
		}
	}
	for _, r := range Requirements {
		if !served[r.GroupVersion+" "+r.Resource] {
			problems = append(problems, fmt.Sprintf("%s %s is not served; needed for %s", r.GroupVersion, r.Resource, r.For))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	msg := fmt.Sprintf("the API server (Kubernetes %s) lacks what fencedlock needs: %s (fencedlock needs Kubernetes 1.%d or "+
		"later with its CRD installed; see docs/operations.md, \"Compatibility\")", info.GitVersion,
		strings.Join(problems, "; "), config.MinKubernetesMinor)
	if discoveryErr != nil {
		return errors.New(msg + "; discovery also failed: " + discoveryErr.Error())
	}
	return errors.New(msg)
}
