package online_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/online"
	"github.com/vacuumops/vacuum-operator/internal/pgtest"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// TestPostgreSQLStandbysLagIsInProgress: an online run on a PostgreSQL 15 primary with a real
// streaming standby (pg_basebackup, primary_conninfo) reports that standby from
// pg_stat_replication as TestReplicationLagInProgressIsTheLargestStandbysLag does for the
// engine server: one standby near 0 while it keeps up; while the standby's processes are
// stopped (SIGSTOP) and the primary writes, at least the WAL written since and at most the
// primary's WAL end less what the standby had replayed before; after SIGCONT the lag now
// falls back while the run's maximum stays. PostgreSQL measures replay_lag only when the
// standby replies, so during the stop the seconds hold their last value: the bytes are what
// grow.
func TestPostgreSQLStandbysLagIsInProgress(t *testing.T) {
	ctx := context.Background()
	primary, err := pgtest.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer primary.Stop()
	standby, err := primary.StartStandby(ctx, "sb1")
	if err != nil {
		t.Fatal(err)
	}
	defer standby.Stop()
	defer func() { _ = standby.ContinueProcesses() }() // before Stop, whatever failed
	c, err := primary.Connect(ctx, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close(context.Background()) }()
	sc, err := standby.Connect(ctx, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sc.Close(context.Background()) }()

	bloat(t, c, "orders", 40000, 200)
	exec(t, c, "CREATE TABLE other (id int, pad text)")
	current := func() uint64 { return lsn(t, scalar[string](t, c, "SELECT pg_current_wal_lsn()::text")) }
	caughtUp := current()
	waitUntil(t, 30*time.Second, "the standby replaying up to the primary's WAL end", func() bool {
		var s *string
		return sc.QueryRow(ctx, "SELECT pg_last_wal_replay_lsn()::text").Scan(&s) == nil && s != nil && lsn(t, *s) >= caughtUp
	})
	if n := scalar[int64](t, sc, "SELECT count(*) FROM orders"); n != 20000 {
		t.Fatalf("the standby has %d rows of orders, want the primary's 20000", n)
	}

	// About 1,100 heap pages, each costing at least one unit of the budget of 1 per 10 ms:
	// the VACUUM outlasts the test, which cancels it at the end.
	target := online.Target{Address: primary.Addr(), Database: "postgres", User: pgtest.Superuser,
		PasswordFile: passwordFile, SSLMode: online.SSLDisable, NoEnvironment: true}
	var rec recorder
	run, err := online.New(ctx, target, online.Options{Parallelism: 1, Tables: []string{"orders"},
		Throttle: limits(10*time.Millisecond, 1), OnProgress: rec.add, PollInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = run.Close() }()
	vctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := run.Vacuum(vctx); done <- err }()
	last := rec.lastReplication
	waitForKeptUpStandby(t, &rec)

	if err := standby.StopProcesses(); err != nil {
		t.Fatal(err)
	}
	before := current()
	exec(t, c, "INSERT INTO other SELECT g, repeat('x', 400) FROM generate_series(1, 10000) g")
	written := current() - before
	var stopped runnerwire.Replication
	waitUntil(t, 30*time.Second, "the stopped standby's lag in progress", func() bool {
		rp := last()
		if rp != nil {
			stopped = *rp
		}
		return rp != nil && rp.LagBytes >= int64(written)
	})
	if bound := current() - caughtUp; stopped.LagBytes > int64(bound) {
		t.Errorf("lag %d bytes, more than the primary's WAL end less the standby's replay before the stop (%d)", stopped.LagBytes, bound)
	}
	t.Logf("standby stopped: %d bytes written since, progress says %+v", written, stopped)

	if err := standby.ContinueProcesses(); err != nil {
		t.Fatal(err)
	}
	rp := waitForCaughtUpStandby(t, &rec, int64(written), stopped)
	t.Logf("after SIGCONT: %+v", *rp)
	waitUntil(t, 30*time.Second, "the standby's copy of other at the primary's 10000 rows", func() bool {
		return scalar[int64](t, sc, "SELECT count(*) FROM other") == 10000
	})
	cancel()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Logf("the cancelled VACUUM returned %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the cancelled VACUUM did not return within 30 s")
	}
}
