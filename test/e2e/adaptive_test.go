package e2e

import (
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/pgtest"
)

// An adaptive online run on the dev cluster: the engine-server sample under a pgbench load
// at a fixed rate (-R), the foreground-latency target set between the load's p99 alone and
// its p99 under an unthrottled VACUUM (both measured here, at the start, from pgbench's
// per-transaction logs), then a second, heavier pgbench load against the same server: the server's
// controller cuts the VACUUM's rate on the latency it measures, nothing fakes the signal.

// pgbenchOf starts PostgreSQL 15's pgbench against the sample server as its app role; it
// is killed when the spec ends. The returned channel gets its exit.
func pgbenchOf(ns, addr string, args ...string) <-chan error {
	GinkgoHelper()
	bin, err := pgtest.Tool(suiteCtx, "pgbench")
	Expect(err).NotTo(HaveOccurred())
	host, port, err := net.SplitHostPort(addr)
	Expect(err).NotTo(HaveOccurred())
	ctx, stop := context.WithCancel(suiteCtx)
	cmd := exec.CommandContext(ctx, bin, append([]string{"-h", host, "-p", port, "-U", secretValue(ns, "shop-db-app", "username")}, append(args, "shop")...)...)
	cmd.Env = append(os.Environ(), "PGPASSWORD="+secretValue(ns, "shop-db-app", "password"), "PGSSLMODE=disable")
	cmd.Stdout, cmd.Stderr = GinkgoWriter, GinkgoWriter
	Expect(cmd.Start()).To(Succeed())
	done, exited := make(chan error, 1), make(chan struct{})
	go func() { done <- cmd.Wait(); close(exited) }()
	DeferCleanup(func() { stop(); <-exited })
	return done
}

// loadArgs is the load: pgbench select-only at a fixed rate (-R).
var loadArgs = []string{"-b", "select-only", "-R", "400", "-c", "4", "-j", "2", "-n"}

// loadP99 runs the load for d with per-transaction logs and returns the p99 of the
// transactions that ended while during ran (during returns its span; nil: the whole run).
// A latency here is the transaction's own time: pgbench's schedule lag (-R) is taken off.
func loadP99(ns, addr string, d time.Duration, during func() (time.Time, time.Time)) time.Duration {
	GinkgoHelper()
	dir := GinkgoT().TempDir()
	done := pgbenchOf(ns, addr, append(loadArgs, "-T", strconv.Itoa(int(d/time.Second)), "-l", "--log-prefix", filepath.Join(dir, "log"))...)
	from, to := time.Time{}, time.Now().Add(time.Hour)
	if during != nil {
		from, to = during()
	}
	Eventually(done).WithTimeout(d + 30*time.Second).Should(Receive(BeNil()))
	files, err := filepath.Glob(filepath.Join(dir, "log.*"))
	Expect(err).NotTo(HaveOccurred())
	var lat []time.Duration
	for _, f := range files {
		b, err := os.ReadFile(f)
		Expect(err).NotTo(HaveOccurred())
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			// client transaction time_us script epoch_s epoch_us schedule_lag_us
			fs := strings.Fields(line)
			Expect(fs).To(HaveLen(7), "pgbench log line %q", line)
			var v [7]int64
			for i, x := range fs {
				v[i], err = strconv.ParseInt(x, 10, 64)
				Expect(err).NotTo(HaveOccurred(), "pgbench log line %q", line)
			}
			if end := time.Unix(v[4], v[5]*1000); !end.Before(from) && !end.After(to) {
				lat = append(lat, time.Duration(v[2]-v[6])*time.Microsecond)
			}
		}
	}
	Expect(len(lat)).To(BeNumerically(">=", 20), "transactions in the measured span")
	slices.Sort(lat)
	return lat[(len(lat)*99+99)/100-1]
}

// serverBudget is the running VACUUM's adaptive binding and budget (per mille of the
// ceiling) as the server shows them; ok is false while no VACUUM runs with a target.
func serverBudget(c *pgx.Conn) (binding string, perMille int64, ok bool) {
	var b *string
	var pm *int64
	if err := c.QueryRow(suiteCtx, "SELECT adaptive_binding, adaptive_budget_per_mille FROM pg_stat_progress_vacuum").Scan(&b, &pm); err != nil || b == nil || pm == nil {
		return "", 0, false
	}
	return *b, *pm, true
}

