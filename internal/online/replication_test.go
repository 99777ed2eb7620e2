package online_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/vacuumops/vacuum-operator/internal/online"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// lsn reads a pg_lsn text (16/B374D848) as a number.
func lsn(t *testing.T, s string) uint64 {
	t.Helper()
	var hi, lo uint64
	if _, err := fmt.Sscanf(s, "%X/%X", &hi, &lo); err != nil {
		t.Fatalf("WAL position %q: %v", s, err)
	}
	return hi<<32 | lo
}

// TestReplicationLagInProgressIsTheLargestStandbysLag: an online run on an engine-server
// primary streaming to a real engine-server standby (two processes, the standby's base
// backup its own first step) reports the standby's lag from pg_stat_replication: near 0
// while it keeps up; while the standby process is stopped (SIGSTOP) and the primary writes,
// at least the WAL written since, and at most the primary's WAL end less what the standby
// had replayed before; after SIGCONT the lag now falls back while the run's maximum stays.
// The standby's pg_last_wal_replay_lsn() and pg_last_wal_receive_lsn() follow the primary,
// its pg_current_wal_lsn() is refused (55000) and the primary's replay LSN is NULL, as
// PostgreSQL's.
func TestReplicationLagInProgressIsTheLargestStandbysLag(t *testing.T) {
	ctx := context.Background()
	users := "app:" + enginePassword + "\nrepl:" + enginePassword + " replication\n"
	primary, _ := startEngineProcess(t, users, true)
	pw := filepath.Join(t.TempDir(), "password")
	writeFile(t, pw, enginePassword+"\n")
	standby, sproc := startEngineProcess(t, users, false, "--standby-of", primary, "--name", "sb1",
		"--basebackup-if-empty", "--user", "repl", "--password-file", pw, "--sslmode", "disable")
	t.Cleanup(func() { _ = sproc.Signal(syscall.SIGCONT) }) // before the process's own cleanup stops it
	c, sc := engineConn(t, primary), engineConn(t, standby)

	exec(t, c, "CREATE TABLE other (id bigint, pad bytea)")
	createUpdatedOrders(t, c)
	current := func() uint64 { return lsn(t, scalar[string](t, c, "SELECT pg_current_wal_lsn()")) }
	caughtUp := current()
	waitUntil(t, 30*time.Second, "the standby replaying up to the primary's WAL end", func() bool {
		var s string
		return sc.QueryRow(ctx, "SELECT pg_last_wal_replay_lsn()").Scan(&s) == nil && lsn(t, s) >= caughtUp
	})
	if recv, replay := lsn(t, scalar[string](t, sc, "SELECT pg_last_wal_receive_lsn()")),
		lsn(t, scalar[string](t, sc, "SELECT pg_last_wal_replay_lsn()")); recv < replay {
		t.Errorf("standby received %X, replayed %X: received must not be behind", recv, replay)
	}
	var pgErr *pgconn.PgError
	if _, err := sc.Exec(ctx, "SELECT pg_current_wal_lsn()"); !errors.As(err, &pgErr) || pgErr.Code != "55000" {
		t.Errorf("pg_current_wal_lsn() on the standby: %v, want 55000 (recovery is in progress)", err)
	}
	if v := scalar[*string](t, c, "SELECT pg_last_wal_replay_lsn()"); v != nil {
		t.Errorf("pg_last_wal_replay_lsn() on the primary is %q, want NULL", *v)
	}

	var rec recorder
	run, err := online.New(ctx, engineTarget(t, primary), online.Options{Parallelism: 1, Tables: []string{"orders"},
		Throttle: limits(100*time.Millisecond, 1), OnProgress: rec.add, PollInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = run.Close() }()
	done := make(chan error, 1)
	go func() { _, err := run.Vacuum(ctx); done <- err }()
	last := rec.lastReplication
	waitForKeptUpStandby(t, &rec)
	if rp := run.Report().Replication; rp == nil || rp.Standbys != 1 {
		t.Errorf("the run's report has replication %+v, want the standby its progress saw", rp)
	}

	if err := sproc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	before := current()
	exec(t, c, "INSERT INTO other SELECT g, '\\x"+fmt.Sprintf("%0400d", 0)+"'::bytea FROM generate_series(1, 10000) g")
	written := current() - before
	var stopped runnerwire.Replication
	waitUntil(t, 30*time.Second, "the stopped standby's lag in progress", func() bool {
		rp := last()
		if rp != nil {
			stopped = *rp
		}
		return rp != nil && rp.LagBytes >= int64(written) && rp.LagSeconds >= 0.3
	})
	if bound := current() - caughtUp; stopped.LagBytes > int64(bound) {
		t.Errorf("lag %d bytes, more than the primary's WAL end less the standby's replay before the stop (%d)", stopped.LagBytes, bound)
	}
	t.Logf("standby stopped: %d bytes written since, progress says %+v", written, stopped)

	if err := sproc.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitForCaughtUpStandby(t, &rec, int64(written), stopped)
	if err := run.UpdateThrottle(limits(0, 200)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the unthrottled VACUUM did not finish within 30 s")
	}
}
