// Package webhook holds fencedlock's admission webhooks: the fence, which refuses writes to fenced
// objects made with stale fencing tokens.
package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
)

// FencePath is where the fence is served.
const FencePath = "/fence"

// The fence matches every namespaced resource (not subresources: a status write carries no
// annotations) but only objects labelled fencedlock.io/fenced-by, so unrelated writes never reach it.
// +kubebuilder:webhook:path=/fence,mutating=false,failurePolicy=fail,sideEffects=None,groups=*,resources=*,verbs=create;update;delete,versions=*,name=fence.locks.fencedlock.io,admissionReviewVersions=v1,timeoutSeconds=5,matchPolicy=Equivalent,patch=`{"objectSelector":{"matchExpressions":[{"key":"fencedlock.io/fenced-by","operator":"Exists"}]}}`

// +kubebuilder:rbac:groups=locks.fencedlock.io,resources=fencedlocks,verbs=get;list;watch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Fence admits writes to fenced objects only with a current fencing token.
type Fence struct {
	// Cache serves FencedLocks and Leases on the hot path: no API call per admission.
	Cache client.Reader
	// APIReader reads live: strict locks, confirmation of tokens above the cached one, and the
	// namespace phase before refusing a DELETE.
	APIReader client.Reader
	Recorder  events.EventRecorder
}

var _ admission.Handler = &Fence{}

// SetupWithManager registers all of fencedlock's webhooks on the manager's webhook server.
func SetupWithManager(mgr ctrl.Manager, clk clock.PassiveClock) error {
	if err := SetupFenceWithManager(mgr); err != nil {
		return err
	}
	return SetupPodGateWithManager(mgr, clk)
}

// SetupFenceWithManager registers the fence on the manager's webhook server.
func SetupFenceWithManager(mgr ctrl.Manager) error {
	f := &Fence{Cache: mgr.GetCache(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("fencedlock-fence")}
	// Informers start on every replica, not only the leader, so the fence never reads cold.
	ctx := context.Background()
	for _, obj := range []client.Object{&locksv1alpha1.FencedLock{}, &coordinationv1.Lease{}} {
		if _, err := mgr.GetCache().GetInformer(ctx, obj); err != nil {
			return fmt.Errorf("starting informer for the fence: %w", err)
		}
	}
	mgr.GetWebhookServer().Register(FencePath, &admission.Webhook{Handler: f})
	return nil
}

// Handle implements admission.Handler.
func (f *Fence) Handle(ctx context.Context, ar admission.Request) admission.Response {
	req, err := requestOf(ar)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	name, final := Target(req)
	var lk Lock
	d := Decision{}
	if final != nil {
		d = *final
	} else {
		lk, err = f.lock(ctx, ar.Namespace, name, false)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
		for d = Decide(req, lk); d.NeedLive || d.NeedNamespace; d = Decide(req, lk) {
			if d.NeedLive {
				fenceLiveReads.WithLabelValues("confirm").Inc()
				if lk, err = f.lock(ctx, ar.Namespace, name, true); err != nil {
					return admission.Errored(http.StatusInternalServerError, err)
				}
			}
			if d.NeedNamespace {
				fenceLiveReads.WithLabelValues("namespace").Inc()
				if req.NamespaceTerminating, err = f.terminating(ctx, ar.Namespace); err != nil {
					return admission.Errored(http.StatusInternalServerError, err)
				}
			}
		}
	}
	fenceDecisions.WithLabelValues(decisionLabel(d), d.Reason).Inc()
	if d.Allowed {
		return admission.Allowed("")
	}
	logf.FromContext(ctx).Info("Denied fenced write", "object", req.Object, "operation", req.Operation,
		"user", req.User.Username, "reason", d.Reason)
	if lk.Found {
		fl := &locksv1alpha1.FencedLock{ObjectMeta: metav1.ObjectMeta{Namespace: ar.Namespace, Name: name}}
		fl.SetGroupVersionKind(locksv1alpha1.GroupVersion.WithKind("FencedLock"))
		f.Recorder.Eventf(fl, nil, corev1.EventTypeWarning, d.Reason, "DenyWrite", "Denied %s by %s: %s",
			req.Operation, req.User.Username, d.Message)
	}
	return admission.Denied(d.Message)
}

// lock gathers what the fence knows of lock namespace/name: from the cache, or live (a quorum
// read) when live is set or the lock is Strict.
func (f *Fence) lock(ctx context.Context, namespace, name string, live bool) (Lock, error) {
	lk := Lock{Key: namespace + "/" + name}
	key := client.ObjectKey{Namespace: namespace, Name: name}
	var fl locksv1alpha1.FencedLock
	if err := f.Cache.Get(ctx, key, &fl); err != nil {
		if apierrors.IsNotFound(err) {
			return lk, nil
		}
		return lk, fmt.Errorf("reading FencedLock %s: %w", lk.Key, err)
	}
	lk.Found, lk.Spec = true, fl.Spec.Fence
	reader := f.Cache
	if live || fl.Spec.Fence.Mode == locksv1alpha1.FenceModeStrict {
		if !live {
			fenceLiveReads.WithLabelValues("strict").Inc()
		}
		reader, lk.Live = f.APIReader, true
	}
	var l coordinationv1.Lease
	if err := reader.Get(ctx, key, &l); err != nil {
		if apierrors.IsNotFound(err) {
			return lk, nil
		}
		return lk, fmt.Errorf("reading Lease %s: %w", lk.Key, err)
	}
	st, err := lease.Read(&l)
	if err != nil {
		return lk, nil // an unreadable token: LeaseFound stays false, so the fence refuses
	}
	lk.Lease, lk.LeaseFound = st, true
	return lk, nil
}

func (f *Fence) terminating(ctx context.Context, namespace string) (*bool, error) {
	var ns corev1.Namespace
	if err := f.APIReader.Get(ctx, client.ObjectKey{Name: namespace}, &ns); err != nil {
		if apierrors.IsNotFound(err) {
			return new(true), nil
		}
		return nil, fmt.Errorf("reading namespace %s: %w", namespace, err)
	}
	return new(!ns.DeletionTimestamp.IsZero() || ns.Status.Phase == corev1.NamespaceTerminating), nil
}

// requestOf extracts the fence's view of an admission request: metadata only.
func requestOf(ar admission.Request) (Request, error) {
	req := Request{
		Operation: ar.Operation,
		Object:    fmt.Sprintf("%s %s/%s", ar.Resource.Resource, ar.Namespace, ar.Name),
		User:      ar.UserInfo,
	}
	var err error
	if req.Old, err = metaOf(ar.OldObject.Raw); err != nil {
		return req, fmt.Errorf("decoding oldObject: %w", err)
	}
	if ar.Operation != admissionv1.Delete {
		if req.New, err = metaOf(ar.Object.Raw); err != nil {
			return req, fmt.Errorf("decoding object: %w", err)
		}
		if req.New == nil {
			return req, fmt.Errorf("%s request without an object", ar.Operation)
		}
		if ar.Name == "" { // generateName: the name is not known yet
			req.Object = fmt.Sprintf("%s %s/%s*", ar.Resource.Resource, ar.Namespace, req.New.GenerateName)
		}
	}
	return req, nil
}

func metaOf(raw []byte) (*metav1.ObjectMeta, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var obj metav1.PartialObjectMetadata
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	return &obj.ObjectMeta, nil
}

func decisionLabel(d Decision) string {
	if d.Allowed {
		return "admitted"
	}
	return "denied"
}
