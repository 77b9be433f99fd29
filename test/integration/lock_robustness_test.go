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
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lock"
	"github.com/fencedlock/fencedlock/pkg/token"
	"github.com/fencedlock/fencedlock/test/util"
)

// flakyLeases wraps the real Lease client of the test API server and makes scripted calls fail as
// an API server that is restarting or overloaded does. Each script entry is consumed by one call;
// a nil entry (or an exhausted script) passes the call through to the real client.
type flakyLeases struct {
	coordinationv1client.LeaseInterface

	mu sync.Mutex
	// lists and watches fail List and Watch calls before they reach the API server.
	lists, watches []error
	// updatesAfter fails Update calls after the real update was made: the write happened, but
	// its response was lost (an API server killed mid-request).
	updatesAfter []error
	// instead, when set, runs in place of the next Update (once) and its error is returned: the
	// write never reaches the API server.
	instead func() error
	// calls counts the calls that reached this wrapper, by verb.
	calls map[string]int
}

// errEndWatch, as a watch script entry, opens a watch that ends at once, as an API server
// shutting down ends its watches.
var errEndWatch = errors.New("end the watch at once")

func (f *flakyLeases) next(verb string, script *[]error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[verb]++
	if len(*script) == 0 {
		return nil
	}
	err := (*script)[0]
	*script = (*script)[1:]
	return err
}

func (f *flakyLeases) count(verb string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[verb]
}

func (f *flakyLeases) List(ctx context.Context, opts metav1.ListOptions) (*coordinationv1.LeaseList, error) {
	if err := f.next("list", &f.lists); err != nil {
		return nil, err
	}
	return f.LeaseInterface.List(ctx, opts)
}

func (f *flakyLeases) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	switch err := f.next("watch", &f.watches); {
	case errors.Is(err, errEndWatch):
		w := watch.NewFake()
		w.Stop()
		return w, nil
	case err != nil:
		return nil, err
	}
	return f.LeaseInterface.Watch(ctx, opts)
}

func (f *flakyLeases) Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error) {
	_ = f.next("get", new([]error)) // Get is never failed: it only advances the script
	return f.LeaseInterface.Get(ctx, name, opts)
}

func (f *flakyLeases) Update(ctx context.Context, l *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	f.mu.Lock()
	instead := f.instead
	f.instead = nil
	f.mu.Unlock()
	if instead != nil {
		return nil, instead()
	}
	out, err := f.LeaseInterface.Update(ctx, l, opts)
	if err != nil {
		_ = f.next("update", new([]error)) // the real error wins
		return out, err
	}
	if ferr := f.next("update", &f.updatesAfter); ferr != nil {
		return nil, ferr
	}
	return out, nil
}

// flakyGetter hands out one flakyLeases for every namespace: each test uses one namespace.
type flakyGetter struct{ f *flakyLeases }

func (g flakyGetter) Leases(ns string) coordinationv1client.LeaseInterface {
	g.f.mu.Lock()
	defer g.f.mu.Unlock()
	if g.f.LeaseInterface == nil {
		g.f.LeaseInterface = clientset.CoordinationV1().Leases(ns)
	}
	return g.f
}

var leasesResource = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}

// connRefused is what client-go returns while nothing listens on the API server's port.
func connRefused() error {
	return &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
}

