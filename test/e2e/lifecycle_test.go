package e2e

import (
	"path/filepath"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

var _ = Describe("A vacuum run on the local dev cluster", func() {
	It("runs the sample lazy policy applied with kubectl and removes exactly the dead tuples bloat made", func() {
		ns := newNamespace()
		dir, dead := makeVolume(ns, "orders-data",
			bloatTable{name: "orders", rows: 20_000, payload: 100, deleted: 0.3},
			bloatTable{name: "events", rows: 10_000, payload: 100, deleted: 0.3, updated: 0.2})
		Expect(sum(dead, "orders", "events")).To(BeNumerically(">", 10_000))

		kubectlRun("apply", "-n", ns, "-f", filepath.Join(repoRoot, "config/samples/vacuum_v1alpha1_vacuumpolicy_lazy.yaml"))
		run := waitPhase(runOf(ns, "orders-lazy"), vacuumv1alpha1.RunSucceeded, 3*time.Minute)

		Expect(run.Status.Totals).NotTo(BeNil(), "a succeeded run reports its totals")
		Expect(run.Status.Totals.TuplesRemoved).To(Equal(sum(dead, "orders", "events")))
		expectCheckClean(dir)
		for _, s := range stats(dir) {
			Expect(s.DeadTuples).To(BeZero(), "table %s still has dead tuples", s.Name)
		}
		Expect(kubectlRun("get", "vacuumruns", "-n", ns)).To(ContainSubstring("Succeeded"))
	})

	It("stops a run on cancel and leaves a consistent volume", func() {
		ns := newNamespace()
		dir, _ := makeVolume(ns, "data", bloatTable{name: "t", rows: 30_000, payload: 300, deleted: 0.3})
		Expect(cluster.Client.Create(suiteCtx, policy(ns, "slow", "data", vacuumv1alpha1.VacuumModeLazy, costThrottle(10*time.Millisecond, 50)))).To(Succeed())
		run := runOf(ns, "slow")
		pod := runningPod(run)
		waitProgress(pod, "past the start", func(p runnerwire.Progress) bool { return p.PagesScanned > 0 })

		kubectlRun("patch", "vacuumrun", run.Name, "-n", ns, "--type=merge", "-p", `{"spec":{"cancel":true}}`)
		waitPhase(run, vacuumv1alpha1.RunCancelled, time.Minute)
		Eventually(func() error { _, err := progress(pod); return err }).WithTimeout(30*time.Second).ShouldNot(Succeed(),
			"the runner process should be gone once the run has ended")
		expectCheckClean(dir)
	})

	It("retries and then succeeds when the runner process is killed mid-run", func() {
		ns := newNamespace()
		dir, dead := makeVolume(ns, "data", bloatTable{name: "t", rows: 20_000, payload: 300, deleted: 0.3})
		// ~650 pages at 5,000 units/s: ~6 s per attempt.
		p := policy(ns, "killed", "data", vacuumv1alpha1.VacuumModeLazy, costThrottle(10*time.Millisecond, 50))
		p.Spec.BackoffLimit = 2
		Expect(cluster.Client.Create(suiteCtx, p)).To(Succeed())
		run := runOf(ns, "killed")
		pod := runningPod(run)
		waitProgress(pod, "past the start", func(p runnerwire.Progress) bool { return p.PagesScanned > 0 })

		Expect(syscall.Kill(runnerPid(pod), syscall.SIGKILL)).To(Succeed())
		done := waitPhase(run, vacuumv1alpha1.RunSucceeded, 3*time.Minute)
		Expect(done.Status.Attempts).To(BeNumerically(">=", 2), "the killed attempt is followed by a retry")
		Expect(done.Status.FailedAttempts).To(BeNumerically(">=", 1))
		expectCheckClean(dir)
		for _, s := range stats(dir) {
			Expect(s.DeadTuples).To(BeZero(), "table %s: the retry removes what the killed attempt left (%d dead before)", s.Name, dead[s.Name])
		}
	})
})
