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
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/test/util"
)

const (
	metricsService = "fencedlock-controller-manager-metrics-service"
	metricsReader  = "fencedlock-metrics-reader" // ClusterRole of config/rbac
)

// The series README's Metrics section names, as sums over the replicas.
var movingSeries = map[string]string{
	"grants":                 `fencedlock_grants_total`,
	"denials (stale tokens)": `fencedlock_fence_decisions_total{decision="denied"}`,
	"waits (queued pods)":    `fencedlock_wait_seconds_count`,
}

var _ = Describe("The manager's metrics", Ordered, func() {
	var token string

	BeforeAll(func() {
		By("a ServiceAccount bound to the metrics-reader ClusterRole, and a token for it (TokenRequest)")
		ns := kit.NewNamespace()
		Expect(k8sClient.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "scraper"}})).To(Succeed())
		crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "e2e-metrics-scraper-" + ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: metricsReader},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "scraper", Namespace: ns}}}
		Expect(k8sClient.Create(ctx, crb)).To(Succeed())
		DeferCleanup(func() { _ = k8sClient.Delete(ctx, crb) })
		tr, err := clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "scraper",
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		token = tr.Status.Token
	})

	It("are served over HTTPS to authorized clients only, through the metrics Service's endpoints, and move with the locks", func() {
		endpoints := metricsEndpoints()
		Expect(endpoints).To(HaveLen(2), "ready endpoints of %s", metricsService)

		By("without a token, or with one that is not authorized, the scrape is refused")
		Expect(scrapeStatus(endpoints[0], "")).To(Equal(http.StatusUnauthorized))
		other, err := clientset.CoreV1().ServiceAccounts("default").CreateToken(ctx, "default",
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(scrapeStatus(endpoints[0], other.Status.Token)).To(Equal(http.StatusForbidden))

		before := scrapeAll(token)
		for what, s := range movingSeries {
			fmt.Fprintf(GinkgoWriter, "before: %s %s = %v\n", what, s, before[s])
		}
		lockActivity()
		Eventually(func(g Gomega) {
			after := scrapeAll(token)
			for what, s := range movingSeries {
				g.Expect(after[s]).To(BeNumerically(">", before[s]), "%s (%s) did not move", what, s)
			}
			msg := "authorized scrape of both replicas:"
			for what, s := range movingSeries {
				msg += fmt.Sprintf(" %s %v -> %v;", what, before[s], after[s])
			}
			AddReportEntry("metrics, authorized scrape", msg)
			fmt.Fprintln(GinkgoWriter, msg)
		}, time.Minute, 2*time.Second).Should(Succeed())
	})

	It("are scraped by a real Prometheus, from both endpoints of the metrics Service", func() {
		prom, err := exec.LookPath("prometheus")
		if err != nil {
			if os.Getenv("E2E_REQUIRED") == "1" {
				Fail("no prometheus binary (apt-get install prometheus; .ci/run installs it)")
			}
			Skip("no prometheus binary (apt-get install prometheus)")
		}
		addr := startPrometheus(prom, token)
		By("Prometheus scrapes the metrics Service's endpoints with the token")
		Eventually(func() float64 { return promQuery(addr, `sum(up{job="fencedlock"})`) }, 2*time.Minute, time.Second).
			Should(BeNumerically("==", 2), "Prometheus does not scrape both replicas")
		before := map[string]float64{}
		for _, s := range movingSeries {
			before[s] = promQuery(addr, "sum("+s+")")
		}
		lockActivity()
		Eventually(func(g Gomega) {
			msg := "Prometheus (" + strings.TrimPrefix(prom, "/usr/bin/") + ") on " + addr + ":"
			for what, s := range movingSeries {
				v := promQuery(addr, "sum("+s+")")
				g.Expect(v).To(BeNumerically(">", before[s]), "%s (%s) did not move", what, s)
				msg += fmt.Sprintf(" %s %v -> %v;", what, before[s], v)
			}
			AddReportEntry("metrics, Prometheus", msg)
			fmt.Fprintln(GinkgoWriter, msg)
		}, time.Minute, 2*time.Second).Should(Succeed())
		By("the denials carry their reason")
		Expect(promQuery(addr, `count(sum by (reason) (fencedlock_fence_decisions_total{decision="denied"}))`)).To(BeNumerically(">=", 1))
	})
})

// lockActivity makes every series of movingSeries move: two grants, a write with the superseded
// token (denied), and a pod that waits in the queue until the lock is released.
func lockActivity() {
	ns := kit.NewNamespace()
	kit.NewLock(ns, "metrics", util.LeaseSeconds(60))
	l := kit.Locker(ns, "metrics", "e2e-metrics")
	actx, cancelA := context.WithTimeout(ctx, time.Minute)
	defer cancelA()
	first, err := l.Acquire(actx)
	Expect(err).NotTo(HaveOccurred())
	Expect(first.Release(ctx)).To(Succeed())
	second, err := l.Acquire(actx)
	Expect(err).NotTo(HaveOccurred())
	err = k8sClient.Create(ctx, util.FencedConfigMap(ns, "stale", "metrics", first.Token(), "0"))
	Expect(answeredByFence(err)).To(BeTrue(), "a write with a superseded token: %v", err)
	pod := kit.CreatePod(probePod(ns, "metrics"))
	time.Sleep(time.Second) // queued
	Expect(second.Release(ctx)).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		g.Expect(pod.Annotations[locksv1alpha1.TokenAnnotation]).NotTo(BeEmpty())
	}, time.Minute, 200*time.Millisecond).Should(Succeed(), "the queued pod was not granted")
}

