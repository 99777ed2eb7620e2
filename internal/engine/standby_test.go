package engine

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum/throttle"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// shipWAL copies the primary's WAL segment files into the standby's WAL directory (what
// a WAL receiver writes) and returns how far the primary had flushed before the copy.
func shipWAL(t *testing.T, primary *DB, sdir string) wal.LSN {
	t.Helper()
	flushed := primary.WAL().FlushedLSN()
	src := filepath.Join(primary.Dir(), wal.WALDirName)
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		in, err := os.Open(filepath.Join(src, e.Name()))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) { // recycled meanwhile: the standby has it
				continue
			}
			t.Fatal(err)
		}
		out, err := os.OpenFile(filepath.Join(sdir, wal.WALDirName, e.Name()), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, in); err != nil {
			t.Fatal(err)
		}
		_ = in.Close()
		if err := out.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return flushed
}

// standbyPair returns a primary with table t (100 rows) and a hot standby made from a copy
// of it, following the WAL shipped to it until the test ends.
// reopenWithCopy closes primary (of directory dir), copies the cleanly shut
// down directory into a new one and reopens primary, closed at the test's end:
// the copy is a base backup a standby starts from.
func reopenWithCopy(t *testing.T, primary *DB, dir string, opts Options) (*DB, string) {
	t.Helper()
	if err := primary.Close(); err != nil {
		t.Fatal(err)
	}
	sdir := t.TempDir()
	if err := CopyDataDir(dir, sdir); err != nil {
		t.Fatal(err)
	}
	primary, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeDB(t, primary) })
	return primary, sdir
}

func standbyPair(t *testing.T, opts Options) (primary, standby *DB, ship func()) {
	t.Helper()
	return standbyPairPolling(t, opts, 5*time.Millisecond)
}