var _ = Describe("Go client robustness", func() {
	Context("holder identities", func() {
		It("refuses identities reserved for pods, and empty ones, before any API call", func() {
			ns := kit.NewNamespace()
			kit.NewLock(ns, "reserved", util.LeaseSeconds(15))
			for _, id := range []string{"pod/x", locksv1alpha1.PodHolderIdentity("worker-0", "uid-1"), ""} {
				// New refuses it, so no Locker can acquire, wait or attach under it.
				f := &flakyLeases{}
				l, err := lock.New(flakyGetter{f}, ns, "reserved", lock.WithIdentity(id))
				Expect(err).To(HaveOccurred(), "New as %q", id)
				Expect(l).To(BeNil())
				Expect(f.calls).To(BeEmpty(), "API calls made with identity %q", id)
				if id == "" {
					Expect(err.Error()).To(ContainSubstring("identity must not be empty"))
				} else {
					Expect(err.Error()).To(ContainSubstring(
						`identity "` + id + `" is reserved for pods queued by the controller; choose another identity`))
				}
				Expect(errors.Is(err, lock.ErrInvalidIdentity)).To(BeTrue(), "%v", err)
				_, err = lock.NewForConfig(cfg, ns, "reserved", lock.WithIdentity(id))
				Expect(errors.Is(err, lock.ErrInvalidIdentity)).To(BeTrue(), "NewForConfig as %q: %v", id, err)
			}
			st := kit.LeaseState(ns, "reserved")
			Expect(st.Transitions).To(BeZero(), "a reserved identity was granted the lock")

			By("an identity that merely contains pod/ is fine")
			g, err := kit.Locker(ns, "reserved", "team/pod/x").TryAcquire(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(g.Release(ctx)).To(Succeed())
		})
	})

	Context("a restarting or overloaded API server", func() {
		It("Acquire resumes when its List and Watch fail with transient errors", func() {
			ns := kit.NewNamespace()
			kit.NewLock(ns, "flaky", util.LeaseSeconds(15))
			a, err := kit.Locker(ns, "flaky", "a").TryAcquire(ctx)
			Expect(err).NotTo(HaveOccurred())

			f := &flakyLeases{
				lists: []error{
					apierrors.NewServiceUnavailable("apiserver is shutting down"),
					apierrors.NewTooManyRequests("too many requests", 0),
					connRefused(),
				},
				watches: []error{
					apierrors.NewInternalError(errors.New("etcd leader changed")),
					errEndWatch, // then the re-list after the watch ended fails too
				},
			}
			f.lists = append(f.lists, nil, nil, apierrors.NewServerTimeout(leasesResource, "list", 1))
			got := make(chan *lock.Grant, 1)
			errs := make(chan error, 1)
			go func() {
				defer GinkgoRecover()
				g, err := util.NewLocker(flakyGetter{f}, ns, "flaky", lock.WithIdentity("b")).Acquire(ctx)
				if err != nil {
					errs <- err
					return
				}
				got <- g
			}()
			// The lock is held, so b waits on a watch once it got past the failures.
			Eventually(func(g Gomega) {
				select {
				case err := <-errs:
					Fail("Acquire failed on a transient error: " + err.Error())
				default:
				}
				g.Expect(f.count("watch")).To(BeNumerically(">=", 3))
			}, 20*time.Second, 10*time.Millisecond).Should(Succeed())
			Consistently(errs, "300ms").ShouldNot(Receive())
			Expect(a.Release(ctx)).To(Succeed())
			var b *lock.Grant
			select {
			case b = <-got:
			case err := <-errs:
				Fail("Acquire failed on a transient error: " + err.Error())
			case <-time.After(20 * time.Second):
				Fail("Acquire did not return")
			}
			Expect(b.Token()).To(BeNumerically(">", a.Token()))
			Expect(f.count("list")).To(BeNumerically(">=", 6))
			Expect(b.Release(ctx)).To(Succeed())
		})

		It("Acquire takes a grant whose write succeeded although its response was lost", func() {
			ns := kit.NewNamespace()
			kit.NewLock(ns, "lost-response", util.LeaseSeconds(15))
			f := &flakyLeases{
				updatesAfter: []error{apierrors.NewServerTimeout(leasesResource, "update", 1)},
			}
			before := kit.GetLease(ns, "lost-response")
			actx, acancel := context.WithTimeout(ctx, 10*time.Second)
			defer acancel()
			g, err := util.NewLocker(flakyGetter{f}, ns, "lost-response", lock.WithIdentity("c")).Acquire(actx)
			Expect(err).NotTo(HaveOccurred())
			Expect(f.count("update")).To(Equal(1), "granted again instead of recognizing its own grant")
			st := kit.LeaseState(ns, "lost-response")
			Expect(st.Holder).To(Equal("c"))
			Expect(st.Token).To(Equal(g.Token()))
			Expect(g.Token().String()).To(Equal(before.ResourceVersion))
			Expect(g.Renew(ctx)).To(Succeed())
			Expect(g.Release(ctx)).To(Succeed())
		})

		It("Acquire does not take as its own a grant another process of the same identity won", func() {
			ns := kit.NewNamespace()
			kit.NewLock(ns, "same-id", util.LeaseSeconds(15))
			var other *lock.Grant
			f := &flakyLeases{instead: func() error {
				// The other process's grant, conditioned on the same resourceVersion, lands first;
				// this process's write times out without reaching etcd.
				var err error
				other, err = kit.Locker(ns, "same-id", "c").TryAcquire(ctx)
				Expect(err).NotTo(HaveOccurred())
				return apierrors.NewServerTimeout(leasesResource, "update", 1)
			}}
			actx, acancel := context.WithTimeout(ctx, 10*time.Second)
			defer acancel()
			got := make(chan *lock.Grant, 1)
			go func() {
				defer GinkgoRecover()
				g, err := util.NewLocker(flakyGetter{f}, ns, "same-id", lock.WithIdentity("c")).Acquire(actx)
				Expect(err).NotTo(HaveOccurred())
				got <- g
			}()
			Consistently(got, "1s").ShouldNot(Receive(), "the other process holds the lock with its token")
			Expect(other.Release(ctx)).To(Succeed())
			var g *lock.Grant
			Eventually(got, 5*time.Second).Should(Receive(&g))
			Expect(g.Token()).To(BeNumerically(">", other.Token()), "a grant of its own, with a higher token")
		})

		It("Acquire returns at once on errors that do not heal", func() {
			ns := kit.NewNamespace()
			kit.NewLock(ns, "denied", util.LeaseSeconds(15))
			for _, err := range []error{
				apierrors.NewForbidden(leasesResource, "", errors.New(`user "x" cannot list leases`)),
				apierrors.NewBadRequest("bad field selector"),
			} {
				f := &flakyLeases{lists: []error{err}}
				start := time.Now()
				_, got := util.NewLocker(flakyGetter{f}, ns, "denied", lock.WithIdentity("d")).Acquire(ctx)
				Expect(got).To(HaveOccurred())
				Expect(strings.Contains(got.Error(), err.Error())).To(BeTrue(), "%v", got)
				Expect(time.Since(start)).To(BeNumerically("<", time.Second))
				Expect(f.count("list")).To(Equal(1))
			}
		})

		It("Acquire gives up when its context ends while the API server is down, saying why", func() {
			ns := kit.NewNamespace()
			refused := make([]error, 1000)
			for i := range refused {
				refused[i] = connRefused()
			}
			f := &flakyLeases{lists: refused}
			actx, acancel := context.WithTimeout(ctx, time.Second)
			defer acancel()
			_, err := util.NewLocker(flakyGetter{f}, ns, "down", lock.WithIdentity("e")).Acquire(actx)
			Expect(errors.Is(err, context.DeadlineExceeded)).To(BeTrue(), "%v", err)
			Expect(err.Error()).To(ContainSubstring("connection refused"))
			// A bounded backoff: a few attempts in a second, not a busy loop.
			Expect(f.count("list")).To(And(BeNumerically(">=", 2), BeNumerically("<=", 15)))
		})
	})

	Context("KeepAlive", func() {
		It("keeps a grant on a Lease without leaseDurationSeconds instead of panicking", func() {
			ns := kit.NewNamespace()
			// A bare Lease nobody reconciles (no FencedLock, no managed-by label), as a third-party
			// writer may leave it: a token, no duration.
			bare := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bare",
				Annotations: map[string]string{locksv1alpha1.TokenAnnotation: "1"}}}
			_, err := clientset.CoordinationV1().Leases(ns).Create(ctx, bare, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			g, err := kit.Locker(ns, "bare", "k").TryAcquire(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(g.Duration()).To(BeNumerically(">", 0))

			renewTime := func() time.Time {
				l, err := clientset.CoordinationV1().Leases(ns).Get(ctx, "bare", metav1.GetOptions{})
				Expect(err).NotTo(HaveOccurred())
				return l.Spec.RenewTime.Time
			}
			first := renewTime()
			renewing := util.KeepAlive(g, 0)
			Eventually(renewTime, 5*time.Second, 50*time.Millisecond).Should(BeTemporally(">", first))
			Consistently(g.Lost(), "1s").ShouldNot(BeClosed())
			renewing.Stop()
			Expect(g.Release(ctx)).To(Succeed())
		})
	})
})

// exampleScript is the path of the shell example of docs/protocol.md.
func exampleScript() string { return filepath.Join(util.RepoRoot(), util.ExampleScript) }

// shellUser is a user with ordinary RBAC in ns (Leases and ConfigMaps, nothing of fencedlock's
// API), as a third-party client runs, and a kubeconfig for it.
func shellUser(ns, name string) string {
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: util.ClientLeaseVerbs},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"}},
	}}
	ExpectWithOffset(1, k8sClient.Create(ctx, role)).To(Succeed())
	ExpectWithOffset(1, k8sClient.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: name}}})).To(Succeed())
	u, err := testEnv.AddUser(envtest.User{Name: name}, nil)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	kc, err := u.KubeConfig()
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	path := filepath.Join(GinkgoT().TempDir(), name+".kubeconfig")
	ExpectWithOffset(1, os.WriteFile(path, kc, 0o600)).To(Succeed())
	return path
}

