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
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/test/util"
)

const (
	operatorImage = "localhost/fencedlock/fenced-operator:e2e"
	// operatorAccount is the ServiceAccount config/samples/fenced_leader_rbac.yaml names.
	operatorAccount = "operator-controller-manager"
	operatorLock    = "fenced-operator"
	fenceDenied     = `admission webhook "fence.locks.fencedlock.io" denied the request`
)

// operatorWrites are the writes cmd/fenced-operator makes every round.
var operatorWrites = []string{"update", "patch", "status", "create", "delete"}

// operatorLine is one line cmd/fenced-operator reports: a write, or an event.
type operatorLine struct {
	Event string `json:"event"`
	Op    string `json:"op"`
	Start int64  `json:"start"`
	OK    bool   `json:"ok"`
	Error string `json:"error"`
}

// deposed is what a leader paused past its lease did once resumed, from its own report, and what
// the ledger ConfigMap shows.
type deposed struct {
	// attempted and admitted count its writes started after it resumed, by operation.
	attempted, admitted map[string]int
	// fenced counts those the fence refused; local those crleader refused in the process (the
	// term already seen lost); other the rest (e.g. cancelled as the manager stopped).
	fenced, local, other int
	// flippedBack counts the ledger's versions written by it after its successor's.
	flippedBack int
	// pausedFor is how long it was stopped.
	pausedFor time.Duration
}

func (d deposed) String() string {
	return fmt.Sprintf("attempted %v, admitted %v; refused by the fence %d, in the process %d, otherwise %d; "+
		"ledger versions by it after its successor's: %d; paused %s",
		d.attempted, d.admitted, d.fenced, d.local, d.other, d.flippedBack, d.pausedFor.Round(time.Millisecond))
}

var _ = Describe("Fenced leadership on the node: the sample operator's leader paused past its lease", Ordered, func() {
	BeforeAll(func() {
		By("building cmd/fenced-operator into an image (hack/mkimage.sh) and loading it into the node's containerd")
		dir := GinkgoT().TempDir()
		run("env", "CGO_ENABLED=0", "go", "build", "-trimpath", "-ldflags=-s -w", "-o", filepath.Join(dir, "fenced-operator"),
			"./cmd/fenced-operator")
		tar := filepath.Join(dir, "fenced-operator.tar")
		run("env", "IMAGE_USER=65532:65532", "hack/mkimage.sh", filepath.Join(dir, "fenced-operator"), operatorImage, tar)
		run("hack/cluster-load-image.sh", tar)
	})

	It("admits the stale writes of controller-runtime's stock election, and none of fenced leadership's", func() {
		stock := pauseOperatorLeader("stock", "--lease-duration=4s", "--renew-deadline=3s", "--retry-period=1s")
		// The fenced replica is made harder to stop: once its term is over it writes on for 2s,
		// its writes detached from its manager's context. The stock replica stops as it would.
		fenced := pauseOperatorLeader("fenced", "--linger=2s")
		AddReportEntry("stock election, the deposed leader", stock.String())
		AddReportEntry("fenced leadership, the deposed leader", fenced.String())
		fmt.Fprintf(GinkgoWriter, "stock: %s\nfenced: %s\n", stock, fenced)

		Expect(stock.flippedBack).To(BeNumerically(">", 0), "stock: the ledger went back to the deposed leader's writes")
		for _, op := range operatorWrites {
			Expect(stock.admitted[op]).To(BeNumerically(">", 0), "stock: a stale %s landed", op)
			Expect(fenced.attempted[op]).To(BeNumerically(">", 0), "fenced: the deposed leader attempted a %s", op)
		}
		Expect(fenced.admitted).To(BeEmpty(), "fenced: none of the deposed leader's writes landed")
		Expect(fenced.flippedBack).To(BeZero())
	})
})

