package online_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vacuumops/vacuum-operator/internal/online"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// sleepingForeground runs sessions clients of real foreground statements on db, each a
// SELECT pg_sleep(d), until the returned stop is called.
func sleepingForeground(t *testing.T, db string, clients int, d time.Duration) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range clients {
		conn, err := pg.Connect(ctx, db)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		wg.Add(1)
		go func(conn *pgx.Conn) {
			defer wg.Done()
			defer func() { _ = conn.Close(context.Background()) }()
			for ctx.Err() == nil {
				_, _ = conn.Exec(ctx, "SELECT pg_sleep($1)", d.Seconds())
			}
		}(conn)
	}
	return func() { cancel(); wg.Wait() }
}

// TestPostgreSQLAdaptsTheNextTablesRateToTheForegroundLatency: PostgreSQL cannot re-throttle
// a running VACUUM, so the runner steps the control law between tables. A foreground of
// 30 ms statements against a 20 ms p99 target cuts the next table's cost limit (its
// configured cost rate falls below the first table's, bound by ForegroundLatency); the
// same foreground against a 200 ms target leaves every table at the ceiling.
func TestPostgreSQLAdaptsTheNextTablesRateToTheForegroundLatency(t *testing.T) {
	db, conn := newDB(t)
	// 12,000 rows: each table lasts about 0.4-0.6 s at the ceiling, several of the
	// sampler's 100 ms reads. At 4,000 (0.2 s) a loaded CI machine's sampler read too
	// few ages before the next table, so the law held every table at the ceiling.
	tables := []string{"a", "b", "c"}
	for _, tb := range tables {
		bloat(t, conn, tb, 12000, 200)
	}
	stop := sleepingForeground(t, db, 4, 30*time.Millisecond)
	defer stop()
	ceiling := limits(10*time.Millisecond, 20) // 2,000 cost units per second
	for _, tc := range []struct {
		name     string
		target   time.Duration
		wantFall bool
	}{
		{"p99 above the target", 20 * time.Millisecond, true},
		{"p99 under the target", 200 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.wantFall {
				for _, tb := range tables { // dead tuples again for the second run
					exec(t, conn, "UPDATE "+tb+" SET pad = pad WHERE id % 4 = 1")
				}
			}
			on := runnerwire.DefaultAdaptive()
			on.LatencyTarget = tc.target
			var rec recorder
			run, err := online.New(context.Background(), target(db), online.Options{Parallelism: 1, Tables: tables,
				Throttle: ceiling, Adaptive: on, OnProgress: rec.add, PollInterval: 100 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = run.Close() }()
			rep, err := run.Vacuum(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			rates := make([]float64, len(rep.Tables))
			for i, tr := range rep.Tables {
				rates[i] = tr.CostRate.Configured
				t.Logf("%s: configured %.0f cost units/s, %.2fs", tr.Table, tr.CostRate.Configured, tr.ElapsedSeconds)
			}
			a := run.Progress().Adaptive
			if a == nil {
				t.Fatal("no adaptive progress after the run")
			}
			t.Logf("adaptive %+v", a)
			if tc.wantFall {
				if !(rates[2] <= rates[1] && rates[1] <= rates[0] && rates[2] < 2000) {
					t.Errorf("configured cost rates %v: want each table's at most the one before, and falling below the ceiling (2000)", rates)
				}
				// On a loaded machine a 30 ms sleep can run past 40 ms, twice the target:
				// HardStop then holds the next table back and it runs at the floor. Both
				// are the foreground's doing; the ceiling is not.
				if (a.Binding != "ForegroundLatency" && a.Binding != "Floor") || a.BudgetPerMille >= 1000 {
					t.Errorf("adaptive %+v at the end, want ForegroundLatency (or Floor) binding below the ceiling", a)
				}
				if a.BoundSeconds["ForegroundLatency"]+a.BoundSeconds["Floor"]+a.BoundSeconds["HardStop"] <= 0 {
					t.Errorf("no time bound by ForegroundLatency, Floor or HardStop: %+v", a.BoundSeconds)
				}
				return
			}
			for i, r := range rates {
				if r != 2000 {
					t.Errorf("table %d ran at %.0f cost units/s, want the ceiling's 2000", i, r)
				}
			}
			if a.Binding != "Ceiling" || a.BudgetPerMille != 1000 {
				t.Errorf("adaptive %+v, want Ceiling at 1000 per mille", a)
			}
		})
	}
}
