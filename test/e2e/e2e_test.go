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
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/test/util"
)

// samples decodes config/samples/<file> into objects.
func samples(file string) []*unstructured.Unstructured {
	raw, err := os.ReadFile(filepath.Join(util.RepoRoot(), "config", "samples", file))
	Expect(err).NotTo(HaveOccurred())
	return decodeAll(raw)
}

// forThisNode adapts a pod template to this machine: no registry, so the image built and loaded
// by BeforeSuite. Nothing else: the pods reach the API server through the kubernetes Service, as
// on any cluster.
func forThisNode(spec *corev1.PodSpec) {
	for i := range spec.Containers {
		c := &spec.Containers[i]
		c.Image, c.ImagePullPolicy = workerImage, corev1.PullNever
	}
}

// installSamples creates the sample lock (with leaseSeconds) and the sample Job's RBAC in ns, and
// returns the sample Job adapted to this node.
func installSamples(ns string, leaseSeconds int32) *batchv1.Job {
	return installSample(ns, "locks_v1alpha1_fencedlock.yaml", "job_ledger.yaml", leaseSeconds)
}

// installSample creates the FencedLock of lockFile (with leaseSeconds) and the objects of jobFile
// but its Job, with the RBAC of job_ledger.yaml (the ServiceAccount every sample Job runs as), in
// ns (the lock Ready first) and returns the Job adapted to this node.
func installSample(ns, lockFile, jobFile string, leaseSeconds int32) *batchv1.Job {
	fl := &locksv1alpha1.FencedLock{}
	Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(samples(lockFile)[0].Object, fl)).To(Succeed())
	fl.Namespace, fl.Spec.LeaseDurationSeconds = ns, leaseSeconds
	kit.CreateLock(fl)
	var job *batchv1.Job
	for _, file := range slices.Compact([]string{"job_ledger.yaml", jobFile}) {
		for _, obj := range samples(file) {
			obj.SetNamespace(ns)
			switch obj.GetKind() {
			case "Job":
				if file == jobFile {
					job = &batchv1.Job{}
					Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, job)).To(Succeed())
				}
				continue
			case "RoleBinding":
				subjects, _, _ := unstructured.NestedSlice(obj.Object, "subjects")
				subjects[0].(map[string]any)["namespace"] = ns
				Expect(unstructured.SetNestedSlice(obj.Object, subjects, "subjects")).To(Succeed())
			}
			Expect(k8sClient.Create(ctx, obj)).To(Succeed())
		}
	}
	Expect(job).NotTo(BeNil(), "no Job in %s", jobFile)
	forThisNode(&job.Spec.Template.Spec)
	return job
}

func logs(ns, pod string) string {
	b, err := clientset.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{}).DoRaw(ctx)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return string(b)
}

var (
	grantedLine = regexp.MustCompile(`\[(\d\d:\d\d:\d\d\.\d{3})\] (\S+)\s+was granted lock \S+: FENCING_TOKEN=(\d+) \(from \$FENCING_TOKEN=(\d+), /etc/fencedlock/token=(\d+)\)`)
	acceptedAt  = regexp.MustCompile(`\[(\d\d:\d\d:\d\d\.\d{3})\] \S+\s+write accepted`)
)

type grant struct {
	pod        string
	token      uint64
	grantedAt  time.Time
	acceptedAt time.Time
}

func clock(s string) time.Time {
	t, err := time.Parse("15:04:05.000", s)
	ExpectWithOffset(2, err).NotTo(HaveOccurred())
	return t
}

func parseGrant(ns, pod string) grant {
	out := logs(ns, pod)
	m := grantedLine.FindStringSubmatch(out)
	ExpectWithOffset(1, m).NotTo(BeNil(), "pod %s logs:\n%s", pod, out)
	ExpectWithOffset(1, m[4]).To(Equal(m[3]), "token from the env var")
	ExpectWithOffset(1, m[5]).To(Equal(m[3]), "token from the downwardAPI volume")
	tok, _ := strconv.ParseUint(m[3], 10, 64)
	g := grant{pod: pod, token: tok, grantedAt: clock(m[1])}
	if a := acceptedAt.FindStringSubmatch(out); a != nil {
		g.acceptedAt = clock(a[1])
	}
	return g
}

func ledger(ns string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{}
	ExpectWithOffset(1, k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ledger"}, cm)).To(Succeed())
	return cm
}

func jobPods(ns, job string) []corev1.Pod {
	var pods corev1.PodList
	ExpectWithOffset(1, k8sClient.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"job-name": job})).To(Succeed())
	return pods.Items
}

// expectJobSucceeded is the poll of a wait for a Job: read it, n pods succeeded and none failed.
// A failed pod never un-fails, so it ends the wait at once, not at its timeout.
func expectJobSucceeded(g Gomega, job *batchv1.Job, n int32) {
	g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(job), job)).To(Succeed())
	if job.Status.Failed > 0 {
		StopTrying(fmt.Sprintf("Job %s/%s: %d pod(s) failed, where none may", job.Namespace, job.Name, job.Status.Failed)).Now()
	}
	g.Expect(job.Status.Succeeded).To(Equal(n))
}

