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
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/onsi/gomega/gexec"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	locksv1alpha1 "github.com/fencedlock/fencedlock/api/v1alpha1"
	"github.com/fencedlock/fencedlock/pkg/lock"
	"github.com/fencedlock/fencedlock/pkg/token"
	"github.com/fencedlock/fencedlock/test/util"
)

// The test binary doubles as the command run under the lock: with signalHelperEnv set it logs to
// the file in $FLOCK_HELPER_OUT its pid, each line it reads from stdin and each signal it receives
// (so a signal delivered twice shows as two lines), and exits 0 on SIGUSR1.
const signalHelperEnv = "FENCEDLOCK_TEST_SIGNAL_HELPER"

func init() {
	if os.Getenv(signalHelperEnv) != "" {
		os.Exit(signalHelper(os.Getenv("FLOCK_HELPER_OUT")))
	}
}

func signalHelper(out string) int {
	f, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 100
	}
	logLine := func(format string, args ...any) { _, _ = fmt.Fprintf(f, format+"\n", args...) }
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1)
	logLine("pid %d pgrp %d", os.Getpid(), syscall.Getpgrp())
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			logLine("line %s", sc.Text())
		}
	}()
	for s := range sigs {
		if s == syscall.SIGUSR1 {
			return 0
		}
		logLine("signal %s", s)
	}
	return 0
}

// alive reports whether pid is a process that has not exited (a zombie has).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}

