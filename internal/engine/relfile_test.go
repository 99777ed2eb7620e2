package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum/throttle"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// testStandby is a hot standby of a test's primary that can be crashed and reopened:
// its Follow runs until crash or the test's end, fed by ship.
type testStandby struct {
	t      *testing.T
	dir    string
	opts   Options
	db     *DB
	limit  atomic.Uint64
	cancel context.CancelFunc
	done   chan error
}

// openTestStandby opens dir (a copy of a primary) as a hot standby and starts its Follow.
func openTestStandby(t *testing.T, dir string, opts Options) *testStandby {
	t.Helper()
	s := &testStandby{t: t, dir: dir, opts: opts}
	s.open()
	t.Cleanup(func() {
		if s.db != nil {
			s.stop()
			closeDB(t, s.db)
		}
	})
	return s
}

func (s *testStandby) open() {
	s.t.Helper()
	db, err := OpenStandby(s.dir, s.opts)
	if err != nil {
		s.t.Fatalf("OpenStandby: %v", err)
	}
	s.db = db
	s.limit.Store(uint64(db.ReplayedLSN()))
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel, s.done = cancel, make(chan error, 1)
	go func() {
		s.done <- db.Follow(ctx, func() wal.LSN { return wal.LSN(s.limit.Load()) }, 5*time.Millisecond)
	}()
}

func (s *testStandby) stop() {
	s.cancel()
	if err := <-s.done; err != nil && !errors.Is(err, ErrClosed) {
		s.t.Errorf("Follow: %v", err)
	}
}

// crashAndReopen stops the standby as a crash would (no restartpoint, nothing written
// back) and opens it again: its Open replays from its last restartpoint.
func (s *testStandby) crashAndReopen() {
	s.t.Helper()
	s.stop()
	abandon(s.t, s.db)
	s.db = nil
	s.open()
}