// pauseOperatorLeader runs two pods of cmd/fenced-operator with --election=election in a new
// namespace, SIGSTOPs the leader's process on the node until the other leads, lets the successor
// write, resumes the first with SIGCONT, waits until it stops, and tells what it did meanwhile.
func pauseOperatorLeader(election string, args ...string) deposed {
	ns := kit.NewNamespace()
	operatorRBAC(ns)
	if election == "fenced" {
		kit.NewLock(ns, operatorLock, util.LeaseSeconds(3), func(fl *locksv1alpha1.FencedLock) {
			fl.Spec.Fence.HolderBinding = true
			fl.Spec.Fence.StatusWrites = locksv1alpha1.StatusWritesFenced
		})
	}
	writers := util.LedgerWriters(ctx, clientset, ns)
	args = append([]string{"--namespace", ns, "--lock", operatorLock, "--election", election}, args...)
	a := operatorPod(ns, "a", args)
	Eventually(func() string { return podLogs(ns, a) }, 90*time.Second, 250*time.Millisecond).
		Should(ContainSubstring(`"event":"elected"`), "replica a leads")
	b := operatorPod(ns, "b", args)
	Eventually(func() corev1.PodPhase { return kit.GetPod(ns, b).Status.Phase }, 60*time.Second).Should(Equal(corev1.PodRunning))
	time.Sleep(time.Second)

	pid := containerPID(ns, a)
	paused := time.Now()
	Expect(syscall.Kill(pid, syscall.SIGSTOP)).To(Succeed())
	DeferCleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	Eventually(func() string { return podLogs(ns, b) }, 90*time.Second, 250*time.Millisecond).
		Should(ContainSubstring(`"event":"elected"`), "replica b leads once a's lease ran out")
	time.Sleep(time.Second) // the successor writes
	resumed := time.Now()
	Expect(syscall.Kill(pid, syscall.SIGCONT)).To(Succeed())
	Eventually(func() corev1.PodPhase { return kit.GetPod(ns, a).Status.Phase }, 90*time.Second).
		Should(Or(Equal(corev1.PodFailed), Equal(corev1.PodSucceeded)), "the deposed leader notices and stops")

	// The successor, which would otherwise write on beside the next scenario.
	Expect(k8sClient.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: b}})).To(Succeed())

	d := tally(podLogs(ns, a), resumed.UnixNano())
	d.pausedFor = resumed.Sub(paused)
	seenB := false
	for _, w := range writers() {
		seenB = seenB || w == "b"
		if seenB && w == "a" {
			d.flippedBack++
		}
	}
	fmt.Fprintf(GinkgoWriter, "%s election, the deposed leader: %s\n", election, d)
	return d
}

// tally counts the writes of a replica's report that started at or after since.
func tally(report string, since int64) deposed {
	d := deposed{attempted: map[string]int{}, admitted: map[string]int{}}
	sc := bufio.NewScanner(strings.NewReader(report))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l operatorLine
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.Op == "" || l.Start < since {
			continue
		}
		if d.attempted[l.Op]++; d.attempted[l.Op] == 1 {
			fmt.Fprintf(GinkgoWriter, "the deposed leader's first %s after resuming: ok=%v %s\n", l.Op, l.OK, l.Error)
		}
		switch {
		case l.OK:
			d.admitted[l.Op]++
		case strings.Contains(l.Error, fenceDenied):
			d.fenced++
		case strings.Contains(l.Error, "refused locally"):
			d.local++
		default:
			d.other++
		}
	}
	return d
}

// operatorRBAC creates ServiceAccount ns/operator-controller-manager with the RBAC of
// config/samples/fenced_leader_rbac.yaml, made for ns, and the sample operator's reconciler rights.
func operatorRBAC(ns string) {
	Expect(k8sClient.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: operatorAccount}})).To(Succeed())
	raw, err := os.ReadFile(filepath.Join(util.RepoRoot(), "config", "samples", "fenced_leader_rbac.yaml"))
	Expect(err).NotTo(HaveOccurred())
	for _, obj := range decodeAll(bytes.ReplaceAll(raw, []byte("operator-system"), []byte(ns))) {
		Expect(k8sClient.Create(ctx, obj)).To(Succeed())
		DeferCleanup(func() { _ = client.IgnoreNotFound(k8sClient.Delete(ctx, obj)) })
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "operator-reconcilers"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps", "services", "services/status"}, Verbs: []string{"*"}},
		{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
	}}
	Expect(k8sClient.Create(ctx, role)).To(Succeed())
	Expect(k8sClient.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: operatorAccount}}})).To(Succeed())
}

// operatorPod creates pod ns/replica-<replica> running the sample operator with args, never
// restarted (its report stays in its log), and returns its name.
func operatorPod(ns, replica string, args []string) string {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "replica-" + replica},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, ServiceAccountName: operatorAccount,
			TerminationGracePeriodSeconds: new(int64(1)),
			Containers: []corev1.Container{{Name: "operator", Image: operatorImage, ImagePullPolicy: corev1.PullNever,
				Args: append(slices.Clone(args), "--replica", replica),
				SecurityContext: &corev1.SecurityContext{RunAsNonRoot: new(true),
					AllowPrivilegeEscalation: new(false)}}}}}
	kit.CreatePod(p)
	return p.Name
}

func podLogs(ns, pod string) string {
	b, _ := clientset.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{}).DoRaw(ctx)
	return string(b)
}

// containerPID is the host PID of the first container of pod ns/name, as the node's containerd
// reports its task.
func containerPID(ns, name string) int {
	var id string
	Eventually(func(g Gomega) {
		st := kit.GetPod(ns, name).Status.ContainerStatuses
		g.Expect(st).NotTo(BeEmpty())
		var ok bool
		id, ok = strings.CutPrefix(st[0].ContainerID, "containerd://")
		g.Expect(ok).To(BeTrue(), "container id %q", st[0].ContainerID)
	}, 30*time.Second).Should(Succeed())
	out, err := exec.Command("ctr", "-a", containerdSocket, "-n", "k8s.io", "tasks", "ls").CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "ctr tasks ls: %s", out)
	for line := range strings.SplitSeq(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == id {
			pid, err := strconv.Atoi(f[1])
			Expect(err).NotTo(HaveOccurred())
			return pid
		}
	}
	Fail(fmt.Sprintf("no task %s in `ctr tasks ls`:\n%s", id, out))
	return 0
}
