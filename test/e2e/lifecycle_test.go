package e2e

import (
	"flag"
	"path/filepath"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// bigSpill runs the FULL whose sort runs exceed the runner pod's 64Mi /tmp (about 8 minutes
// here, most of it making the volume).
var bigSpill = flag.Bool("e2e.bigspill", false, "run the VACUUM FULL whose sort runs exceed 64Mi (slow)")

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
		// 834 heap pages, about 22,000 cost units at 5,000 units/s: about 4.5 s per attempt.
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

	It("vacuums tables whose names hold $ and $(VAR): the spec reaches the runner as a file, not an expanded arg", func() {
		ns := newNamespace()
		// As container args the kubelet would turn price$$ into price$ and $(POD_IP) into the
		// pod's IP, and the runner would refuse the tables as unknown (BadInput).
		tables := []string{"price$$", "a$(POD_IP)"}
		dir, dead := makeVolume(ns, "data",
			bloatTable{name: tables[0], rows: 5_000, payload: 100, deleted: 0.3},
			bloatTable{name: tables[1], rows: 5_000, payload: 100, deleted: 0.3})
		Expect(cluster.Client.Create(suiteCtx, policy(ns, "dollars", "data", vacuumv1alpha1.VacuumModeLazy, vacuumv1alpha1.Throttle{}, tables...))).To(Succeed())
		run := waitPhase(runOf(ns, "dollars"), vacuumv1alpha1.RunSucceeded, 3*time.Minute)
		Expect(run.Status.Totals.TuplesRemoved).To(Equal(sum(dead, tables...)))
		var names []string
		for _, t := range run.Status.Tables {
			names = append(names, t.Name)
		}
		Expect(names).To(ConsistOf(tables))
		expectCheckClean(dir)
	})

	It("runs a VACUUM FULL whose index sort spills, with its sort runs on the data volume", func() {
		ns := newNamespace()
		// 70,000 rows, 5% deleted: 66,500 index entries against 1Mi of sort memory (65,536
		// entries) spill a sort run, into pgsql_tmp in the data directory.
		dir, dead := makeVolume(ns, "data", bloatTable{name: "t", rows: 70_000, payload: 8, deleted: 0.05})
		p := policy(ns, "spill", "data", vacuumv1alpha1.VacuumModeFull, vacuumv1alpha1.Throttle{})
		p.Spec.MaintenanceWorkMem = ptr.To(resource.MustParse("1Mi"))
		Expect(cluster.Client.Create(suiteCtx, p)).To(Succeed())
		run := waitPhase(runOf(ns, "spill"), vacuumv1alpha1.RunSucceeded, 3*time.Minute)
		Expect(run.Status.Totals.TuplesRemoved).To(Equal(dead["t"]))
		Expect(filepath.Join(dir, "pgsql_tmp")).To(BeADirectory(), "the runner sorts on the data volume")
		expectCheckClean(dir)
	})

	It("runs a VACUUM FULL whose sort runs exceed the pod's 64Mi /tmp, which the local node evicts a pod for", func() {
		if !*bigSpill {
			Skip("slow: run with -e2e.bigspill")
		}
		ns := newNamespace()
		// 600,000 rows with 10 indexes, 5% deleted: 5.7 million index entries of 14 bytes
		// each, all spilled at once (79.8 MB, against 64Mi = 67.1 MB).
		dir, dead := makeVolume(ns, "data", bloatTable{name: "t", rows: 600_000, payload: 8, indexes: 10, deleted: 0.05})
		p := policy(ns, "bigspill", "data", vacuumv1alpha1.VacuumModeFull, vacuumv1alpha1.Throttle{})
		p.Spec.MaintenanceWorkMem = ptr.To(resource.MustParse("1Mi"))
		p.Spec.BackoffLimit = 0
		Expect(cluster.Client.Create(suiteCtx, p)).To(Succeed())
		run := waitPhase(runOf(ns, "bigspill"), vacuumv1alpha1.RunSucceeded, 15*time.Minute)
		Expect(run.Status.Attempts).To(BeEquivalentTo(1), "the pod was not evicted")
		Expect(run.Status.Totals.TuplesRemoved).To(Equal(dead["t"]))
		expectCheckClean(dir)
	})
})