// ship copies the primary's WAL to the standby and waits until it has replayed it.
func (s *testStandby) ship(primary *DB) {
	s.t.Helper()
	end := shipWAL(s.t, primary, s.dir)
	s.limit.Store(uint64(end))
	s.db.WakeFollow()
	deadline := time.Now().Add(20 * time.Second)
	for s.db.ReplayedLSN() < end {
		select {
		case err := <-s.done:
			s.done <- err
			s.t.Fatalf("Follow stopped at %X of %X: %v", uint64(s.db.ReplayedLSN()), uint64(end), err)
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the standby replayed up to %X of %X in 20 s", uint64(s.db.ReplayedLSN()), uint64(end))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// primaryAndCopy returns a primary with table t (6000 rows, index t_id, the first 4000
// deleted so that a VACUUM FULL's rewrite reads many pages before it writes one) and
// table h, and the directory of a copy of it taken after a clean shutdown.
func primaryAndCopy(t *testing.T, opts Options) (*DB, string) {
	t.Helper()
	primary, dir := newDB(t, opts)
	for _, name := range []string{"t", "h"} {
		if err := primary.CreateTable(name, accountCols); err != nil {
			t.Fatal(err)
		}
	}
	if err := primary.CreateIndex("t_id", "t", "id"); err != nil {
		t.Fatal(err)
	}
	insertRange(t, primary, "t", 0, 6000)
	insertRange(t, primary, "h", 0, 10)
	deleteIDs(t, primary, 0, 4000)
	return reopenWithCopy(t, primary, dir, opts)
}

// slowFull starts a VACUUM FULL of t that reads about one heap page per 10 ms, pauses
// it once it took the relfilenode of its new heap (at its next delay point: the first
// pages it reads hold no live row, so it has written none), and returns that
// relfilenode, the batch (to Resume it) and the channel of its result.
func slowFull(ctx context.Context, t *testing.T, primary *DB) (storage.RelFileNode, *vacuum.Batch, chan error) {
	t.Helper()
	nextOID := func() uint32 { // allocRelfilenode bumps it in place, under db.mu
		primary.mu.RLock()
		defer primary.mu.RUnlock()
		return primary.cat.NextOID
	}
	before := nextOID()
	slow := &throttle.Settings{CostDelay: 10 * time.Millisecond, CostLimit: 20, PageHitCost: 1, PageMissCost: 2, PageDirtyCost: 20}
	b, err := vacuum.NewBatch(vacuum.Options{Throttle: slow, Full: true})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := primary.VacuumBatch(ctx, b, []string{"t"})
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for nextOID() == before {
		if time.Now().After(deadline) {
			t.Fatal("VACUUM FULL took no relfilenode in 10 s")
		}
		time.Sleep(time.Millisecond)
	}
	b.Pause()
	return storage.RelFileNode(before), b, done
}

// TestStandbyRestartedBetweenAFullsRelfilenodeAndItsFirstPageReplaysTheRewrite: a VACUUM
// FULL takes its new relfilenode, a TRUNCATE of another table logs a catalog that counts
// it, and the standby replays that catalog and restarts before any page of the rewrite
// reached it. Its restarted replay knows the file is meant to exist (the relation's
// creation is a WAL record) and applies the rewrite's pages, so after the swap the
// standby's table equals the primary's rather than being empty.
func TestStandbyRestartedBetweenAFullsRelfilenodeAndItsFirstPageReplaysTheRewrite(t *testing.T) {
	opts := testOpts()
	primary, sdir := primaryAndCopy(t, opts)
	standby := openTestStandby(t, sdir, opts)
	standby.ship(primary)

	newHeap, full, done := slowFull(context.Background(), t, primary)
	if err := primary.TruncateTable(context.Background(), "h"); err != nil {
		t.Fatal(err)
	}
	// The TRUNCATE's catalog record is flushed: no page of the rewrite precedes it in
	// the WAL if the new heap has none yet.
	if n, err := primary.st.NBlocks(newHeap, storage.MainFork); err != nil || n != 0 {
		t.Fatalf("the rewrite's heap %d has %d pages (%v) at the TRUNCATE: the test proves nothing", newHeap, n, err)
	}
	standby.ship(primary)
	if c := standby.db.catalogNow(); c.NextOID <= uint32(newHeap) {
		t.Fatalf("the standby's catalog counts OIDs below %d, not the rewrite's %d: the test proves nothing", c.NextOID, newHeap)
	}
	standby.crashAndReopen()

	full.Resume()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	insertRange(t, primary, "t", 7000, 7100)
	standby.ship(primary)
	sameRows(t, primary, standby.db, "t")
	sameRows(t, primary, standby.db, "h")
	checkClean(t, standby.db)
}

// unnamedFiles lists the relations that have files in db's directory and that its
// catalog does not name.
func unnamedFiles(t *testing.T, db *DB) []storage.RelFileNode {
	t.Helper()
	list, err := db.st.List()
	if err != nil {
		t.Fatal(err)
	}
	rels := db.catalogNow().Rels()
	var out []storage.RelFileNode
	for _, r := range list {
		if !rels[r] {
			out = append(out, r)
		}
	}
	return out
}

// waitForPages resumes the paused FULL until its new heap has a page, and pauses it
// again.
func waitForPages(t *testing.T, primary *DB, full *vacuum.Batch, rel storage.RelFileNode) {
	t.Helper()
	full.Resume()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := primary.st.NBlocks(rel, storage.MainFork)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("VACUUM FULL wrote no page of relation %d in 10 s", rel)
		}
		time.Sleep(time.Millisecond)
	}
	full.Pause()
}

// TestStandbyRemovesTheFilesOfAVacuumFullCancelledOnThePrimary: a VACUUM FULL cancelled
// after part of its rewrite reached the standby removes its files on the primary and
// logs it, and the standby removes its copies too instead of keeping them forever.
func TestStandbyRemovesTheFilesOfAVacuumFullCancelledOnThePrimary(t *testing.T) {
	opts := testOpts()
	primary, sdir := primaryAndCopy(t, opts)
	standby := openTestStandby(t, sdir, opts)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	newHeap, full, done := slowFull(ctx, t, primary)
	waitForPages(t, primary, full, newHeap)
	insertRange(t, primary, "h", 100, 101) // its commit flushes the rewrite's WAL
	standby.ship(primary)
	if got := unnamedFiles(t, standby.db); len(got) != 1 || got[0] != newHeap {
		t.Fatalf("before the cancel the standby has unnamed files %v, want the rewrite's heap %d", got, newHeap)
	}

	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("VACUUM FULL: %v, want context.Canceled", err)
	}
	standby.ship(primary)
	if got := unnamedFiles(t, standby.db); len(got) != 0 {
		t.Fatalf("the standby keeps files %v of the cancelled rewrite", got)
	}
	if got := unnamedFiles(t, primary); len(got) != 0 {
		t.Fatalf("the primary keeps files %v of the cancelled rewrite", got)
	}
	sameRows(t, primary, standby.db, "t")
	checkClean(t, standby.db)
}

