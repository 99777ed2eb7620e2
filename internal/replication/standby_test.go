package replication_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
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
// equals the primary row for row and checks clean.
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
		if len(ss) == 1 && ss[0].Flush >= end && ss[0].FlushLag < 0 {
			// Every write landed in the base backup, so nothing was streamed that a lag
			// could be measured on (PostgreSQL shows NULL then too): stream one more.
			write(t, pr.db, "b", 1, 200)
			end = pr.db.WAL().FlushedLSN()
		}
		if time.Now().After(deadline) {
			t.Fatalf("primary's standbys %+v, want sb1 flushed to %s with a flush lag", ss, replication.FormatLSN(end))
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
	if lsn, err := replication.ParseLSN(flushLSN); err != nil || lsn < end || app != "sb1" || (state != "streaming" && state != "catchup") || flushLag == nil {
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

// TestSynchronousCommitWaitsForTheStandbysFlush: with --synchronous-standby, a commit
// returns only once that standby has flushed it; while the standby is down a commit does
// not return, and it returns once the standby is back.
func TestSynchronousCommitWaitsForTheStandbysFlush(t *testing.T) {
	pr := startPrimary(t, replication.PrimaryConfig{MaxSlotWALKeepSize: -1, SynchronousStandby: "sync1"})
	if err := pr.db.CreateTable("s", []engine.Column{{Name: "id", Type: engine.Int8}, {Name: "pad", Type: engine.Bytea}}); err != nil {
		t.Fatal(err)
	}
	host, port := pr.hostPort()
	cfg := replication.StandbyConfig{Primary: replication.ConnConfig{Host: host, Port: port, User: "repl", Password: "secret",
		AppName: "sync1"}, Dir: t.TempDir() + "/standby", BaseBackupIfEmpty: true, StatusInterval: time.Second}
	r, stop := runReceiver(t, cfg)
	commit := func(id int64) <-chan error {
		done := make(chan error, 1)
		go func() {
			tx, err := pr.db.Begin()
			if err == nil {
				if _, err = tx.Insert("s", []any{id, []byte("x")}); err == nil {
					err = tx.Commit()
				}
			}
			done <- err
		}()
		return done
	}
	if err := <-commit(0); err != nil { // waits for the standby's base backup and first report
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := <-commit(1); err != nil {
		t.Fatal(err)
	}
	lat := time.Since(t0)
	if end := pr.db.WAL().FlushedLSN(); r.Status().Flushed < end {
		t.Fatalf("commit returned with the standby flushed to %s, the commit at or before %s", replication.FormatLSN(r.Status().Flushed), replication.FormatLSN(end))
	}
	t.Logf("synchronous commit with the standby up: %v (status interval 1 s: the standby reports at once when caught up)", lat)
	if lat > 900*time.Millisecond {
		t.Fatalf("synchronous commit took %v: the standby did not report its flush at once", lat)
	}
	stop()
	blocked := commit(2)
	select {
	case err := <-blocked:
		t.Fatalf("commit returned (%v) while the synchronous standby was down", err)
	case <-time.After(700 * time.Millisecond):
	}
	cfg.BaseBackupIfEmpty = false
	runReceiver(t, cfg)
	select {
	case err := <-blocked:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("commit still waiting 20 s after the synchronous standby came back")
	}
}

// deleteEvery deletes every k-th row of table (by scan order) in one transaction.
func deleteEvery(t *testing.T, db *engine.DB, table string, k int) {
	t.Helper()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	var tids []page.TID
	i := 0
	if err := tx.ScanContext(context.Background(), table, func(tid page.TID, _ []any) error {
		if i%k == 0 {
			tids = append(tids, tid)
		}
		i++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, tid := range tids {
		if err := tx.Delete(table, tid); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// TestStandbyReplaysVacuumDuringTraffic: a hot standby made by its receiver's base backup
// replays while a writer commits into a table created after the backup and truncates
// another one, and the primary runs a lazy VACUUM, or a VACUUM FULL twice, of a table with
// dead rows, each followed by more rows: the standby, read live, has every row of both
// tables (rows written after each VACUUM FULL included) and checks clean.
func TestStandbyReplaysVacuumDuringTraffic(t *testing.T) {
	for _, full := range []bool{false, true} {
		name := "lazy"
		if full {
			name = "full"
		}
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			pr := startPrimary(t, replication.PrimaryConfig{MaxSlotWALKeepSize: -1})
			write(t, pr.db, "v", 3000, 300)
			host, port := pr.hostPort()
			dir := t.TempDir() + "/standby"
			sdb, _ := runHotStandby(ctx, t, replication.StandbyConfig{Primary: replication.ConnConfig{Host: host, Port: port,
				User: "repl", Password: "secret"}, Dir: dir, BaseBackupIfEmpty: true, StatusInterval: 50 * time.Millisecond})

			// Traffic into a table created after the base backup, during the vacuum.
			stopTraffic := make(chan struct{})
			trafficDone := make(chan error, 1)
			if err := pr.db.CreateTable("w", []engine.Column{{Name: "id", Type: engine.Int8}, {Name: "pad", Type: engine.Bytea}}); err != nil {
				t.Fatal(err)
			}
			// And a table whose files the traffic switches (TRUNCATE) while VACUUM FULL
			// rewrites, as the bench's pgbench_history is.
			if err := pr.db.CreateTable("x", []engine.Column{{Name: "id", Type: engine.Int8}, {Name: "pad", Type: engine.Bytea}}); err != nil {
				t.Fatal(err)
			}
			go func() {
				for id := int64(0); ; id += 20 {
					if id%100 == 0 {
						if err := pr.db.TruncateTable(ctx, "x"); err != nil {
							trafficDone <- err
							return
						}
					}
					select {
					case <-stopTraffic:
						trafficDone <- nil
						return
					default:
					}
					tx, err := pr.db.Begin()
					if err != nil {
						trafficDone <- err
						return
					}
					for j := int64(0); j < 20; j++ {
						if _, err := tx.Insert("w", []any{id + j, make([]byte, 100)}); err != nil {
							trafficDone <- err
							return
						}
					}
					if err := tx.Commit(); err != nil {
						trafficDone <- err
						return
					}
				}
			}()
			deleteEvery(t, pr.db, "v", 3)
			want := 2000
			rounds := 1
			if full {
				rounds = 2 // the second FULL rewrites what the first one wrote, as exp 5 does
			}
			for range rounds {
				var err error
				if full {
					_, err = pr.db.VacuumFull(ctx, "v", vacuum.Options{})
				} else {
					_, err = pr.db.Vacuum(ctx, "v", vacuum.Options{})
				}
				if err != nil {
					t.Fatal(err)
				}
				write(t, pr.db, "v", 500, 300) // ids 0..499 again: counted, not keyed
				want += 500
			}
			close(stopTraffic)
			if err := <-trafficDone; err != nil {
				t.Fatal(err)
			}
			waitReplayed(t, sdb, pr.db.WAL().FlushedLSN())
			if rep, err := sdb.Check(ctx); err != nil || !rep.OK() {
				t.Fatalf("check of the standby: %+v, %v", rep, err)
			}
			if a, b := count(t, sdb, "v"), count(t, pr.db, "v"); a != b || b != want {
				t.Fatalf("standby has %d rows, primary %d; want %d", a, b, want)
			}
			for _, table := range []string{"v", "w"} {
				got, want := rows(t, sdb, table), rows(t, pr.db, table)
				if len(got) != len(want) || len(want) == 0 {
					t.Fatalf("table %s: standby %d ids, primary %d", table, len(got), len(want))
				}
				for id, n := range want {
					if got[id] != n {
						t.Fatalf("table %s row %d: standby %d bytes, primary %d", table, id, got[id], n)
					}
				}
			}
			if !sdb.InRecovery() {
				t.Fatal("the standby is not in recovery")
			}
		})
	}
}

// runHotStandby prepares the standby directory (base backup), opens it as a hot standby
// and runs its receiver and replay until the test ends.
func runHotStandby(ctx context.Context, t *testing.T, cfg replication.StandbyConfig) (*engine.DB, *replication.Receiver) {
	t.Helper()
	cfg.Logf = t.Logf
	var sdb atomic.Pointer[engine.DB]
	cfg.Replayed = func() wal.LSN {
		if d := sdb.Load(); d != nil {
			return d.ReplayedLSN()
		}
		return 0
	}
	r := replication.NewReceiver(cfg)
	if err := r.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	d, err := engine.OpenStandby(cfg.Dir, engine.Options{BufferPoolBytes: 8 << 20, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	sdb.Store(d)
	rctx, cancel := context.WithCancel(ctx)
	recv, follow := make(chan error, 1), make(chan error, 1)
	go func() { recv <- r.Run(rctx) }()
	go func() { follow <- d.Follow(rctx, func() wal.LSN { return r.Status().Flushed }, 5*time.Millisecond) }()
	t.Cleanup(func() {
		cancel()
		if err := <-recv; err != nil {
			t.Errorf("receiver: %v", err)
		}
		if err := <-follow; err != nil {
			t.Errorf("follow: %v", err)
		}
		if err := d.Close(); err != nil {
			t.Errorf("close the standby: %v", err)
		}
	})
	return d, r
}

func waitReplayed(t *testing.T, db *engine.DB, end wal.LSN) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for db.ReplayedLSN() < end {
		if time.Now().After(deadline) {
			t.Fatalf("standby replayed %s, want %s", replication.FormatLSN(db.ReplayedLSN()), replication.FormatLSN(end))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func count(t *testing.T, db *engine.DB, table string) int {
	t.Helper()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	n := 0
	if err := tx.ScanContext(context.Background(), table, func(page.TID, []any) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}
