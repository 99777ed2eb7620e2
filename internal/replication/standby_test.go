package replication_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
	"github.com/vacuumops/vacuum-operator/internal/replication"
)

// runReceiver starts a receiver; the returned stop ends it the way a crash does (no last
// fsync or report) and waits for it.
func runReceiver(t *testing.T, cfg replication.StandbyConfig) (*replication.Receiver, func()) {
	t.Helper()
	cfg.Logf = t.Logf
	r := replication.NewReceiver(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("receiver: %v", err)
		}
	}
	t.Cleanup(stop)
	return r, stop
}

func waitFlushed(t *testing.T, r *replication.Receiver, end wal.LSN) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for r.Status().Flushed < end {
		if time.Now().After(deadline) {
			t.Fatalf("standby flushed %s, want %s: %+v", replication.FormatLSN(r.Status().Flushed), replication.FormatLSN(end), r.Status())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStandbyTakesABaseBackupStreamsAndResumesAfterACrash: a standby started on an empty
// directory takes its base backup, streams through a slot, fsyncs and reports what it
// flushed (the primary's pg_stat_replication figures and the slot follow), is stopped as
// by a crash, resumes from what it had flushed while the primary kept writing, and the
// directory it received, opened by the engine (a promotion: recovery replays the WAL),
// equals the primary row for row and checks clean. Tables are created before the base
// backup: DDL is not replicated yet.
func TestStandbyTakesABaseBackupStreamsAndResumesAfterACrash(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	pr := startPrimary(t, replication.PrimaryConfig{MaxSlotWALKeepSize: -1})
	c := replConnect(t, pr.replURL("repl"))
	if _, err := pglogrepl.CreateReplicationSlot(ctx, c, "sb", "", pglogrepl.CreateReplicationSlotOptions{
		Mode: pglogrepl.PhysicalReplication, SnapshotAction: "RESERVE_WAL"}); err != nil {
		t.Fatal(err)
	}
	write(t, pr.db, "a", 2000, 200)
	// DDL is not in the engine's WAL (the catalog is its own file): the tables exist
	// before the base backup, and what follows is DML only.
	write(t, pr.db, "b", 1, 200)
	write(t, pr.db, "c", 1, 200)
	host, port := pr.hostPort()
	dir := t.TempDir() + "/standby"
	cfg := replication.StandbyConfig{Primary: replication.ConnConfig{Host: host, Port: port, User: "repl", Password: "secret",
		AppName: "sb1"}, Dir: dir, BaseBackupIfEmpty: true, Slot: "sb", StatusInterval: 50 * time.Millisecond}
	r, stop := runReceiver(t, cfg)
	write(t, pr.db, "b", 3000, 200)
	end := pr.db.WAL().FlushedLSN()
	waitFlushed(t, r, end)
	if !r.Status().BaseBackupFromUs {
		t.Fatal("standby did not take its base backup")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ss := pr.p.Standbys()
		if len(ss) == 1 && ss[0].Flush >= end && ss[0].AppName == "sb1" && ss[0].FlushLag >= 0 {
			t.Logf("pg_stat_replication: %+v", ss[0])
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("primary's standbys %+v, want sb1 flushed to %s", ss, replication.FormatLSN(end))
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The same figures through SQL, as a monitoring client reads them.
	sc, err := pgx.Connect(ctx, "postgres://plain:secret@"+pr.addr+"/postgres?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	var app, state, flushLSN, slotRestart string
	var flushLag *string
	if err := sc.QueryRow(ctx, "SELECT application_name, state, flush_lsn, flush_lag FROM pg_stat_replication").Scan(&app, &state, &flushLSN, &flushLag); err != nil {
		t.Fatal(err)
	}
	if lsn, err := replication.ParseLSN(flushLSN); err != nil || lsn < end || app != "sb1" || state != "streaming" || flushLag == nil {
		t.Fatalf("pg_stat_replication: %s %s flush %s lag %v, want sb1 streaming flushed to %s", app, state, flushLSN, flushLag, replication.FormatLSN(end))
	}
	if err := sc.QueryRow(ctx, "SELECT restart_lsn FROM pg_replication_slots WHERE slot_name = 'sb'").Scan(&slotRestart); err != nil {
		t.Fatal(err)
	}
	_ = sc.Close(ctx)
	stop() // as a crash: no last report
	write(t, pr.db, "c", 2000, 200)
	if sl, _ := pr.p.Slots().Get("sb"); sl.RestartLSN < end {
		t.Fatalf("slot restart %s, want at least the standby's flush %s", replication.FormatLSN(sl.RestartLSN), replication.FormatLSN(end))
	}
	if err := pr.db.Checkpoint(); err != nil { // would recycle WAL the slot holds
		t.Fatal(err)
	}
	cfg.BaseBackupIfEmpty = false
	r, stop = runReceiver(t, cfg)
	end = pr.db.WAL().FlushedLSN()
	waitFlushed(t, r, end)
	stop()

	sdb, err := engine.Open(dir, engine.Options{BufferPoolBytes: 8 << 20, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sdb.Close() }()
	if rep, err := sdb.Check(ctx); err != nil || !rep.OK() {
		t.Fatalf("check of the standby: %+v, %v", rep, err)
	}
	if sdb.SystemID() != pr.db.SystemID() {
		t.Fatalf("standby system %d, primary %d", sdb.SystemID(), pr.db.SystemID())
	}
	for _, table := range []string{"a", "b", "c"} {
		got, want := rows(t, sdb, table), rows(t, pr.db, table)
		if len(got) != len(want) || len(want) == 0 {
			t.Fatalf("table %s: standby %d rows, primary %d", table, len(got), len(want))
		}
		for id, n := range want {
			if got[id] != n {
				t.Fatalf("table %s row %d: standby %d bytes, primary %d", table, id, got[id], n)
			}
		}
	}
}
