package e2e

import (
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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

// adaptiveScale is pgbench's scale for the spec and adaptiveFloor the run's floorPerMille.
const (
	adaptiveScale = 8
	adaptiveFloor = 1
)

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

// traceBudget writes each change of the server's adaptive binding and budget to the spec's
// output until the spec ends, read every 50 ms on c (which it then owns): what the
// controller did, for a reader of a failed run.
func traceBudget(c *pgx.Conn, start time.Time) {
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		last := ""
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			b, pm, ok := serverBudget(c)
			if now := fmt.Sprintf("%s %d %v", b, pm, ok); now != last {
				GinkgoWriter.Printf("%6.2fs server: binding %q budget %d per mille (VACUUM running: %v)\n", time.Since(start).Seconds(), b, pm, ok)
				last = now
			}
		}
	}()
	DeferCleanup(func() { close(stop); <-stopped })
}

var (
	reVerboseBuffers = regexp.MustCompile(`buffer usage: (\d+) hits, (\d+) misses, (\d+) dirtied`)
	reVerboseElapsed = regexp.MustCompile(`system usage: elapsed ([0-9.]+) s`)
)

// unthrottledVacuum runs VACUUM (VERBOSE) of table, unthrottled, on a session of the
// vacuum role that is not foreground, and returns how long it ran on the server and its
// rate in cost units per second at the page costs of costThrottle (1, 2, 20), both from
// the VERBOSE report.
func unthrottledVacuum(ns, addr, table string) (elapsed time.Duration, unitsPerSecond float64) {
	GinkgoHelper()
	cfg, err := pgx.ParseConfig(fmt.Sprintf("postgres://%s/shop?sslmode=disable&application_name=vacuum-runner-e2e", addr))
	Expect(err).NotTo(HaveOccurred())
	cfg.User = secretValue(ns, "shop-db-vacuum", "username")
	cfg.Password = secretValue(ns, "shop-db-vacuum", "password")
	var report strings.Builder
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { report.WriteString(n.Message + "\n" + n.Detail + "\n") }
	c, err := pgx.ConnectConfig(suiteCtx, cfg)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = c.Close(context.Background()) }()
	_, err = c.Exec(suiteCtx, "VACUUM (VERBOSE) "+table)
	Expect(err).NotTo(HaveOccurred())
	b, e := reVerboseBuffers.FindStringSubmatch(report.String()), reVerboseElapsed.FindStringSubmatch(report.String())
	Expect(b).NotTo(BeNil(), "VACUUM VERBOSE's buffer usage in %q", report.String())
	Expect(e).NotTo(BeNil(), "VACUUM VERBOSE's elapsed time in %q", report.String())
	var n [3]float64
	for i := range n {
		n[i], err = strconv.ParseFloat(b[i+1], 64)
		Expect(err).NotTo(HaveOccurred())
	}
	secs, err := strconv.ParseFloat(e[1], 64)
	Expect(err).NotTo(HaveOccurred())
	Expect(secs).To(BeNumerically(">", 0), "VACUUM VERBOSE's elapsed time")
	return time.Duration(secs * float64(time.Second)), (n[0] + 2*n[1] + 20*n[2]) / secs
}

