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

package webhook

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
)

// PodGatePath is where the pod gate is served.
const PodGatePath = "/mutate-pods"

// The gate sees only pods that ask for a lock (label fencedlock.io/lock or annotation
// fencedlock.io/locks); every other pod of the cluster is created without calling it.
// +kubebuilder:webhook:path=/mutate-pods,mutating=true,failurePolicy=fail,sideEffects=None,groups="",resources=pods,verbs=create,versions=v1,name=gate.locks.fencedlock.io,admissionReviewVersions=v1,timeoutSeconds=5,reinvocationPolicy=Never,patch=`{"matchConditions":[{"name":"asks-for-a-lock","expression":"(has(object.metadata.labels) && 'fencedlock.io/lock' in object.metadata.labels) || (has(object.metadata.annotations) && 'fencedlock.io/locks' in object.metadata.annotations)"}]}`

// PodGate holds pods that ask for locks behind a scheduling gate until the controller
// grants them the lock and sets their token.
type PodGate struct {
	Clock clock.PassiveClock
}

var _ admission.Defaulter[*corev1.Pod] = &PodGate{}

// Default implements admission.Defaulter.
func (g *PodGate) Default(ctx context.Context, pod *corev1.Pod) error {
	ns := pod.Namespace
	if req, err := admission.RequestFromContext(ctx); ns == "" && err == nil {
		ns = req.Namespace // a pod created without metadata.namespace: the request's
	}
	return gatePod(pod, ns, g.Clock.Now())
}

// gatePod is the gate's decision: gate the pod, stamp when it joined the queue, and drop any token
// it brought along (only the controller grants tokens). A pod that asks for its locks through the
// annotation alone gets label fencedlock.io/lock set to its first lock, so that the manager's
// label-selected cache and the pod-grant policy see it (the union of label and annotation is
// unchanged). ns is the pod's namespace, for the error messages.
func gatePod(pod *corev1.Pod, ns string, now time.Time) error {
	locks, err := locksv1alpha1.ParsePodLocksIn(pod, ns)
	if err != nil {
		return err
	}
	if len(locks) == 0 {
		return nil
	}
	if _, ok := pod.Labels[locksv1alpha1.LockLabel]; !ok {
		if pod.Labels == nil {
			pod.Labels = map[string]string{}
		}
		pod.Labels[locksv1alpha1.LockLabel] = locks[0]
	}
	if !locksv1alpha1.HasLockGate(pod) {
		pod.Spec.SchedulingGates = append(pod.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: locksv1alpha1.SchedulingGate})
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	delete(pod.Annotations, locksv1alpha1.TokenAnnotation)
	for k := range pod.Annotations {
		if strings.HasPrefix(k, locksv1alpha1.LockTokenAnnotationPrefix) {
			delete(pod.Annotations, k)
		}
	}
	pod.Annotations[locksv1alpha1.EnqueuedAnnotation] = now.UTC().Format(time.RFC3339Nano)
	return nil
}