// metricsEndpoints are host:port of the ready endpoints of the metrics Service: what Prometheus's
// Kubernetes discovery scrapes (this node has no kube-proxy to route the Service's ClusterIP).
func metricsEndpoints() []string {
	var list discoveryv1.EndpointSliceList
	Expect(k8sClient.List(ctx, &list, client.InNamespace(managerNamespace),
		client.MatchingLabels{discoveryv1.LabelServiceName: metricsService})).To(Succeed())
	var out []string
	for _, s := range list.Items {
		for _, p := range s.Ports {
			for _, e := range s.Endpoints {
				if ptr.Deref(e.Conditions.Ready, false) {
					out = append(out, net.JoinHostPort(e.Addresses[0], strconv.Itoa(int(ptr.Deref(p.Port, 0)))))
				}
			}
		}
	}
	return out
}

var insecureClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
	// The manager serves metrics with a self-signed certificate (no --metrics-cert-path).
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // see above

func scrape(hostport, token string) (int, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+hostport+"/metrics", nil)
	Expect(err).NotTo(HaveOccurred())
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := insecureClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	return resp.StatusCode, string(b)
}

func scrapeStatus(hostport, token string) int {
	code, _ := scrape(hostport, token)
	return code
}

// scrapeAll sums each series of movingSeries over every replica's scrape.
func scrapeAll(token string) map[string]float64 {
	sums := map[string]float64{}
	for _, ep := range metricsEndpoints() {
		code, body := scrape(ep, token)
		ExpectWithOffset(1, code).To(Equal(http.StatusOK), "scraping %s: %s", ep, body)
		for _, s := range movingSeries {
			sums[s] += sumSeries(body, s)
		}
	}
	return sums
}

// sumSeries adds up the samples of a text exposition that match a selector of the form
// name or name{label="value"}.
func sumSeries(exposition, selector string) float64 {
	name, matcher, _ := strings.Cut(selector, "{")
	matcher = strings.TrimSuffix(matcher, "}")
	var sum float64
	sc := bufio.NewScanner(strings.NewReader(exposition))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		series, value, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		n, labels, _ := strings.Cut(series, "{")
		if n != name || (matcher != "" && !strings.Contains(labels, matcher)) {
			continue
		}
		v, err := strconv.ParseFloat(strings.Fields(value)[0], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}

// startPrometheus runs Prometheus on 127.0.0.1, scraping the metrics Service's endpoints with the
// scraper's token, until the spec ends; it returns its address.
func startPrometheus(bin, token string) string {
	dir := GinkgoT().TempDir()
	Expect(os.WriteFile(filepath.Join(dir, "token"), []byte(token), 0o600)).To(Succeed())
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	addr := l.Addr().String()
	Expect(l.Close()).To(Succeed())
	cfg := fmt.Sprintf(`global:
  scrape_interval: 2s
  scrape_timeout: 2s
scrape_configs:
- job_name: fencedlock
  scheme: https
  authorization:
    credentials_file: %s
  tls_config:
    insecure_skip_verify: true
  file_sd_configs:
  - files: [%s]
    refresh_interval: 2s
`, filepath.Join(dir, "token"), filepath.Join(dir, "targets.json"))
	// Debian builds Prometheus without the Kubernetes service discovery: the targets are the
	// metrics Service's ready endpoints, as kubernetes_sd (role endpoints) would find them, written
	// to a file_sd file.
	targets, err := json.Marshal([]map[string]any{{"targets": metricsEndpoints(),
		"labels": map[string]string{"service": metricsService, "namespace": managerNamespace}}})
	Expect(err).NotTo(HaveOccurred())
	Expect(os.WriteFile(filepath.Join(dir, "targets.json"), targets, 0o600)).To(Succeed())
	Expect(os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600)).To(Succeed())
	log, err := os.Create(filepath.Join(dir, "prometheus.log"))
	Expect(err).NotTo(HaveOccurred())
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr)
	cmd.Stdout, cmd.Stderr = log, log
	Expect(cmd.Start()).To(Succeed())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	DeferCleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		_ = log.Close()
		if CurrentSpecReport().Failed() {
			b, _ := os.ReadFile(log.Name())
			fmt.Fprintf(GinkgoWriter, "---- prometheus log ----\n%s\n", b)
		}
	})
	Eventually(func() error {
		select {
		case <-exited:
			b, _ := os.ReadFile(log.Name())
			StopTrying("Prometheus exited:\n" + string(b)).Now()
		default:
		}
		resp, err := http.Get("http://" + addr + "/-/ready")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s", resp.Status)
		}
		return nil
	}, time.Minute, 500*time.Millisecond).Should(Succeed(), "Prometheus did not become ready")
	return addr
}

// promQuery evaluates an instant query that yields one number (NaN-free sums); no result is 0.
func promQuery(addr, q string) float64 {
	resp, err := http.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape(q))
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	var r struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	Expect(json.NewDecoder(resp.Body).Decode(&r)).To(Succeed())
	Expect(r.Status).To(Equal("success"), q)
	if len(r.Data.Result) == 0 {
		return 0
	}
	v, err := strconv.ParseFloat(r.Data.Result[0].Value[1].(string), 64)
	Expect(err).NotTo(HaveOccurred())
	return v
}
