//go:build e2e

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

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/lock"
	"github.com/fencedlock/fencedlock/test/lincheck"
	"github.com/fencedlock/fencedlock/test/util"
)

const chaosImage = "localhost/fencedlock/chaos-worker:e2e"

// campaign is one fault-injection run on two locks and a semaphore of two permits: holders
// (Go-client processes queued for one lock or for the semaphore, pods asking for one lock or for
// both) acquire, write each lock's fenced ConfigMap and fenced custom resource, read back and
// release, while faults are injected (paused holders among them, of locks and permits); every
// operation is recorded and the history is checked for linearizability, one partition per lock,
// the semaphore's by lincheck's semaphore model.
type campaign struct {
	ns, dir   string
	workerBin string
	lease     time.Duration
	locks     []string // each fences <lock>-cm and <lock>-sb
	// sem is a semaphore of semPermits permits beside the locks, fencing <sem>-cm and <sem>-sb;
	// Go clients only (CHAOS_SEM_CLIENTS at a time, more than its permits, so that they queue).
	sem        string
	semPermits int

	mu       sync.Mutex
	history  []lincheck.Op // the campaign's own operations (setup, stamps)
	faults   map[string]int
	leaseDel map[string]time.Time // each Lease's last deletion, the call time of the stamp that follows
	procs    []*exec.Cmd
	leaseBad []string // violations seen on the Leases themselves
	// createErrs are the errors creating the queued pods (the pod gate webhook's admissions).
	createErrs []string
}

func (c *campaign) record(lk string, op lincheck.Op) {
	c.mu.Lock()
	defer c.mu.Unlock()
	op.Lock = c.ns + "/" + lk
	if lk == c.sem {
		op.Permits = c.semPermits // the checker holds the semaphore's ops to its rule
	}
	c.history = append(c.history, op)
}

func (c *campaign) fault(kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.faults[kind]++
	fmt.Fprintf(GinkgoWriter, "[%s] fault: %s\n", time.Now().Format("15:04:05.000"), kind)
}

var _ = Describe("Fault injection", Ordered, func() {
	var c *campaign

	BeforeAll(func() {
		c = newCampaign()
		By("rolling the manager's replicas out with the crash-after-pod-grant failpoint armed")
		setFailpoint(0.3)
		DeferCleanup(func() {
			setFailpoint(0)
			// The next spec starts with both replicas serving, whatever the faults left.
			waitWebhooksServing()
			waitLeader()
		})
	})

	It("never admits a write with a superseded token, and the history is linearizable", func() {
		duration := envDuration("CHAOS_DURATION", 75*time.Second)
		c.run(duration, func() {
			// Nobody supervises the manager: the kubelet restarts a crashed replica, the Deployment
			// replaces a deleted one.
			cctx, stop := context.WithTimeout(ctx, duration)
			defer stop()
			c.injectFaults(cctx)
			By("waiting for the holders to finish and the cluster to settle")
			run("hack/cluster-up.sh", "--node") // whatever a fault left stopped
			setFailpoint(0)                     // disarmed, so the queue drains
		})
		Expect(c.faults).To(HaveLen(len(faultKinds)), "every kind of fault was injected")
	})
})

// chaosWorker builds the holder process and its image once per suite.
var chaosWorker = sync.OnceValue(func() string {
	By("building the holder process and its image")
	bin := filepath.Join(clusterDir, "chaos-bin")
	Expect(os.MkdirAll(bin, 0o755)).To(Succeed())
	build := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(bin, "worker"), "./test/chaos/worker")
	build.Dir, build.Env = util.RepoRoot(), append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), string(out))
	run("hack/mkimage.sh", filepath.Join(bin, "worker"), chaosImage, filepath.Join(bin, "worker.tar"))
	run("hack/cluster-load-image.sh", filepath.Join(bin, "worker.tar"))
	return filepath.Join(bin, "worker")
})

