package wire_test

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vacuumops/vacuum-operator/internal/server/latency"
	"github.com/vacuumops/vacuum-operator/internal/server/wire"
)

// adaptiveRow is the adaptive throttle's columns of pg_stat_progress_vacuum.
type adaptiveRow struct {
	binding  *string
	budget   *int32
	boundFG  *int64
	scanned  int64
	costDly  int64
	finished bool
}

func readAdaptive(t *testing.T, c *pgx.Conn, pid uint32) adaptiveRow {
	t.Helper()
	var r adaptiveRow
	err := c.QueryRow(context.Background(), `SELECT adaptive_binding, adaptive_budget_per_mille, adaptive_foreground_latency_ms,
		heap_blks_scanned, cost_delay_us FROM pg_stat_progress_vacuum WHERE pid = $1`, int32(pid)).
		Scan(&r.binding, &r.budget, &r.boundFG, &r.scanned, &r.costDly)
	if err == pgx.ErrNoRows {
		r.finished = true
		return r
	}
	if err != nil {
		t.Fatalf("read pg_stat_progress_vacuum: %v", err)
	}
	return r
}

func (r adaptiveRow) String() string {
	s := func(p *string) string {
		if p == nil {
			return "NULL"
		}
		return *p
	}
	i := func(p *int32) string {
		if p == nil {
			return "NULL"
		}
		return fmt.Sprint(*p)
	}
	return fmt.Sprintf("binding %s budget %s scanned %d cost_delay_us %d finished %v", s(r.binding), i(r.budget), r.scanned, r.costDly, r.finished)
}

// pointReads runs point reads of table fg on c until stop closes, counting them.
func pointReads(t *testing.T, c *pgx.Conn, rows int, stop <-chan struct{}, n *atomic.Int64, wg *sync.WaitGroup) {
	reads(t, c, "SELECT n FROM fg WHERE id = $1", rows, stop, n, wg)
}

// reads runs q (one bigint parameter, one bigint result) on c until stop closes.
func reads(t *testing.T, c *pgx.Conn, q string, rows int, stop <-chan struct{}, n *atomic.Int64, wg *sync.WaitGroup) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		ctx := context.Background()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			var v int64
			if err := c.QueryRow(ctx, q, int64(i%rows+1)).Scan(&v); err != nil {
				t.Errorf("%s: %v", q, err)
				return
			}
			n.Add(1)
		}
	}()
}

// serverP99 is the median, over a second of 100 ms samples, of the server's own recent
// foreground p99 (what the adaptive throttle steers by).
func serverP99(s *testServer) time.Duration {
	var ds []time.Duration
	for range 10 {
		time.Sleep(100 * time.Millisecond)
		if d, n := s.srv.Latency().RecentQuantile(99); n > 0 {
			ds = append(ds, d)
		}
	}
	if len(ds) == 0 {
		return 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2]
}