// jobState tells where a Job stands, for a spec whose wait for it failed: the Job's counts, each
// pod's phase, gate, grant annotations and container end, the tail of a failed pod's log, and the
// status and Lease of the lock its pods ask for (their template's lock label), with the
// namespace's last warnings.
func jobState(job *batchv1.Job) string {
	var b strings.Builder
	ns, lockName := job.Namespace, job.Spec.Template.Labels[locksv1alpha1.LockLabel]
	var j batchv1.Job
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(job), &j); err != nil {
		fmt.Fprintf(&b, "job %s: %v\n", job.Name, err)
	} else {
		fmt.Fprintf(&b, "job %s: active %d, succeeded %d, failed %d\n", job.Name, j.Status.Active, j.Status.Succeeded, j.Status.Failed)
	}
	for _, p := range jobPods(ns, job.Name) {
		fmt.Fprintf(&b, "pod %s: %s gated=%t token=%q permit=%q", p.Name, p.Status.Phase, locksv1alpha1.HasLockGate(&p),
			p.Annotations[locksv1alpha1.TokenAnnotation], p.Annotations[locksv1alpha1.PodPermitAnnotation])
		for _, c := range p.Status.ContainerStatuses {
			if t := c.State.Terminated; t != nil {
				fmt.Fprintf(&b, " exit=%d (%s)", t.ExitCode, t.Reason)
			}
		}
		b.WriteString("\n")
		if p.Status.Phase == corev1.PodFailed {
			out, _ := clientset.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{TailLines: ptr.To[int64](5)}).DoRaw(ctx)
			fmt.Fprintf(&b, "  log tail: %s\n", strings.ReplaceAll(strings.TrimSpace(string(out)), "\n", "\n  "))
		}
	}
	var fl locksv1alpha1.FencedLock
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: lockName}, &fl); err != nil {
		fmt.Fprintf(&b, "lock %s: %v\n", lockName, err)
	} else {
		st, _ := json.Marshal(fl.Status)
		fmt.Fprintf(&b, "lock %s status: %s\n", lockName, st)
	}
	var l coordinationv1.Lease
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: lockName}, &l); err != nil {
		fmt.Fprintf(&b, "lease %s: %v\n", lockName, err)
	} else {
		fmt.Fprintf(&b, "lease %s rv %s holder %q annotations %v\n", lockName, l.ResourceVersion,
			ptr.Deref(l.Spec.HolderIdentity, ""), l.Annotations)
	}
	// The namespace's warnings (a pod the Job could not create, a refused write), last ones last.
	if evs, err := clientset.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "type=Warning"}); err == nil {
		for _, e := range evs.Items[max(0, len(evs.Items)-10):] {
			fmt.Fprintf(&b, "warning %s %s/%s x%d: %s\n", e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Count, e.Message)
		}
	}
	return b.String()
}