// newCampaign prepares a campaign in a new namespace: the holder process and image, the custom
// resource kind and the pods' permissions.
func newCampaign() *campaign {
	c := &campaign{ns: kit.NewNamespace(), lease: 2 * time.Second, locks: []string{"chaos", "chaos2"},
		sem: "chaos-sem", semPermits: 2, faults: map[string]int{}, leaseDel: map[string]time.Time{}}
	c.dir = filepath.Join(clusterDir, "chaos", c.ns)
	Expect(os.MkdirAll(c.dir, 0o777)).To(Succeed())
	Expect(os.Chmod(c.dir, 0o777)).To(Succeed())
	c.workerBin = chaosWorker()

	By("installing the custom resource kind and the pods' permissions")
	run("kubectl", "apply", "--server-side", "-f", "test/integration/testdata/crds/settlementbatches.yaml")
	run("kubectl", "wait", "--for=condition=Established", "crd/settlementbatches.example.fencedlock.io")
	Expect(k8sClient.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: "writer"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"", "example.fencedlock.io"},
			Resources: []string{"configmaps", "settlementbatches"}, Verbs: []string{"get", "patch"}}}})).To(Succeed())
	Expect(k8sClient.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: "writer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "writer"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "default", Namespace: c.ns}}})).To(Succeed())
	return c
}

// run runs the campaign's holders while disrupt runs: Go-client processes (CHAOS_CLIENTS, in
// rounds of first, then 15 s, until disrupt has returned; each queued for one of the locks) and
// pods queued for one lock or for both. Then it waits for the holders and the queues, checks the
// history for linearizability (failing the spec on a violation) and returns it.
func (c *campaign) run(first time.Duration, disrupt func()) []lincheck.Op {
	stops := make([]func(), 0, len(c.locks)+1)
	for _, lk := range append(slices.Clone(c.locks), c.sem) {
		// Strict: the lock's current token is read from etcd, so rule (c) is exact and the model's
		// "no superseded token is ever accepted" holds without a cache window.
		spec := []func(*locksv1alpha1.FencedLock){util.LeaseSeconds(int32(c.lease / time.Second)),
			util.FenceMode(locksv1alpha1.FenceModeStrict)}
		if lk == c.sem {
			spec = append(spec, util.Permits(int32(c.semPermits)))
		}
		kit.NewLock(c.ns, lk, spec...)
		c.setup(lk)
		stops = append(stops, c.watchLease(lk))
	}

	pctx, stopPods := context.WithCancel(ctx)
	defer stopPods()
	podsDone := make(chan struct{})
	go func() { defer GinkgoRecover(); defer close(podsDone); c.createPods(pctx) }()
	disrupted := make(chan struct{})
	go func() { defer GinkgoRecover(); defer close(disrupted); disrupt() }()
	clients, semClients := envInt("CHAOS_CLIENTS", 4), envInt("CHAOS_SEM_CLIENTS", 3)
	for round, d := 0, first; ; round, d = round+1, 15*time.Second {
		procs := make([]*exec.Cmd, 0, clients+semClients)
		for i := range clients {
			procs = append(procs, c.startClient(round*clients+i+1, d))
		}
		for i := range semClients { // ids apart from the locks' clients
			procs = append(procs, c.startSemClient(5000+round*semClients+i+1, d))
		}
		for _, p := range procs {
			_ = p.Wait()
		}
		select {
		case <-disrupted:
		default:
			continue
		}
		break
	}
	stopPods()
	<-podsDone
	for _, p := range c.procs {
		_ = p.Process.Signal(syscall.SIGCONT)
		_ = p.Wait()
	}
	c.drainPods()
	for _, stop := range stops {
		stop()
	}
	c.checkPods()

	By("checking the history for linearizability")
	h := c.collect()
	res, err := lincheck.Check(h, 5*time.Minute)
	c.summary(h, res, err)
	if err != nil {
		_ = lincheck.SaveHistory(filepath.Join(c.dir, "history.jsonl"), h)
		_ = lincheck.SaveVisualization(res, filepath.Join(c.dir, "history.html"))
		Fail(fmt.Sprintf("history is not linearizable (saved to %s/history.{jsonl,html}): %v", c.dir, err))
	}
	Expect(c.leaseBad).To(BeEmpty(), "violations on the Leases themselves")
	return h
}

var faultKinds = []string{"pause-holder", "kill-manager", "apiserver-restart", "etcd-restart", "webhook-down", "lease-delete"}

func envDuration(k string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(k)); err == nil {
		return d
	}
	return def
}

func envInt(k string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil {
		return v
	}
	return def
}

