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

package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lock"
)

// options are what every subcommand shares: kubeconfig flags and streams.
type options struct {
	flags   *genericclioptions.ConfigFlags
	streams genericiooptions.IOStreams
}

func (o *options) namespace() (string, error) {
	ns, _, err := o.flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", fmt.Errorf("resolving namespace: %w", err)
	}
	return ns, nil
}

// objectNamespace is the namespace of the objects stamp and apply write: -n, else
// $FENCEDLOCK_NAMESPACE, which run sets for its command from its own -n, so that a command run
// under a lock writes next to the lock without repeating -n; else the kubeconfig's. explicit
// says whether one of the first two named it.
func (o *options) objectNamespace() (ns string, explicit bool, err error) {
	if ns := *o.flags.Namespace; ns != "" {
		return ns, true, nil
	}
	if ns := os.Getenv(envNamespace); ns != "" {
		return ns, true, nil
	}
	ns, err = o.namespace()
	return ns, false, err
}

func (o *options) clients() (client.Client, *kubernetes.Clientset, error) {
	cfg, err := o.flags.ToRESTConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme()})
	if err != nil {
		return nil, nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	return cl, cs, err
}

// locker returns a Locker for the named lock in the current namespace, under identity or, if it
// is empty, the process's default identity.
func (o *options) locker(name, identity string, opts ...lock.Option) (*lock.Locker, error) {
	ns, err := o.namespace()
	if err != nil {
		return nil, err
	}
	_, cs, err := o.clients()
	if err != nil {
		return nil, err
	}
	opts = append(opts, lock.WithIdentity(identityOr(identity)))
	return lock.New(cs.CoordinationV1(), ns, name, opts...)
}

// completeLocks completes FencedLock names of the current namespace.
func (o *options) completeLocks(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	cl, _, err := o.clients()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	ns, err := o.namespace()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	var list locksv1alpha1.FencedLockList
	if err := cl.List(cmd.Context(), &list, client.InNamespace(ns)); err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	names := make([]cobra.Completion, 0, len(list.Items))
	for _, fl := range list.Items {
		names = append(names, fl.Name)
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}
