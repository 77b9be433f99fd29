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
	"fmt"
	"net/http"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
)

// SetupWithManager registers all of fencedlock's webhooks on the manager's webhook server.
func SetupWithManager(mgr ctrl.Manager, clk clock.PassiveClock) error {
	if err := SetupFenceWithManager(mgr); err != nil {
		return err
	}
	return SetupPodGateWithManager(mgr, clk)
}

// SetupFenceWithManager registers the fence on the manager's webhook server.
func SetupFenceWithManager(mgr ctrl.Manager) error {
	md, err := metadata.NewForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("creating the fence's metadata client: %w", err)
	}
	f := &Fence{Cache: mgr.GetCache(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("fencedlock-fence"),
		Metadata: md}
	// Informers start on every replica, not only the leader, so the fence never reads cold.
	ctx := context.Background()
	for _, obj := range []client.Object{&locksv1alpha1.FencedLock{}, &coordinationv1.Lease{}} {
		if _, err := mgr.GetCache().GetInformer(ctx, obj); err != nil {
			return fmt.Errorf("starting informer for the fence: %w", err)
		}
	}
	mgr.GetWebhookServer().Register(FencePath, fenceHandler(f))
	return nil
}

// SetupPodGateWithManager registers the pod gate on the manager's webhook server.
func SetupPodGateWithManager(mgr ctrl.Manager, clk clock.PassiveClock) error {
	return ctrl.NewWebhookManagedBy(mgr, &corev1.Pod{}).
		WithDefaulter(&PodGate{Clock: clk}).
		WithDefaulterCustomPath(PodGatePath).
		Complete()
}

// fenceHandler serves the fence's AdmissionReviews.
func fenceHandler(f *Fence) http.Handler { return f }
