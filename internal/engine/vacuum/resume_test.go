package vacuum_test

import (
	"context"
	"errors"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
)

// resumeOpts pace a vacuum of the resume tests' table over a few hundred
// ms, with one block per dead-items cycle (a position every block).
func resumeOpts() vacuum.Options {
	o := slowOpts(120000)
	o.MaintenanceWorkMem = vacuum.MinMaintenanceWorkMem
	return o
}

// resumeTable loads the resume tests' table: seed decides which rows are
// deleted, so two databases loaded with one seed hold the same table.
func resumeTable(t *testing.T, db *engine.DB, seed int64) *table {
	t.Helper()
	tb := createTable(t, db, "t", 2, 3000, 100)
	deletePercent(t, db, tb, 30, rand.New(rand.NewSource(seed)))
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	return tb
}

// vacuumUntil runs one lazy vacuum of table t with opts and stops it
// (cancels its context) once it has scanned stopAfter heap blocks; a
// negative stopAfter lets it finish.
func vacuumUntil(t testing.TB, db *engine.DB, opts vacuum.Options, stopAfter int64) *vacuum.Report {
	t.Helper()
	b, err := vacuum.NewBatch(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	if stopAfter >= 0 {
		go func() {
			for {
				select {
				case <-done:
					return
				case <-time.After(time.Millisecond):
				}
				if b.Progress().HeapBlocksScanned >= stopAfter {
					cancel()
					return
				}
			}
		}()
	}
	rr, err := db.VacuumBatch(ctx, b, []string{"t"})
	close(done)
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("vacuum: %v", err)
	}
	if len(rr.Tables) != 1 {
		t.Fatalf("vacuum reported %d tables, want 1", len(rr.Tables))
	}
	rep := rr.Tables[0]
	if (err == nil) != rep.Complete {
		t.Fatalf("vacuum returned %v with Complete %v", err, rep.Complete)
	}
	return rep
}

// TestResumedVacuumRemovesWhatOneVacuumRemoves stops a lazy vacuum at
// random points and resumes it until it completes: the tuples removed by
// all the invocations add up to those one uninterrupted vacuum of the
// same table removes, every resumed invocation scans only from the block
// the previous one recorded, and the table reads right and checks clean.
func TestResumedVacuumRemovesWhatOneVacuumRemoves(t *testing.T) {
	for _, seed := range []int64{1, 2} {
		ref, _ := newDB(t, testOpts())
		resumeTable(t, ref, seed)
		whole := vacuumUntil(t, ref, resumeOpts(), -1)
		if whole.TuplesRemoved == 0 || whole.PagesTotal < 20 {
			t.Fatalf("seed %d: the uninterrupted vacuum removed %d tuples of %d pages: too small a test", seed, whole.TuplesRemoved, whole.PagesTotal)
		}

		db, _ := newDB(t, testOpts())
		tb := resumeTable(t, db, seed)
		rng := rand.New(rand.NewSource(seed))
		opts := resumeOpts()
		var removed, reached int64
		stops := 0
		for inv := 0; ; inv++ {
			if inv > 50 {
				t.Fatalf("seed %d: not complete after %d invocations", seed, inv)
			}
			stopAfter := int64(1 + rng.Intn(int(whole.PagesTotal)/3))
			rep := vacuumUntil(t, db, opts, stopAfter)
			removed += rep.TuplesRemoved
			if inv > 0 {
				if !rep.Resumed || rep.ResumedFromBlock != reached {
					t.Fatalf("seed %d invocation %d: resumed %v from block %d, want from the recorded %d",
						seed, inv, rep.Resumed, rep.ResumedFromBlock, reached)
				}
				got, want := rep.PagesScanned+rep.PagesSkipped, rep.PagesTotal-reached
				if got > want || (rep.Complete && got != want) {
					t.Errorf("seed %d invocation %d (complete %v): scanned %d and skipped %d pages, want %d in all when complete, no more when stopped (from block %d of %d)",
						seed, inv, rep.Complete, rep.PagesScanned, rep.PagesSkipped, want, reached, rep.PagesTotal)
				}
				if rep.PagesLeftBehind != 0 {
					t.Errorf("seed %d invocation %d: %d pages left behind, want 0 (nothing changed behind the position)",
						seed, inv, rep.PagesLeftBehind)
				}
			}
			if rep.Complete {
				break
			}
			stops++
			if rep.BlockReached < reached {
				t.Fatalf("seed %d invocation %d: position went back from %d to %d", seed, inv, reached, rep.BlockReached)
			}
			reached = rep.BlockReached
			opts.Resume = true
		}
		if stops == 0 {
			t.Errorf("seed %d: no invocation was stopped: the test resumed nothing", seed)
		}
		if removed != whole.TuplesRemoved {
			t.Errorf("seed %d: %d stopped invocations and the last removed %d tuples in all, one vacuum %d",
				seed, stops, removed, whole.TuplesRemoved)
		}
		t.Logf("seed %d: %d stops, %d tuples removed", seed, stops, removed)
		checkClean(t, db)
		verifyRows(t, db, tb)
		again := vacuumUntil(t, db, opts, -1)
		if !again.Skipped || again.PagesScanned != 0 {
			t.Errorf("a resume after the table's vacuum finished scanned %d pages (skipped %v), want none", again.PagesScanned, again.Skipped)
		}
	}
}