// Pending, not passing: of two runs, the first passed (p99 5.85 ms alone, 35.5 ms under the
// unthrottled VACUUM, target 14.4 ms, ForegroundLatency at 84.7 %, the budget 932 -> 883 per
// mille 0.72 s after the heavier load), the second failed: the binding stayed Ceiling for
// 60 s (p99 4.99 ms alone, 32.6 ms unthrottled, target 12.8 ms). The ceiling of 100 units per
// ms is about a third of the unthrottled VACUUM's rate: sometimes it does not push the
// latency over the target; a ceiling at the unthrottled rate makes the VACUUM (1.7 s at
// scale 4) end before the heavier load. It needs a larger table or a ceiling derived from the
// measured unthrottled rate, and three greens, before it runs in make test.
var _ = Describe("An adaptive online run against the engine-server sample under pgbench at a fixed rate", func() {
	PIt("shows ForegroundLatency binding below the ceiling, and cuts the rate within 2 s when a heavier load raises the latency", func() {
		needEndpoints()
		ns := newNamespace()
		By("applying the engine-server sample and filling pgbench's tables (scale 4), every account updated once")
		kubectlRun("apply", "-n", ns, "-f", samplePath("engine_server.yaml"))
		server := podOf(ns, "shop-db")
		addr := net.JoinHostPort(server.Status.PodIP, "5432")
		check := sampleConn(ns, addr, "vacuum-runner-e2e") // not foreground
		Eventually(pgbenchOf(ns, addr, "-i", "-s", "4", "-q")).WithTimeout(2 * time.Minute).Should(Receive(BeNil()))
		bloat := func() {
			GinkgoHelper()
			_, err := check.Exec(suiteCtx, "UPDATE pgbench_accounts SET abalance = abalance + 1")
			Expect(err).NotTo(HaveOccurred())
		}
		bloat()

		By("measuring the load's p99 alone, then under an unthrottled VACUUM (pgbench select-only at -R 400, per-statement logs)")
		// A select-only transaction is one statement: pgbench's per-transaction log is the
		// load's statement latency, the figure the server's controller steers on.
		alone := loadP99(ns, addr, 3*time.Second, nil)
		var vacuumed time.Duration
		underVacuum := loadP99(ns, addr, 4*time.Second, func() (time.Time, time.Time) {
			time.Sleep(time.Second)
			t0 := time.Now()
			_, err := check.Exec(suiteCtx, "VACUUM pgbench_accounts")
			Expect(err).NotTo(HaveOccurred())
			vacuumed = time.Since(t0)
			return t0, time.Now()
		})
		bloat()
		GinkgoWriter.Printf("the load's p99: %v alone, %v under an unthrottled VACUUM (%v)\n", alone, underVacuum, vacuumed)
		Expect(underVacuum).To(BeNumerically(">", 2*alone), "the unthrottled VACUUM raises the load's p99 (else no target lies between)")

		By("starting the load for the run: the same pgbench select-only at -R 400")
		pgbenchOf(ns, addr, append(loadArgs, "-T", "600")...)
		// The geometric mean: as far (as a ratio) from either.
		target := time.Duration(math.Sqrt(float64(alone) * float64(underVacuum))).Round(100 * time.Microsecond)

		By(fmt.Sprintf("creating the run: a ceiling of 100 cost units per 1 ms, a p99 target of %v, the floor at 1 per mille", target))
		th := costThrottle(time.Millisecond, 100)
		th.Adaptive = &vacuumv1alpha1.AdaptiveThrottle{
			ForegroundLatency: &vacuumv1alpha1.ForegroundLatencyTarget{Target: metav1.Duration{Duration: target}},
			FloorPerMille:     ptr.To(int32(1)),
		}
		run := onlineRunOf(ns, "adaptive", th)
		run.Spec.Target.Tables = []string{"pgbench_accounts"}
		Expect(cluster.Client.Create(suiteCtx, run)).To(Succeed())
		Eventually(func(g Gomega) {
			a := getRun(run).Status.Adaptive
			g.Expect(a).NotTo(BeNil())
			g.Expect(a.Binding).To(Equal(vacuumv1alpha1.BindingForegroundLatency))
			g.Expect(a.BudgetPerMille).To(BeNumerically("<", 1000), "the effective rate is below the ceiling")
		}).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
		GinkgoWriter.Printf("status.adaptive: %+v\n", getRun(run).Status.Adaptive)

		By("starting a second, heavier load (pgbench tpcb-like, unthrottled): the server cuts the rate within 2 s")
		// The budget in force before, read from the server, with room above the floor to cut.
		var before int64
		Eventually(func() bool {
			b, pm, ok := serverBudget(check)
			before = pm
			return ok && b == string(vacuumv1alpha1.BindingForegroundLatency) && pm >= 20
		}).WithTimeout(30*time.Second).WithPolling(50*time.Millisecond).Should(BeTrue(), "the budget bound by ForegroundLatency at 2 %% of the ceiling or more")
		heavy := time.Now()
		pgbenchOf(ns, addr, "-b", "tpcb-like", "-c", "4", "-j", "2", "-T", "600", "-n")
		var after int64
		var binding string
		Eventually(func() bool {
			var ok bool
			binding, after, ok = serverBudget(check)
			return ok && after < before
		}).WithTimeout(2*time.Second).WithPolling(50*time.Millisecond).Should(BeTrue(), "the budget falls below %d per mille", before)
		GinkgoWriter.Printf("budget %d -> %d per mille (%s) %.2fs after the heavier load started\n", before, after, binding, time.Since(heavy).Seconds())
		Eventually(func() int32 { return getRun(run).Status.Adaptive.BudgetPerMille }).
			WithTimeout(10*time.Second).WithPolling(200*time.Millisecond).Should(BeNumerically("<", before), "status follows the server")

		By("lifting the adaptive throttle: the run ends Succeeded")
		kubectlRun("patch", "vacuumrun", "adaptive", "-n", ns, "--type=json", "-p", `[{"op":"remove","path":"/spec/throttle/adaptive"}]`)
		done := waitPhase(run, vacuumv1alpha1.RunSucceeded, 2*time.Minute)
		Expect(done.Status.Adaptive).NotTo(BeNil())
		Expect(done.Status.Adaptive.BoundSeconds.Of(vacuumv1alpha1.BindingForegroundLatency)).To(BeNumerically(">", 0))
	})
})
