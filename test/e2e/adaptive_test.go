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
	"github.com/vacuumops/vacuum-operator/internal/server/latency"
)

// An adaptive online run on the dev cluster: the engine-server sample under a pgbench load
// at a fixed rate (-R), the foreground-latency target set between the load's p99 alone and
// its p99 under an unthrottled VACUUM (both measured here, at the start, as the server
// measures them), then a second, heavier pgbench load against the same server: the server's
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

// adaptiveScale is pgbench's scale for the spec, adaptiveHot the accounts its load reads
// and adaptiveFloor the run's floorPerMille.
const (
	adaptiveScale = 24
	adaptiveHot   = 50000
	adaptiveFloor = 50
)

// hotSelect is the load's pgbench script: select-only's SELECT of one account, drawn from
// the first adaptiveHot accounts, which fit the sample's 64Mi buffer pool (the whole
// table, about 440 MB at scale 24, does not).
var hotSelect = fmt.Sprintf("\\set aid random(1, %d)\nSELECT abalance FROM pgbench_accounts WHERE aid = :aid;\n", adaptiveHot)

// loadArgs is the load: hotSelect at a fixed rate (-R), from script, a file holding it.
func loadArgs(script string) []string {
	return []string{"-f", script, "-R", "400", "-c", "4", "-j", "2", "-n"}
}

// directIOSample is the engine-server sample with --direct-io added to the server's flags,
// written to a file of the spec's: the plant (see below). The sample itself stays
// buffered, as a user's server would usually be.
func directIOSample() string {
	GinkgoHelper()
	b, err := os.ReadFile(samplePath("engine_server.yaml"))
	Expect(err).NotTo(HaveOccurred())
	const flag = "        - --buffer-pool=64Mi\n"
	Expect(string(b)).To(ContainSubstring(flag), "the sample's --buffer-pool flag, after which --direct-io goes")
	p := filepath.Join(GinkgoT().TempDir(), "engine_server_direct_io.yaml")
	Expect(os.WriteFile(p, []byte(strings.Replace(string(b), flag, flag+"        - --direct-io\n", 1)), 0o600)).To(Succeed())
	return p
}

