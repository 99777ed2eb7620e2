package wire_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vacuumops/vacuum-operator/internal/online"
	"github.com/vacuumops/vacuum-operator/internal/server/wire"
)

func TestRunnerDetectsTheEngineServerAndReadsItsSystemIdentifier(t *testing.T) {
	s := startServer(t, wire.Config{})
	c := connect(t, s.url("app", "", "postgres"))
	ctx := context.Background()
	srv, err := online.Detect(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if srv.Kind != online.KindEngineServer || srv.Major != 15 {
		t.Fatalf("online.Detect: %+v, want the engine server emulating 15", srv)
	}
	if !strings.HasPrefix(srv.Version, online.EngineServerVersionPrefix) {
		t.Fatalf("version() %q", srv.Version)
	}
	var id int64
	var ver int32
	var modified time.Time
	if err := c.QueryRow(ctx, "SELECT system_identifier, pg_control_version, pg_control_last_modified FROM pg_control_system()").Scan(&id, &ver, &modified); err != nil {
		t.Fatal(err)
	}
	if uint64(id) != s.db.SystemID() || s.db.SystemID() == 0 {
		t.Fatalf("system_identifier %d, the data directory's is %d", uint64(id), s.db.SystemID())
	}
	if time.Since(modified) > time.Hour || ver <= 0 {
		t.Fatalf("pg_control_version %d, last modified %v", ver, modified)
	}
	var block int64
	if err := c.QueryRow(ctx, "SELECT current_setting('block_size')::bigint").Scan(&block); err != nil || block != 8192 {
		t.Fatalf("block_size %d, %v", block, err)
	}
}

// bloated makes a table of about 250 heap pages with every row updated once (half its
// tuples dead), so that a throttled vacuum of it takes a while.
func bloated(t *testing.T, c *pgx.Conn, name string) {
	t.Helper()
	mustExec(t, c, "CREATE TABLE "+name+" (id bigint PRIMARY KEY, n bigint, pad bytea)")
	mustExec(t, c, "INSERT INTO "+name+" SELECT g, g, '\\x"+strings.Repeat("00", 300)+"'::bytea FROM generate_series(1, 3000) g")
	mustExec(t, c, "UPDATE "+name+" SET n = n + 1")
}

// progressRow is what the runner's online driver reads of pg_stat_progress_vacuum (its
// own query), plus this server's throttle columns.
type progressRow struct {
	pid                                    int32
	phase                                  string
	total, scanned, vacuumed, passes, dead int64
	costDelayUS                            int64
	costLimit                              int32
}

func readProgress(t *testing.T, c *pgx.Conn, pid uint32) (progressRow, bool) {
	t.Helper()
	rows, err := c.Query(context.Background(), `SELECT pid, phase, heap_blks_total, heap_blks_scanned, heap_blks_vacuumed,
		index_vacuum_count, num_dead_tuples, cost_delay_us, cost_limit FROM pg_stat_progress_vacuum WHERE pid = ANY($1)`, []int32{int32(pid)})
	if err != nil {
		t.Fatalf("read pg_stat_progress_vacuum: %v", err)
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (progressRow, error) {
		var x progressRow
		err := r.Scan(&x.pid, &x.phase, &x.total, &x.scanned, &x.vacuumed, &x.passes, &x.dead, &x.costDelayUS, &x.costLimit)
		return x, err
	})
	if err != nil {
		t.Fatalf("read pg_stat_progress_vacuum: %v", err)
	}
	if len(got) == 0 {
		return progressRow{}, false
	}
	return got[0], true
}

// TestProgressViewFollowsARunningVacuumAndSetThrottleReachesIt runs a VACUUM throttled to a
// crawl, watches it in pg_stat_progress_vacuum through the runner's own query, lifts its
// throttle with vacuum_set_throttle from another session (in effect within 10 s: the view
// shows the new setting and the vacuum then finishes), and checks that the row is gone
// once the VACUUM returns.
func TestProgressViewFollowsARunningVacuumAndSetThrottleReachesIt(t *testing.T) {
	s := startServer(t, wire.Config{})
	ctl := connect(t, s.url("ctl", "", "postgres"))
	bloated(t, ctl, "bloat")
	vac := connect(t, s.url("vacuum-runner", "", "postgres"))
	pid := vac.PgConn().PID()
	mustExec(t, vac, "SELECT set_config('vacuum_cost_delay', '100ms', false), set_config('vacuum_cost_limit', '1', false)")
	done := make(chan error, 1)
	go func() {
		_, err := vac.Exec(context.Background(), "VACUUM bloat")
		done <- err
	}()
	var first progressRow
	deadline := time.Now().Add(10 * time.Second)
	for {
		p, ok := readProgress(t, ctl, pid)
		if ok && p.phase == "scanning heap" && p.scanned > 0 {
			first = p
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no scanning-heap row for pid %d within 10 s (last %+v, %v)", pid, p, ok)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if first.total < 200 || first.costDelayUS != 100000 || first.costLimit != 1 || first.scanned >= first.total {
		t.Fatalf("progress %+v: want a table of at least 200 blocks, delay 100000 us, limit 1, scan under way", first)
	}
	var ok bool
	if err := ctl.QueryRow(context.Background(), "SELECT vacuum_set_throttle($1, 'vacuum_cost_delay', '0')", int32(pid)).Scan(&ok); err != nil || !ok {
		t.Fatalf("vacuum_set_throttle: %v, %v", ok, err)
	}
	changed := time.Now()
	if p, seen := readProgress(t, ctl, pid); seen && p.costDelayUS != 0 {
		t.Fatalf("after vacuum_set_throttle the view shows delay %d us", p.costDelayUS)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("VACUUM: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the unthrottled VACUUM did not finish within 10 s of vacuum_set_throttle")
	}
	t.Logf("VACUUM finished %v after its throttle was lifted (first seen at block %d of %d)", time.Since(changed), first.scanned, first.total)
	if p, seen := readProgress(t, ctl, pid); seen {
		t.Fatalf("pg_stat_progress_vacuum still has a row after VACUUM returned: %+v", p)
	}
	if err := ctl.QueryRow(context.Background(), "SELECT vacuum_set_throttle($1, 'vacuum_cost_delay', '0')", int32(pid)).Scan(&ok); err != nil || ok {
		t.Fatalf("vacuum_set_throttle of a session running no VACUUM: %v, %v (want false)", ok, err)
	}
	if _, err := ctl.Exec(context.Background(), "SELECT vacuum_set_throttle($1, 'work_mem', '1MB')", int32(pid)); sqlstate(err) != "22023" {
		t.Fatalf("vacuum_set_throttle of work_mem: %v, want 22023", err)
	}
}

// TestStatementLatencyViewCountsOnlyForegroundStatements runs statements from an
// application session and from a vacuum-runner session (including a VACUUM), and reads
// vacuumops_statement_latency: only the application's statements are there, by kind, and
// the one slow statement (pg_sleep(1)) is the maximum. An autocommit write's implicit commit
// counts as a commit (the WAL flush a write load waits on); a read-only one does not.
func TestStatementLatencyViewCountsOnlyForegroundStatements(t *testing.T) {
	s := startServer(t, wire.Config{})
	app := connect(t, s.url("app", "", "postgres"))
	runner := connect(t, s.url("app", "", "postgres")+"&application_name=vacuum-runner-test")
	mustExec(t, runner, "CREATE TABLE lat (id int4 PRIMARY KEY, v int4)")
	for i := range 20 {
		mustExec(t, app, "INSERT INTO lat VALUES ($1, 0)", int32(i))
	}
	for range 30 {
		mustExec(t, app, "SELECT v FROM lat WHERE id = 3")
		mustExec(t, runner, "SELECT v FROM lat WHERE id = 4")
	}
	mustExec(t, app, "SELECT pg_sleep(1)")
	mustExec(t, runner, "VACUUM lat")
	mustExec(t, app, "BEGIN")
	mustExec(t, app, "UPDATE lat SET v = v + 1 WHERE id < 5")
	mustExec(t, app, "COMMIT")
	rows, err := runner.Query(context.Background(), "SELECT kind, window_seconds, count, p50_us, p99_us, max_us FROM vacuumops_statement_latency")
	if err != nil {
		t.Fatal(err)
	}
	type stat struct {
		window              int32
		count, p50, p99, mx int64
	}
	got := map[string]stat{}
	for rows.Next() {
		var k string
		var st stat
		if err := rows.Scan(&k, &st.window, &st.count, &st.p50, &st.p99, &st.mx); err != nil {
			t.Fatal(err)
		}
		got[k] = st
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	// pgx's extended protocol: the app's statements are one Execute each. The commits: the
	// 20 autocommit INSERTs' implicit ones and the explicit COMMIT; the SELECTs' are not.
	want := map[string]int64{"insert": 20, "select": 31, "update": 1, "commit": 21, "other": 1, "all": 74}
	for k, n := range want {
		if got[k].count != n || got[k].window != 10 {
			t.Errorf("kind %s: %+v, want count %d over 10 s", k, got[k], n)
		}
	}
	if len(got) != len(want) {
		t.Errorf("kinds %v, want exactly %v (no VACUUM, nothing of the vacuum-runner session)", got, want)
	}
	sel := got["select"]
	if sel.mx < 1_000_000 || sel.mx > 5_000_000 || sel.p50 >= 1_000_000 || sel.p50 <= 0 {
		t.Errorf("select latency %+v: want max about 1 s (pg_sleep(1)) and p50 well under it", sel)
	}
}

// TestUserTablesShowDeadTuplesAndTheVacuumsDone reads pg_stat_user_tables before and after a
// VACUUM, and looks the table up with to_regclass and pg_relation_size, as the runner picks
// tables.
func TestUserTablesShowDeadTuplesAndTheVacuumsDone(t *testing.T) {
	s := startServer(t, wire.Config{})
	c := connect(t, s.url("app", "", "postgres"))
	ctx := context.Background()
	mustExec(t, c, "CREATE TABLE st (id int4 PRIMARY KEY, v int4)")
	mustExec(t, c, "INSERT INTO st SELECT g, g FROM generate_series(1, 100) g")
	mustExec(t, c, "DELETE FROM st WHERE id <= 40")
	type row struct {
		live, dead, count int64
		last              *time.Time
	}
	read := func() row {
		t.Helper()
		var r row
		err := c.QueryRow(ctx, `SELECT n_live_tup, n_dead_tup, vacuum_count, last_vacuum FROM pg_stat_user_tables
			WHERE relid = to_regclass('"st"') AND schemaname = 'public' AND relname = 'st'`).Scan(&r.live, &r.dead, &r.count, &r.last)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := read(); r.live != 60 || r.dead != 40 || r.count != 0 || r.last != nil {
		t.Fatalf("before VACUUM: %+v, want 60 live, 40 dead, never vacuumed", r)
	}
	mustExec(t, c, "VACUUM st")
	if r := read(); r.live != 60 || r.dead != 0 || r.count != 1 || r.last == nil || time.Since(*r.last) > time.Minute {
		t.Fatalf("after VACUUM: %+v, want 60 live, 0 dead, vacuumed once just now", r)
	}
	var size int64
	if err := c.QueryRow(ctx, "SELECT pg_relation_size(to_regclass('public.st'))").Scan(&size); err != nil || size != 8192 {
		t.Fatalf("pg_relation_size: %d, %v (want one block)", size, err)
	}
	var missing *int64
	if err := c.QueryRow(ctx, "SELECT to_regclass('nope')").Scan(&missing); err != nil || missing != nil {
		t.Fatalf("to_regclass of no table: %v, %v (want NULL)", missing, err)
	}
}