func componentPID(name string) int {
	b, _ := os.ReadFile(filepath.Join(clusterDir, name+".pid"))
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// setup creates the two objects lock lk fences, <lk>-cm and <lk>-sb, under a first grant.
func (c *campaign) setup(lk string) {
	var g *lock.Grant
	Eventually(func() error {
		var err error
		call := time.Now().UnixNano()
		g, err = kit.Locker(c.ns, lk, "setup").TryAcquire(ctx)
		if err == nil {
			c.record(lk, lincheck.Op{Client: 0, Kind: lincheck.Acquire, Token: uint64(g.Token()), Outcome: lincheck.OK,
				Call: call, Return: time.Now().UnixNano()})
		}
		return err
	}, time.Minute, 100*time.Millisecond).Should(Succeed())
	// Creating the custom object may wait out the API server's 503s for a kind just Established,
	// longer than the lock's lease on a loaded node: the grant must outlive it. Release stops it.
	util.KeepAlive(g, 0)
	meta := metav1.ObjectMeta{Namespace: c.ns, Labels: map[string]string{locksv1alpha1.FencedByLabel: lk},
		Annotations: map[string]string{locksv1alpha1.TokenAnnotation: g.Token().String()}}
	cm := &corev1.ConfigMap{ObjectMeta: *meta.DeepCopy(), Data: map[string]string{"v": "setup"}}
	cm.Name = lk + "-cm"
	call := time.Now().UnixNano()
	Expect(k8sClient.Create(ctx, cm)).To(Succeed())
	c.record(lk, lincheck.Op{Kind: lincheck.Write, Object: "configmaps/" + c.ns + "/" + cm.Name, Token: uint64(g.Token()), Value: "setup",
		Outcome: lincheck.OK, Call: call, Return: time.Now().UnixNano()})
	sb := &unstructured.Unstructured{}
	sb.SetAPIVersion("example.fencedlock.io/v1")
	sb.SetKind("SettlementBatch")
	sb.SetName(lk + "-sb")
	sb.SetNamespace(c.ns)
	sb.SetLabels(meta.Labels)
	sb.SetAnnotations(meta.Annotations)
	Expect(unstructured.SetNestedField(sb.Object, "setup", "spec", "v")).To(Succeed())
	// Right after the kind is Established, the API server may still answer 503 for it.
	Eventually(func() error {
		call = time.Now().UnixNano()
		return k8sClient.Create(ctx, sb.DeepCopy())
	}, time.Minute, 200*time.Millisecond).Should(Succeed())
	c.record(lk, lincheck.Op{Kind: lincheck.Write, Object: "settlementbatches/" + c.ns + "/" + sb.GetName(), Token: uint64(g.Token()), Value: "setup",
		Outcome: lincheck.OK, Call: call, Return: time.Now().UnixNano()})
	call = time.Now().UnixNano()
	Expect(g.Release(ctx)).To(Succeed())
	// On a semaphore the release frees a permit the checker would otherwise count as held.
	c.record(lk, lincheck.Op{Kind: lincheck.Release, Token: uint64(g.Token()), Outcome: lincheck.OK, Call: call,
		Return: time.Now().UnixNano()})
}

// watchLease follows lock lk's Lease through API server and etcd restarts: a holder never
// appears without a token, the token never goes down, and a recreated Lease's stamp is recorded.
func (c *campaign) watchLease(lk string) (stop func()) {
	wctx, cancel := context.WithCancel(ctx)
	leases := clientset.CoordinationV1().Leases(c.ns)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var uid string
		var last uint64
		for wctx.Err() == nil {
			l, err := leases.Get(wctx, lk, metav1.GetOptions{})
			if err != nil {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			rw, err := watchtools.NewRetryWatcherWithContext(wctx, l.ResourceVersion, &cache.ListWatch{
				WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
					o.FieldSelector = "metadata.name=" + lk
					return leases.Watch(ctx, o)
				}})
			if err != nil {
				continue
			}
			bad := func(msg string) {
				c.mu.Lock()
				defer c.mu.Unlock()
				c.leaseBad = append(c.leaseBad, lk+": "+msg)
			}
			check := func(l *coordinationv1.Lease) {
				st, err := lease.Read(l)
				switch {
				case err != nil:
					bad(err.Error())
				case st.Held() && !st.Initialized():
					bad(fmt.Sprintf("holder %s without a token at %s", st.Holder, l.ResourceVersion))
				case st.Initialized() && uint64(st.Token) < last:
					bad(fmt.Sprintf("token went down from %d to %s", last, st.Token))
				case len(st.Permits) > st.Limit:
					bad(fmt.Sprintf("%d permits held (%v), above the %d it admits, at %s", len(st.Permits), st.Holders(),
						st.Limit, l.ResourceVersion))
				}
				for _, p := range st.Permits {
					if p.Token > st.Token {
						bad(fmt.Sprintf("permit %d of %s holds token %s, above the last issued %s", p.Number, p.Holder, p.Token,
							st.Token))
					}
				}
				if st.Initialized() && !st.Held() && string(l.UID) != uid && uid != "" {
					// A recreated Lease was stamped: its token supersedes every earlier one. Seen
					// only once already granted (the observer's watch restarted in between), the
					// Lease's token is the grant's, not the stamp's: the grant's own acquire op
					// records it, and recording it as a stamp too would be a false history.
					c.mu.Lock()
					call := c.leaseDel[lk]
					c.mu.Unlock()
					c.record(lk, lincheck.Op{Kind: lincheck.Stamp, Token: uint64(st.Token), Outcome: lincheck.OK,
						Call: call.UnixNano(), Return: time.Now().UnixNano(), Note: "Lease recreated"})
				}
				if st.Initialized() {
					uid, last = string(l.UID), max(last, uint64(st.Token))
				}
			}
			check(l)
			for ev := range rw.ResultChan() {
				if l, ok := ev.Object.(*coordinationv1.Lease); ok && ev.Type != watch.Deleted {
					check(l)
				}
			}
			rw.Stop()
		}
	}()
	return func() { cancel(); <-done }
}