// serverP99 is the p99 of the foreground's SELECTs over the server's last latency.Window,
// as the server measures them (vacuumops_statement_latency), and how many it covers. A
// select-only pgbench transaction is one SELECT, so this is the load's statement latency
// as the server's controller sees it: the signal it steers on is the same recorder's p99
// over a shorter window. (pgbench's client-side latencies add the client's own scheduling
// on these two shared cores, so a target taken from them can sit above anything the
// server measures, and the binding then stays Ceiling.)
func serverP99(c *pgx.Conn) (time.Duration, int64) {
	GinkgoHelper()
	var us, n int64
	Expect(c.QueryRow(suiteCtx, "SELECT p99_us, count FROM vacuumops_statement_latency WHERE kind = 'select'").Scan(&us, &n)).To(Succeed())
	return time.Duration(us) * time.Microsecond, n
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
// output until the spec ends, read every 50 ms on c (which it then owns), and at least once
// a second with the server's SELECT p99: what the controller did, for a reader of a failed
// run.
func traceBudget(c *pgx.Conn, start time.Time) {
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		last, said := "", time.Time{}
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			b, pm, ok := serverBudget(c)
			if now := fmt.Sprintf("%s %d %v", b, pm, ok); now != last || time.Since(said) >= time.Second {
				var p99 int64
				_ = c.QueryRow(suiteCtx, "SELECT p99_us FROM vacuumops_statement_latency WHERE kind = 'select'").Scan(&p99)
				GinkgoWriter.Printf("%6.2fs server: binding %q budget %d per mille (VACUUM running: %v), SELECT p99 %v over %v\n",
					time.Since(start).Seconds(), b, pm, ok, time.Duration(p99)*time.Microsecond, latency.Window)
				last, said = now, time.Now()
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

// The plant, and why the spec is built so. The target comes from the server's own figures
// for the load's SELECTs (serverP99), the recorder the controller steers on. pgbench's
// client-side figures, which earlier tries used, are several times the server's (an earlier
// run: 5.0 ms alone, 14.8 ms under the VACUUM; the server: 0.22 to 2.1 ms alone), so a
// target between them could sit above anything the server saw, and the binding then stayed
// Ceiling.
//
// The plant is a server whose working set exceeds its cache: the sample's server, 64Mi of
// buffer pool, run with --direct-io (added to the sample's flags in a copy, directIOSample;
// the sample itself stays buffered), so that the pool is the tables' only cache and every
// miss goes to the device. pgbench_accounts at scale 24 is about 440 MB; the load reads the
// first 50,000 accounts, which fit the pool, so alone its SELECTs hit the pool, while the
// VACUUM reads and writes every page of the table through the device beside them. A
// quarter of the accounts is deleted, spread over every page (much cheaper than an UPDATE
// of every row), so each VACUUM has every page to clean; a CHECKPOINT follows each bulk
// change (the DELETEs, the unthrottled VACUUM), so that the one their WAL would start (the
// engine checkpoints every 64 MiB of WAL) falls in no measurement.
//
// Before it, no plant tried made the VACUUM, rather than the machine, set the load's p99:
// pgbench's select-only over the whole table against the sample as it is (buffered I/O,
// whose misses the page cache serves; the VACUUM's ring makes it pay for its own I/O)
// measured 1.08x to 7.9x from one run to the next, with or without a 1-CPU server, a write
// load or a synchronous standby.
//
// This plant does not either, once measured fairly. A study (2026-12-06) ran this spec's
// procedure against a local engine-server at -R 400 and read p99 under the unthrottled
// VACUUM over p99 alone: with --direct-io and the first 50,000 accounts, 2.9x to 40x in
// ten runs at load 2.4 to 10.3 (1.18x to 7.4x buffered); the spec's own 17 runs read 3.7x
// to 29x where they measured it, and 12 passed (two failed on a full disk, the machine's
// other tenants; one on a p99 alone read during a refill, an order since undone; two as
// below). But in every one of those the figure under the VACUUM was
// read while the load was reading its accounts back into the pool from the device: the
// study restarted the server for each run, and the spec's first DELETE evicts them, 0.3 s
// before the load and the VACUUM started. With that refill taken out (the load runs a
// window's length before the VACUUM, as the spec now does), one run at load 2.1 read 172
// µs alone and 342 µs under the unthrottled VACUUM (2.0x, under the 2x asserted); in
// another, on a quiet machine (load 1.9), the run's VACUUM at the ceiling left the load's
// p99 at 328 to 338 µs over the 10 s window and the binding stayed Ceiling until it ended.
// The study warm (the load 10 s before the VACUUM; load 1.7 to 3.1): the first 50,000
// accounts 2.30x and 1.88x (147 to 153 µs alone), select-only over the whole table, a
// working set above the pool, 2.22x (1.30 ms alone, 2.89 ms under).
// The passing runs' cuts below the ceiling were real VACUUM effects at load 3 to 11
// (the window's p99 rose from about 0.5 to 3.2 ms with the run's VACUUM at 917 per mille),
// and the heavier load put the law in HardStop 0.12 to 0.60 s after it started every time;
// but the law also went to HardStop and its floor before the heavier load in most runs, so
// the status the spec waits for (ForegroundLatency above the floor) was often the floor
// plus one raise (55 per mille). What the load waits for under the VACUUM was not traced:
// its pages are in the pool, so not the device itself; the CPU and the pool's locks held
// over the VACUUM's synchronous I/O are the candidates.
//
// PENDING again: with the load's pages in the pool, a quiet machine leaves the VACUUM's
// effect on the load's p99 near 2x or none, and a busy one adds its own. Next: a load that
// misses the pool for real (a working set above the pool), measured warm, or a plant on the
// real-cluster lane's own disk.
//
// The target is the geometric mean of the p99 alone and under the unthrottled VACUUM (the
// second asserted above twice the first): room above it for the p99 alone's noise, and the
// run's VACUUM at the ceiling, which is that VACUUM's measured rate, well over it. Earlier
// tries with a target a quarter or a third above the p99 alone went to HardStop on noise.
//
// The law steers on the p99 of at least 1,000 foreground statements (at most 2 s of them)
// run since its last change (latency.RecentQuantileSince): over the 500 ms it read before,
// about 200 statements at -R 400, one stall of this shared machine set the p99, and the law
// went to HardStop before the heavier load came in eight of the nine adaptive runs read. The
// trace of the server's binding and budget and the phase times in the spec's output say
// what happened in a failed run.
var _ = Describe("An adaptive online run against the engine-server sample under pgbench at a fixed rate", func() {
	PIt("shows ForegroundLatency binding below the ceiling, and cuts the rate within 2 s when a heavier load raises the latency", func() {
		needEndpoints()
		ns := newNamespace()
		start := time.Now()
		phase := func(what string) { GinkgoWriter.Printf("%6.1fs %s\n", time.Since(start).Seconds(), what) }
		By(fmt.Sprintf("applying the engine-server sample with --direct-io and filling pgbench's tables (scale %d), a quarter of the accounts deleted", adaptiveScale))
		kubectlRun("apply", "-n", ns, "-f", directIOSample())
		server := podOf(ns, "shop-db")
		addr := net.JoinHostPort(server.Status.PodIP, "5432")
		check := sampleConn(ns, addr, "vacuum-runner-e2e") // not foreground
		Eventually(pgbenchOf(ns, addr, "-i", "-s", strconv.Itoa(adaptiveScale), "-q")).WithTimeout(2 * time.Minute).Should(Receive(BeNil()))
		phase("pgbench -i")
		// checkpoint writes the pages a bulk change dirtied now, so that the checkpoint its
		// WAL would trigger does not fall in a measurement or the run.
		checkpoint := func() {
			GinkgoHelper()
			_, err := check.Exec(suiteCtx, "CHECKPOINT")
			Expect(err).NotTo(HaveOccurred())
		}
		// A quarter of the accounts deleted, spread over every page: each VACUUM has every
		// page to clean (a DELETE is cheaper to set up than an UPDATE of every row).
		bloat := func(k int) {
			GinkgoHelper()
			_, err := check.Exec(suiteCtx, fmt.Sprintf("DELETE FROM pgbench_accounts WHERE aid %% 4 = %d", k))
			Expect(err).NotTo(HaveOccurred())
			checkpoint()
		}
		bloat(0)
		phase("bloat")

		By(fmt.Sprintf("starting the load (pgbench, one SELECT of the first %d accounts, at -R 400), and measuring its p99 on the server under an unthrottled VACUUM, that VACUUM's rate, then the p99 alone", adaptiveHot))
		script := filepath.Join(GinkgoT().TempDir(), "hot_select.sql")
		Expect(os.WriteFile(script, []byte(hotSelect), 0o600)).To(Succeed())
		pgbenchOf(ns, addr, append(loadArgs(script), "-T", "600")...)
		// The DELETE evicted the load's accounts from the pool: the load reads them back for
		// a window's length before the VACUUM starts (else that refill, not the VACUUM, sets
		// the p99 read under it), and the p99 is read as the VACUUM ends: the server's window
		// then holds the load's SELECTs under the VACUUM and those of the seconds before.
		time.Sleep(latency.Window)
		vacuumed, rate := unthrottledVacuum(ns, addr, "pgbench_accounts")
		underVacuum, n := serverP99(check)
		Expect(n).To(BeNumerically(">=", 200), "the load's SELECTs in the server's window")
		phase("measured under VACUUM")
		checkpoint()
		// Then the window holds the load alone.
		time.Sleep(latency.Window + time.Second)
		alone, n := serverP99(check)
		Expect(n).To(BeNumerically(">=", 1000), "the load's SELECTs in the server's window")
		phase("measured alone")
		bloat(1)
		phase("bloat again")
		// The DELETE read the whole table through the pool and evicted the load's accounts,
		// which the load then reads back from the device for a while (the unthrottled VACUUM,
		// with its ring, does not evict them). The run starts once the load is back to about
		// its p99 alone, so that the law judges the VACUUM, not that refill.
		Eventually(func() time.Duration {
			p, _ := serverP99(check)
			return p
		}).WithTimeout(30*time.Second).WithPolling(500*time.Millisecond).Should(BeNumerically("<=", 2*alone),
			"the load's p99 over the server's window back to within twice its p99 alone after the DELETE")
		phase("the load's accounts back in the pool")
		GinkgoWriter.Printf("the load's p99 on the server: %v alone, %v under an unthrottled VACUUM (%v at %.0f cost units/s)\n", alone, underVacuum, vacuumed, rate)
		Expect(underVacuum).To(BeNumerically(">", alone*2), "the unthrottled VACUUM raises the load's p99 (else no target lies between)")

		// The geometric mean of the two: between them, with room for the p99 alone's noise
		// below it, and the run's VACUUM at the ceiling over it (see above).
		target := time.Duration(math.Sqrt(float64(alone) * float64(underVacuum))).Round(10 * time.Microsecond)
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
