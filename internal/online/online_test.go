package online_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vacuumops/vacuum-operator/internal/online"
	"github.com/vacuumops/vacuum-operator/internal/pgtest"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// One real PostgreSQL 15 serves every test of the package; each test has its own database.
var (
	pg           *pgtest.Server
	passwordFile string
	dbSeq        atomic.Int64
)

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var err error
	pg, err = pgtest.Start(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start PostgreSQL 15:", err)
		return 1
	}
	defer pg.Stop()
	passwordFile = filepath.Join(pg.Dir(), "runner-password")
	if err := os.WriteFile(passwordFile, []byte(pgtest.Password+"\n"), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// newDB creates a database for one test and returns a superuser session to it.
func newDB(t *testing.T) (string, *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("t%d", dbSeq.Add(1))
	if err := pg.CreateDatabase(ctx, name); err != nil {
		t.Fatal(err)
	}
	conn, err := pg.Connect(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return name, conn
}

func target(db string) online.Target {
	return online.Target{Address: pg.Addr(), Database: db, User: pgtest.Superuser,
		PasswordFile: passwordFile, SSLMode: online.SSLDisable, NoEnvironment: true}
}

func exec(t *testing.T, conn *pgx.Conn, sql string, args ...any) {
	t.Helper()
	if _, err := conn.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func scalar[T any](t *testing.T, conn *pgx.Conn, sql string, args ...any) T {
	t.Helper()
	var v T
	if err := conn.QueryRow(context.Background(), sql, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

// bloat creates table name with rows rows of padding bytes each and deletes every second
// one, then waits until the statistics show the dead tuples. It returns how many it deleted.
func bloat(t *testing.T, conn *pgx.Conn, name string, rows, padding int) int64 {
	t.Helper()
	id := pgx.Identifier{name}.Sanitize()
	exec(t, conn, "CREATE TABLE "+id+" (id int PRIMARY KEY, pad text) WITH (autovacuum_enabled = off)")
	exec(t, conn, "INSERT INTO "+id+" SELECT g, repeat('x', $1) FROM generate_series(1, $2) g", padding, rows)
	exec(t, conn, "DELETE FROM "+id+" WHERE id % 2 = 0")
	deleted := int64(rows / 2)
	waitDead(t, conn, name, func(n int64) bool { return n == deleted })
	return deleted
}

// waitDead waits (10 s at most) until n_dead_tup of table satisfies ok.
func waitDead(t *testing.T, conn *pgx.Conn, table string, ok func(int64) bool) int64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		exec(t, conn, "SELECT pg_stat_force_next_flush()")
		n := scalar[int64](t, conn, "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = $1", table)
		if ok(n) {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("n_dead_tup of %s is %d after 10s", table, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// recorder keeps every progress poll.
type recorder struct {
	mu   sync.Mutex
	seen []runnerwire.Progress
}

func (r *recorder) add(p runnerwire.Progress) { r.mu.Lock(); r.seen = append(r.seen, p); r.mu.Unlock() }

func (r *recorder) all() []runnerwire.Progress {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]runnerwire.Progress(nil), r.seen...)
}

// lastReplication is the replication part of the latest progress report, nil before any.
func (r *recorder) lastReplication() *runnerwire.Replication {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.seen) == 0 {
		return nil
	}
	return r.seen[len(r.seen)-1].Replication
}

// waitForKeptUpStandby waits for a progress report with the one standby in it and checks
// that a standby keeping up lags by less than 1 MiB.
func waitForKeptUpStandby(t *testing.T, rec *recorder) {
	t.Helper()
	waitUntil(t, 30*time.Second, "progress with the standby in it", func() bool {
		rp := rec.lastReplication()
		return rp != nil && rp.Standbys == 1
	})
	if rp := rec.lastReplication(); rp.LagBytes > 1<<20 {
		t.Errorf("lag %d bytes while the standby keeps up, want under 1 MiB: %+v", rp.LagBytes, rp)
	}
}

// waitForCaughtUpStandby waits, once a stopped standby runs again, for its lag to fall below a
// quarter of the bytes written while it was stopped, and checks that the run's maxima kept at
// least what was seen while it was stopped. It returns the last replication progress.
func waitForCaughtUpStandby(t *testing.T, rec *recorder, written int64, stopped runnerwire.Replication) *runnerwire.Replication {
	t.Helper()
	waitUntil(t, 30*time.Second, "the lag falling back once the standby runs again", func() bool {
		rp := rec.lastReplication()
		return rp != nil && rp.LagBytes < written/4
	})
	rp := rec.lastReplication()
	if rp.MaxLagBytes < stopped.LagBytes || rp.MaxLagSeconds < stopped.LagSeconds {
		t.Errorf("after the standby caught up: %+v, want the maxima at least those seen while it was stopped (%+v)", rp, stopped)
	}
	return rp
}

func limits(delay time.Duration, limit int) runnerwire.Limits {
	l := runnerwire.DefaultLimits()
	l.CostDelay, l.CostLimit = delay, limit
	return l
}

func TestLazyRunTakesDeadTuplesToZeroWithProgressMoving(t *testing.T) {
	db, conn := newDB(t)
	deleted := bloat(t, conn, "items", 40000, 200)
	ctx := context.Background()
	rec := &recorder{}
	// About 3,700 buffer hits at 1 unit each, 10 units per 10 ms: about 4 seconds.
	run, err := online.New(ctx, target(db), online.Options{Throttle: limits(10*time.Millisecond, 10),
		Parallelism: 1, OnProgress: rec.add})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = run.Close() }()
	if got := run.Server().String(); got != "PostgreSQL 15" {
		t.Errorf("detected %q, want PostgreSQL 15", got)
	}
	rep, err := run.Vacuum(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Tables) != 1 || rep.Tables[0].Table != "public.items" || rep.Totals.TablesVacuumed != 1 {
		t.Fatalf("report tables %+v, totals %+v; want public.items vacuumed", rep.Tables, rep.Totals)
	}
	tr := rep.Tables[0]
	if tr.TuplesRemoved != deleted || tr.TuplesRemaining != deleted {
		t.Errorf("VERBOSE says %d tuples removed, %d remain; want %d and %d", tr.TuplesRemoved, tr.TuplesRemaining, deleted, deleted)
	}
	if tr.PagesScanned == 0 || tr.BuffersDirtied == 0 || tr.WALBytes == 0 || len(tr.Indexes) != 1 || tr.Indexes[0].EntriesRemoved != deleted {
		t.Errorf("VERBOSE figures missing: %+v", tr)
	}
	if !strings.Contains(strings.Join(tr.Notices, "\n"), `finished vacuuming "`+db+`.public.items"`) {
		t.Errorf("notices do not hold PostgreSQL's VERBOSE summary: %q", tr.Notices)
	}
	waitDead(t, conn, "items", func(n int64) bool { return n == 0 })

	var moving []float64
	for _, p := range rec.all() {
		if p.Table == "public.items" && p.Percent > 0 && p.Percent < 100 && p.Phase != runnerwire.PhaseInitializing {
			if len(moving) == 0 || p.Percent > moving[len(moving)-1] {
				moving = append(moving, p.Percent)
			}
		}
	}
	if len(moving) < 2 {
		t.Errorf("progress did not move while the vacuum ran: %+v", rec.all())
	}
	if last := rec.all()[len(rec.all())-1]; last.Percent != 100 || last.TablesDone != 1 || last.ThrottleApplies != runnerwire.ThrottleAppliesNextTable {
		t.Errorf("last progress %+v, want 100%% with 1 table done and throttle applying from the next table", last)
	}
	for _, p := range rec.all() {
		if p.Foreground != nil || p.ForegroundBaseline != nil {
			t.Fatalf("progress %+v has a foreground: PostgreSQL has no latency histogram to read it from", p)
		}
		if p.SleptSeconds != nil {
			t.Fatalf("progress slept %v s: PostgreSQL counts no time slept, so it must be unset", *p.SleptSeconds)
		}
	}
	if rep.Totals.SleptSeconds != nil || tr.SleptSeconds != nil || rep.Foreground != nil {
		t.Errorf("report slept %v (table %v), foreground %+v: PostgreSQL reports neither, both must be unset",
			rep.Totals.SleptSeconds, tr.SleptSeconds, rep.Foreground)
	}
}

func TestFullShrinksTheTableKeepsItsRowsAndReportsClusterProgress(t *testing.T) {
	db, conn := newDB(t)
	bloat(t, conn, "orders", 3000, 300)
	// An index on a slow expression makes the rebuild last long enough for several polls;
	// it is built after the delete, so only the live rows pay for it twice.
	exec(t, conn, `CREATE FUNCTION slow(int) RETURNS int IMMUTABLE LANGUAGE plpgsql
		AS $$ BEGIN PERFORM pg_sleep(0.0002); RETURN $1; END $$`)
	exec(t, conn, "CREATE INDEX orders_slow ON orders (slow(id))")
	before := scalar[int64](t, conn, "SELECT pg_relation_size('orders')")
	rows := scalar[int64](t, conn, "SELECT count(*) FROM orders")
	ctx := context.Background()
	rec := &recorder{}
	run, err := online.New(ctx, target(db), online.Options{Full: true, Tables: []string{"orders"},
		Throttle: limits(0, 200), Parallelism: 1, OnProgress: rec.add, PollInterval: 250 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = run.Close() }()
	rep, err := run.Vacuum(ctx)
	if err != nil {
		t.Fatal(err)
	}
	after := scalar[int64](t, conn, "SELECT pg_relation_size('orders')")
	if after >= before || after > before*6/10 {
		t.Errorf("pg_relation_size %d -> %d: VACUUM FULL of a half-deleted table should shrink it to about half", before, after)
	}
	if got := scalar[int64](t, conn, "SELECT count(*) FROM orders"); got != rows {
		t.Errorf("rows %d -> %d; FULL must keep every live row", rows, got)
	}
	tr := rep.Tables[0]
	if tr.Mode != runnerwire.ModeFull || tr.PagesRemaining != after/8192 || tr.PagesRemoved != (before-after)/8192 || tr.TuplesRemaining != rows {
		t.Errorf("report %+v does not match sizes %d -> %d and %d rows", tr, before, after, rows)
	}
	phases := map[runnerwire.Phase]bool{}
	for _, p := range rec.all() {
		if p.Table == "public.orders" {
			phases[p.Phase] = true
		}
	}
	if !phases[runnerwire.PhaseRebuildingIndexes] && !phases[runnerwire.PhaseRewritingHeap] {
		t.Errorf("no pg_stat_progress_cluster phase seen in progress: %+v", rec.all())
	}
}

func TestCancellingTheRunCancelsTheServerSideVacuum(t *testing.T) {
	db, conn := newDB(t)
	bloat(t, conn, "events", 20000, 200)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	running := make(chan struct{})
	var once sync.Once
	// 1 cost unit per 100 ms: this vacuum would take hours.
	run, err := online.New(ctx, target(db), online.Options{Throttle: limits(100*time.Millisecond, 1),
		Parallelism: 1, PollInterval: 100 * time.Millisecond,
		OnProgress: func(p runnerwire.Progress) {
			if p.Phase == runnerwire.PhaseScanningHeap {
				once.Do(func() { close(running) })
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = run.Close() }()
	done := make(chan error, 1)
	go func() { _, err := run.Vacuum(ctx); done <- err }()
	select {
	case <-running:
	case err := <-done:
		t.Fatalf("vacuum ended before it was seen running: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the vacuum never showed up in pg_stat_progress_vacuum")
	}
	if n := scalar[int64](t, conn, "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'VACUUM%' AND state = 'active'"); n != 1 {
		t.Fatalf("%d VACUUMs running before the cancel, want 1", n)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Vacuum returned %v, want context.Canceled", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Vacuum did not return after the cancel")
	}
	if n := scalar[int64](t, conn, "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'VACUUM%' AND state = 'active'"); n != 0 {
		t.Errorf("%d VACUUMs still active on the server after the cancel", n)
	}
}

// A cancel landing inside a progress poll once closed the control session (pgx closes a
// session whose query's context ends mid-query), so pg_cancel_backend could not be sent
// and the server-side VACUUM ran on. Polls every millisecond put most cancels inside one.
func TestCancellingTheRunDuringAProgressPollStillCancelsTheServerSideVacuum(t *testing.T) {
	db, conn := newDB(t)
	bloat(t, conn, "events", 20000, 200)
	active := "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'VACUUM%' AND state = 'active' AND datname = $1"
	t.Cleanup(func() { // a failed attempt's VACUUM would run for hours
		_, _ = conn.Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE query LIKE 'VACUUM%' AND datname = $1`, db)
	})
	for attempt := range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		running := make(chan struct{})
		var once sync.Once
		run, err := online.New(ctx, target(db), online.Options{Throttle: limits(100*time.Millisecond, 1),
			Parallelism: 1, PollInterval: time.Millisecond,
			OnProgress: func(p runnerwire.Progress) {
				if p.Phase == runnerwire.PhaseScanningHeap {
					once.Do(func() { close(running) })
				}
			}})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { _, err := run.Vacuum(ctx); done <- err }()
		select {
		case <-running:
		case <-time.After(20 * time.Second):
			t.Fatal("the vacuum never showed up in pg_stat_progress_vacuum")
		}
		// A few polls later, at a moment unrelated to the poll's own timing.
		time.Sleep(time.Duration(attempt*3+2) * time.Millisecond)
		cancel()
		select {
		case err = <-done:
		case <-time.After(20 * time.Second):
			t.Fatal("Vacuum did not return after the cancel")
		}
		_ = run.Close()
		if !errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "backend") {
			t.Errorf("attempt %d: Vacuum returned %v, want only context.Canceled", attempt, err)
		}
		if n := scalar[int64](t, conn, active, db); n != 0 {
			t.Fatalf("attempt %d: %d VACUUMs still active on the server after the cancel", attempt, n)
		}
	}
}

func TestPostgreSQL15RefusesWrittenFieldsItCannotHonour(t *testing.T) {
	db, conn := newDB(t)
	exec(t, conn, "CREATE TABLE t (id int)")
	ring := int64(256 << 10)
	one := 1
	cases := []struct {
		name  string
		opts  online.Options
		field string
	}{
		{"ring size", online.Options{RingSize: &ring}, "ringSize"},
		{"read rate", online.Options{Throttle: runnerwire.Limits{CostLimit: 200, MaxReadBytesPerSecond: 50 << 20}}, "throttle.maxReadBytesPerSecond"},
		{"write rate", online.Options{Throttle: runnerwire.Limits{CostLimit: 200, MaxWriteBytesPerSecond: 1}}, "throttle.maxWriteBytesPerSecond"},
		{"WAL rate", online.Options{Throttle: runnerwire.Limits{CostLimit: 200, MaxWALBytesPerSecond: 1}}, "throttle.maxWALBytesPerSecond"},
		{"override rate", online.Options{TableThrottles: map[string]runnerwire.Limits{"t": {MaxReadBytesPerSecond: 1}}},
			"tableOverrides[t].throttle.maxReadBytesPerSecond"},
		{"parallel full", online.Options{Full: true, IndexWorkers: &one}, "indexWorkers"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.opts.Parallelism = 1
			run, err := online.New(context.Background(), target(db), c.opts)
			if err == nil {
				_ = run.Close()
				t.Fatal("New accepted a field PostgreSQL 15 cannot honour")
			}
			var fe *online.FieldError
			if !errors.As(err, &fe) || fe.Field != c.field || !strings.Contains(err.Error(), "PostgreSQL 15") {
				t.Errorf("error %v, want a FieldError naming %s and PostgreSQL 15", err, c.field)
			}
		})
	}
}

func TestAuthenticationRefusesCleartextAndMD5AndWrongPasswords(t *testing.T) {
	cases := []struct {
		user, password, want string
	}{
		{pgtest.CleartextUser, pgtest.Password, "server requested password authentication"},
		{pgtest.MD5User, pgtest.Password, "server requested md5 authentication"},
		{pgtest.Superuser, "wrong", "password authentication failed"},
	}
	for _, c := range cases {
		t.Run(c.user+"/"+c.password, func(t *testing.T) {
			pw := filepath.Join(t.TempDir(), "pw")
			if err := os.WriteFile(pw, []byte(c.password), 0o600); err != nil {
				t.Fatal(err)
			}
			tg := target("postgres")
			tg.User, tg.PasswordFile = c.user, pw
			run, err := online.New(context.Background(), tg, online.Options{Parallelism: 1})
			if err == nil {
				_ = run.Close()
				t.Fatal("connected")
			}
			if !errors.Is(err, online.ErrAuth) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want ErrAuth saying %q", err, c.want)
			}
		})
	}
}

func TestConnectionRefusedIsUnreachable(t *testing.T) {
	tg := target("postgres")
	tg.Address = "127.0.0.1:1" // nothing listens on port 1
	_, err := online.New(context.Background(), tg, online.Options{Parallelism: 1})
	if !errors.Is(err, online.ErrUnreachable) {
		t.Errorf("error %v, want ErrUnreachable", err)
	}
}

func TestTablesArePickedBiggestFirstAndSkippedBelowMinDeadPercent(t *testing.T) {
	db, conn := newDB(t)
	bloat(t, conn, "small", 2000, 10) // 50% dead
	exec(t, conn, "CREATE TABLE big (id int PRIMARY KEY, pad text) WITH (autovacuum_enabled = off)")
	exec(t, conn, "INSERT INTO big SELECT g, repeat('y', 100) FROM generate_series(1, 20000) g")
	exec(t, conn, "DELETE FROM big WHERE id <= 1000") // 5% dead
	waitDead(t, conn, "big", func(n int64) bool { return n == 1000 })
	run, err := online.New(context.Background(), target(db), online.Options{Parallelism: 2, MinDeadTuplePercent: 20,
		Throttle: limits(0, 200)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = run.Close() }()
	var names []string
	for _, tb := range run.Tables() {
		names = append(names, tb.Qualified())
	}
	if strings.Join(names, ",") != "public.big,public.small" {
		t.Errorf("tables %v, want biggest first", names)
	}
	rep, err := run.Vacuum(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Tables[0].Skipped || rep.Tables[1].Skipped || rep.Totals.TablesSkipped != 1 || rep.Totals.TablesVacuumed != 1 {
		t.Errorf("report %+v: want big skipped (5%% dead < 20%%) and small vacuumed", rep.Tables)
	}
	waitDead(t, conn, "small", func(n int64) bool { return n == 0 })
	if n := waitDead(t, conn, "big", func(int64) bool { return true }); n != 1000 {
		t.Errorf("big has %d dead tuples, want its 1000 untouched", n)
	}
}

func TestNamedTableThatDoesNotExistIsAFieldError(t *testing.T) {
	db, _ := newDB(t)
	_, err := online.New(context.Background(), target(db), online.Options{Parallelism: 1, Tables: []string{"nope"}})
	var fe *online.FieldError
	if !errors.As(err, &fe) || fe.Field != "tables[0]" {
		t.Errorf("error %v, want a FieldError for tables[0]", err)
	}
}

func TestThrottleChangeAppliesFromTheNextTable(t *testing.T) {
	db, conn := newDB(t)
	bloat(t, conn, "first", 20000, 200)
	bloat(t, conn, "second", 20000, 200)
	ctx := context.Background()
	var changed atomic.Bool
	var run *online.Run
	slow := limits(10*time.Millisecond, 10)
	run, err := online.New(ctx, target(db), online.Options{Tables: []string{"first", "second"}, Throttle: slow,
		Parallelism: 1, PollInterval: 100 * time.Millisecond,
		OnProgress: func(p runnerwire.Progress) {
			// Once the first table is under way, lift the throttle.
			if p.Table == "public.first" && p.Phase == runnerwire.PhaseScanningHeap && !changed.Load() {
				changed.Store(true)
				if err := run.UpdateThrottle(limits(0, 200)); err != nil {
					t.Error(err)
				}
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = run.Close() }()
	if run.ThrottleApplies() != runnerwire.ThrottleAppliesNextTable {
		t.Errorf("ThrottleApplies %q on PostgreSQL, want NextTable", run.ThrottleApplies())
	}
	rep, err := run.Vacuum(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !changed.Load() {
		t.Fatal("the first table was never seen scanning; the throttle was not changed")
	}
	first, second := rep.Tables[0], rep.Tables[1]
	// The first table kept the throttle it started with (10 units per 10 ms); the second
	// ran without one, so it is much faster on the same amount of work.
	if first.CostRate.Configured != 1000 || second.CostRate.Configured != 0 {
		t.Errorf("configured cost rates %v and %v, want 1000 (the first table's) and 0 (the second's)",
			first.CostRate.Configured, second.CostRate.Configured)
	}
	if second.ElapsedSeconds*3 > first.ElapsedSeconds {
		t.Errorf("the second table took %.2fs against the first's %.2fs: the lifted throttle did not apply to it",
			second.ElapsedSeconds, first.ElapsedSeconds)
	}
	if err := run.UpdateThrottle(runnerwire.Limits{CostLimit: 200, MaxWALBytesPerSecond: 1 << 20}); err == nil {
		t.Error("a byte-rate limit was accepted by a PostgreSQL run")
	}
}

func TestAVerifiedServerMayAskForACleartextPasswordAnUnverifiedOneMayNot(t *testing.T) {
	otherCA := filepath.Join(t.TempDir(), "other-ca.crt")
	writeStrangerCA(t, otherCA)
	cases := []struct {
		name, user, mode, ca string
		want                 string // "" = connects
	}{
		{"verify-full with the server's CA", pgtest.CleartextUser, online.SSLVerifyFull, pg.CAFile, ""},
		{"verify-ca with the server's CA", pgtest.CleartextUser, online.SSLVerifyCA, pg.CAFile, ""},
		{"require: encrypted but not verified", pgtest.CleartextUser, online.SSLRequire, "", "server requested password authentication"},
		{"verify-full with another CA", pgtest.CleartextUser, online.SSLVerifyFull, otherCA, "certificate"},
		{"MD5 even to a verified server", pgtest.MD5User, online.SSLVerifyFull, pg.CAFile, "server requested md5 authentication"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tg := target("postgres")
			tg.User, tg.SSLMode, tg.SSLRootCert = c.user, c.mode, c.ca
			run, err := online.New(context.Background(), tg, online.Options{Parallelism: 1})
			if err == nil {
				_ = run.Close()
			}
			switch {
			case c.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.want != "" && (!errors.Is(err, online.ErrAuth) || !strings.Contains(err.Error(), c.want)):
				t.Errorf("error %v, want ErrAuth saying %q", err, c.want)
			}
		})
	}
}

// writeStrangerCA writes a self-signed CA certificate that signed nothing of the server's.
func writeStrangerCA(t *testing.T, path string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "stranger CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestATableTheRoleMayNotVacuumIsSkippedWithTheServersWarning(t *testing.T) {
	db, conn := newDB(t)
	bloat(t, conn, "owned_by_postgres", 2000, 10)
	exec(t, conn, "CREATE ROLE outsider LOGIN PASSWORD '"+pgtest.Password+"'")
	t.Cleanup(func() {
		_, _ = conn.Exec(context.Background(), "DROP OWNED BY outsider; DROP ROLE outsider") // best effort
	})
	tg := target(db)
	tg.User = "outsider"
	run, err := online.New(context.Background(), tg, online.Options{Parallelism: 1, Tables: []string{"owned_by_postgres"},
		Throttle: limits(0, 200)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = run.Close() }()
	rep, err := run.Vacuum(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tr := rep.Tables[0]
	if !tr.Skipped || rep.Totals.TablesSkipped != 1 || rep.Totals.TablesVacuumed != 0 ||
		!strings.Contains(strings.Join(tr.Notices, "\n"), "WARNING:") {
		t.Errorf("report %+v: want the table skipped with the server's warning", rep)
	}
	if n := waitDead(t, conn, "owned_by_postgres", func(int64) bool { return true }); n != 1000 {
		t.Errorf("%d dead tuples, want the 1000 left alone", n)
	}
}
