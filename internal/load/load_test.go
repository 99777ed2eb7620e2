package load_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vacuumops/vacuum-operator/internal/load"
	"github.com/vacuumops/vacuum-operator/internal/online"
	"github.com/vacuumops/vacuum-operator/internal/server/servertest"
	"github.com/vacuumops/vacuum-operator/internal/server/wire"
)

// The load against the engine server (in process, on a loopback port, trust auth): what the
// load says it ran is what the server counted.

func startServer(t *testing.T) string {
	t.Helper()
	return servertest.Start(t, wire.Config{}).Addr
}

func target(addr string) online.Target {
	return online.Target{Address: addr, Database: "postgres", User: "app", SSLMode: online.SSLDisable, NoEnvironment: true}
}

// checker is a session the server does not count as foreground.
func checker(t *testing.T, addr string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), fmt.Sprintf("postgres://app@%s/postgres?sslmode=disable&application_name=vacuum-runner-check", addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func scalar(t *testing.T, c *pgx.Conn, sql string) int64 {
	t.Helper()
	var v int64
	if err := c.QueryRow(context.Background(), sql).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

type reports struct {
	mu   sync.Mutex
	seen []load.Report
}

func (r *reports) add(rep load.Report) { r.mu.Lock(); r.seen = append(r.seen, rep); r.mu.Unlock() }
func (r *reports) all() []load.Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]load.Report(nil), r.seen...)
}

func TestLoadRunsAtItsRateOnItsOwnTableAndTheServerCountsTheSameStatements(t *testing.T) {
	addr := startServer(t)
	chk := checker(t, addr)
	var rec reports
	const rate, secs = 150.0, 1.5
	rep, err := load.Run(context.Background(), load.Config{Target: target(addr), Table: "accounts", Rows: 500,
		Rate: rate, UpdatePercent: 50, Connections: 2, Duration: time.Duration(secs * float64(time.Second)),
		ReportEvery: 400 * time.Millisecond, OnReport: rec.add, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	tot := rep.Total
	t.Logf("total %+v; %d interval reports", tot, len(rec.all()))
	if !rep.Final || tot.Failed != 0 || rep.LastError != "" || tot.Lookups == 0 || tot.Updates == 0 || tot.P99Microseconds <= 0 {
		t.Fatalf("final report %+v: want lookups and updates, none failed, a p99", rep)
	}
	due := int64(secs*rate) + 1
	// Every due statement ran or was late (the schedule does not slip); on this shared
	// machine under -race at least a third of them run.
	if sent := tot.Statements + tot.Late; sent < due*9/10 || sent > due*11/10 || tot.Statements < due/3 {
		t.Errorf("%d statements ran and %d were late, want about %d due at %g/s for %gs", tot.Statements, tot.Late, due, rate, secs)
	}
	if got := rec.all(); len(got) < 2 || got[0].Interval.Statements == 0 || got[0].Final {
		t.Errorf("interval reports %+v, want at least 2 with statements", got)
	}
	// The table: the 500 ids, and every committed update's increment.
	if n := scalar(t, chk, "SELECT count(*) FROM accounts"); n != 500 {
		t.Errorf("accounts has %d rows, want the 500 ids", n)
	}
	if sum := scalar(t, chk, "SELECT sum(n) FROM accounts"); sum != tot.Updates {
		t.Errorf("sum(n) %d, want one per committed update, %d", sum, tot.Updates)
	}
	// The server's foreground counted each statement once: the load's and its four of
	// preparation (to_regclass, CREATE TABLE, count, INSERT), and the implicit commit of
	// each autocommit write (the updates and the INSERT).
	if n := scalar(t, chk, "SELECT count FROM vacuumops_statement_latency WHERE kind = 'all'"); n != tot.Statements+4+tot.Updates+1 {
		t.Errorf("the server counted %d foreground statements and commits, the load ran %d (+4 to prepare) and committed %d updates (+1 INSERT)",
			n, tot.Statements, tot.Updates)
	}
	if n := scalar(t, chk, "SELECT count FROM vacuumops_statement_latency WHERE kind = 'commit'"); n != tot.Updates+1 {
		t.Errorf("the server counted %d commits, the load committed %d updates (+1 INSERT)", n, tot.Updates)
	}
	if n := scalar(t, chk, "SELECT count FROM vacuumops_statement_latency WHERE kind = 'update'"); n != tot.Updates {
		t.Errorf("the server counted %d updates, the load committed %d", n, tot.Updates)
	}

	// Run again with more rows: the table is kept and only the missing ids are added.
	if _, err := load.Run(context.Background(), load.Config{Target: target(addr), Table: "accounts", Rows: 800,
		Rate: 50, UpdatePercent: 0, Connections: 1, Duration: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if n := scalar(t, chk, "SELECT count(*) FROM accounts"); n != 800 {
		t.Errorf("accounts has %d rows after a run with 800, want 800", n)
	}
	if sum := scalar(t, chk, "SELECT sum(n) FROM accounts"); sum != tot.Updates {
		t.Errorf("sum(n) %d after a lookup-only run, want still %d", sum, tot.Updates)
	}
}

func TestLoadCountsFailedStatementsAndStopsCleanlyWhenCancelled(t *testing.T) {
	addr := startServer(t)
	chk := checker(t, addr)
	var rec reports
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		rep load.Report
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := load.Run(ctx, load.Config{Target: target(addr), Table: "t", Rows: 100, Rate: 200,
			UpdatePercent: 30, Connections: 2, ReportEvery: 200 * time.Millisecond, OnReport: rec.add})
		done <- result{rep, err}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for len(rec.all()) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("no two reports within 20 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := chk.Exec(context.Background(), "DROP TABLE t"); err != nil {
		t.Fatal(err)
	}
	n := len(rec.all())
	for len(rec.all()) < n+2 {
		if time.Now().After(deadline) {
			t.Fatal("no reports after the table was dropped: the load stopped on failures")
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	var res result
	select {
	case res = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the load did not stop within 10 s of its cancellation")
	}
	if res.err != nil {
		t.Fatalf("a cancelled load returned %v, want its report and no error", res.err)
	}
	rep := res.rep
	t.Logf("final %+v", rep)
	if !rep.Final || rep.Total.Failed == 0 || rep.Total.Statements == 0 || !strings.Contains(rep.LastError, "t") {
		t.Errorf("final report %+v: want statements before the drop, failures after it, and the last error", rep)
	}
	if last := rec.all()[len(rec.all())-1]; last.Interval.Failed == 0 || last.Interval.Statements != 0 {
		t.Errorf("an interval after the drop %+v: want only failures", last.Interval)
	}
}