// TestResumeLeavesNewDeletesBehindTheRecordedBlockAndSaysSo: rows deleted
// below the recorded position after the stop are not removed by the
// resumed vacuum, which counts their pages in PagesLeftBehind; the next
// vacuum without resume removes them.
func TestResumeLeavesNewDeletesBehindTheRecordedBlockAndSaysSo(t *testing.T) {
	db, _ := newDB(t, testOpts())
	tb := resumeTable(t, db, 3)
	first := vacuumUntil(t, db, resumeOpts(), 20)
	if first.Complete || first.BlockReached < 10 {
		t.Fatalf("first vacuum: complete %v, block reached %d: want stopped past block 10", first.Complete, first.BlockReached)
	}
	// Delete rows on the first blocks, behind the recorded position.
	refreshTIDs(t, db, tb)
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	behind := 0
	for id, tid := range tb.live {
		if int64(tid.Block) < first.BlockReached/2 && behind < 40 {
			if err := tx.Delete(tb.name, tid); err != nil {
				t.Fatal(err)
			}
			delete(tb.live, id)
			behind++
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	opts := resumeOpts()
	opts.Resume = true
	resumed := vacuumUntil(t, db, opts, -1)
	if resumed.ResumedFromBlock != first.BlockReached || resumed.PagesLeftBehind == 0 {
		t.Fatalf("resumed from block %d with %d pages left behind, want from %d with some left behind",
			resumed.ResumedFromBlock, resumed.PagesLeftBehind, first.BlockReached)
	}
	dead := deadTuples(t, db)
	if dead != int64(behind) {
		t.Errorf("after the resumed vacuum %d dead tuples remain, want the %d deleted behind its position", dead, behind)
	}
	full := vacuumUntil(t, db, resumeOpts(), -1)
	if full.TuplesRemoved != int64(behind) || deadTuples(t, db) != 0 {
		t.Errorf("the next vacuum without resume removed %d tuples (%d dead left), want %d", full.TuplesRemoved, deadTuples(t, db), behind)
	}
	checkClean(t, db)
	verifyRows(t, db, tb)
}

// deadTuples is table t's dead tuples by the engine's Stats.
func deadTuples(t *testing.T, db *engine.DB) int64 {
	t.Helper()
	st, err := db.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		if s.Name == "t" {
			return s.DeadTuples
		}
	}
	t.Fatal("no stats for table t")
	return 0
}

// TestResumeDistrustsAPositionItCannotVerify: a damaged position file, or
// one left for the table's old relfilenode by TRUNCATE, is not used: the
// vacuum starts at block 0 (saying why for the damaged one), and the
// next Open removes the old relfilenode's file.
func TestResumeDistrustsAPositionItCannotVerify(t *testing.T) {
	db, dir := newDB(t, testOpts())
	resumeTable(t, db, 4)
	if rep := vacuumUntil(t, db, resumeOpts(), 10); rep.Complete || rep.BlockReached == 0 {
		t.Fatalf("first vacuum: complete %v at block %d, want stopped past 0", rep.Complete, rep.BlockReached)
	}
	info, err := db.Table("t")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "vacuum_position", strconv.FormatUint(uint64(info.Relfilenode), 10))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the stopped vacuum left no position file: %v", err)
	}
	b[12] ^= 1 // the block, under the checksum
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	opts := resumeOpts()
	opts.Resume = true
	rep := vacuumUntil(t, db, opts, 5)
	if rep.Resumed || rep.ResumeUntrusted == "" {
		t.Fatalf("damaged position: resumed %v from %d (untrusted %q), want block 0 and a reason", rep.Resumed, rep.ResumedFromBlock, rep.ResumeUntrusted)
	}
	if err := db.TruncateTable(context.Background(), "t"); err != nil {
		t.Fatal(err)
	}
	if rep := vacuumUntil(t, db, opts, -1); rep.Resumed || rep.ResumeUntrusted != "" {
		t.Errorf("after TRUNCATE: resumed %v (untrusted %q), want a fresh start", rep.Resumed, rep.ResumeUntrusted)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db2, err := engine.Open(dir, testOpts())
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the old relfilenode's position file is still there after Open (%v)", err)
	}
}