// TestStandbySweepsAVacuumFullThePrimarysCrashAbandoned: the primary crashes during a
// VACUUM FULL whose new heap the standby already has. The primary's next Open removes
// its orphan and logs the end of its recovery; the standby, replaying that record,
// removes its copy (nothing that old can still be switched in), or, when its directory
// looks inconsistent (here: a catalog switch of unknown outcome), moves it into the
// quarantine as a primary's Open does.
func TestStandbySweepsAVacuumFullThePrimarysCrashAbandoned(t *testing.T) {
	for _, uncertain := range []bool{false, true} {
		name := "consistent"
		if uncertain {
			name = "uncertain switch"
		}
		t.Run(name, func(t *testing.T) {
			opts := testOpts()
			primary, sdir := primaryAndCopy(t, opts)
			dir := primary.Dir()
			standby := openTestStandby(t, sdir, opts)

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			newHeap, full, done := slowFull(ctx, t, primary)
			waitForPages(t, primary, full, newHeap)
			insertRange(t, primary, "h", 100, 101)
			standby.ship(primary)
			if got := unnamedFiles(t, standby.db); len(got) != 1 || got[0] != newHeap {
				t.Fatalf("before the crash the standby has unnamed files %v, want the rewrite's heap %d", got, newHeap)
			}

			abandon(t, primary) // the crash: the FULL is paused, its files stay
			cancel()
			if err := <-done; err == nil { // it removes nothing on the closed DB
				t.Fatal("VACUUM FULL succeeded on the crashed primary")
			}
			primary, err := Open(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { closeDB(t, primary) })
			if got := primary.RecoveryInfo().OrphansRemoved; len(got) != 1 || got[0] != newHeap {
				t.Fatalf("the primary's Open removed orphans %v, want the rewrite's heap %d", got, newHeap)
			}
			if uncertain {
				if err := os.WriteFile(filepath.Join(sdir, uncertainSwitchName), []byte("test\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			standby.ship(primary)
			if got := unnamedFiles(t, standby.db); len(got) != 0 {
				t.Fatalf("the standby keeps files %v of the rewrite the primary's crash abandoned", got)
			}
			qi, err := standby.db.Quarantine()
			if err != nil {
				t.Fatal(err)
			}
			if uncertain != (qi.Files > 0) {
				t.Fatalf("the standby's quarantine holds %d files; want some only when the switch is uncertain (%v)", qi.Files, uncertain)
			}
			sameRows(t, primary, standby.db, "t")
			checkClean(t, standby.db)
		})
	}
}

// TestStandbyNeverSweepsARewriteWhoseCatalogRecordHasNotArrived: a standby opened from a
// copy taken before the primary's last Open replays that Open's end-of-recovery record,
// then a VACUUM FULL's creation and first pages, all at its own Open (and again after a
// crash, when the rewrite's file is already on disk): the rewrite was created after the
// end of recovery, so neither sweep touches it, and after the swap the standby's table
// equals the primary's.
func TestStandbyNeverSweepsARewriteWhoseCatalogRecordHasNotArrived(t *testing.T) {
	opts := testOpts()
	primary, sdir := primaryAndCopy(t, opts)

	newHeap, full, done := slowFull(context.Background(), t, primary)
	waitForPages(t, primary, full, newHeap)
	insertRange(t, primary, "h", 100, 101)
	shipWAL(t, primary, sdir)
	standby := openTestStandby(t, sdir, opts)
	if got := unnamedFiles(t, standby.db); len(got) != 1 || got[0] != newHeap {
		t.Fatalf("after its Open the standby has unnamed files %v, want the rewrite's heap %d", got, newHeap)
	}
	if standby.db.skip.endOfRecovery == 0 {
		t.Fatal("the standby's Open replayed no end-of-recovery record: the test proves nothing")
	}
	standby.crashAndReopen()
	if got := unnamedFiles(t, standby.db); len(got) != 1 || got[0] != newHeap {
		t.Fatalf("after a crash and reopen the standby has unnamed files %v, want the rewrite's heap %d", got, newHeap)
	}

	full.Resume()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	standby.ship(primary)
	sameRows(t, primary, standby.db, "t")
	checkClean(t, standby.db)
}

// TestStandbyRestartDoesNotResurrectATableDroppedSinceItsRestartpoint: the standby's
// replay after a crash starts before a CREATE TABLE whose table was dropped since. The
// creation record makes the file again, but the catalog record that named the table,
// older than the standby's catalog that no longer does, tells replay it is retired: the
// standby's Open removes it rather than keeping it until the primary's next restart.
func TestStandbyRestartDoesNotResurrectATableDroppedSinceItsRestartpoint(t *testing.T) {
	opts := testOpts()
	primary, sdir := primaryAndCopy(t, opts)
	standby := openTestStandby(t, sdir, opts)
	standby.ship(primary) // replays the primary's Open: its checkpoint is the restartpoint

	if err := primary.CreateTable("x", accountCols); err != nil {
		t.Fatal(err)
	}
	insertRange(t, primary, "x", 0, 500)
	x, err := primary.Table("x")
	if err != nil {
		t.Fatal(err)
	}
	if err := primary.DropTable(context.Background(), "x"); err != nil {
		t.Fatal(err)
	}
	insertRange(t, primary, "h", 100, 101)
	standby.ship(primary)
	if got := unnamedFiles(t, standby.db); len(got) != 0 {
		t.Fatalf("before the crash the standby has unnamed files %v", got)
	}
	if lr := wal.LSN(standby.db.lastRedo.Load()); lr == 0 {
		t.Fatal("the standby took no restartpoint: the test proves nothing")
	}

	standby.crashAndReopen()
	if got := unnamedFiles(t, standby.db); len(got) != 0 {
		t.Fatalf("after a crash and reopen the standby has unnamed files %v (table x was %d)", got, x.Relfilenode)
	}
	sameRows(t, primary, standby.db, "t")
	checkClean(t, standby.db)
}
