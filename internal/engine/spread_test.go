package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
	"github.com/vacuumops/vacuum-operator/internal/hangtest"
)

// dirtyTable makes a table t of rows that leaves about pages dirty buffers.
func dirtyTable(t *testing.T, db *DB, rows int64) { dirtyTableNamed(t, db, "t", rows) }

// dirtyTableNamed is dirtyTable for a table of another name.
func dirtyTableNamed(t *testing.T, db *DB, name string, rows int64) {
	t.Helper()
	if err := db.CreateTable(name, accountCols); err != nil {
		t.Fatal(err)
	}
	tx := mustTx(t, db)
	for i := range rows {
		if _, err := tx.Insert(name, []any{i, "a row of some bytes to fill pages with", i}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// startSpread asks the background checkpointer for a checkpoint (the spread
// kind, as the WAL's distance does) and returns a channel closed once the
// checkpoint count passed its value now.
func startSpread(t *testing.T, db *DB) <-chan struct{} {
	t.Helper()
	before := db.ckpts.Load()
	db.ckptReq <- struct{}{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for db.ckpts.Load() == before && !db.closed.Load() {
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return done
}

// spreadOpts: no automatic checkpoint (the tests start one), a spread of 2 s.
func spreadOpts() Options {
	o := testOpts()
	o.CheckpointWALBytes = -1
	o.CheckpointSpread = 2 * time.Second
	return o
}

// TestASpreadCheckpointPacesItsWritesOverTheSpreadWhenNoWALFollows: with no WAL
// after it began, the checkpoint the engine starts by itself writes its buffers
// over about checkpointCompletion of CheckpointSpread, not at once, and still
// finishes (its redo pointer recorded).
func TestASpreadCheckpointPacesItsWritesOverTheSpreadWhenNoWALFollows(t *testing.T) {
	db, _ := newDB(t, spreadOpts())
	dirtyTable(t, db, 3000)
	before := db.ckpts.Load()
	start := time.Now()
	<-startSpread(t, db)
	took := time.Since(start)
	// 0.9 of 2 s is 1.8 s; at least 1 s, and nowhere near a stuck pace.
	if took < time.Second || took > 6*time.Second {
		t.Fatalf("spread checkpoint took %v, want about 1.8 s", took)
	}
	if db.ckpts.Load() != before+1 {
		t.Fatalf("checkpoints %d, want %d", db.ckpts.Load(), before+1)
	}
}

// TestAnImmediateCheckpointHurriesASpreadOneAndSoDoesClose: Checkpoint asked
// for while a spread checkpoint paces its writes makes it finish at full speed,
// then runs, both well within the spread; Close does the same.
func TestAnImmediateCheckpointHurriesASpreadOneAndSoDoesClose(t *testing.T) {
	for _, tc := range []struct {
		name string
		stop func(*DB) error
	}{
		{"Checkpoint", (*DB).Checkpoint},
		{"Close", (*DB).Close},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := spreadOpts()
			o.CheckpointSpread = 30 * time.Second
			db, _ := newDB(t, o)
			dirtyTable(t, db, 3000)
			done := startSpread(t, db)
			time.Sleep(300 * time.Millisecond)
			start := time.Now()
			if err := tc.stop(db); err != nil {
				t.Fatal(err)
			}
			if took := time.Since(start); took > 3*time.Second {
				t.Fatalf("%s took %v beside a spread checkpoint of 30 s", tc.name, took)
			}
			select {
			case <-done:
			case <-time.After(3 * time.Second):
				t.Fatal("the spread checkpoint still runs 3 s after an immediate one")
			}
		})
	}
}

// TestASpreadCheckpointKeepsUpWithTheWAL: WAL written while a spread checkpoint
// runs moves its schedule, so with the checkpoint distance written again it has
// finished, long before the time spread.
func TestASpreadCheckpointKeepsUpWithTheWAL(t *testing.T) {
	o := spreadOpts()
	o.CheckpointSpread = time.Minute
	db, _ := newDB(t, o)
	dirtyTable(t, db, 3000)
	db.opts.CheckpointWALBytes = 256 << 10 // the schedule's distance; no checkpoint is asked for by WAL here
	done := startSpread(t, db)
	time.Sleep(200 * time.Millisecond)
	if err := db.CreateTable("u", accountCols); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := int64(0); ; i++ {
		tx := mustTx(t, db)
		for j := range int64(100) {
			if _, err := tx.Insert("u", []any{i*100 + j, "WAL that moves the checkpoint's schedule on", j}); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-done:
			if took := time.Since(start); took > 20*time.Second {
				t.Fatalf("the spread checkpoint finished %v after the WAL began", took)
			}
			return
		default:
		}
		if time.Since(start) > 30*time.Second {
			t.Fatal("the spread checkpoint did not finish within 30 s of WAL")
		}
	}
}

// TestASpreadCheckpointCountsAnOIDAllocatedWhileItPaced: DDL runs while a spread
// checkpoint sleeps (it lets go of db.mu), and the checkpoint's NextOID, read
// again after its writes, counts the OID that DDL took.
func TestASpreadCheckpointCountsAnOIDAllocatedWhileItPaced(t *testing.T) {
	db, dir := newDB(t, spreadOpts())
	dirtyTable(t, db, 3000)
	done := startSpread(t, db)
	time.Sleep(300 * time.Millisecond)
	if err := db.CreateTable("u", accountCols); err != nil {
		t.Fatal(err)
	}
	ti, err := db.Table("u")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
		t.Fatal("the spread checkpoint ended before the DDL: nothing paced")
	default:
	}
	<-done
	c, err := wal.ReadControl(vfs.OS(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.NextOID <= ti.OID {
		t.Fatalf("checkpoint's NextOID %d does not count table u's OID %d, allocated while it paced", c.NextOID, ti.OID)
	}
}

// TestAnImmediateCheckpointBesideASpreadOneAndAWriterLetsEveryoneThrough: a
// Checkpoint asked for while a spread checkpoint naps, with a writer of db.mu (DDL)
// right behind it, ends, and so do the writer, the spread checkpoint and a new
// transaction. It once waited for the spread checkpoint while holding db.mu shared;
// the writer then waited for it, and the spread checkpoint, waking from a nap, could
// not take db.mu shared again past the waiting writer: the engine server hung so in
// experiment 10 (a CHECKPOINT statement, a spread checkpoint and the clog truncation
// after a VACUUM). The writer must be waiting before the spread checkpoint's nap ends,
// so each try runs the three within a millisecond; five tries.
func TestAnImmediateCheckpointBesideASpreadOneAndAWriterLetsEveryoneThrough(t *testing.T) {
	o := spreadOpts()
	o.CheckpointSpread = 30 * time.Second
	db, _ := newDB(t, o)
	dirtyTable(t, db, 3000)
	for i := range 5 {
		done := startSpread(t, db)
		time.Sleep(100 * time.Millisecond) // the spread checkpoint is pacing, napping
		ckpt, ddl := make(chan error, 1), make(chan error, 1)
		go func() { ckpt <- db.Checkpoint() }()
		time.Sleep(500 * time.Microsecond)
		go func() { ddl <- db.CreateTable(fmt.Sprintf("w%d", i), accountCols) }()
		hangtest.Wait(t, fmt.Sprintf("try %d: Checkpoint", i), ckpt, 10*time.Second)
		hangtest.Wait(t, fmt.Sprintf("try %d: CREATE TABLE", i), ddl, 10*time.Second)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("try %d: the spread checkpoint still runs 10 s after an immediate one", i)
		}
		tx := make(chan error, 1)
		go func() {
			x, err := db.Begin()
			if err == nil {
				err = x.Commit()
			}
			tx <- err
		}()
		hangtest.Wait(t, fmt.Sprintf("try %d: a new transaction", i), tx, 10*time.Second)
		dirtyTableNamed(t, db, fmt.Sprintf("d%d", i), 3000)
	}
}