// TestAdaptiveThrottleCutsTheBudgetLiveWhenTheForegroundMissesItsTarget drives the
// server's adaptive throttle through pgx: a foreground of whole-table scans on one
// connection, a VACUUM at its static ceiling (adaptive columns NULL: no target), then a
// latency target set live through vacuum_set_throttle at a quarter of the foreground's
// p99 (measured at the test's start, so the target is missed whatever the vacuum does):
// within 3 s the view shows a budget below 1000 and the run's cost delay stretched past
// the ceiling's by the budget; a bad value is 22023; setting the target back to 0
// restores the ceiling, with the time bound below it counted. With LogAdaptive the server's
// log has a line for the cut, with what the judgement read.
func TestAdaptiveThrottleCutsTheBudgetLiveWhenTheForegroundMissesItsTarget(t *testing.T) {
	start := time.Now()
	var logMu sync.Mutex
	var logged []string
	s := startServer(t, wire.Config{LogAdaptive: true, Logf: func(format string, args ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		logged = append(logged, fmt.Sprintf(format, args...))
	}})
	ctl := connect(t, s.url("ctl", "", "postgres"))
	const fgRows = 1000
	mustExec(t, ctl, "CREATE TABLE fg (id bigint PRIMARY KEY, n bigint)")
	mustExec(t, ctl, fmt.Sprintf("INSERT INTO fg SELECT g, g FROM generate_series(1, %d) g", fgRows))
	bloated(t, ctl, "bloat")

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var nreads atomic.Int64
	defer func() { close(stop); wg.Wait() }()
	fg := connect(t, s.url("app", "", "postgres"))
	reads(t, fg, "SELECT count(*) FROM fg WHERE n >= $1 - $1", fgRows, stop, &nreads, &wg)
	alone := serverP99(s)
	if alone <= 0 {
		t.Fatal("no foreground p99 after a second of scans")
	}

	vac := connect(t, s.url("vacuum-runner", "", "postgres"))
	pid := vac.PgConn().PID()
	// At most 250 buffer hits (12 pages dirtied) a second at the ceiling: the vacuum runs for several seconds.
	mustExec(t, vac, "SET vacuum_cost_delay = 20")
	mustExec(t, vac, "SET vacuum_cost_limit = 5")
	done := make(chan error, 1)
	go func() {
		_, err := vac.Exec(context.Background(), "VACUUM bloat")
		done <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for r := readAdaptive(t, ctl, pid); r.finished || r.scanned == 0; r = readAdaptive(t, ctl, pid) {
		if time.Now().After(deadline) {
			t.Fatal("the VACUUM scanned nothing within 5 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if r := readAdaptive(t, ctl, pid); r.binding != nil || r.budget != nil || r.costDly != 20000 {
		t.Fatalf("before any target: %s, want NULL adaptive columns and the ceiling's 20000 µs", r)
	}

	target := alone / 4
	if !callBool(t, ctl, "SELECT vacuum_set_throttle($1, 'vacuum_adaptive_latency_target', $2)", int32(pid), fmt.Sprintf("%dus", target.Microseconds())) {
		t.Fatal("vacuum_set_throttle of the running VACUUM = false")
	}
	var r adaptiveRow
	deadline = time.Now().Add(3 * time.Second)
	for r = readAdaptive(t, ctl, pid); !r.finished && (r.budget == nil || *r.budget >= 1000); r = readAdaptive(t, ctl, pid) {
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("p99 %v, target %v: %s after %v", alone, target, r, time.Since(start))
	if r.finished || r.budget == nil || *r.budget >= 1000 || r.binding == nil {
		t.Fatalf("3 s after a target below the foreground's p99: %s, want a budget below 1000", r)
	}
	if want := 20000 * 1000 / int64(*r.budget); r.costDly < want*9/10 || r.costDly > want*11/10 {
		t.Fatalf("cost delay %d µs at budget %d‰, want the ceiling's 20000 µs stretched to ~%d", r.costDly, *r.budget, want)
	}
	cut := regexp.MustCompile(fmt.Sprintf(`^adaptive throttle of VACUUM \(pid %d\): latency p[0-9.]+ of \d+ statements \S+ \(\d+ over the \S+ target; judged as \S+, fresh true\); budget 1000 -> \d+ per mille(, paused)?, bound by \w+; the budget's use [0-9.]+$`, pid))
	logMu.Lock()
	found := slices.ContainsFunc(logged, cut.MatchString)
	lines := slices.Clone(logged)
	logMu.Unlock()
	if !found {
		t.Fatalf("the server logged no line for the cut from the ceiling; its log:\n%s", strings.Join(lines, "\n"))
	}
	// A bad value is refused with 22023 and changes nothing.
	if _, err := ctl.Exec(context.Background(), "SELECT vacuum_set_throttle($1, 'vacuum_adaptive_floor_per_mille', '0')", int32(pid)); sqlstate(err) != "22023" {
		t.Fatalf("vacuum_set_throttle of floor 0: %v, want 22023", err)
	}
	time.Sleep(500 * time.Millisecond) // time bound below the ceiling, for the views to count
	if !callBool(t, ctl, "SELECT vacuum_set_throttle($1, 'vacuum_adaptive_latency_target', '0')", int32(pid)) {
		t.Fatal("vacuum_set_throttle of target 0 = false")
	}
	deadline = time.Now().Add(2 * time.Second)
	for r = readAdaptive(t, ctl, pid); !r.finished && r.costDly != 20000; r = readAdaptive(t, ctl, pid) {
		if time.Now().After(deadline) {
			t.Fatalf("2 s after target 0: %s, want the ceiling's 20000 µs back", r)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var below int64
	if err := ctl.QueryRow(context.Background(), `SELECT adaptive_foreground_latency_ms + adaptive_floor_ms + adaptive_hard_stop_ms
		FROM pg_stat_progress_vacuum WHERE pid = $1`, int32(pid)).Scan(&below); err != nil {
		t.Fatalf("time bound below the ceiling: %v", err)
	}
	if r.finished || r.budget == nil || *r.budget != 1000 || *r.binding != "Ceiling" || below <= 0 {
		t.Fatalf("after target 0: %s, want budget 1000, Ceiling and the time bound below it counted (%d ms)", r, below)
	}
	callBool(t, ctl, "SELECT pg_cancel_backend($1)", int32(pid))
	if err := <-done; err != nil && sqlstate(err) != "57014" {
		t.Fatalf("VACUUM: %v", err)
	}
	if nreads.Load() == 0 {
		t.Fatal("the foreground read nothing")
	}
	t.Logf("wall time %v, %d scans", time.Since(start), nreads.Load())
}

// TestAdaptiveThrottleCutsWithinTwoSecondsOfAHeavierForegroundLoad measures at its start
// the foreground's p99 with one connection of point reads and with two connections of
// whole-table scans beside it (the heavier load),
// sets (with SET, before the VACUUM) a latency target between the two, and runs the VACUUM
// beside the light load; then starts the heavier load for real: the budget the progress
// view shows falls within 2 s, with ForegroundLatency binding (or HardStop/Floor beyond it).
func TestAdaptiveThrottleCutsWithinTwoSecondsOfAHeavierForegroundLoad(t *testing.T) {
	start := time.Now()
	s := startServer(t, wire.Config{})
	ctl := connect(t, s.url("ctl", "", "postgres"))
	const fgRows = 1000
	mustExec(t, ctl, "CREATE TABLE fg (id bigint PRIMARY KEY, n bigint)")
	mustExec(t, ctl, fmt.Sprintf("INSERT INTO fg SELECT g, g FROM generate_series(1, %d) g", fgRows))
	bloated(t, ctl, "bloat")

	var wg sync.WaitGroup
	var nreads atomic.Int64
	light := make(chan struct{})
	defer func() { close(light); wg.Wait() }()
	pointReads(t, connect(t, s.url("app", "", "postgres")), fgRows, light, &nreads, &wg)
	alone := serverP99(s)
	heavyConns := make([]*pgx.Conn, 2)
	for i := range heavyConns {
		heavyConns[i] = connect(t, s.url("app", "", "postgres"))
	}
	runHeavy := func() chan struct{} {
		stop := make(chan struct{})
		for _, c := range heavyConns {
			// Scans of the whole table: each as long as a few hundred point reads.
			reads(t, c, "SELECT count(*) FROM fg WHERE n >= $1 - $1", fgRows, stop, &nreads, &wg)
		}
		return stop
	}
	stopHeavy := runHeavy()
	heavy := serverP99(s)
	close(stopHeavy)
	time.Sleep(latencyDrain)
	if heavy < alone*3/2 {
		t.Fatalf("the heavier load's p99 %v is not clearly above the light load's %v: no target fits between them", heavy, alone)
	}
	target := time.Duration(math.Sqrt(float64(alone) * float64(heavy)))

	vac := connect(t, s.url("vacuum-runner", "", "postgres"))
	pid := vac.PgConn().PID()
	mustExec(t, vac, "SET vacuum_cost_delay = 20")
	mustExec(t, vac, "SET vacuum_cost_limit = 5")
	mustExec(t, vac, fmt.Sprintf("SET vacuum_adaptive_latency_target = '%dus'", target.Microseconds()))
	done := make(chan error, 1)
	go func() {
		_, err := vac.Exec(context.Background(), "VACUUM bloat")
		done <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	r := readAdaptive(t, ctl, pid)
	for ; r.finished || r.budget == nil; r = readAdaptive(t, ctl, pid) {
		if time.Now().After(deadline) {
			t.Fatalf("no adaptive budget within 5 s: %s", r)
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(time.Second) // the light load alone beside the vacuum
	before := readAdaptive(t, ctl, pid)
	if before.finished || before.budget == nil {
		t.Fatalf("before the heavier load: %s", before)
	}
	stopHeavy = runHeavy()
	defer close(stopHeavy)
	began := time.Now()
	for r = readAdaptive(t, ctl, pid); !r.finished && *r.budget >= *before.budget; r = readAdaptive(t, ctl, pid) {
		if time.Since(began) > 2*time.Second {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	fell := time.Since(began)
	t.Logf("p99 light %v, heavy %v, target %v; before the heavier load: %s; %v after it began: %s", alone, heavy, target, before, fell, r)
	if r.finished || *r.budget >= *before.budget || fell > 2*time.Second {
		t.Fatalf("the budget did not fall within 2 s of the heavier load: before %s, after %s", before, r)
	}
	if b := *r.binding; b != "ForegroundLatency" && b != "HardStop" && b != "Floor" {
		t.Fatalf("binding %s after the budget fell, want ForegroundLatency (or HardStop, Floor)", b)
	}
	callBool(t, ctl, "SELECT pg_cancel_backend($1)", int32(pid))
	if err := <-done; err != nil && sqlstate(err) != "57014" {
		t.Fatalf("VACUUM: %v", err)
	}
	t.Logf("wall time %v", time.Since(start))
}

// latencyDrain is how long the heavier load's statements take to leave the recent window:
// the law's first judgement of a VACUUM may look back latency.RecentMax for its statements.
const latencyDrain = latency.RecentMax + latency.RecentSlot
