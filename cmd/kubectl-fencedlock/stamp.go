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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/cli-runtime/pkg/resource"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/token"
)

// stampOptions are the flags stamp and apply share.
type stampOptions struct {
	filenames []string
	lock      string
	token     string
}

func (s *stampOptions) addFlags(cmd *cobra.Command) {
	cmd.Flags().StringSliceVarP(&s.filenames, "filename", "f", nil, "Files, directories or URLs with the objects (- for stdin)")
	cmd.Flags().StringVar(&s.lock, "lock", "", "Lock that fences the objects (default: their existing fencedlock.io/fenced-by label)")
	cmd.Flags().StringVar(&s.token, "fencing-token", "", "Fencing token to write with (default: $FENCING_TOKEN)")
	_ = cmd.MarkFlagRequired("filename")
}

// stamp sets the fence label and token annotation on every object the builder yields.
func (s *stampOptions) stamp(b *resource.Builder, o *options) ([]*resource.Info, error) {
	raw := s.token
	if raw == "" {
		raw = os.Getenv("FENCING_TOKEN")
	}
	if raw == "" {
		return nil, s.noToken(o)
	}
	tok, err := token.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("--fencing-token: %w", err)
	}
	if s.lock != "" {
		if errs := validation.IsDNS1123Subdomain(s.lock); len(errs) > 0 {
			return nil, fmt.Errorf("--lock %q is not a valid FencedLock name: %v", s.lock, errs)
		}
	}
	ns, explicit, err := o.objectNamespace()
	if err != nil {
		return nil, err
	}
	infos, err := b.Unstructured().ContinueOnError().NamespaceParam(ns).DefaultNamespace().
		FilenameParam(false, &resource.FilenameOptions{Filenames: s.filenames}).Flatten().Do().Infos()
	if err != nil {
		return nil, err
	}
	for _, info := range infos {
		u, ok := info.Object.(*unstructured.Unstructured)
		if !ok {
			return nil, fmt.Errorf("%s: not an object", info.Name)
		}
		labels := u.GetLabels()
		if s.lock != "" {
			if labels == nil {
				labels = map[string]string{}
			}
			labels[locksv1alpha1.FencedByLabel] = s.lock
			u.SetLabels(labels)
		} else if labels[locksv1alpha1.FencedByLabel] == "" {
			return nil, fmt.Errorf("%s %s has no %s label: pass --lock", u.GetKind(), u.GetName(), locksv1alpha1.FencedByLabel)
		}
		// Offline (stamp), the builder cannot tell namespaced kinds and sets no namespace; fenced
		// objects are all namespaced, since their lock is.
		if info.Mapping == nil && explicit && u.GetNamespace() == "" {
			u.SetNamespace(ns)
		}
		annotations := u.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[locksv1alpha1.TokenAnnotation] = tok.String()
		u.SetAnnotations(annotations)
	}
	return infos, nil
}

// noToken is the error of a stamp or apply without a token, with the command that gives it one,
// complete but for the file and as it would run here (the namespace named).
func (s *stampOptions) noToken(o *options) error {
	lock := s.lock
	if lock == "" {
		lock = "LOCK"
	}
	ns, _, err := o.objectNamespace()
	if err != nil {
		ns = "NAMESPACE"
	}
	return fmt.Errorf("no fencing token: pass --fencing-token, or run under the lock, which sets $FENCING_TOKEN: "+
		"kubectl fencedlock run %[1]s -n %[2]s -- kubectl fencedlock apply -f FILE --lock %[1]s", lock, ns)
}

func newStampCommand(o *options) *cobra.Command {
	var s stampOptions
	cmd := &cobra.Command{
		Use:   "stamp -f FILE [--lock LOCK] [--fencing-token TOKEN]",
		Short: "Print objects with the fence label and your fencing token set, for kubectl apply",
		Example: `  # Inside "kubectl fencedlock run", the token comes from $FENCING_TOKEN
  kubectl fencedlock run ledger -- sh -c \
    'kubectl fencedlock stamp -f ledger.yaml --lock ledger | kubectl apply -f -'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			infos, err := s.stamp(resource.NewLocalBuilder(), o)
			if err != nil {
				return err
			}
			p := &printers.YAMLPrinter{}
			for _, info := range infos {
				if err := p.PrintObj(info.Object, o.streams.Out); err != nil {
					return err
				}
			}
			return nil
		},
	}
	s.addFlags(cmd)
	return cmd
}

func newApplyCommand(o *options) *cobra.Command {
	var s stampOptions
	cmd := &cobra.Command{
		Use:   "apply -f FILE [--lock LOCK] [--fencing-token TOKEN]",
		Short: "Server-side apply objects as a fenced write with your fencing token",
		Long: `Stamp the objects with the fence label and your fencing token, then server-side apply them.
The fence refuses the write if the token is stale; the refusal is printed as the API server sent it.`,
		Example: `  kubectl fencedlock run ledger -- kubectl fencedlock apply -f ledger.yaml --lock ledger`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			infos, err := s.stamp(resource.NewBuilder(o.flags), o)
			if err != nil {
				return err
			}
			for _, info := range infos {
				data, err := runtime.Encode(unstructured.UnstructuredJSONScheme, info.Object)
				if err != nil {
					return err
				}
				_, err = resource.NewHelper(info.Client, info.Mapping).WithFieldManager("kubectl-fencedlock").
					Patch(info.Namespace, info.Name, types.ApplyPatchType, data, &metav1.PatchOptions{Force: new(true)})
				if err != nil {
					return fmt.Errorf("%s/%s: %w", info.Mapping.Resource.Resource, info.Name, err)
				}
				fmt.Fprintf(o.streams.Out, "%s/%s applied with token %s\n", info.Mapping.Resource.Resource, info.Name,
					info.Object.(*unstructured.Unstructured).GetAnnotations()[locksv1alpha1.TokenAnnotation])
			}
			return nil
		},
	}
	s.addFlags(cmd)
	return cmd
}