// startClient starts Go-client process id, queued for one of the locks in turn.
func (c *campaign) startClient(id int, duration time.Duration) *exec.Cmd {
	return c.startWorker(id, duration, "--lock", c.locks[(id-1)%len(c.locks)])
}

// startSemClient starts Go-client process id on the semaphore.
func (c *campaign) startSemClient(id int, duration time.Duration) *exec.Cmd {
	return c.startWorker(id, duration, "--lock", c.sem, "--permits", strconv.Itoa(c.semPermits))
}

// startWorker starts Go-client process id of the chaos worker, asking as lockArgs say.
func (c *campaign) startWorker(id int, duration time.Duration, lockArgs ...string) *exec.Cmd {
	args := append([]string{"--kubeconfig", filepath.Join(clusterDir, "admin.kubeconfig"), "--namespace", c.ns}, lockArgs...)
	cmd := exec.Command(c.workerBin, append(args,
		"--id", strconv.Itoa(id), "--history", filepath.Join(c.dir, fmt.Sprintf("client-%d.jsonl", id)),
		"--duration", duration.String())...)
	cmd.Stdout, cmd.Stderr = GinkgoWriter, GinkgoWriter
	Expect(cmd.Start()).To(Succeed())
	c.mu.Lock()
	c.procs = append(c.procs, cmd)
	c.mu.Unlock()
	return cmd
}

