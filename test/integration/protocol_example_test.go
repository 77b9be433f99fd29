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
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/onsi/gomega/gexec"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lease"
	"github.com/fencedlock/fencedlock/pkg/lock"
	"github.com/fencedlock/fencedlock/pkg/token"
	"github.com/fencedlock/fencedlock/test/conformance"
	"github.com/fencedlock/fencedlock/test/util"
)

// The functions of the shell example of docs/protocol.md (docs/examples/fencedlock.sh) (grant, renew, release, join,
// wait_turn, beat, leave), run as an ordinary user against the real API server and manager: on
// contended locks, beside Go clients and pods, and on the states of the conformance table
// (runner (c) of pkg/lease/testdata/conformance.yaml).

// exampleFunctions sources the example's functions: sourced, docs/examples/fencedlock.sh runs
// nothing of its own.
func exampleFunctions() string { return "source " + strconv.Quote(exampleScript()) }

// shell runs the example's functions as the user of kubeconfig; home keeps kubectl's discovery
// cache between runs.
type shell struct{ kubeconfig, ns, assets, home string }

func newShell(ns string) shell {
	for _, tool := range []string{"bash", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			Skip(tool + " is not installed")
		}
	}
	assets, err := util.Assets()
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return shell{kubeconfig: shellUser(ns, "shell-"+ns), ns: ns, assets: assets, home: GinkgoT().TempDir()}
}

// command is bash running the example's functions, then body, with env.
func (s shell) command(lockName, me, body string, env ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "bash", "-c", exampleFunctions()+"\n"+body)
	cmd.Env = append(os.Environ(), "PATH="+s.assets+string(os.PathListSeparator)+os.Getenv("PATH"),
		"KUBECONFIG="+s.kubeconfig, "HOME="+s.home, "NS="+s.ns, "LOCK="+lockName, "ME="+me)
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// run runs body to its end and returns its output and exit status.
func (s shell) run(lockName, me, body string, env ...string) (string, int) {
	out, err := s.command(lockName, me, body, env...).CombinedOutput()
	GinkgoWriter.Printf("$ %s\n%s\n", body, out)
	if exit, ok := errors.AsType[*exec.ExitError](err); ok {
		return string(out), exit.ExitCode()
	}
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return string(out), 0
}

// holderBody takes the lock, renews it until the file $STOP exists, then releases it and says
// which resourceVersion the release was conditioned on.
const holderBody = `grant
echo "acquired with token $TOKEN"
while [ ! -e "$STOP" ]; do renew; sleep 0.2; done
release
echo "released at resourceVersion $RV"`

// startHolder starts holderBody as me and returns its session, its token and the file that ends it.
func (s shell) startHolder(lockName, me string) (*gexec.Session, token.Token, string) {
	stop := filepath.Join(GinkgoT().TempDir(), "stop")
	sess, err := gexec.Start(s.command(lockName, me, holderBody, "STOP="+stop), GinkgoWriter, GinkgoWriter)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	DeferCleanup(func() { sess.Kill() })
	EventuallyWithOffset(1, sess.Out, 20*time.Second).Should(gbytes.Say(`acquired with token (\d+)`))
	m := acquiredWith.FindStringSubmatch(string(sess.Out.Contents()))
	ExpectWithOffset(1, m).NotTo(BeNil())
	tok, err := token.Parse(m[1])
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return sess, tok, stop
}

var (
	releasedAt   = regexp.MustCompile(`released at resourceVersion (\d+)`)
	acquiredWith = regexp.MustCompile(`acquired with token (\d+)`)
)

// stopHolder ends holderBody and returns the resourceVersion its release was conditioned on.
func stopHolder(sess *gexec.Session, stop string) string {
	ExpectWithOffset(1, os.WriteFile(stop, nil, 0o600)).To(Succeed())
	EventuallyWithOffset(1, sess, 20*time.Second).Should(gexec.Exit(0))
	m := releasedAt.FindStringSubmatch(string(sess.Out.Contents()))
	ExpectWithOffset(1, m).NotTo(BeNil(), "%s", sess.Out.Contents())
	return m[1]
}

