package traffic_test

import (
	"testing"
)

// TestPgbenchRunsEveryBuiltinScriptInBothModesWithConsistentBalances runs pgbench
// unmodified against the engine-server binary: `-i -s 2` (its DROP, CREATE with fillfactor,
// TRUNCATE in a block, COPY ... WITH (FREEZE ON), VACUUM ANALYZE, ADD PRIMARY KEY), then the
// built-in tpcb-like, simple-update and select-only scripts with 8 clients on 2 threads for
// 5 s each, in -M simple and -M prepared. No transaction may fail and no client abort. pgbench
// empties pgbench_history before each run, so after each: the history holds one row per
// transaction committed (none for select-only), and each balance sum the script updates
// moved by exactly the sum of the history's deltas (tpcb-like: accounts, branches and
// tellers; simple-update: accounts only), the others not at all.
func TestPgbenchRunsEveryBuiltinScriptInBothModesWithConsistentBalances(t *testing.T) {
	s, init := startPgbenchServer(t, "--max-connections", "32")
	c := s.connect(t)
	start := balances(t, c)
	if start.accounts != 0 || start.history != 0 {
		t.Fatalf("after pgbench -i: %+v\n%s", start, init)
	}
	var n int64
	if err := c.QueryRow(t.Context(), "SELECT count(*) FROM pgbench_accounts").Scan(&n); err != nil || n != 200000 {
		t.Fatalf("after pgbench -i -s 2: pgbench_accounts has %d rows (%v), want 200000\n%s", n, err, init)
	}
	for _, script := range []string{"tpcb-like", "simple-update", "select-only"} {
		for _, mode := range []string{"simple", "prepared"} {
			before := balances(t, c)
			b := mustPgbench(t, s, "-b", script, "-M", mode, "-c", "8", "-j", "2", "-T", "5")
			after := balances(t, c)
			t.Logf("%s -M %s: %d transactions, %.0f tps", script, mode, b.processed, b.tps)
			what := script + " -M " + mode
			moved := func(name string, from, to int64, updates bool) {
				t.Helper()
				want := int64(0)
				if updates {
					want = after.delta
				}
				if to-from != want {
					t.Fatalf("%s: sum of %s balances moved by %d, want %d (history deltas %d over %d rows)",
						what, name, to-from, want, after.delta, after.history)
				}
			}
			wantHistory := b.processed
			if script == "select-only" {
				wantHistory = 0
			}
			if after.history != wantHistory {
				t.Fatalf("%s: pgbench_history has %d rows, want %d (pgbench committed %d transactions)", what, after.history, wantHistory, b.processed)
			}
			moved("account", before.accounts, after.accounts, script != "select-only")
			moved("branch", before.branches, after.branches, script == "tpcb-like")
			moved("teller", before.tellers, after.tellers, script == "tpcb-like")
		}
	}
}
