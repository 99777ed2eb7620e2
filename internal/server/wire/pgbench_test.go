package wire_test

import (
	"bytes"
	"context"
	"net"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/server/wire"
)

// runPgbench runs PostgreSQL 15's pgbench, unmodified, against addr.
func runPgbench(t *testing.T, addr string, args ...string) string {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	all := append([]string{"-h", host, "-p", port, "-U", "app"}, args...)
	all = append(all, "postgres")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, pgTool(t, "pgbench"), all...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "PGCONNECT_TIMEOUT=10", "PGSSLMODE=disable"}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("pgbench %v: %v\n%s", args, err, out.String())
	}
	return out.String()
}

// pgbenchFigure is one "name: number" line of pgbench's report.
func pgbenchFigure(t *testing.T, out, pattern string) int64 {
	t.Helper()
	m := regexp.MustCompile(pattern).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("pgbench output has no %q:\n%s", pattern, out)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		t.Fatalf("pgbench figure %q: %v", m[1], err)
	}
	return n
}

// TestPgbenchInitializesAndRunsTPCBWithConsistentBalances runs pgbench unmodified against
// the server: `-i -s 1` (its DROP, CREATE with fillfactor, TRUNCATE in a block, COPY ...
// WITH (FREEZE ON), VACUUM ANALYZE, ADD PRIMARY KEY), then the built-in tpcb-like script
// with 4 clients on 2 threads for 5 s, in -M simple and -M prepared. No transaction may fail, every committed
// transaction leaves one pgbench_history row, and the balances agree:
// sum(abalance) = sum(bbalance) = sum(tbalance) = sum(delta).
func TestPgbenchInitializesAndRunsTPCBWithConsistentBalances(t *testing.T) {
	s := startServer(t, wire.Config{MaxConnections: 16})
	out := runPgbench(t, s.addr, "-i", "-s", "1")
	c := connect(t, s.url("app", "", "postgres"))
	ctx := context.Background()
	for table, want := range map[string]int64{"pgbench_accounts": 100000, "pgbench_branches": 1, "pgbench_tellers": 10, "pgbench_history": 0} {
		var n int64
		if err := c.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil || n != want {
			t.Fatalf("after pgbench -i: %s has %d rows (%v), want %d\n%s", table, n, err, want, out)
		}
	}
	sums := func() (abal, bbal, tbal int64) {
		t.Helper()
		for q, dst := range map[string]*int64{
			"SELECT sum(abalance) FROM pgbench_accounts": &abal,
			"SELECT sum(bbalance) FROM pgbench_branches": &bbal,
			"SELECT sum(tbalance) FROM pgbench_tellers":  &tbal,
		} {
			if err := c.QueryRow(ctx, q).Scan(dst); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		return abal, bbal, tbal
	}
	for _, mode := range []string{"simple", "prepared"} {
		before, _, _ := sums()
		out = runPgbench(t, s.addr, "-T", "5", "-c", "4", "-j", "2", "-M", mode)
		t.Logf("pgbench tpcb-like -M %s:\n%s", mode, out)
		done := pgbenchFigure(t, out, `number of transactions actually processed: (\d+)`)
		failed := pgbenchFigure(t, out, `number of failed transactions: (\d+)`)
		if failed != 0 || done == 0 {
			t.Fatalf("pgbench -M %s: %d transactions, %d failed", mode, done, failed)
		}
		// pgbench truncates pgbench_history before each run.
		var history, delta int64
		if err := c.QueryRow(ctx, `SELECT count(*), coalesce(sum(delta), 0) FROM pgbench_history`).Scan(&history, &delta); err != nil {
			t.Fatal(err)
		}
		if history != done {
			t.Fatalf("-M %s: pgbench_history has %d rows, pgbench committed %d transactions", mode, history, done)
		}
		abal, bbal, tbal := sums()
		if abal != bbal || bbal != tbal || abal-before != delta {
			t.Fatalf("-M %s: balances disagree: accounts %d, branches %d, tellers %d; accounts changed by %d, history deltas sum to %d",
				mode, abal, bbal, tbal, abal-before, delta)
		}
	}
}