var _ = Describe("The shell client's functions on contended locks", func() {
	It("hands the lock to the queued Go client in the release write", func() {
		ns := kit.NewNamespace()
		kit.NewLock(ns, "ledger", util.LeaseSeconds(15))
		sh := newShell(ns)
		sess, shellTok, stop := sh.startHolder("ledger", "shell/holder")

		By("a Go client queues behind the shell holder")
		got, _ := acquireAsync(ctx, kit.Locker(ns, "ledger", "go-waiter"))
		Eventually(func() []string { return waiterIDs(ns, "ledger") }, 10*time.Second, 20*time.Millisecond).
			Should(Equal([]string{"go-waiter"}))
		Eventually(func() bool { return kit.LeaseState(ns, "ledger").Waiting }, 10*time.Second, 20*time.Millisecond).Should(BeTrue())

		By("the shell's release grants it in the same write")
		rv := stopHolder(sess, stop)
		var g *lock.Grant
		Eventually(got, 10*time.Second).Should(Receive(&g))
		Expect(g.Token().String()).To(Equal(rv), "the token is the resourceVersion the shell's release was conditioned on")
		Expect(g.Token()).To(BeNumerically(">", shellTok))
		st := kit.LeaseState(ns, "ledger")
		Expect(st.Holder).To(Equal("go-waiter"))
		Expect(st.Waiting).To(BeTrue(), "a handover keeps the waiting mark, even to the last waiter")
		Expect(g.Release(ctx)).To(Succeed())
		Expect(kit.LeaseState(ns, "ledger").Waiting).To(BeFalse(), "the next release read the queue empty and cleared the mark")
	})

	It("keeps the lock for a queued pod, refuses its own grant on the reserved lock, and the manager grants the pod", func() {
		ns := kit.NewNamespace()
		kit.NewLock(ns, "ledger", util.LeaseSeconds(15))
		sh := newShell(ns)
		sess, shellTok, stop := sh.startHolder("ledger", "shell/holder")

		pod := kit.CreatePod(util.Pod(ns, "worker-0", "ledger"))
		podID := locksv1alpha1.PodHolderIdentity(pod.Name, string(pod.UID))
		Eventually(func() []string { return waiterIDs(ns, "ledger") }, 10*time.Second, 20*time.Millisecond).
			Should(Equal([]string{podID}))
		Eventually(func() bool { return kit.LeaseState(ns, "ledger").Waiting }, 10*time.Second, 20*time.Millisecond).Should(BeTrue())
		podTicket := queueOf(ns, "ledger").Waiters[0].Ticket

		By("with the manager stopped, the shell's release keeps the free lock for the pod")
		stopManager()
		restarted := false
		DeferCleanup(func() {
			if !restarted {
				startManager()
			}
		})
		stopHolder(sess, stop)
		st := kit.LeaseState(ns, "ledger")
		Expect(st.Held()).To(BeFalse())
		Expect(st.Reserved).To(Equal(podTicket))
		Expect(st.Waiting).To(BeTrue())
		Expect(st.Token).To(Equal(shellTok), "a release keeps the token")

		By("the script's grant refuses the reserved lock itself, before any write")
		rv := kit.GetLease(ns, "ledger").ResourceVersion
		out, code := sh.run("ledger", "shell/other", "grant")
		Expect(code).To(Equal(3), out)
		Expect(out).To(ContainSubstring(fmt.Sprintf("lock ledger is free but kept for the queued pod with ticket %s: the manager grants it; join the queue", podTicket)))
		Expect(kit.GetLease(ns, "ledger").ResourceVersion).To(Equal(rv), "no write")

		By("the manager grants the pod")
		startManager()
		restarted = true
		Eventually(func() string { return kit.LeaseState(ns, "ledger").Holder }, 10*time.Second, 20*time.Millisecond).Should(Equal(podID))
		Eventually(func() string { return kit.GetPod(ns, pod.Name).Annotations[locksv1alpha1.TokenAnnotation] },
			10*time.Second, 20*time.Millisecond).ShouldNot(BeEmpty())
		podTok, err := token.Parse(kit.GetPod(ns, pod.Name).Annotations[locksv1alpha1.TokenAnnotation])
		Expect(err).NotTo(HaveOccurred())
		Expect(podTok).To(BeNumerically(">", shellTok))
		Expect(kit.LeaseState(ns, "ledger").Reserved).To(BeZero())

		By("the script's grant refuses the held lock")
		out, code = sh.run("ledger", "shell/other", "grant")
		Expect(code).To(Equal(3), out)
		Expect(out).To(ContainSubstring("lock ledger is held by " + podID))
	})

	It("skips a dead head the manager dropped, and grants the live Go waiter behind it", func() {
		ns := kit.NewNamespace()
		// lease.Window(4 s): a waiter unseen for 4 s is dead. Not shorter: the shell holder renews
		// with a kubectl read and write per step, and starved of CPU (a benchmark beside the suite)
		// it once missed a 2 s lease.
		kit.NewLock(ns, "ledger", util.LeaseSeconds(4))
		sh := newShell(ns)
		sess, _, stop := sh.startHolder("ledger", "shell/holder")

		By("a dead client heads the queue, a live Go client waits behind it")
		joinAs(ns, "ledger", "dead-client")
		got, _ := acquireAsync(ctx, kit.Locker(ns, "ledger", "go-waiter"))
		Eventually(func() []string { return waiterIDs(ns, "ledger") }, 10*time.Second, 20*time.Millisecond).
			Should(Equal([]string{"dead-client", "go-waiter"}))

		By("the manager drops the dead entry after one lease duration")
		Eventually(func() []string { return lockEventReasons(ns, "ledger") }, 10*time.Second, 50*time.Millisecond).
			Should(ContainElement(locksv1alpha1.ReasonWaiterDead))
		Eventually(func() []string { return waiterIDs(ns, "ledger") }, 10*time.Second, 20*time.Millisecond).
			Should(Equal([]string{"go-waiter"}))
		Expect(queueOf(ns, "ledger").Waiters).To(ConsistOf(HaveField("Holder", "go-waiter")))

		By("the shell's release grants the live waiter")
		rv := stopHolder(sess, stop)
		var g *lock.Grant
		Eventually(got, 10*time.Second).Should(Receive(&g))
		Expect(g.Token().String()).To(Equal(rv))
		Expect(g.Release(ctx)).To(Succeed())
	})

	It("queues a shell waiter that beats, is served by a Go holder's release, and can leave", func() {
		ns := kit.NewNamespace()
		// lease.Window(5 s). A handover's grant expires one window after the waiter's last beat was
		// seen; a shell waiter runs a few processes (kubectl, jq) per step, which on a loaded 2-core
		// machine took more than the 3 s window this spec used to have.
		kit.NewLock(ns, "ledger", util.LeaseSeconds(5))
		sh := newShell(ns)
		holder, err := kit.Locker(ns, "ledger", "go-holder").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		util.KeepAlive(holder, 0)

		By("the shell's grant is refused and it joins the queue; its beats outlive the lease duration")
		waiter, err := gexec.Start(sh.command("ledger", "shell/waiter",
			`grant || { [ $? = 3 ] && join && echo "joined with ticket $TICKET" && wait_turn; }
echo "acquired with token $TOKEN"
release`), GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { waiter.Kill() })
		Eventually(waiter.Err, 10*time.Second).Should(gbytes.Say("lock ledger is held by go-holder .*: join the queue"))
		Eventually(waiter.Out, 10*time.Second).Should(gbytes.Say(`joined with ticket \d+`))
		Eventually(func() []string { return waiterIDs(ns, "ledger") }, 10*time.Second, 20*time.Millisecond).
			Should(Equal([]string{"shell/waiter"}))
		Expect(kit.LeaseState(ns, "ledger").Waiting).To(BeTrue(), "join marked the lock waited for")
		Consistently(func() []string { return waiterIDs(ns, "ledger") }, 5500*time.Millisecond, 200*time.Millisecond).
			Should(Equal([]string{"shell/waiter"}), "a beating shell waiter outlives the 5 s window")
		Expect(lockEventReasons(ns, "ledger")).NotTo(ContainElement(locksv1alpha1.ReasonWaiterDead))

		By("the Go holder's release hands the lock to the shell waiter")
		before := kit.GetLease(ns, "ledger").ResourceVersion
		Expect(holder.Release(ctx)).To(Succeed())
		Eventually(waiter, 20*time.Second).Should(gexec.Exit(0))
		Expect(string(waiter.Out.Contents())).To(ContainSubstring("acquired with token " + before))

		By("a shell waiter that leaves removes its entry and writes fencedlock.io/left")
		again, err := kit.Locker(ns, "ledger", "go-holder").TryAcquire(ctx)
		Expect(err).NotTo(HaveOccurred())
		util.KeepAlive(again, 0)
		out, code := sh.run("ledger", "shell/quitter", `join; echo "ticket $TICKET"; leave`)
		Expect(code).To(BeZero(), out)
		Expect(queueOf(ns, "ledger").Waiters).To(BeEmpty())
		var ticket string
		_, err = fmt.Sscanf(out[strings.Index(out, "ticket "):], "ticket %s", &ticket)
		Expect(err).NotTo(HaveOccurred())
		Expect(kit.GetLease(ns, "ledger").Annotations).To(HaveKeyWithValue(locksv1alpha1.LeftAnnotation, ticket))
		Expect(again.Release(ctx)).To(Succeed())
		Expect(kit.LeaseState(ns, "ledger").Waiting).To(BeFalse(), "the release read an empty queue")
	})
})