var _ = Describe("docs/protocol.md", func() {
	It("the shell example of docs/protocol.md (docs/examples/fencedlock.sh) runs as written", func() {
		for _, tool := range []string{"bash", "jq"} {
			if _, err := exec.LookPath(tool); err != nil {
				Skip(tool + " is not installed")
			}
		}
		assets, err := util.Assets()
		Expect(err).NotTo(HaveOccurred())
		ns := kit.NewNamespace()
		kit.NewLock(ns, "ledger", util.LeaseSeconds(15))
		stamp := kit.GetLease(ns, "ledger").Annotations[locksv1alpha1.TokenAnnotation]
		kubeconfig := shellUser(ns, "shell-"+ns)

		cmd := exec.CommandContext(ctx, "bash", exampleScript())
		cmd.Env = append(os.Environ(), "PATH="+assets+string(os.PathListSeparator)+os.Getenv("PATH"),
			"KUBECONFIG="+kubeconfig, "HOME="+GinkgoT().TempDir(), "NS="+ns, "LOCK=ledger", "ME=shell/example")
		out, err := cmd.CombinedOutput()
		GinkgoWriter.Printf("%s\n", out)
		Expect(err).NotTo(HaveOccurred(), "the example failed:\n%s", out)

		_, after, ok := strings.Cut(string(out), "acquired ledger as shell/example with token ")
		Expect(ok).To(BeTrue(), "%s", out)
		tok, err := token.Parse(strings.Fields(after)[0])
		Expect(err).NotTo(HaveOccurred())
		first, err := token.Parse(stamp)
		Expect(err).NotTo(HaveOccurred())
		Expect(tok).To(BeNumerically(">", first))

		By("the Lease went through grant, renew and release, and keeps the token")
		st := kit.LeaseState(ns, "ledger")
		Expect(st.Held()).To(BeFalse())
		Expect(st.Token).To(Equal(tok))
		Expect(st.Transitions).To(Equal(int32(1)))
		Expect(st.RenewTime.After(st.AcquireTime.Time)).To(BeTrue(), "the renewal did not move renewTime on")

		By("the fenced writes were admitted and recorded; the stamped object was deleted")
		cm := &corev1.ConfigMap{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ledger"}, cm)).To(Succeed())
		Expect(cm.Data).To(HaveKeyWithValue("balance", "42"))
		Expect(cm.Annotations).To(HaveKeyWithValue(locksv1alpha1.RecordedTokenAnnotation, tok.String()))
		Expect(cm.Annotations).NotTo(HaveKey(locksv1alpha1.TokenAnnotation))
		err = k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "scratch"}, &corev1.ConfigMap{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)

		By("a grant that keeps the old token is refused as the document shows")
		l := kit.GetLease(ns, "ledger")
		l.Spec.HolderIdentity = new("shell/example")
		l.ManagedFields = nil
		l.APIVersion, l.Kind = "coordination.k8s.io/v1", "Lease"
		bad, err := json.Marshal(l)
		Expect(err).NotTo(HaveOccurred())
		replace := exec.CommandContext(ctx, filepath.Join(assets, "kubectl"), "replace", "-f", "-")
		replace.Env = cmd.Env
		replace.Stdin = strings.NewReader(string(bad))
		out, err = replace.CombinedOutput()
		Expect(err).To(HaveOccurred())
		Expect(string(out)).To(And(ContainSubstring(`leases.coordination.k8s.io "ledger" is forbidden`),
			ContainSubstring("ValidatingAdmissionPolicy 'fencedlock-lease-protocol' with binding 'fencedlock-lease-protocol' denied request"),
			ContainSubstring("a grant must set annotation fencedlock.io/token to the resourceVersion it is conditioned on")))
	})
})
