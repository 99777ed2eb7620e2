package traffic_test

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// connectNoticed opens a session whose notices (VACUUM VERBOSE's INFO lines) are collected.
func connectNoticed(t *testing.T, s *server) (*pgx.Conn, func() string) {
	t.Helper()
	cfg, err := pgx.ParseConfig(s.connString())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var notices []string
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		defer mu.Unlock()
		notices = append(notices, n.Severity+": "+n.Message)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c, func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(notices, "\n")
	}
}

// background runs pgbench in a goroutine; wait returns its outcome.
func background(t *testing.T, s *server, dir string, args ...string) (wait func() bench) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	done := make(chan bench, 1)
	go func() { done <- runPgbenchIn(ctx, t, dir, s.addr, args...) }()
	var once sync.Once
	var b bench
	wait = func() bench {
		once.Do(func() { b = <-done; cancel() })
		return b
	}
	t.Cleanup(func() { wait() })
	return wait
}

func scanInt(t *testing.T, c *pgx.Conn, q string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := c.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

var (
	verboseTuplesRE = regexp.MustCompile(`tuples: (\d+) removed, (\d+) remain(?: \(estimated\))?, (\d+) are dead but not yet removable`)
	verboseCutoffRE = regexp.MustCompile(`removable cutoff: (\d+), which was (\d+) XIDs old when operation ended`)
)

func atoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

const deadAccounts = "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'pgbench_accounts'"

// TestVacuumVerboseBesidePgbenchRemovesEveryTupleDeadBeforeItsCutoff runs VACUUM (VERBOSE)
// of pgbench_accounts while pgbench tpcb-like runs. VERBOSE prints the removable cutoff as
// PostgreSQL 15 does. Every tuple dead before the cutoff must be gone: afterwards
// n_dead_tup (exact on this server) is at most the tuples VERBOSE found dead but not yet
// removable plus the updates committed since the VACUUM started (tpcb-like updates one
// account per transaction and adds one history row, counted before and after). pgbench
// has no failure and the balances agree.
func TestVacuumVerboseBesidePgbenchRemovesEveryTupleDeadBeforeItsCutoff(t *testing.T) {
	s, _ := startPgbenchServer(t)
	c, notices := connectNoticed(t, s)
	wait := background(t, s, "", "-n", "-b", "tpcb-like", "-c", "8", "-j", "2", "-T", "8")
	time.Sleep(3 * time.Second)
	deadBefore := scanInt(t, c, deadAccounts)
	historyBefore := scanInt(t, c, "SELECT count(*) FROM pgbench_history")
	vacStart := time.Now()
	if _, err := c.Exec(context.Background(), "VACUUM (VERBOSE) pgbench_accounts"); err != nil {
		t.Fatalf("VACUUM (VERBOSE) beside pgbench: %v", err)
	}
	t.Logf("VACUUM (VERBOSE) took %v", time.Since(vacStart))
	deadAfter := scanInt(t, c, deadAccounts)
	historyAfter := scanInt(t, c, "SELECT count(*) FROM pgbench_history")
	verbose := notices()
	tm := verboseTuplesRE.FindStringSubmatch(verbose)
	cm := verboseCutoffRE.FindStringSubmatch(verbose)
	if tm == nil || cm == nil {
		t.Fatalf("VACUUM (VERBOSE) printed no tuples or removable cutoff line:\n%s", verbose)
	}
	removed, notYet, cutoff := atoi(t, tm[1]), atoi(t, tm[3]), atoi(t, cm[1])
	committedSince := historyAfter - historyBefore
	t.Logf("n_dead_tup %d before, %d after; VERBOSE: %d removed, %d dead but not yet removable, cutoff %s (%s XIDs old); %d transactions committed during and after",
		deadBefore, deadAfter, removed, notYet, cm[1], cm[2], committedSince)
	if deadBefore == 0 || removed == 0 || cutoff == 0 {
		t.Fatalf("nothing to test: %d dead before, %d removed, cutoff %d\n%s", deadBefore, removed, cutoff, verbose)
	}
	if deadAfter > notYet+committedSince {
		t.Fatalf("n_dead_tup after VACUUM is %d, more than the %d dead-but-not-removable plus %d updates committed since it started: tuples dead before the cutoff %d were left\n%s",
			deadAfter, notYet, committedSince, cutoff, verbose)
	}
	b := wait()
	b.ok(t, "tpcb-like beside VACUUM (VERBOSE)")
	t.Logf("pgbench: %d transactions, %.0f tps", b.processed, b.tps)
	balances(t, c).consistent(t, "after VACUUM (VERBOSE) beside tpcb-like")
}

// TestVacuumFullBesidePgbenchMakesItWaitAndNeverFail runs VACUUM FULL of pgbench_accounts
// (throttled to a read rate, so that the rewrite lasts about two seconds) while pgbench
// tpcb-like runs: pgbench waits for the table's lock (its slowest transaction lasts at least
// half the rewrite) and no transaction fails; the balances agree afterwards and the
// table lost its dead tuples.
func TestVacuumFullBesidePgbenchMakesItWaitAndNeverFail(t *testing.T) {
	s, _ := startPgbenchServer(t, "--buffer-pool", "8Mi")
	c := s.connect(t)
	logs := t.TempDir()
	wait := background(t, s, logs, "-n", "-l", "--failures-detailed", "--verbose-errors", "-b", "tpcb-like", "-c", "8", "-j", "2", "-T", "8")
	time.Sleep(2 * time.Second)
	if _, err := c.Exec(context.Background(), "SET vacuum_max_read_rate = '16MB'"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := c.Exec(context.Background(), "VACUUM FULL pgbench_accounts"); err != nil {
		t.Fatalf("VACUUM FULL beside pgbench: %v", err)
	}
	full := time.Since(start)
	b := wait()
	b.ok(t, "tpcb-like beside VACUUM FULL")
	lat := transactionLatencies(t, logs)
	slowest := slices.Max(lat)
	t.Logf("VACUUM FULL took %v; pgbench: %d transactions, slowest %v", full, b.processed, slowest)
	if full < 500*time.Millisecond {
		t.Fatalf("VACUUM FULL took only %v: too short to show pgbench waiting", full)
	}
	if slowest < full/2 {
		t.Fatalf("pgbench's slowest transaction took %v, less than half the %v rewrite: nothing waited for the lock", slowest, full)
	}
	balances(t, c).consistent(t, "after VACUUM FULL beside tpcb-like")
}

type progress struct {
	at          time.Time
	bytesRead   int64
	maxReadRate int64
}

func readVacuumProgress(t *testing.T, c *pgx.Conn, pid uint32) (progress, bool) {
	t.Helper()
	var p progress
	err := c.QueryRow(context.Background(),
		"SELECT now(), bytes_read, max_read_rate FROM pg_stat_progress_vacuum WHERE pid = $1", int32(pid)).
		Scan(&p.at, &p.bytesRead, &p.maxReadRate)
	if err == pgx.ErrNoRows {
		return p, false
	}
	if err != nil {
		t.Fatalf("read pg_stat_progress_vacuum: %v", err)
	}
	return p, true
}

// TestSetThrottleChangesARunningVacuumsRateWithinTenPercentAndCancelStopsIt runs a VACUUM of a
// bloated pgbench_accounts limited to 2 MiB/s of reads (a buffer pool smaller than the
// table, so that it reads) beside pgbench select-only, and measures its rate from
// pg_stat_progress_vacuum's bytes_read: within 10 % of 2 MiB/s. vacuum_set_throttle from
// another session raises the limit to 4 MiB/s: the view shows it within 2 s, and the rate over
// the next 3 s is within 10 % of it. pg_cancel_backend then stops the VACUUM (57014) at its
// next delay point, within a second. pgbench has no failure.
func TestSetThrottleChangesARunningVacuumsRateWithinTenPercentAndCancelStopsIt(t *testing.T) {
	s, _ := startPgbenchServer(t, "--buffer-pool", "8Mi")
	ctl := s.connect(t)
	if _, err := ctl.Exec(context.Background(), "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid % 3 = 0"); err != nil {
		t.Fatal(err)
	}
	wait := background(t, s, "", "-b", "select-only", "-M", "prepared", "-c", "2", "-j", "1", "-T", "15")
	vac := s.connect(t)
	pid := vac.PgConn().PID()
	if _, err := vac.Exec(context.Background(), "SET vacuum_max_read_rate = '2MB'"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := vac.Exec(context.Background(), "VACUUM pgbench_accounts")
		done <- err
	}()
	sample := func() progress {
		t.Helper()
		p, ok := readVacuumProgress(t, ctl, pid)
		if !ok {
			select {
			case err := <-done:
				t.Fatalf("VACUUM ended before the test was done measuring: %v", err)
			default:
			}
			t.Fatalf("no pg_stat_progress_vacuum row for pid %d", pid)
		}
		return p
	}
	within := func(what string, a, b progress, limit int64) {
		t.Helper()
		rate := float64(b.bytesRead-a.bytesRead) / b.at.Sub(a.at).Seconds()
		t.Logf("%s: %.0f B/s read over %v, limit %d B/s (%.1f %%)", what, rate, b.at.Sub(a.at), limit, 100*rate/float64(limit))
		if rate < 0.9*float64(limit) || rate > 1.1*float64(limit) {
			t.Fatalf("%s: VACUUM read %.0f B/s, not within 10 %% of its limit %d B/s", what, rate, limit)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if p, ok := readVacuumProgress(t, ctl, pid); ok && p.bytesRead > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the VACUUM read nothing within 10 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	a := sample()
	if a.maxReadRate != 2<<20 {
		t.Fatalf("max_read_rate %d, want %d", a.maxReadRate, 2<<20)
	}
	time.Sleep(2 * time.Second)
	within("at 2MB", a, sample(), 2<<20)

	var ok bool
	if err := ctl.QueryRow(context.Background(), "SELECT vacuum_set_throttle($1, 'vacuum_max_read_rate', '4MB')", int32(pid)).Scan(&ok); err != nil || !ok {
		t.Fatalf("vacuum_set_throttle: %v, %v", ok, err)
	}
	changed := time.Now()
	var from progress
	for {
		from = sample()
		if from.maxReadRate == 4<<20 {
			break
		}
		if time.Since(changed) > 2*time.Second {
			t.Fatalf("2 s after vacuum_set_throttle the view still shows max_read_rate %d", from.maxReadRate)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("the view showed the new limit %v after vacuum_set_throttle", time.Since(changed))
	time.Sleep(3 * time.Second)
	within("after vacuum_set_throttle to 4MB", from, sample(), 4<<20)

	if err := ctl.QueryRow(context.Background(), "SELECT pg_cancel_backend($1)", int32(pid)).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_cancel_backend: %v, %v", ok, err)
	}
	canceled := time.Now()
	select {
	case err := <-done:
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "57014" {
			t.Fatalf("VACUUM after pg_cancel_backend: %v, want 57014", err)
		}
		t.Logf("the VACUUM stopped %v after pg_cancel_backend", time.Since(canceled))
		if time.Since(canceled) > time.Second {
			t.Fatalf("the VACUUM took %v to stop after pg_cancel_backend", time.Since(canceled))
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the VACUUM was still running 5 s after pg_cancel_backend")
	}
	wait().ok(t, "select-only beside the throttled VACUUM")
}