// Runner (c) of the conformance table: its client cases that the example's functions implement,
// from the installed state before, compared with the state after the table gives.
var _ = Describe("The conformance table through the shell client's functions", Ordered, ContinueOnFailure, func() {
	cases, loadErr := conformanceCases()
	var (
		ns    string
		sh    shell
		names = map[string]string{}
	)
	// body is the shell run of a case, "" when the example has no function for it.
	body := func(c conformance.Case) string {
		if c.Actor == "manager" {
			return ""
		}
		switch c.Transition {
		case "grant", "renew", "release":
			return c.Transition
		case "markWaiting":
			return "read_lease; mark_waiting"
		case "markLeft":
			return "leave" // leave is the queue's leave, then markLeft
		case "join":
			return `join; echo "ticket $TICKET"`
		case "beat", "leave":
			return c.Transition
		}
		return ""
	}

	BeforeAll(func() {
		Expect(loadErr).NotTo(HaveOccurred())
		ns = kit.NewNamespace()
		sh = newShell(ns)
		for i, c := range cases {
			if body(c) == "" || c.Before.Token == "" {
				continue
			}
			names[c.Name] = fmt.Sprintf("sh-%02d", i)
			kit.NewLock(ns, names[c.Name], util.LeaseSeconds(15))
		}
		for _, name := range names {
			Eventually(func() error {
				_, err := clientset.CoordinationV1().Leases(ns).Get(ctx, lease.QueueOf(kit.GetLease(ns, name)), metav1.GetOptions{})
				return err
			}, 10*time.Second, 20*time.Millisecond).Should(Succeed())
		}
		By("stopping the manager, so that nothing but the script writes the installed state")
		stopManager()
		DeferCleanup(startManager)
	})

	for _, c := range cases {
		if body(c) == "" || c.Before.Token == "" {
			continue
		}
		It(c.Name, func() {
			name := names[c.Name]
			c := installTickets(ns, name, c)
			waiterBefore := waiterOf(ns, name, c.Actor)
			lk := installConformance(ns, name, c)
			tok := lk.Annotations[locksv1alpha1.TokenAnnotation]
			if st, err := lease.Read(lk); err == nil && st.Semaphore {
				if p, ok := st.HolderOf(c.Actor); ok {
					tok = p.Token.String() // a semaphore's holder presents its own permit's token
				}
			}
			if c.Args.Token != "" {
				tok = c.Args.Token
			}
			env := []string{"TOKEN=" + tok, fmt.Sprintf("TICKET=%d", c.Args.Ticket)}
			out, code := sh.run(name, c.Actor, body(c), env...)

			if r := c.Expect.Refused; r != nil {
				switch r.Error {
				case "HeldError":
					if strings.Contains(r.Message, "already holds a permit") { // one identity, one permit: wait
						Expect(code).To(Equal(4), out)
						Expect(out).To(ContainSubstring(c.Actor + " already holds a permit of " + name))
						break
					}
					Expect(code).To(Equal(3), out)
					Expect(out).To(ContainSubstring("join the queue"))
				case "VersionError":
					Expect(code).To(Equal(5), out)
					Expect(out).To(ContainSubstring(r.Message))
				case "LostError":
					Expect(code).To(Equal(2), out)
					Expect(out).To(ContainSubstring("is lost"))
				case "NotQueued":
					if c.Transition == "beat" {
						Expect(code).To(Equal(3), out)
					} else {
						Expect(code).To(BeZero(), "leave without an entry goes on to write fencedlock.io/left: %s", out)
					}
					Expect(waiterOf(ns, name, c.Actor)).To(Equal(waiterBefore), "the waiter Lease is unchanged")
					return
				case "ServedWhileLeaving":
					Expect(code).To(BeZero(), out)
					Expect(kit.LeaseState(ns, name).Held()).To(BeFalse(), "a waiter served before it left releases the lock")
					return
				default:
					Fail("no shell check for refusal " + r.Error)
				}
				Expect(kit.GetLease(ns, name).ResourceVersion).To(Equal(lk.ResourceVersion), "a refusal writes nothing")
				return
			}
			Expect(code).To(BeZero(), out)
			w := c.Expect.Admitted
			if c.WritesWaiter() {
				expectConformanceWaiter(ns, name, c, waiterBefore, *w.Waiter)
				if c.Transition == "join" {
					Expect(out).To(ContainSubstring("ticket " + waiterOf(ns, name, c.Actor).ResourceVersion))
					Expect(kit.LeaseState(ns, name).Waiting).To(BeTrue(), "join marks the lock waited for")
				}
				return
			}
			expectConformanceLease(ns, name, c, lk, w)
		})
	}
})