// The ceiling is the unthrottled VACUUM's own rate, measured beside the load: at the
// ceiling the run's VACUUM hurts the load as the unthrottled one did, so its p99 goes over
// any target below the p99 measured under the unthrottled VACUUM. (A fixed ceiling of 100
// units per ms, about a third of that rate, did not always push it over the target: the
// binding then stayed Ceiling.)
//
// Pending, not passing. With the fixed ceiling, one run of two passed and one failed (the
// binding stayed Ceiling for 60 s). With the derived ceiling: at scale 4 on a quiet machine
// the precondition failed (p99 6.5 ms alone, 11.4 ms under the unthrottled VACUUM); at
// scale 8 under load 3-4 it held (5.0 ms, 14.8 ms), but the run's VACUUM at the ceiling
// (495 units per ms) ran 2.3 s with the binding Ceiling throughout and ended before
// anything bound it. Unverified lead: the target comes from pgbench's client-side
// latencies, the server steers on its own statement latencies over latency.Recent, and on
// two cores the client's share of the CPU may be most of the difference. It needs three
// greens in a row before it runs in make test. The trace of the server's binding and
// budget and the phase times in the spec's output say what happened in a failed run.
var _ = Describe("An adaptive online run against the engine-server sample under pgbench at a fixed rate", func() {
	PIt("shows ForegroundLatency binding below the ceiling, and cuts the rate within 2 s when a heavier load raises the latency", func() {
		needEndpoints()
		ns := newNamespace()
		start := time.Now()
		phase := func(what string) { GinkgoWriter.Printf("%6.1fs %s\n", time.Since(start).Seconds(), what) }
		By(fmt.Sprintf("applying the engine-server sample and filling pgbench's tables (scale %d), every account updated once", adaptiveScale))
		kubectlRun("apply", "-n", ns, "-f", samplePath("engine_server.yaml"))
		server := podOf(ns, "shop-db")
		addr := net.JoinHostPort(server.Status.PodIP, "5432")
		check := sampleConn(ns, addr, "vacuum-runner-e2e") // not foreground
		Eventually(pgbenchOf(ns, addr, "-i", "-s", strconv.Itoa(adaptiveScale), "-q")).WithTimeout(2 * time.Minute).Should(Receive(BeNil()))
		phase("pgbench -i")
		bloat := func() {
			GinkgoHelper()
			_, err := check.Exec(suiteCtx, "UPDATE pgbench_accounts SET abalance = abalance + 1")
			Expect(err).NotTo(HaveOccurred())
		}
		bloat()
		phase("bloat")

		By("measuring the load's p99 alone, then under an unthrottled VACUUM and that VACUUM's rate (pgbench select-only at -R 400, per-transaction logs)")
		// A select-only transaction is one statement: pgbench's per-transaction log is the
		// load's statement latency, the figure the server's controller steers on.
		alone := loadP99(ns, addr, 3*time.Second, nil)
		var vacuumed time.Duration
		var rate float64
		underVacuum := loadP99(ns, addr, 4*time.Second, func() (time.Time, time.Time) {
			time.Sleep(time.Second)
			t0 := time.Now()
			vacuumed, rate = unthrottledVacuum(ns, addr, "pgbench_accounts")
			return t0, time.Now()
		})
		phase("measured")
		bloat()
		phase("bloat again")
		GinkgoWriter.Printf("the load's p99: %v alone, %v under an unthrottled VACUUM (%v at %.0f cost units/s)\n", alone, underVacuum, vacuumed, rate)
		Expect(underVacuum).To(BeNumerically(">", 2*alone), "the unthrottled VACUUM raises the load's p99 (else no target lies between)")

		By("starting the load for the run: the same pgbench select-only at -R 400")
		pgbenchOf(ns, addr, append(loadArgs, "-T", "600")...)
		// The geometric mean: as far (as a ratio) from either.
		target := time.Duration(math.Sqrt(float64(alone) * float64(underVacuum))).Round(100 * time.Microsecond)
		// The ceiling: the unthrottled VACUUM's rate, in cost units per 1 ms.
		limit := int32(min(10000, max(1, math.Round(rate/1000))))

		By(fmt.Sprintf("creating the run: a ceiling of %d cost units per 1 ms (the unthrottled rate), a p99 target of %v, the floor at %d per mille", limit, target, adaptiveFloor))
		th := costThrottle(time.Millisecond, limit)
		th.Adaptive = &vacuumv1alpha1.AdaptiveThrottle{
			ForegroundLatency: &vacuumv1alpha1.ForegroundLatencyTarget{Target: metav1.Duration{Duration: target}},
			FloorPerMille:     ptr.To(int32(adaptiveFloor)),
		}
		run := onlineRunOf(ns, "adaptive", th)
		run.Spec.Target.Tables = []string{"pgbench_accounts"}
		traceBudget(sampleConn(ns, addr, "vacuum-runner-e2e-trace"), start)
		Expect(cluster.Client.Create(suiteCtx, run)).To(Succeed())
		Eventually(func(g Gomega) {
			a := getRun(run).Status.Adaptive
			g.Expect(a).NotTo(BeNil())
			g.Expect(a.Binding).To(Equal(vacuumv1alpha1.BindingForegroundLatency))
			g.Expect(a.BudgetPerMille).To(BeNumerically("<", 1000), "the effective rate is below the ceiling")
		}).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
		phase("status ForegroundLatency")
		GinkgoWriter.Printf("status.adaptive: %+v\n", getRun(run).Status.Adaptive)

		By("starting a second, heavier load (pgbench tpcb-like, unthrottled): the server cuts the rate within 2 s")
		// The budget in force before, read from the server: bound by the latency, so above
		// the floor, with room to cut.
		var before int64
		Eventually(func() bool {
			b, pm, ok := serverBudget(check)
			before = pm
			return ok && b == string(vacuumv1alpha1.BindingForegroundLatency) && pm > adaptiveFloor
		}).WithTimeout(30*time.Second).WithPolling(50*time.Millisecond).Should(BeTrue(), "the budget bound by ForegroundLatency above the floor")
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
		phase("cut")

		By("lifting the adaptive throttle: the run ends Succeeded")
		kubectlRun("patch", "vacuumrun", "adaptive", "-n", ns, "--type=json", "-p", `[{"op":"remove","path":"/spec/throttle/adaptive"}]`)
		done := waitPhase(run, vacuumv1alpha1.RunSucceeded, 2*time.Minute)
		phase("succeeded")
		Expect(done.Status.Adaptive).NotTo(BeNil())
		Expect(done.Status.Adaptive.BoundSeconds.Of(vacuumv1alpha1.BindingForegroundLatency)).To(BeNumerically(">", 0))
	})
})