// standbyPairPolling is standbyPair with Follow polling every poll; ship wakes it
// (WakeFollow) as a receiver does after each fsync.
func standbyPairPolling(t *testing.T, opts Options, poll time.Duration) (primary, standby *DB, ship func()) {
	t.Helper()
	primary, dir := newDB(t, opts)
	if err := primary.CreateTable("t", accountCols); err != nil {
		t.Fatal(err)
	}
	if err := primary.CreateIndex("t_id", "t", "id"); err != nil {
		t.Fatal(err)
	}
	insertRange(t, primary, "t", 0, 100)
	primary, sdir := reopenWithCopy(t, primary, dir, opts)
	standby, err := OpenStandby(sdir, opts)
	if err != nil {
		t.Fatalf("OpenStandby: %v", err)
	}
	var limit atomic.Uint64
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- standby.Follow(ctx, func() wal.LSN { return wal.LSN(limit.Load()) }, poll)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("Follow: %v", err)
		}
		closeDB(t, standby)
	})
	ship = func() {
		t.Helper()
		end := shipWAL(t, primary, sdir)
		limit.Store(uint64(end))
		standby.WakeFollow()
		deadline := time.Now().Add(20 * time.Second)
		for standby.ReplayedLSN() < end {
			select {
			case err := <-done:
				done <- err // for the cleanup, which waits for Follow's end
				t.Fatalf("Follow stopped at %X of %X: %v", uint64(standby.ReplayedLSN()), uint64(end), err)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("the standby replayed up to %X of %X in 20 s", uint64(standby.ReplayedLSN()), uint64(end))
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return primary, standby, ship
}

// A receiver wakes Follow after each fsync (WakeFollow): the standby replays the new WAL
// at once, not at its next poll, which here is a minute away; ship fails after 20 s.
func TestFollowReplaysAtOnceWhenWokenNotAtItsNextPoll(t *testing.T) {
	primary, standby, ship := standbyPairPolling(t, testOpts(), time.Minute)
	insertRange(t, primary, "t", 100, 150)
	ship()
	insertRange(t, primary, "t", 150, 160) // a second wake, after Follow went back to its poll
	ship()
	if n := len(scanAll(t, standby, "t")); n != 160 {
		t.Errorf("the standby sees %d rows, want 160", n)
	}
}

func insertRange(t *testing.T, db *DB, table string, from, to int64) {
	t.Helper()
	tx := mustTx(t, db)
	for i := from; i < to; i++ {
		if _, err := tx.Insert(table, []any{i, []byte("owner"), i * 10}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// deleteIDs deletes the rows of t with ids in [from, to) in one transaction.
func deleteIDs(t *testing.T, db *DB, from, to int64) {
	t.Helper()
	tx := mustTx(t, db)
	for i := from; i < to; i++ {
		found, err := tx.IndexLookup("t_id", i)
		if err != nil || len(found) != 1 {
			t.Fatalf("lookup of id %d: %v, %d rows", i, err, len(found))
		}
		if err := tx.Delete("t", found[0].TID); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

func sameRows(t *testing.T, primary, standby *DB, table string) {
	t.Helper()
	p, s := scanAll(t, primary, table), scanAll(t, standby, table)
	if !reflect.DeepEqual(p, s) {
		t.Fatalf("table %s: the primary has %d rows, the standby %d, and they differ", table, len(p), len(s))
	}
}

// TestHotStandbyReplaysDDLAndVacuumFullWhileReading: a standby made from a copy follows
// the primary's WAL while it reads: tables created after the copy, rows written after a
// VACUUM FULL (the gap of the last milestone) and after a lazy VACUUM, TRUNCATE and DROP
// all reach it; it refuses writes with ErrReadOnly; its Check is clean, and its rows equal
// the primary's.
func TestHotStandbyReplaysDDLAndVacuumFullWhileReading(t *testing.T) {
	opts := testOpts()
	primary, standby, ship := standbyPair(t, opts)
	ship()
	sameRows(t, primary, standby, "t")

	if err := primary.CreateTable("u", accountCols); err != nil {
		t.Fatal(err)
	}
	if err := primary.CreateIndex("u_id", "u", "id"); err != nil {
		t.Fatal(err)
	}
	insertRange(t, primary, "u", 0, 300)
	if err := primary.CreateTable("gone", accountCols); err != nil {
		t.Fatal(err)
	}
	insertRange(t, primary, "gone", 0, 10)
	ship()
	sameRows(t, primary, standby, "u")
	sameRows(t, primary, standby, "gone")

	// Dead rows, then VACUUM FULL, then rows after it.
	deleteIDs(t, primary, 0, 50)
	if _, err := primary.VacuumFull(context.Background(), "t", vacuum.Options{}); err != nil {
		t.Fatal(err)
	}
	insertRange(t, primary, "t", 1000, 1500)
	if _, err := primary.Vacuum(context.Background(), "u", vacuum.Options{}); err != nil {
		t.Fatal(err)
	}
	insertRange(t, primary, "u", 1000, 1200)
	if err := primary.TruncateTable(context.Background(), "gone"); err != nil {
		t.Fatal(err)
	}
	if err := primary.DropTable(context.Background(), "gone"); err != nil {
		t.Fatal(err)
	}
	ship()
	sameRows(t, primary, standby, "t")
	sameRows(t, primary, standby, "u")
	if n := len(scanAll(t, standby, "t")); n != 550 {
		t.Fatalf("the standby's t has %d rows after VACUUM FULL and 500 more, want 550", n)
	}
	if _, err := standby.Table("gone"); !errors.Is(err, ErrNoSuchTable) {
		t.Fatalf("the dropped table on the standby: %v, want ErrNoSuchTable", err)
	}
	checkClean(t, standby)

	stx := mustTx(t, standby)
	if _, err := stx.Insert("t", []any{int64(5000), []byte("x"), int64(1)}); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("insert on the standby: %v, want ErrReadOnly", err)
	}
	endTx(stx)
	if err := standby.CreateTable("w", accountCols); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("create table on the standby: %v, want ErrReadOnly", err)
	}
	if _, err := standby.Vacuum(context.Background(), "t", vacuum.Options{}); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("vacuum on the standby: %v, want ErrReadOnly", err)
	}
	if !standby.InRecovery() || primary.InRecovery() {
		t.Fatal("InRecovery: want true on the standby only")
	}
}

// TestHotStandbySeesTransactionsOnlyWhenTheirCommitIsReplayed: rows of a transaction the
// primary has not committed are replayed but invisible; a snapshot taken before the
// commit's replay keeps not seeing them; a new one sees all of them.
func TestHotStandbySeesTransactionsOnlyWhenTheirCommitIsReplayed(t *testing.T) {
	primary, standby, ship := standbyPair(t, testOpts())
	open := mustTx(t, primary)
	for i := int64(200); i < 260; i++ {
		if _, err := open.Insert("t", []any{i, []byte("late"), i}); err != nil {
			t.Fatal(err)
		}
	}
	// Make the uncommitted records durable (a later commit flushes them).
	insertRange(t, primary, "t", 300, 301)
	ship()
	if n := len(scanAll(t, standby, "t")); n != 101 {
		t.Fatalf("the standby sees %d rows with 60 uncommitted, want 101", n)
	}
	before := mustTx(t, standby)
	defer endTx(before)
	if err := open.Commit(); err != nil {
		t.Fatal(err)
	}
	ship()
	count := func(tx *Tx) int {
		n := 0
		if err := tx.Scan("t", func(_ page.TID, _ []any) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(before); n != 101 {
		t.Fatalf("a snapshot from before the commit's replay sees %d rows, want 101", n)
	}
	if n := len(scanAll(t, standby, "t")); n != 161 {
		t.Fatalf("after the commit's replay the standby sees %d rows, want 161", n)
	}
}

// TestHotStandbyCancelsAReaderAPruneWouldRemoveRowsFrom: a standby reader whose snapshot
// still sees deleted rows holds replay of the primary's prune for
// MaxStandbyStreamingDelay, then is cancelled with ErrStandbyConflict, and replay goes on.
func TestHotStandbyCancelsAReaderAPruneWouldRemoveRowsFrom(t *testing.T) {
	opts := testOpts()
	opts.MaxStandbyStreamingDelay = 300 * time.Millisecond
	primary, standby, ship := standbyPair(t, opts)
	ship()
	reader := mustTx(t, standby)
	defer endTx(reader)
	deleteIDs(t, primary, 0, 100)
	if _, err := primary.Vacuum(context.Background(), "t", vacuum.Options{}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	ship()
	if waited := time.Since(t0); waited < opts.MaxStandbyStreamingDelay {
		t.Errorf("replay caught up in %v, before the %v delay: it did not wait for the reader", waited, opts.MaxStandbyStreamingDelay)
	}
	err := reader.Scan("t", func(page.TID, []any) error { return nil })
	if !errors.Is(err, ErrStandbyConflict) {
		t.Fatalf("the conflicting reader's scan: %v, want ErrStandbyConflict", err)
	}
	if standby.StandbyCancels() < 1 {
		t.Fatal("StandbyCancels is 0 after a cancel")
	}
	if n := len(scanAll(t, standby, "t")); n != 0 {
		t.Fatalf("a new reader sees %d rows after the delete, want 0", n)
	}
}

// TestHotStandbyReplaysAVacuumFullsRewriteWhileAnotherTableSwitches: a catalog switch of
// another table (a TRUNCATE) logged while a VACUUM FULL is still writing its new heap
// carries a next OID that already counts the new heap's relfilenode, which no catalog names
// yet. The standby must go on applying the rewrite's pages all the same, so that rows
// written after the swap replay onto them and its rows equal the primary's.
func TestHotStandbyReplaysAVacuumFullsRewriteWhileAnotherTableSwitches(t *testing.T) {
	opts := testOpts()
	primary, standby, ship := standbyPair(t, opts)
	if err := primary.CreateTable("h", accountCols); err != nil {
		t.Fatal(err)
	}
	insertRange(t, primary, "h", 0, 10)
	insertRange(t, primary, "t", 100, 6000)
	deleteIDs(t, primary, 0, 3000)
	ship()

	nextOID := func() uint32 { // allocRelfilenode bumps it in place, under db.mu
		primary.mu.RLock()
		defer primary.mu.RUnlock()
		return primary.cat.NextOID
	}
	before := nextOID()
	// About one heap page per 10 ms: the rewrite lasts long after its relfilenode is taken.
	slow := &throttle.Settings{CostDelay: 10 * time.Millisecond, CostLimit: 20, PageHitCost: 1, PageMissCost: 2, PageDirtyCost: 20}
	done := make(chan error, 1)
	go func() {
		_, err := primary.VacuumFull(context.Background(), "t", vacuum.Options{Throttle: slow})
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for nextOID() == before {
		if time.Now().After(deadline) {
			t.Fatal("VACUUM FULL took no relfilenode in 10 s")
		}
		time.Sleep(time.Millisecond)
	}
	if err := primary.TruncateTable(context.Background(), "h"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("VACUUM FULL ended (%v) before the TRUNCATE's catalog record: the test proves nothing", err)
	default:
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The rows after the swap go onto the rewritten heap's last page.
	insertRange(t, primary, "t", 7000, 7100)
	ship()
	sameRows(t, primary, standby, "t")
	sameRows(t, primary, standby, "h")
	checkClean(t, standby)
}