// createPods keeps pods queued, at most CHAOS_MAX_QUEUED (3) at a time; each writes once with
// each token it was granted. They take turns: one lock by label (the first, then the second), then
// both by annotation (in one order, then the other), so multi-lock pods queue beside single-lock
// pods and Go clients. A bounded queue bounds the pod acquisitions pending at once, which the
// linearizability check must order: every kill of the leader leaves the queue unserved until its
// leader-election Lease expires, and an unbounded queue made the check time out.
func (c *campaign) createPods(cctx context.Context) {
	maxQueued := envInt("CHAOS_MAX_QUEUED", 3)
	for i := 0; cctx.Err() == nil; i++ {
		if n, err := c.queued(cctx); err != nil || n >= maxQueued {
			i--
			select {
			case <-cctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
			continue
		}
		name := fmt.Sprintf("holder-%03d", i)
		pod := c.holderPod(name, i, time.Now())
		if err := k8sClient.Create(cctx, pod); err != nil && cctx.Err() == nil {
			fmt.Fprintf(GinkgoWriter, "creating pod %s: %v\n", name, err) // e.g. the API server is restarting
			c.mu.Lock()
			c.createErrs = append(c.createErrs, err.Error())
			c.mu.Unlock()
		}
		select {
		case <-cctx.Done():
		case <-time.After(time.Duration(2000+rand.IntN(2000)) * time.Millisecond):
		}
	}
}

// holderPod is the i-th queued pod, created at created. Its turn says what it asks for: lock 0
// by label, both locks by annotation, lock 1 by label, both locks in the other order. It reads
// each token through the downward API, as users' pods do: fencedlock.io/token for one lock,
// token.fencedlock.io/<lock> for each of several.
func (c *campaign) holderPod(name string, i int, created time.Time) *corev1.Pod {
	var meta metav1.ObjectMeta
	var locks []string
	var env []corev1.EnvVar
	fromAnnotation := func(name, key string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
			FieldPath: fmt.Sprintf("metadata.annotations['%s']", key)}}}
	}
	switch a, b := c.locks[0], c.locks[1]; i % 4 {
	case 0, 2:
		locks = []string{c.locks[i%4/2]}
		meta.Labels = map[string]string{locksv1alpha1.LockLabel: locks[0]}
		env = append(env, fromAnnotation("FENCING_TOKEN", locksv1alpha1.TokenAnnotation))
	case 1, 3:
		locks = []string{a, b}
		if i%4 == 3 {
			locks = []string{b, a}
		}
		meta.Annotations = map[string]string{locksv1alpha1.LocksAnnotation: strings.Join(locks, ",")}
		for _, l := range locks {
			env = append(env, fromAnnotation("TOKEN_"+l, locksv1alpha1.LockTokenAnnotation(l)))
		}
	}
	meta.Namespace, meta.Name = c.ns, name
	env = append(env,
		corev1.EnvVar{Name: "CREATED_AT", Value: strconv.FormatInt(created.UnixNano(), 10)},
		corev1.EnvVar{Name: "POD_NAME", Value: name},
		corev1.EnvVar{Name: "KUBERNETES_SERVICE_HOST", Value: "127.0.0.1"},
		corev1.EnvVar{Name: "KUBERNETES_SERVICE_PORT", Value: apiPort})
	return &corev1.Pod{ObjectMeta: meta,
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, HostNetwork: true,
			Containers: []corev1.Container{{Name: "w", Image: chaosImage, ImagePullPolicy: corev1.PullNever,
				Args: []string{"--pod", "--namespace", c.ns, "--id", strconv.Itoa(10000 + i), "--locks", strings.Join(locks, ","),
					"--history", "/history/" + name + ".jsonl"},
				Env: env, TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
				VolumeMounts: []corev1.VolumeMount{{Name: "history", MountPath: "/history"}}}},
			Volumes: []corev1.Volume{{Name: "history", VolumeSource: corev1.VolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: c.dir}}}}},
	}
}

func (c *campaign) injectFaults(cctx context.Context) {
	order := slices.Clone(faultKinds)
	rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	for i := 0; ; i++ {
		select {
		case <-cctx.Done():
			return
		case <-time.After(time.Duration(3000+rand.IntN(3000)) * time.Millisecond):
		}
		kind := order[rand.IntN(len(order))]
		if i < len(order) {
			kind = order[i] // every kind at least once
		}
		c.fault(kind)
		switch kind {
		case "pause-holder": // SIGSTOP a holder past its lease, then SIGCONT
			c.mu.Lock()
			// a current one: of the locks' clients or the semaphore's (paused holders of a permit)
			p := c.procs[len(c.procs)-1-rand.IntN(min(len(c.procs), envInt("CHAOS_CLIENTS", 4)+envInt("CHAOS_SEM_CLIENTS", 3)))]
			c.mu.Unlock()
			_ = p.Process.Signal(syscall.SIGSTOP)
			time.Sleep(c.lease + time.Second)
			_ = p.Process.Signal(syscall.SIGCONT)
		case "kill-manager": // the leader, so the controller stops mid-work (the Lease is not released)
			if err := killLeader(); err != nil {
				fmt.Fprintf(GinkgoWriter, "kill-manager: %v\n", err) // e.g. the leader is restarting
			}
		case "apiserver-restart":
			_ = syscall.Kill(componentPID("kube-apiserver"), syscall.SIGKILL)
			time.Sleep(500 * time.Millisecond)
			run("hack/cluster-up.sh", "--node")
		case "etcd-restart":
			_ = syscall.Kill(componentPID("etcd"), syscall.SIGKILL)
			time.Sleep(500 * time.Millisecond)
			run("hack/cluster-up.sh", "--node")
		case "webhook-down": // fenced writes must fail while nobody serves the fence
			stopManager()
			time.Sleep(3 * time.Second)
			startManager()
		case "lease-delete":
			lk := append(slices.Clone(c.locks), c.sem)[rand.IntN(len(c.locks)+1)]
			c.mu.Lock()
			c.leaseDel[lk] = time.Now()
			c.mu.Unlock()
			_ = clientset.CoordinationV1().Leases(c.ns).Delete(ctx, lk, metav1.DeleteOptions{})
		}
	}
}

