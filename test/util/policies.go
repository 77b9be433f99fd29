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
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/config"
)

// InstallPolicies creates the admission policies of config/policy (the token record, the Lease
// protocol, the queue Lease's rules, the pod grant rules) as the install does, and waits until the
// API server enforces them.
func InstallPolicies(ctx context.Context, cfg *rest.Config) error {
	cl, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		return err
	}
	files, err := PolicyFiles()
	if err != nil {
		return err
	}
	for _, f := range files {
		if err := createAll(ctx, cl, f); err != nil {
			return err
		}
	}
	return waitEnforced(ctx, cl)
}

// PolicyFiles returns the files of config/policy that hold policies and bindings (not kustomize's).
func PolicyFiles() ([]string, error) {
	files, err := filepath.Glob(filepath.Join(RepoRoot(), "config", "policy", "*.yaml"))
	return slices.DeleteFunc(files, func(f string) bool { return strings.HasPrefix(filepath.Base(f), "kustom") }), err
}

const namePrefix = "fencedlock-"

func createAll(ctx context.Context, cl client.Client, file string) error {
	objs, err := PolicyObjects(file, namePrefix)
	if err != nil {
		return err
	}
	for _, obj := range objs {
		if err := cl.Create(ctx, obj); client.IgnoreAlreadyExists(err) != nil {
			return fmt.Errorf("%s: creating %s %s: %w", file, obj.GetKind(), obj.GetName(), err)
		}
	}
	return nil
}

// PolicyObjects decodes the policies and bindings of a config/policy file, their names (and the
// bindings' policyName) prefixed with prefix.
func PolicyObjects(file, prefix string) ([]*unstructured.Unstructured, error) {
	fh, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer func() { _ = fh.Close() }()
	objs, err := config.Decode(fh)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	for _, obj := range objs {
		// As config/default's namePrefix names them, so refusals read as they do on a cluster.
		obj.SetName(prefix + obj.GetName())
		if p, ok, _ := unstructured.NestedString(obj.Object, "spec", "policyName"); ok {
			if err := unstructured.SetNestedField(obj.Object, prefix+p, "spec", "policyName"); err != nil {
				return nil, err
			}
		}
	}
	return objs, nil
}

// waitEnforced probes the rules that bind every principal, one per policy a lock's Leases meet:
// removing the token of a lock Lease, giving a queue Lease a holder. Each is refused once its
// policy is loaded (they load asynchronously, within a second).
func waitEnforced(ctx context.Context, cl client.Client) error {
	for _, probe := range []struct {
		role   string
		mutate func(*coordinationv1.Lease)
	}{
		{"", func(l *coordinationv1.Lease) { l.Annotations = nil }},
		{locksv1alpha1.RoleQueue, func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = new("probe") }},
	} {
		if err := waitRefused(ctx, cl, probe.role, probe.mutate); err != nil {
			return err
		}
	}
	return nil
}

func waitRefused(ctx context.Context, cl client.Client, role string, mutate func(*coordinationv1.Lease)) error {
	probe := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "fencedlock-policy-probe" + role,
		Labels: map[string]string{locksv1alpha1.ManagedByLabel: locksv1alpha1.ManagedByValue}}}
	if role != "" {
		probe.Labels[locksv1alpha1.RoleLabel] = role
	}
	if err := cl.Create(ctx, probe); err != nil {
		return fmt.Errorf("creating the policy probe: %w", err)
	}
	defer func() { _ = cl.Delete(context.Background(), probe) }()
	if role == "" {
		probe.Annotations = map[string]string{locksv1alpha1.TokenAnnotation: probe.ResourceVersion}
		if err := cl.Update(ctx, probe); err != nil {
			return fmt.Errorf("stamping the policy probe: %w", err)
		}
	}
	var last error
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		p := probe.DeepCopy()
		mutate(p)
		last = cl.Update(ctx, p, client.DryRunAll)
		return apierrors.IsInvalid(last) || apierrors.IsForbidden(last), nil
	})
	if err != nil {
		return fmt.Errorf("admission policies of config/policy not enforced on %s after 30s (last probe: %v): %w", probe.Name, last, err)
	}
	return nil
}