// Issue 12: kubectl fencedlock as dependable as flock(1). The plugin runs as its own process
// against the real API server; so do the commands it runs.
var _ = Describe("kubectl fencedlock as flock(1)", Ordered, ContinueOnFailure, func() {
	var bin, kubeconfig, ns, stateDir, host string
	// mine matches the plugin's default identity: $USER@host/<pid>-<random>, one per process.
	mine := func() OmegaMatcher { return MatchRegexp(`^tester@%s/\d+-[0-9a-f]{4}$`, regexp.QuoteMeta(host)) }

	BeforeAll(func() {
		bin, kubeconfig = buildWithKubeconfig("github.com/fencedlock/fencedlock/cmd/kubectl-fencedlock", "flock-user")
		ns = kit.NewNamespace()
		stateDir = GinkgoT().TempDir()
		var err error
		host, err = os.Hostname()
		Expect(err).NotTo(HaveOccurred())
	})

	// env is what every plugin process gets: a known $USER, and a private directory for holds.
	env := func(extra ...string) []string {
		return append(append(os.Environ(), "USER=tester", "XDG_RUNTIME_DIR="+stateDir), extra...)
	}
	command := func(extraEnv []string, args ...string) *exec.Cmd {
		cmd := exec.Command(bin, append([]string{"--kubeconfig", kubeconfig, "-n", ns}, args...)...)
		cmd.Env = env(extraEnv...)
		return cmd
	}
	start := func(cmd *exec.Cmd) *gexec.Session {
		s, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { s.Kill() })
		return s
	}
	plugin := func(args ...string) *gexec.Session { return start(command(nil, args...)) }
	exits := func(code int, args ...string) (stdout, stderr string) {
		s := plugin(args...)
		EventuallyWithOffset(1, s, 30*time.Second).Should(gexec.Exit(code), "%v: %s", args, s.Err.Contents())
		return strings.TrimSpace(string(s.Out.Contents())), string(s.Err.Contents())
	}
	holder := func(name string) (string, string) {
		st := kit.LeaseState(ns, name)
		return st.Holder, st.Token.String()
	}
	// holdBy takes name for identity with the Go client and keeps it until the spec ends.
	holdBy := func(name, identity string) *lock.Grant {
		g, err := kit.Locker(ns, name, identity).TryAcquire(ctx)
		ExpectWithOffset(1, err).NotTo(HaveOccurred())
		DeferCleanup(func() { _ = g.Release(ctx) })
		util.KeepAlive(g, 0) // stopped before the release above (cleanups run last first)
		return g
	}
	helperLog := func(path string) func() string {
		return func() string { b, _ := os.ReadFile(path); return string(b) }
	}
	helperPid := func(path string) int {
		var pid int
		EventuallyWithOffset(1, func(g Gomega) {
			m := regexp.MustCompile(`pid (\d+)`).FindStringSubmatch(helperLog(path)())
			g.Expect(m).To(HaveLen(2))
			pid, _ = strconv.Atoi(m[1])
		}, 30*time.Second).Should(Succeed())
		return pid
	}

	Describe("run's process handling", func() {
		BeforeAll(func() { kit.NewLock(ns, "proc", util.LeaseSeconds(3)) })

		It("forwards SIGINT, SIGTERM, SIGHUP and SIGQUIT to the command once each, as a terminal sends them to the whole job", func() {
			out := filepath.Join(GinkgoT().TempDir(), "helper.log")
			cmd := command([]string{signalHelperEnv + "=1", "FLOCK_HELPER_OUT=" + out}, "run", "proc", "--", os.Args[0])
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // the plugin leads its job's group
			s := start(cmd)
			child := helperPid(out)
			DeferCleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL) })

			for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT} {
				Expect(syscall.Kill(-cmd.Process.Pid, sig)).To(Succeed()) // what a terminal does on Ctrl-C
				line := "signal " + sig.String()
				Eventually(func() int { return strings.Count(helperLog(out)(), line) }, 10*time.Second).Should(Equal(1), line)
				Consistently(func() int { return strings.Count(helperLog(out)(), line) }, "500ms").Should(Equal(1), line)
			}
			Expect(syscall.Kill(child, syscall.SIGUSR1)).To(Succeed())
			Eventually(s, 30*time.Second).Should(gexec.Exit(0), string(s.Err.Contents()))
			Expect(string(s.Err.Contents())).To(ContainSubstring("released proc"))
		})

		It("in a terminal, gives it to the command: it reads its input, gets one SIGINT per Ctrl-C, and Ctrl-Z does not suspend it", func() {
			script, err := exec.LookPath("script")
			if err != nil {
				Skip("script(1) from util-linux is needed for a pseudo-terminal")
			}
			// A job-control shell in a pseudo-terminal: it gives the plugin's job the terminal, as an
			// interactive shell does.
			dir := GinkgoT().TempDir()
			out := filepath.Join(dir, "helper.log")
			job := filepath.Join(dir, "job.sh")
			Expect(os.WriteFile(job, []byte(fmt.Sprintf("set -m\n%s=1 FLOCK_HELPER_OUT=%s %s --kubeconfig %s -n %s run proc -- %s\n"+
				"echo \"plugin exit status $?\"\n", signalHelperEnv, out, bin, kubeconfig, ns, os.Args[0])), 0o600)).To(Succeed())
			cmd := exec.Command(script, "-qec", "sh "+job, "/dev/null")
			cmd.Env = env()
			tty, err := cmd.StdinPipe()
			Expect(err).NotTo(HaveOccurred())
			s := start(cmd)
			DeferCleanup(func() { _ = tty.Close() })
			child := helperPid(out)
			DeferCleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL) })

			_, err = io.WriteString(tty, "hello\n")
			Expect(err).NotTo(HaveOccurred())
			Eventually(helperLog(out), 10*time.Second).Should(ContainSubstring("line hello"))

			_, err = io.WriteString(tty, "\x03") // Ctrl-C
			Expect(err).NotTo(HaveOccurred())
			count := func() int { return strings.Count(helperLog(out)(), "signal interrupt") }
			Eventually(count, 10*time.Second).Should(Equal(1))
			Consistently(count, "500ms").Should(Equal(1))

			_, err = io.WriteString(tty, "\x1a") // Ctrl-Z
			Expect(err).NotTo(HaveOccurred())
			time.Sleep(300 * time.Millisecond)
			_, err = io.WriteString(tty, "again\n")
			Expect(err).NotTo(HaveOccurred())
			Eventually(helperLog(out), 10*time.Second).Should(ContainSubstring("line again"), "still running")

			Expect(syscall.Kill(child, syscall.SIGUSR1)).To(Succeed())
			Eventually(s, 30*time.Second).Should(gexec.Exit(0), "the plugin takes the terminal back and exits")
			Expect(string(s.Out.Contents())).To(ContainSubstring("plugin exit status 0"))
			h, _ := holder("proc")
			Expect(h).To(BeEmpty())
		})

		It("dies of the signal that killed the command, after releasing, so the calling shell sees the interrupt", func() {
			cmd := command(nil, "run", "proc", "--", "sleep", "100")
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			s := start(cmd)
			Eventually(s.Err, 30*time.Second).Should(gbytes.Say("acquired proc"))
			Expect(syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)).To(Succeed())
			Eventually(s, 30*time.Second).Should(gexec.Exit())
			ws := s.Command.ProcessState.Sys().(syscall.WaitStatus)
			Expect(ws.Signaled()).To(BeTrue(), "exit status %d", ws.ExitStatus())
			Expect(ws.Signal()).To(Equal(syscall.SIGINT))
			Expect(string(s.Err.Contents())).To(ContainSubstring("released proc"))
		})

		It("kills the command when the plugin is killed with SIGKILL: it never outlives the lock", func() {
			pidFile := filepath.Join(GinkgoT().TempDir(), "child.pid")
			s := plugin("run", "proc", "--", "sh", "-c", "echo $$ > "+pidFile+"; exec sleep 1000")
			var pid int
			Eventually(func() error {
				b, err := os.ReadFile(pidFile)
				if err == nil {
					pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
				}
				return err
			}, 30*time.Second).Should(Succeed())
			DeferCleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
			Expect(alive(pid)).To(BeTrue())

			s.Kill()
			Eventually(s).Should(gexec.Exit())
			Eventually(func() bool { return alive(pid) }, 5*time.Second).Should(BeFalse(), "the command outlived the plugin")
		})
	})

	Describe("exit codes", func() {
		It("tells a lock that is busy (--no-wait) or still busy at --timeout apart from the command's status, and says who holds it", func() {
			kit.NewLock(ns, "busy", util.LeaseSeconds(15))
			g := holdBy("busy", "other")
			held := fmt.Sprintf(`held by "other" with token %s`, g.Token())

			_, stderr := exits(124, "run", "busy", "--no-wait", "--", "true")
			Expect(stderr).To(ContainSubstring(held))
			exits(3, "run", "busy", "--no-wait", "--conflict-exit-code", "3", "--", "true")
			_, stderr = exits(124, "acquire", "busy", "--no-wait")
			Expect(stderr).To(ContainSubstring(held))

			_, stderr = exits(124, "run", "busy", "--timeout", "1s", "--", "true")
			Expect(stderr).To(ContainSubstring(fmt.Sprintf("timed out after 1s waiting for FencedLock %s/busy: %s", ns, held)))
			Expect(stderr).NotTo(ContainSubstring("deadline exceeded"))
			_, stderr = exits(124, "acquire", "busy", "--timeout", "1s")
			Expect(stderr).To(ContainSubstring(fmt.Sprintf("timed out after 1s waiting for FencedLock %s/busy: %s", ns, held)))

			By("a signal ends the wait: run dies of it, the command never ran")
			waiting := command(nil, "run", "busy", "--", "touch", filepath.Join(GinkgoT().TempDir(), "ran"))
			s := start(waiting)
			Eventually(s.Err, 30*time.Second).Should(gbytes.Say(`waiting for busy: held by "other"`))
			Expect(waiting.Process.Signal(syscall.SIGTERM)).To(Succeed())
			Eventually(s, 30*time.Second).Should(gexec.Exit())
			Expect(s.Command.ProcessState.Sys().(syscall.WaitStatus).Signal()).To(Equal(syscall.SIGTERM))
			h, _ := holder("busy")
			Expect(h).To(Equal("other"))
		})

		It("exits 127 for a command that does not exist and 126 for one that cannot be executed, without taking the lock", func() {
			kit.NewLock(ns, "exec", util.LeaseSeconds(15))
			_, stderr := exits(127, "run", "exec", "--", "no-such-command-anywhere")
			Expect(stderr).To(ContainSubstring("no-such-command-anywhere"))
			plain := filepath.Join(GinkgoT().TempDir(), "not-executable")
			Expect(os.WriteFile(plain, []byte("echo hi\n"), 0o644)).To(Succeed())
			exits(126, "run", "exec", "--", plain)
			h, tok := holder("exec")
			Expect(h).To(BeEmpty())
			Expect(kit.GetLease(ns, "exec").Spec.LeaseTransitions).To(Or(BeNil(), HaveValue(BeZero())), "never granted; token %s", tok)
		})

		It("exits 123 when the lock is lost while the command runs, whatever the command then returns", func() {
			kit.NewLock(ns, "lost", util.LeaseSeconds(3))
			tokFile := filepath.Join(GinkgoT().TempDir(), "token")
			s := plugin("run", "lost", "--identity", "runner", "--grace", "1s", "--",
				"sh", "-c", "echo $FENCING_TOKEN > "+tokFile+"; trap 'exit 0' TERM; sleep 60 & wait")
			var tok token.Token
			Eventually(func() error {
				b, err := os.ReadFile(tokFile)
				if err == nil {
					tok, err = token.Parse(strings.TrimSpace(string(b)))
				}
				return err
			}, 30*time.Second).Should(Succeed())
			g, err := kit.Locker(ns, "lost", "runner").Attach(ctx, tok)
			Expect(err).NotTo(HaveOccurred())
			Expect(g.Release(ctx)).To(Succeed()) // someone releases the grant under the command's feet
			Eventually(s, 30*time.Second).Should(gexec.Exit(123))
			Expect(string(s.Err.Contents())).To(ContainSubstring("lost lock lost"))
		})
	})

	Describe("waiting, identity and flags", func() {
		It("waits by default, under an identity of its own that release and renew in other processes find from the token", func() {
			kit.NewLock(ns, "wait", util.LeaseSeconds(15))
			other := holdBy("wait", "other")
			s := plugin("acquire", "wait")
			Eventually(s.Err, 30*time.Second).Should(gbytes.Say(`waiting for wait: held by "other"`))
			Consistently(s, "1s").ShouldNot(gexec.Exit())
			Expect(other.Release(ctx)).To(Succeed())
			Eventually(s, 30*time.Second).Should(gexec.Exit(0), string(s.Err.Contents()))
			tok := strings.TrimSpace(string(s.Out.Contents()))
			h, _ := holder("wait")
			Expect(h).To(mine())

			exits(0, "renew", "wait", "--fencing-token", tok)
			exits(0, "release", "wait", "--fencing-token", tok)
			h, _ = holder("wait")
			Expect(h).To(BeEmpty())

			s = plugin("run", "wait", "--", "sh", "-c", "echo $FENCEDLOCK_HOLDER")
			Eventually(s, 30*time.Second).Should(gexec.Exit(0))
			ran := strings.TrimSpace(string(s.Out.Contents()))
			Expect(ran).To(mine())
			Expect(ran).NotTo(Equal(h), "each process holds under an identity of its own")
		})

		It("says a wait is for another process of the same user and host, and how to end it", func() {
			kit.NewLock(ns, "self", util.LeaseSeconds(30))
			tok, _ := exits(0, "acquire", "self") // a script that forgot to release
			s := plugin("acquire", "self")
			Eventually(s.Err, 30*time.Second).Should(gbytes.Say(fmt.Sprintf(
				`waiting for self: held by "tester@%s/\d+-[0-9a-f]{4}" \(token %s\), another process of tester@%s: `+
					`if none of yours still needs it, release it with "kubectl fencedlock release self -n %s --fencing-token %s"`,
				regexp.QuoteMeta(host), tok, regexp.QuoteMeta(host), ns, tok)))
			_, stderr := exits(124, "acquire", "self", "--no-wait")
			Expect(stderr).To(ContainSubstring("another process of tester@" + host))

			exits(0, "release", "self", "--fencing-token", tok)
			Eventually(s, 30*time.Second).Should(gexec.Exit(0), string(s.Err.Contents()))
			h, now := holder("self")
			Expect(h).To(mine())
			Expect(now).To(Equal(strings.TrimSpace(string(s.Out.Contents()))))
			exits(0, "release", "self", "--fencing-token", now)
		})

		It("renews and releases by token only the grants of this user and host: anyone else's needs --identity", func() {
			kit.NewLock(ns, "theirs", util.LeaseSeconds(15))
			g := holdBy("theirs", "alice@elsewhere/1-abcd")
			_, stderr := exits(1, "release", "theirs", "--fencing-token", g.Token().String())
			Expect(stderr).To(ContainSubstring(fmt.Sprintf(`token %s is held by "alice@elsewhere/1-abcd", not by a process of tester@%s`,
				g.Token(), host)))
			h, _ := holder("theirs")
			Expect(h).To(Equal("alice@elsewhere/1-abcd"))
			_, stderr = exits(1, "renew", "theirs", "--fencing-token", "999999")
			Expect(stderr).To(ContainSubstring("no grant with token 999999 is held"))
			exits(0, "release", "theirs", "--fencing-token", g.Token().String(), "--identity", "alice@elsewhere/1-abcd")
			h, _ = holder("theirs")
			Expect(h).To(BeEmpty())
		})

		It("shows a waiting plugin and a waiting Go client in WAITING and NEXT, and in the lock's status, in the order they asked", func() {
			kit.NewLock(ns, "seen", util.LeaseSeconds(15))
			first := holdBy("seen", "first")
			s := plugin("acquire", "seen")
			Eventually(s.Err, 30*time.Second).Should(gbytes.Say(`waiting for seen: held by "first"`))
			gotGo, _ := acquireAsync(ctx, kit.Locker(ns, "seen", "go-client"))
			Eventually(func() []string { return waiterIDs(ns, "seen") }, 30*time.Second, 50*time.Millisecond).
				Should(HaveExactElements(mine(), Equal("go-client")))
			me := waiterIDs(ns, "seen")[0]
			out, _ := exits(0, "get", "seen")
			Expect(out).To(MatchRegexp(`(?m)^seen\s+first\s+\d+\s+\S+ ago\s+2\s+`))
			GinkgoWriter.Printf("$ kubectl fencedlock get seen\n%s\n", out)
			out, _ = exits(0, "get", "seen", "-o", "wide")
			Expect(out).To(ContainSubstring(me + ",go-client"))
			GinkgoWriter.Printf("$ kubectl fencedlock get seen -o wide\n%s\n", out)

			By("each release serves the next in line: the plugin, then the Go client")
			Expect(first.Release(ctx)).To(Succeed())
			Eventually(s, 30*time.Second).Should(gexec.Exit(0), string(s.Err.Contents()))
			tok := strings.TrimSpace(string(s.Out.Contents()))
			Consistently(gotGo, "500ms").ShouldNot(Receive())
			exits(0, "release", "seen", "--fencing-token", tok)
			var g *lock.Grant
			Eventually(gotGo, 30*time.Second).Should(Receive(&g))
			Expect(g.Release(ctx)).To(Succeed())
		})

		It("fails at once, waiting or not, on a lock that does not exist", func() {
			for _, args := range [][]string{{"acquire", "nope"}, {"acquire", "nope", "--no-wait"}} {
				_, stderr := exits(1, args...)
				Expect(stderr).To(ContainSubstring(fmt.Sprintf("FencedLock %s/nope not found", ns)))
			}
			_, stderr := exits(125, "run", "nope", "--", "true")
			Expect(stderr).To(ContainSubstring(fmt.Sprintf("FencedLock %s/nope not found", ns)))
		})

		It("calls the fencing token --fencing-token everywhere: --token stays kubectl's bearer token", func() {
			for _, sub := range []string{"release", "renew", "stamp", "apply"} {
				help, _ := exits(0, sub, "--help")
				Expect(help).To(ContainSubstring("--fencing-token"), sub)
				Expect(help).To(MatchRegexp(`--token string\s+Bearer token`), sub)
			}
			_, stderr := exits(1, "release", "wait", "--token", "5")
			Expect(stderr).To(ContainSubstring("--fencing-token"))
		})

		It("validates -o before acquiring, and prints names, JSONPath, JSON and YAML like kubectl", func() {
			kit.NewLock(ns, "out", util.LeaseSeconds(15))
			_, stderr := exits(1, "acquire", "out", "-o", "bogus")
			Expect(stderr).To(ContainSubstring(`output format "bogus"`))
			h, _ := holder("out")
			Expect(h).To(BeEmpty(), "not acquired")

			name, _ := exits(0, "acquire", "out", "-o", "name")
			Expect(name).To(Equal("fencedlock.locks.fencedlock.io/out"))
			_, tok := holder("out")
			exits(0, "release", "out", "--fencing-token", tok)
			jp, _ := exits(0, "acquire", "out", "-o", "jsonpath={.status.holder} {.status.token}")
			h, tok = holder("out")
			Expect(h).To(mine())
			Expect(jp).To(Equal(h + " " + tok))
			exits(0, "release", "out", "--fencing-token", tok)

			name, _ = exits(0, "get", "out", "-o", "name")
			Expect(name).To(Equal("fencedlock.locks.fencedlock.io/out"))
			jp, _ = exits(0, "get", "out", "-o", "jsonpath={.spec.leaseDurationSeconds}")
			Expect(jp).To(Equal("15"))
			js, _ := exits(0, "get", "out", "-o", "json")
			Expect(js).To(ContainSubstring(`"kind": "FencedLock"`))
			Expect(js).NotTo(ContainSubstring("managedFields"))
			y, _ := exits(0, "get", "-o", "yaml")
			Expect(y).To(ContainSubstring("kind: FencedLockList"), "no name: a list, however many locks")
			Expect(y).NotTo(ContainSubstring("managedFields"))
		})

		// Issue 46, point 8: get had no watch mode.
		It("get -w prints the lock, then a row per change of its Lease or FencedLock, until Ctrl-C", func() {
			kit.NewLock(ns, "watched", util.LeaseSeconds(15))
			s := plugin("get", "watched", "-w")
			Eventually(s.Out, 30*time.Second).Should(gbytes.Say(`NAME\s+HOLDER\s+TOKEN\s+RENEWED\s+WAITING\s+AGE\n`))
			Eventually(s.Out, 30*time.Second).Should(gbytes.Say(`watched\s+<none>\s+\d+\s+<none>\s+0\s+`))
			g := holdBy("watched", "watcher-sees-me")
			Eventually(s.Out, 30*time.Second).Should(gbytes.Say(`watched\s+watcher-sees-me\s+` + g.Token().String() + `\s+\S+ ago\s+`))
			Expect(g.Release(ctx)).To(Succeed())
			Eventually(s.Out, 30*time.Second).Should(gbytes.Say(`watched\s+<none>\s+` + g.Token().String() + `\s+<none>\s+`))
			Expect(strings.Count(string(s.Out.Contents()), "NAME")).To(Equal(1), "one header")
			Consistently(s, "500ms").ShouldNot(gexec.Exit())
			s.Interrupt()
			Eventually(s, 10*time.Second).Should(gexec.Exit(0))

			_, stderr := exits(1, "get", "-w")
			Expect(stderr).To(ContainSubstring("--watch takes one LOCK"))
			_, stderr = exits(1, "get", "nope", "-w")
			Expect(stderr).To(ContainSubstring("not found"))
		})

		It(`says "No resources found in <ns> namespace." for an empty get`, func() {
			empty := kit.NewNamespace()
			s := start(exec.Command(bin, "--kubeconfig", kubeconfig, "-n", empty, "get"))
			Eventually(s, 30*time.Second).Should(gexec.Exit(0))
			Expect(string(s.Out.Contents())).To(BeEmpty())
			Expect(string(s.Err.Contents())).To(Equal(fmt.Sprintf("No resources found in %s namespace.\n", empty)))
		})

		It("stamp and apply use $FENCEDLOCK_NAMESPACE, which run sets from -n", func() {
			kit.NewLock(ns, "nsl", util.LeaseSeconds(15))
			manifest := filepath.Join(GinkgoT().TempDir(), "cm.yaml")
			Expect(os.WriteFile(manifest, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: nsbooks\ndata:\n  a: \"1\"\n"), 0o600)).To(Succeed())

			stamp := exec.Command(bin, "stamp", "-f", manifest, "--lock", "nsl", "--fencing-token", "7")
			stamp.Env = env("FENCEDLOCK_NAMESPACE=elsewhere")
			s := start(stamp)
			Eventually(s, 30*time.Second).Should(gexec.Exit(0), string(s.Err.Contents()))
			Expect(string(s.Out.Contents())).To(ContainSubstring("namespace: elsewhere"))

			// The command run under the lock names no namespace: it inherits the one run was given.
			_, stderr := exits(0, "run", "nsl", "--", bin, "--kubeconfig", kubeconfig, "apply", "-f", manifest, "--lock", "nsl")
			Expect(stderr).To(ContainSubstring("released nsl"))
			cm := &corev1.ConfigMap{}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "nsbooks"}, cm)).To(Succeed())
			_, tok := holder("nsl")
			Expect(cm.Annotations[locksv1alpha1.RecordedTokenAnnotation]).To(Equal(tok))
		})
	})

	// Issue 46, point 6: "run ... -- kubectl apply" was refused with a hint to use "kubectl
	// fencedlock run", which is what was run. The hints now name the writer that stamps the
	// token, with -n, and work as pasted (kubectl finds the plugin on PATH, as a user's does).
	It("refuses plain kubectl apply under run with a hint that works as pasted, and so does stamp without a token", func() {
		kit.NewLock(ns, "paste", util.LeaseSeconds(15))
		dir := GinkgoT().TempDir()
		manifest := filepath.Join(dir, "cm.yaml")
		Expect(os.WriteFile(manifest, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: pasted\n  labels:\n"+
			"    fencedlock.io/fenced-by: paste\ndata:\n  a: \"1\"\n"), 0o600)).To(Succeed())
		assets, err := util.Assets()
		Expect(err).NotTo(HaveOccurred())
		Expect(os.Symlink(bin, filepath.Join(dir, "kubectl-fencedlock"))).To(Succeed())
		shell := func(line string) *gexec.Session {
			c := exec.Command("sh", "-c", line)
			c.Env = env("PATH="+assets+":"+dir+":"+os.Getenv("PATH"), "KUBECONFIG="+kubeconfig)
			c.Dir = dir
			return start(c)
		}
		hint := regexp.MustCompile(`kubectl fencedlock run \S+ -n \S+ -- kubectl fencedlock apply -f FILE --lock \S+`)

		s := shell("kubectl fencedlock run paste -n " + ns + " -- kubectl apply -n " + ns + " -f cm.yaml")
		Eventually(s, 30*time.Second).Should(gexec.Exit(1))
		refusal := string(s.Err.Contents())
		Expect(refusal).To(ContainSubstring("plain kubectl sends no token, even under kubectl fencedlock run"))
		pasted := hint.FindString(refusal)
		Expect(pasted).NotTo(BeEmpty(), refusal)

		s = shell("kubectl fencedlock apply -n " + ns + " -f cm.yaml --lock paste")
		Eventually(s, 30*time.Second).Should(gexec.Exit(1))
		Expect(hint.FindString(string(s.Err.Contents()))).To(Equal(pasted), "stamp and apply give the same hint")

		s = shell(strings.Replace(pasted, "FILE", "cm.yaml", 1))
		Eventually(s, 30*time.Second).Should(gexec.Exit(0), string(s.Err.Contents()))
		cm := &corev1.ConfigMap{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pasted"}, cm)).To(Succeed())
		Expect(cm.Annotations).To(HaveKey(locksv1alpha1.RecordedTokenAnnotation))
	})

	Describe("completion, version and packaging", func() {
		It("completes subcommands and lock names, also through kubectl's kubectl_complete-fencedlock", func() {
			kit.NewLock(ns, "complete-me", util.LeaseSeconds(15))
			subs, _ := exits(0, "__complete", "")
			for _, sub := range []string{"acquire", "get", "release", "renew", "run", "stamp", "apply", "delete", "check", "version"} {
				Expect(subs).To(MatchRegexp(`(?m)^`+sub+`\t`), sub)
			}
			for _, sub := range []string{"acquire", "get", "delete"} {
				locks, _ := exits(0, "__complete", sub, "")
				Expect(locks).To(ContainSubstring("complete-me"), sub)
			}

			// kubectl calls kubectl_complete-fencedlock with the words after "kubectl fencedlock".
			dir := GinkgoT().TempDir()
			Expect(os.Symlink(bin, filepath.Join(dir, "kubectl-fencedlock"))).To(Succeed())
			script := filepath.Join(util.RepoRoot(), "cmd", "kubectl-fencedlock", "kubectl_complete-fencedlock")
			linked := filepath.Join(GinkgoT().TempDir(), "kubectl_complete-fencedlock")
			Expect(os.Symlink(bin, linked)).To(Succeed())
			for _, completer := range []string{script, linked} {
				c := exec.Command(completer, "-n", ns, "run", "")
				c.Env = env("PATH="+dir+":"+os.Getenv("PATH"), "KUBECONFIG="+kubeconfig)
				s := start(c)
				Eventually(s, 30*time.Second).Should(gexec.Exit(0), string(s.Err.Contents()))
				Expect(string(s.Out.Contents())).To(ContainSubstring("complete-me"), completer)
			}
		})

		It("prints its version: the module's, or the one set at link time", func() {
			out, _ := exits(0, "version")
			Expect(out).To(MatchRegexp(`^kubectl-fencedlock \S+`))
			stamped, err := gexec.Build("github.com/fencedlock/fencedlock/cmd/kubectl-fencedlock",
				"-ldflags", "-X main.version=v9.8.7-test")
			Expect(err).NotTo(HaveOccurred())
			s := start(exec.Command(stamped, "version"))
			Eventually(s, 30*time.Second).Should(gexec.Exit(0))
			Expect(string(s.Out.Contents())).To(HavePrefix("kubectl-fencedlock v9.8.7-test"))
		})
	})

	Describe("acquire --hold", func() {
		It("keeps the lock past its lease duration in the background until release, which stops the renewer", func() {
			kit.NewLock(ns, "hold", util.LeaseSeconds(2))
			tok, stderr := exits(0, "acquire", "hold", "--hold") // exits: the renewer keeps no pipe open
			Expect(tok).To(MatchRegexp(`^\d+$`))
			m := regexp.MustCompile(`in the background by pid (\d+)`).FindStringSubmatch(stderr)
			Expect(m).To(HaveLen(2), stderr)
			renewer, _ := strconv.Atoi(m[1])
			DeferCleanup(func() { _ = syscall.Kill(renewer, syscall.SIGKILL) })

			time.Sleep(5 * time.Second) // more than twice the lease
			h, now := holder("hold")
			Expect(h).To(mine())
			Expect(now).To(Equal(tok))
			Expect(alive(renewer)).To(BeTrue())

			_, stderr = exits(0, "release", "hold")
			Expect(stderr).To(ContainSubstring("released hold (token " + tok + ")"))
			h, _ = holder("hold")
			Expect(h).To(BeEmpty())
			Eventually(func() bool { return alive(renewer) }, 5*time.Second).Should(BeFalse())
		})

		// Issue 46, point 1: a release naming another identity (a typo) stopped the renewer
		// before the identity was checked, and the real holder's grant was revoked a lease later.
		It("keeps renewing when a release names another identity, and refuses that release", func() {
			kit.NewLock(ns, "typo", util.LeaseSeconds(2))
			tok, stderr := exits(0, "acquire", "typo", "--hold")
			m := regexp.MustCompile(`in the background by pid (\d+)`).FindStringSubmatch(stderr)
			Expect(m).To(HaveLen(2), stderr)
			renewer, _ := strconv.Atoi(m[1])
			DeferCleanup(func() { _ = syscall.Kill(renewer, syscall.SIGKILL) })

			_, stderr = exits(1, "release", "typo", "--identity", "someone-else")
			Expect(stderr).NotTo(ContainSubstring("stopped the background renewer"))
			Expect(alive(renewer)).To(BeTrue(), "the renewer of the real holder was stopped")
			time.Sleep(5 * time.Second) // more than twice the lease: the grant lives on its renewals
			h, now := holder("typo")
			Expect(h).To(mine())
			Expect(now).To(Equal(tok))

			exits(0, "release", "typo")
			Eventually(func() bool { return alive(renewer) }, 5*time.Second).Should(BeFalse())
		})

		It("stops renewing when the grant is lost, and release then says so", func() {
			tok, stderr := exits(0, "acquire", "hold", "--hold")
			m := regexp.MustCompile(`in the background by pid (\d+)`).FindStringSubmatch(stderr)
			Expect(m).To(HaveLen(2), stderr)
			renewer, _ := strconv.Atoi(m[1])
			DeferCleanup(func() { _ = syscall.Kill(renewer, syscall.SIGKILL) })
			_, stderr = exits(124, "acquire", "hold", "--hold", "--no-wait")
			Expect(stderr).To(ContainSubstring("already"))

			t, err := token.Parse(tok)
			Expect(err).NotTo(HaveOccurred())
			h, _ := holder("hold") // the identity of the acquire, which its renewer holds under
			Expect(h).To(mine())
			g, err := kit.Locker(ns, "hold", h).Attach(ctx, t)
			Expect(err).NotTo(HaveOccurred())
			Expect(g.Release(ctx)).To(Succeed())
			Eventually(func() bool { return alive(renewer) }, 5*time.Second).Should(BeFalse())

			_, stderr = exits(1, "release", "hold")
			Expect(stderr).To(ContainSubstring("was lost"))
		})
	})
})