// queued counts the campaign's pods that have not finished.
func (c *campaign) queued(cctx context.Context) (int, error) {
	var pods corev1.PodList
	if err := k8sClient.List(cctx, &pods, client.InNamespace(c.ns), client.HasLabels{locksv1alpha1.LockLabel}); err != nil {
		return 0, err
	}
	n := 0
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			n++
		}
	}
	return n, nil
}

// drainPods waits for the queued pods to run out.
func (c *campaign) drainPods() {
	Eventually(func(g Gomega) {
		var pods corev1.PodList
		g.Expect(k8sClient.List(ctx, &pods, client.InNamespace(c.ns))).To(Succeed())
		held := make([]string, 0, len(c.locks))
		for _, lk := range c.locks {
			l, err := clientset.CoordinationV1().Leases(c.ns).Get(ctx, lk, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			st, _ := lease.Read(l)
			held = append(held, fmt.Sprintf("%s held by %q with token %s", lk, st.Holder, st.Token))
		}
		for _, p := range pods.Items {
			g.Expect(p.Status.Phase).To(BeElementOf(corev1.PodSucceeded, corev1.PodFailed),
				"pod %s (locks %v, gates %v; %s)", p.Name, locksv1alpha1.PodLocks(&p), p.Spec.SchedulingGates, strings.Join(held, ", "))
		}
	}, 3*time.Minute, time.Second).Should(Succeed())
}

// checkPods fails the spec if a pod started without a token for every lock it asked for (the
// worker exits with status 3), and if no pod that asked for both locks got to run: the campaign
// must have exercised them.
func (c *campaign) checkPods() {
	var pods corev1.PodList
	Expect(k8sClient.List(ctx, &pods, client.InNamespace(c.ns))).To(Succeed())
	ran := map[int]int{} // pods that ran, by how many locks they asked for
	var missing []string
	for _, p := range pods.Items {
		locks := locksv1alpha1.PodLocks(&p)
		for _, cs := range p.Status.ContainerStatuses {
			if t := cs.State.Terminated; t != nil {
				ran[len(locks)]++
				if t.ExitCode == 3 {
					missing = append(missing, fmt.Sprintf("%s (locks %v): %s", p.Name, locks, t.Message))
				}
			}
		}
	}
	msg := fmt.Sprintf("pods that ran: %d with one lock, %d with both", ran[1], ran[2])
	AddReportEntry("fault-injection pods", msg)
	fmt.Fprintln(GinkgoWriter, msg)
	Expect(missing).To(BeEmpty(), "pods ungated without a token for each of their locks")
	Expect(ran[2]).To(BeNumerically(">", 0), "no pod asking for both locks ran: "+msg)
}

// collect merges the campaign's operations and every holder's history file.
func (c *campaign) collect() []lincheck.Op {
	h := slices.Clone(c.history)
	files, _ := filepath.Glob(filepath.Join(c.dir, "*.jsonl"))
	for _, f := range files {
		if filepath.Base(f) == "history.jsonl" {
			continue
		}
		ops, err := lincheck.LoadHistory(f)
		Expect(err).NotTo(HaveOccurred(), f)
		h = append(h, ops...)
	}
	return h
}

func (c *campaign) summary(h []lincheck.Op, res lincheck.Result, err error) {
	counts := map[string]int{}
	for _, op := range h {
		counts[string(op.Kind)+"/"+string(op.Outcome)]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "fault-injection campaign: %d operations (", len(h))
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d", k, counts[k])
	}
	faults, _ := json.Marshal(c.faults)
	violations := 0
	if err != nil {
		violations = max(1, len(res.Violations))
	}
	fmt.Fprintf(&b, "); faults injected %s; linearizable: %v; violations: %d; Lease violations: %d",
		faults, res.Linearizable, violations, len(c.leaseBad))
	AddReportEntry("fault-injection summary", b.String())
	fmt.Fprintln(GinkgoWriter, b.String())
	fmt.Println(b.String())
}
