package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vacuumops/vacuum-operator/internal/pgtest"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// The online tests run vacuum-runner against a real PostgreSQL 15, started once for the
// package by the first test that needs it.

var (
	pgOnce  sync.Once
	pg      *pgtest.Server
	pgErr   error
	pgDBSeq atomic.Int64
)

func stopPostgres() {
	if pg != nil {
		pg.Stop()
	}
}

// postgres returns the shared server, a fresh database on it, a superuser session to that
// database and a file holding the password.
func postgres(t *testing.T) (db string, conn *pgx.Conn, passwordFile string) {
	t.Helper()
	pgOnce.Do(func() { pg, pgErr = pgtest.Start(context.Background()) })
	if pgErr != nil {
		t.Fatalf("start PostgreSQL 15: %v", pgErr)
	}
	ctx := context.Background()
	db = fmt.Sprintf("cli%d", pgDBSeq.Add(1))
	if err := pg.CreateDatabase(ctx, db); err != nil {
		t.Fatal(err)
	}
	conn, err := pg.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	passwordFile = filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(passwordFile, []byte(pgtest.Password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return db, conn, passwordFile
}

func sqlExec(t *testing.T, conn *pgx.Conn, sql string) {
	t.Helper()
	if _, err := conn.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func deadTuples(t *testing.T, conn *pgx.Conn, table string) int64 {
	t.Helper()
	sqlExec(t, conn, "SELECT pg_stat_force_next_flush()")
	var n int64
	if err := conn.QueryRow(context.Background(), "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = $1", table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// bloatPG makes a table of rows rows and deletes half of them, waiting for the statistics.
func bloatPG(t *testing.T, conn *pgx.Conn, table string, rows int) {
	t.Helper()
	sqlExec(t, conn, fmt.Sprintf("CREATE TABLE %s (id int PRIMARY KEY, pad text) WITH (autovacuum_enabled = off)", table))
	sqlExec(t, conn, fmt.Sprintf("INSERT INTO %s SELECT g, repeat('x', 200) FROM generate_series(1, %d) g", table, rows))
	sqlExec(t, conn, fmt.Sprintf("DELETE FROM %s WHERE id %% 2 = 0", table))
	waitFor(t, 10*time.Second, func() bool { return deadTuples(t, conn, table) == int64(rows/2) })
}

func waitFor(t *testing.T, d time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met after %v", d)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func activeVacuums(t *testing.T, conn *pgx.Conn) int64 {
	t.Helper()
	var n int64
	if err := conn.QueryRow(context.Background(),
		"SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'VACUUM%' AND state = 'active'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func serverArgs(db, passwordFile string) []string {
	return []string{"--server", pg.Addr(), "--database", db, "--user", pgtest.Superuser,
		"--password-file", passwordFile, "--sslmode", "disable"}
}

func TestVacuumServerRemovesDeadTuplesAndPrintsTheServersVerboseReport(t *testing.T) {
	db, conn, pw := postgres(t)
	bloatPG(t, conn, "items", 10000)
	r := mustVR(t, append([]string{"vacuum", "--cost-delay", "0"}, serverArgs(db, pw)...)...)
	for _, want := range []string{"server: PostgreSQL 15", `vacuum of "public.items"`, "tuples: 5000 removed, 5000 remain",
		`finished vacuuming "` + db + `.public.items"`, "total: 1 tables vacuumed"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("report lacks %q:\n%s", want, r.stdout)
		}
	}
	waitFor(t, 10*time.Second, func() bool { return deadTuples(t, conn, "items") == 0 })
}

func TestVacuumServerTakesUserAndPasswordFromPGUSERAndPGPASSWORD(t *testing.T) {
	db, conn, _ := postgres(t)
	bloatPG(t, conn, "items", 2000)
	r := vr(t, []string{"PGUSER=" + pgtest.Superuser, "PGPASSWORD=" + pgtest.Password, "PGPASSFILE=/nonexistent"},
		"full", "--json", "--server", pg.Addr(), "--database", db, "--sslmode", "disable")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var rep runnerwire.Report
	decode(t, r.stdout, &rep)
	if rep.Totals.TablesVacuumed != 1 || rep.Tables[0].Mode != runnerwire.ModeFull || rep.Tables[0].PagesRemoved == 0 {
		t.Errorf("FULL report %+v, want one table shrunk", rep)
	}
}

func TestSIGTERMOfAnOnlineVacuumCancelsTheServerSideVacuumAndExitsFive(t *testing.T) {
	db, conn, pw := postgres(t)
	bloatPG(t, conn, "events", 20000)
	// 1 cost unit per 100 ms: hours unless cancelled.
	p := start(t, append([]string{"vacuum", "--cost-delay", "100ms", "--cost-limit", "1"}, serverArgs(db, pw)...)...)
	waitFor(t, 20*time.Second, func() bool { return activeVacuums(t, conn) == 1 })
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 20*time.Second); code != runnerwire.ExitCancelled {
		t.Errorf("exit %d, want %d\nstderr: %s", code, runnerwire.ExitCancelled, p.stderr.String())
	}
	if n := activeVacuums(t, conn); n != 0 {
		t.Errorf("%d VACUUMs still active on the server after the runner exited", n)
	}
	if !strings.Contains(p.stderr.String(), "SIGTERM") {
		t.Errorf("stderr does not say SIGTERM: %s", p.stderr.String())
	}
}

func TestOnlineVacuumExitCodesNameTheProblem(t *testing.T) {
	db, conn, pw := postgres(t)
	sqlExec(t, conn, "CREATE TABLE t (id int)")
	wrong := filepath.Join(t.TempDir(), "wrong")
	if err := os.WriteFile(wrong, []byte("nope"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := serverArgs(db, pw)
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"ring size on 15", append([]string{"vacuum", "--ring-size", "256Ki"}, base...), 2, "--ring-size: becomes BUFFER_USAGE_LIMIT"},
		{"read rate on PostgreSQL", append([]string{"vacuum", "--max-read-rate", "50Mi"}, base...), 2, "--max-read-rate: byte-rate limits"},
		{"WAL rate on PostgreSQL", append([]string{"vacuum", "--max-wal-rate", "1Mi"}, base...), 2, "--max-wal-rate"},
		{"buffer pool", append([]string{"vacuum", "--buffer-pool", "64Mi"}, base...), 2, "--buffer-pool"},
		{"unknown table", append([]string{"vacuum", "--table", "nope"}, base...), 2, `--table: no table "nope"`},
		{"cleartext password", []string{"vacuum", "--server", pg.Addr(), "--database", db, "--user", pgtest.CleartextUser,
			"--password-file", pw, "--sslmode", "disable"}, 2, "server requested password authentication"},
		{"wrong password", []string{"vacuum", "--server", pg.Addr(), "--database", db, "--user", pgtest.Superuser,
			"--password-file", wrong, "--sslmode", "disable"}, 2, "password authentication failed"},
		{"connection refused", []string{"vacuum", "--server", freeAddr(t), "--database", db, "--user", pgtest.Superuser,
			"--password-file", pw, "--sslmode", "disable"}, 3, "connection refused"},
		{"data and server", append([]string{"vacuum", "--data", "/tmp"}, base...), 2, "not both"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := vr(t, nil, c.args...)
			if r.code != c.code || !strings.Contains(r.stderr, c.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
				t.Errorf("exit %d, stderr %q; want exit %d and one line saying %q", r.code, r.stderr, c.code, c.want)
			}
		})
	}
}

func TestRunWithAServerTargetVacuumsTheServerAndWritesASummary(t *testing.T) {
	db, conn, pw := postgres(t)
	bloatPG(t, conn, "orders", 4000)
	spec := fmt.Sprintf(`{"server":{"address":%q,"database":%q,"user":%q,"passwordFile":%q,"sslMode":"disable"},"tables":["orders"]}`,
		pg.Addr(), db, pgtest.Superuser, pw)
	log := filepath.Join(t.TempDir(), "termination-log")
	r := vr(t, []string{"PGPASSWORD=must-not-be-read"}, "run", "--spec", spec, "--listen", freeAddr(t), "--termination-log", log)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var sum runnerwire.Summary
	decode(t, string(b), &sum)
	if sum.Phase != runnerwire.SummarySucceeded || sum.Totals.TablesVacuumed != 1 || sum.Tables[0].TuplesRemoved != 2000 ||
		len(sum.Tables[0].Notices) != 0 {
		t.Errorf("summary %+v: want public.orders vacuumed, 2000 tuples removed, notices left to the log", sum)
	}
	if !strings.Contains(r.stderr, "finished vacuuming") || !strings.Contains(r.stderr, "PostgreSQL 15") {
		t.Errorf("the log lacks the server's notices: %s", r.stderr)
	}
	waitFor(t, 10*time.Second, func() bool { return deadTuples(t, conn, "orders") == 0 })

	// Without a password file the pod face reads no environment: PGPASSWORD is ignored.
	spec = fmt.Sprintf(`{"server":{"address":%q,"database":%q,"user":%q,"sslMode":"disable"}}`, pg.Addr(), db, pgtest.Superuser)
	r = vr(t, []string{"PGPASSWORD=" + pgtest.Password}, "run", "--spec", spec, "--listen", freeAddr(t), "--termination-log", log)
	if r.code != runnerwire.ExitBadInput || !strings.Contains(r.stderr, "password") {
		t.Errorf("exit %d, stderr %q: want 2, the pod face must not read PGPASSWORD", r.code, r.stderr)
	}
}

func TestRunWithAServerTargetServesProgressTakesAThrottleForTheNextTableAndStopsOnSIGTERM(t *testing.T) {
	db, conn, pw := postgres(t)
	bloatPG(t, conn, "events", 20000)
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	// 1 cost unit per 100 ms: hours unless stopped.
	spec := fmt.Sprintf(`{"server":{"address":%q,"database":%q,"user":%q,"passwordFile":%q,"sslMode":"disable"},`+
		`"throttle":{"costDelay":"100ms","costLimit":1}}`, pg.Addr(), db, pgtest.Superuser, pw)
	addr, log := freeAddr(t), filepath.Join(dir, "termination-log")
	p := start(t, "run", "--spec", spec, "--listen", addr, "--termination-log", log, "--control-token-file", token)
	var prog runnerwire.Progress
	waitFor(t, 20*time.Second, func() bool {
		getJSON(t, "http://"+addr+"/progress", &prog)
		return prog.Phase == runnerwire.PhaseScanningHeap
	})
	if prog.Table != "public.events" || prog.ThrottleApplies != runnerwire.ThrottleAppliesNextTable {
		t.Errorf("progress %+v: want public.events, throttle applying from the next table", prog)
	}
	if code, body := put(t, "http://"+addr+"/throttle", "Bearer s3cret", `{"costDelay":"0s"}`); code != 200 {
		t.Errorf("PUT /throttle: %d %s", code, body)
	}
	if code, body := put(t, "http://"+addr+"/throttle", "Bearer s3cret", `{"maxReadBytesPerSecond":"1Mi"}`); code != 400 ||
		!strings.Contains(body, "maxReadBytesPerSecond") {
		t.Errorf("PUT /throttle with a byte rate on PostgreSQL: %d %s, want 400 naming it", code, body)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 20*time.Second); code != runnerwire.ExitCancelled {
		t.Errorf("exit %d, want %d\nstderr: %s", code, runnerwire.ExitCancelled, p.stderr.String())
	}
	if n := activeVacuums(t, conn); n != 0 {
		t.Errorf("%d VACUUMs still active on the server after the runner exited", n)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var sum runnerwire.Summary
	decode(t, string(b), &sum)
	if sum.Phase != runnerwire.SummaryCancelled || !strings.Contains(sum.Message, "SIGTERM") {
		t.Errorf("summary %+v, want Cancelled by SIGTERM", sum)
	}
	if !strings.Contains(p.stderr.String(), "from the next table") {
		t.Errorf("the log does not say the throttle applies from the next table: %s", p.stderr.String())
	}
}

func TestRunIdentifyWritesTheServersSystemIdentifierAndVacuumsNothing(t *testing.T) {
	db, conn, pw := postgres(t)
	bloatPG(t, conn, "orders", 400)
	var want string
	if err := conn.QueryRow(context.Background(), "SELECT system_identifier::text FROM pg_control_system()").Scan(&want); err != nil {
		t.Fatal(err)
	}
	userFile := filepath.Join(t.TempDir(), "username")
	if err := os.WriteFile(userFile, []byte(pgtest.Superuser+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	spec := fmt.Sprintf(`{"server":{"address":%q,"database":%q,"userFile":%q,"passwordFile":%q,"sslMode":"disable"},"identify":true}`,
		pg.Addr(), db, userFile, pw)
	log := filepath.Join(t.TempDir(), "termination-log")
	r := vr(t, nil, "run", "--spec", spec, "--listen", freeAddr(t), "--termination-log", log)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var sum runnerwire.Summary
	decode(t, string(b), &sum)
	if sum.Server == nil || sum.Server.SystemIdentifier != want || sum.Server.Kind != "PostgreSQL" || len(sum.Tables) != 0 {
		t.Errorf("summary %+v: want system identifier %s of a PostgreSQL and no table", sum, want)
	}
	if n := deadTuples(t, conn, "orders"); n != 200 {
		t.Errorf("%d dead tuples, want the 200 left alone", n)
	}

	// A vacuum for another server's identifier is refused before any table: exit 3, retried.
	spec = fmt.Sprintf(`{"server":{"address":%q,"database":%q,"userFile":%q,"passwordFile":%q,"sslMode":"disable","systemIdentifier":"1"}}`,
		pg.Addr(), db, userFile, pw)
	r = vr(t, nil, "run", "--spec", spec, "--listen", freeAddr(t), "--termination-log", log)
	if r.code != runnerwire.ExitBusy || !strings.Contains(r.stderr, "system identifier") {
		t.Errorf("exit %d, stderr %q: want 3 naming the system identifier", r.code, r.stderr)
	}
	if n := deadTuples(t, conn, "orders"); n != 200 {
		t.Errorf("%d dead tuples, want the 200 left alone", n)
	}
}