var _ = Describe("Jobs and pods as lock holders on a real node", func() {
	It("runs a Job's pods one at a time, each with a higher token from the downward API", func() {
		ns := kit.NewNamespace()
		job := installSamples(ns, 15)
		start := time.Now()
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			expectJobSucceeded(g, job, 3)
		}, 3*time.Minute, 200*time.Millisecond).Should(Succeed(), func() string { return jobState(job) })
		AddReportEntry("job with 3 serialized pods", time.Since(start).Round(time.Millisecond).String())

		pods := jobPods(ns, "settle")
		grants := make([]grant, 0, len(pods))
		for _, p := range pods {
			grants = append(grants, parseGrant(ns, p.Name))
		}
		Expect(grants).To(HaveLen(3))
		slices.SortFunc(grants, func(a, b grant) int { return a.grantedAt.Compare(b.grantedAt) })
		for i := 1; i < len(grants); i++ {
			Expect(grants[i].token).To(BeNumerically(">", grants[i-1].token), "tokens in grant order: %+v", grants)
			Expect(grants[i].grantedAt.After(grants[i-1].acceptedAt)).To(BeTrue(), "grants overlap: %+v", grants)
			handover := grants[i].grantedAt.Sub(grants[i-1].acceptedAt)
			AddReportEntry(fmt.Sprintf("handover %d (previous pod's write accepted -> next pod running with its token)", i),
				handover.String())
			fmt.Fprintf(GinkgoWriter, "handover %d: %s\n", i, handover)
		}
		cm := ledger(ns)
		last := grants[len(grants)-1]
		Expect(cm.Data["writer"]).To(Equal(last.pod))
		Expect(cm.Annotations[locksv1alpha1.RecordedTokenAnnotation]).To(Equal(strconv.FormatUint(last.token, 10)))
	})

	It("hands the lock over when the holder pod is killed mid-hold", func() {
		ns := kit.NewNamespace()
		job := installSamples(ns, 15)
		job.Name = "long"
		job.Spec.Completions, job.Spec.Parallelism = ptr.To[int32](1), ptr.To[int32](1)
		args := job.Spec.Template.Spec.Containers[0].Args
		job.Spec.Template.Spec.Containers[0].Args = append(slices.Clone(args), "--work=10m")
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		holder := runningPod(ns, "long")
		first := parseGrantEventually(ns, holder.Name)

		next := installNextJob(ns, job, "next")
		Eventually(func() int32 { return waiting(ns) }, time.Minute, 100*time.Millisecond).Should(Equal(int32(1)))

		killedAt := time.Now()
		Expect(k8sClient.Delete(ctx, &holder, client.GracePeriodSeconds(0))).To(Succeed())
		succeeded(next)
		second := parseGrant(ns, jobPods(ns, "next")[0].Name)
		Expect(second.token).To(BeNumerically(">", first.token))
		AddReportEntry("holder pod deleted -> next pod granted and ungated (API)", time.Since(killedAt).String())
	})

	It("refuses a stale pod's late write after its grant was revoked", func() {
		ns := kit.NewNamespace()
		job := installSamples(ns, 3)
		job.Name = "stale"
		job.Spec.Completions, job.Spec.Parallelism = ptr.To[int32](1), ptr.To[int32](1)
		c := &job.Spec.Template.Spec.Containers[0]
		// A holder that stops being Ready (as on a partitioned node) and writes much later.
		c.Args = append(slices.Clone(c.Args), "--work=25s", "--ready-file=/tmp/ready", "--unready-after=3s")
		c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{
			Command: []string{"/bin/entry", "--probe", "/tmp/ready"}}}, PeriodSeconds: 1, FailureThreshold: 1}
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		stale := runningPod(ns, "stale")
		old := parseGrantEventually(ns, stale.Name)

		succeeded(installNextJob(ns, job, "fresh"))
		fresh := parseGrant(ns, jobPods(ns, "fresh")[0].Name)
		Expect(fresh.token).To(BeNumerically(">", old.token))

		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(&stale), &stale)).To(Succeed())
			g.Expect(stale.Status.Phase).To(Equal(corev1.PodFailed))
		}, 2*time.Minute, 500*time.Millisecond).Should(Succeed())
		out := logs(ns, stale.Name)
		Expect(out).To(ContainSubstring(fmt.Sprintf("stale fencing token %d for lock %s/ledger: the lock was re-acquired with token %d",
			old.token, ns, fresh.token)))
		Expect(stale.Status.ContainerStatuses[0].State.Terminated.ExitCode).To(Equal(int32(3)))
		Expect(ledger(ns).Data["writer"]).To(Equal(fresh.pod))
	})
})

// runningPod waits until the one pod of a one-pod Job runs, and returns it.
func runningPod(ns, job string) corev1.Pod {
	var pod corev1.Pod
	EventuallyWithOffset(1, func(g Gomega) {
		pods := jobPods(ns, job)
		g.Expect(pods).To(HaveLen(1))
		pod = pods[0]
		g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning))
	}, 2*time.Minute, 200*time.Millisecond).Should(Succeed())
	return pod
}

// succeeded waits until a one-pod Job has succeeded.
func succeeded(job *batchv1.Job) {
	EventuallyWithOffset(1, func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(job), job)).To(Succeed())
		g.Expect(job.Status.Succeeded).To(Equal(int32(1)))
	}, 2*time.Minute, 200*time.Millisecond).Should(Succeed())
}

func parseGrantEventually(ns, pod string) grant {
	EventuallyWithOffset(1, func() string { return logs(ns, pod) }, time.Minute, 100*time.Millisecond).Should(
		ContainSubstring("was granted lock"))
	return parseGrant(ns, pod)
}

// installNextJob creates a one-pod Job like job, named name, that writes at once.
func installNextJob(ns string, job *batchv1.Job, name string) *batchv1.Job {
	next := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: *job.Spec.DeepCopy()}
	next.Spec.Selector, next.Spec.ManualSelector = nil, nil
	delete(next.Spec.Template.Labels, "batch.kubernetes.io/controller-uid")
	delete(next.Spec.Template.Labels, "controller-uid")
	delete(next.Spec.Template.Labels, "batch.kubernetes.io/job-name")
	delete(next.Spec.Template.Labels, "job-name")
	c := &next.Spec.Template.Spec.Containers[0]
	c.ReadinessProbe = nil
	c.Args = slices.DeleteFunc(slices.Clone(c.Args), func(a string) bool {
		return a == "--work=10m" || a == "--work=25s" || a == "--ready-file=/tmp/ready" || a == "--unready-after=3s"
	})
	ExpectWithOffset(1, k8sClient.Create(ctx, next)).To(Succeed())
	return next
}

func waiting(ns string) int32 { return kit.GetLock(ns, "ledger").Status.WaitingCount }
