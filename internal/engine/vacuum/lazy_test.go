package vacuum_test

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
)

// TestVacuumRemovesDeadTuplesAndKeepsLiveOnes is the correctness matrix:
// dead fractions x index counts x dead-TID budgets, on the test table of
// helpers_test.go (a unique int8 index, a text key, a two-column int4/int2
// key with NULLs in its second column, a nullable int2 key).
func TestVacuumRemovesDeadTuplesAndKeepsLiveOnes(t *testing.T) {
	const rows = 1500
	for _, deadPct := range []float64{0, 1, 30, 90, 100} {
		for nIdx := 0; nIdx <= 3; nIdx++ {
			for _, tiny := range []bool{false, true} {
				if tiny && (nIdx == 0 || deadPct == 0) {
					continue // no index pass to force
				}
				name := fmt.Sprintf("dead%v_idx%d_tiny%v", deadPct, nIdx, tiny)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					db, _ := newDB(t, testOpts())
					tb := createTable(t, db, "t", nIdx, rows, 100)
					rng := rand.New(rand.NewSource(int64(deadPct*10) + int64(nIdx)))
					deleted := deletePercent(t, db, tb, deadPct, rng)

					opts := unthrottled()
					if tiny {
						opts.MaintenanceWorkMem = vacuum.MinMaintenanceWorkMem
						opts.IndexWorkers = nIdx // and the indexes in parallel
					} else {
						opts.HeapWorkers = 3 // the second heap pass in parallel
					}
					rep, err := db.Vacuum(context.Background(), "t", opts)
					if err != nil {
						t.Fatal(err)
					}
					if rep.TuplesRemoved != int64(deleted) {
						t.Errorf("tuples removed = %d, want %d deleted", rep.TuplesRemoved, deleted)
					}
					if rep.TuplesRemaining != int64(len(tb.live)) {
						t.Errorf("tuples remaining = %d, want %d live", rep.TuplesRemaining, len(tb.live))
					}
					switch {
					case nIdx == 0 || deleted == 0:
						if rep.IndexPasses != 0 {
							t.Errorf("index passes = %d, want 0", rep.IndexPasses)
						}
					case tiny:
						if rep.IndexPasses < 3 {
							t.Errorf("index passes = %d with a tiny dead-TID budget, want >= 3", rep.IndexPasses)
						}
					default:
						if rep.IndexPasses != 1 {
							t.Errorf("index passes = %d, want 1", rep.IndexPasses)
						}
					}
					if len(rep.Indexes) != nIdx {
						t.Fatalf("report has %d indexes, want %d", len(rep.Indexes), nIdx)
					}
					liveIDs := make([]int64, 0, len(tb.live))
					for id := range tb.live {
						liveIDs = append(liveIDs, id)
					}
					for i, ix := range rep.Indexes {
						// Rows whose key is all NULL (index 1, odd ids; index 3,
						// every fifth id) have no entry.
						if want := withKey(i, tb.lastDeleted); deleted > 0 && ix.EntriesRemoved != want {
							t.Errorf("index %s: entries removed = %d, want %d", ix.Name, ix.EntriesRemoved, want)
						}
						if want := withKey(i, liveIDs); ix.EntriesRemaining != want {
							t.Errorf("index %s: entries remaining = %d, want %d", ix.Name, ix.EntriesRemaining, want)
						}
					}
					if deadPct == 100 && rep.PagesRemaining != 0 {
						t.Errorf("all rows deleted but %d pages remain (truncation)", rep.PagesRemaining)
					}
					if rep.PagesScanned+rep.PagesSkipped != rep.PagesTotal {
						t.Errorf("pages scanned %d + skipped %d != total %d", rep.PagesScanned, rep.PagesSkipped, rep.PagesTotal)
					}
					checkClean(t, db)
					verifyRows(t, db, tb)

					// A second vacuum finds nothing and skips the pages the
					// first one marked all-visible.
					rep2, err := db.Vacuum(context.Background(), "t", opts)
					if err != nil {
						t.Fatal(err)
					}
					if rep2.TuplesRemoved != 0 || rep2.IndexPasses != 0 {
						t.Errorf("second vacuum removed %d tuples in %d passes, want none", rep2.TuplesRemoved, rep2.IndexPasses)
					}
					if rep2.PagesTotal > 0 && rep2.PagesSkipped != rep2.PagesTotal {
						t.Errorf("second vacuum skipped %d of %d pages, want all (all-visible)", rep2.PagesSkipped, rep2.PagesTotal)
					}
					checkClean(t, db)
				})
			}
		}
	}
}

func TestVacuumedSpaceIsReusedByInserts(t *testing.T) {
	db, _ := newDB(t, testOpts())
	tb := createTable(t, db, "t", 2, 3000, 120)
	rng := rand.New(rand.NewSource(1))
	pagesAfterLoad := heapPages(t, db, "t")
	for range 3 {
		n := deletePercent(t, db, tb, 40, rng)
		opts := unthrottled()
		opts.DisableTruncate = true // measure reuse, not truncation
		if _, err := db.Vacuum(context.Background(), "t", opts); err != nil {
			t.Fatal(err)
		}
		// Reinsert the deleted ids: exactly the same rows, so the same
		// volume (their keys are free again: the deletes committed).
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range tb.lastDeleted[:n] {
			tid, err := tx.Insert(tb.name, rowOf(id, tb.payload))
			if err != nil {
				t.Fatal(err)
			}
			tb.live[id] = tid
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if got := heapPages(t, db, "t"); got > pagesAfterLoad+pagesAfterLoad/50+1 {
		t.Errorf("table grew from %d to %d pages although every delete was vacuumed before the same volume was reinserted", pagesAfterLoad, got)
	}
	checkClean(t, db)
	verifyRows(t, db, tb)
}

func TestVerboseReportStatesWhatTheVacuumDid(t *testing.T) {
	db, _ := newDB(t, testOpts())
	tb := createTable(t, db, "t", 1, 1000, 100)
	deleted := deletePercent(t, db, tb, 100, rand.New(rand.NewSource(3)))
	rr, err := vacuumTables(context.Background(), db, []string{"t"}, unthrottled())
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := rr.Format(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	t.Log("\n" + out)
	rep := rr.Tables[0]
	for _, want := range []string{
		`finished vacuuming "t": index scans: 1`,
		fmt.Sprintf("pages: %d removed, 0 remain, %d scanned (100.00%% of total)", rep.PagesTotal, rep.PagesTotal),
		fmt.Sprintf("tuples: %d removed, 0 remain", deleted),
		fmt.Sprintf(`index "t_id": pages: %d in total`, rep.Indexes[0].Pages),
		fmt.Sprintf("entries: %d removed, 0 remain", deleted),
		"run: 1 tables vacuumed, 0 skipped",
		"throttle: cost ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

func TestTablesBelowMinDeadTuplePercentAreSkipped(t *testing.T) {
	db, _ := newDB(t, testOpts())
	clean := createTable(t, db, "clean", 1, 1000, 100)
	dirty := createTable(t, db, "dirty", 1, 1000, 100)
	deletePercent(t, db, clean, 2, rand.New(rand.NewSource(1)))
	n := deletePercent(t, db, dirty, 30, rand.New(rand.NewSource(2)))
	opts := unthrottled()
	opts.MinDeadTuplePercent = 10
	rr, err := vacuumTables(context.Background(), db, []string{"clean", "dirty"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*vacuum.Report{}
	for _, rep := range rr.Tables {
		byName[rep.Table] = rep
	}
	if c := byName["clean"]; c == nil || !c.Skipped || c.TuplesRemoved != 0 || c.SkipReason == "" {
		t.Errorf("table with 2%% dead: %+v, want skipped with a reason", c)
	}
	if d := byName["dirty"]; d == nil || d.Skipped || d.TuplesRemoved != int64(n) {
		t.Errorf("table with 30%% dead: %+v, want vacuumed (%d removed)", d, n)
	}
	if rr.Totals.TablesSkipped != 1 || rr.Totals.TablesVacuumed != 1 {
		t.Errorf("totals: %d vacuumed, %d skipped; want 1 and 1", rr.Totals.TablesVacuumed, rr.Totals.TablesSkipped)
	}
	checkClean(t, db)
}

// TestTuplesRemainingCountsSkippedAllVisiblePages: the second vacuum skips
// the all-visible pages the first one marked, and still reports the tuples
// of the whole table: exactly when it could read every skipped page into
// its sample, within 3 % when it had to scale a sample.
func TestTuplesRemainingCountsSkippedAllVisiblePages(t *testing.T) {
	for _, c := range []struct {
		rows      int
		estimated bool
	}{{1500, false}, {15000, true}} {
		t.Run(fmt.Sprintf("rows%d", c.rows), func(t *testing.T) {
			db, _ := newDB(t, testOpts())
			tb := createTable(t, db, "t", 1, c.rows, 100)
			if _, err := db.Vacuum(context.Background(), "t", unthrottled()); err != nil {
				t.Fatal(err)
			}
			// Delete every third row of the first 5 pages: only they lose
			// their all-visible bit.
			tx, err := db.Begin()
			if err != nil {
				t.Fatal(err)
			}
			deleted := 0
			for id, tid := range tb.live {
				if tid.Block < 5 && id%3 == 0 {
					if err := tx.Delete("t", tid); err != nil {
						t.Fatal(err)
					}
					delete(tb.live, id)
					deleted++
				}
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			rep, err := db.Vacuum(context.Background(), "t", unthrottled())
			if err != nil {
				t.Fatal(err)
			}
			live := int64(len(tb.live))
			t.Logf("%d pages, %d skipped; %d removed; %d remain (estimated %v), %d live", rep.PagesTotal, rep.PagesSkipped,
				rep.TuplesRemoved, rep.TuplesRemaining, rep.TuplesRemainingEstimated, live)
			if rep.PagesSkipped == 0 || rep.PagesScanned == 0 {
				t.Fatalf("want both skipped and scanned pages, got %d and %d", rep.PagesSkipped, rep.PagesScanned)
			}
			if rep.TuplesRemoved != int64(deleted) {
				t.Errorf("tuples removed = %d, want %d", rep.TuplesRemoved, deleted)
			}
			if rep.TuplesRemainingEstimated != c.estimated {
				t.Errorf("estimated = %v with %d skipped pages (sample %d), want %v", rep.TuplesRemainingEstimated,
					rep.PagesSkipped, vacuum.SkippedSamplePages, c.estimated)
			}
			if c.estimated {
				if d := float64(rep.TuplesRemaining-live) / float64(live); d > 0.03 || d < -0.03 {
					t.Errorf("tuples remaining = %d, %.1f%% off the %d live rows", rep.TuplesRemaining, 100*d, live)
				}
			} else if rep.TuplesRemaining != live {
				t.Errorf("tuples remaining = %d, want %d live", rep.TuplesRemaining, live)
			}
			var b strings.Builder
			if err := rep.Format(&b); err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf("%d removed, %d remain", rep.TuplesRemoved, rep.TuplesRemaining)
			if c.estimated {
				want += " (estimated)"
			}
			if !strings.Contains(b.String(), want) {
				t.Errorf("report does not say %q:\n%s", want, b.String())
			}
			checkClean(t, db)
			verifyRows(t, db, tb)
		})
	}
}

// TestParallelHeapPassRemovesExactlyTheDeadTuples: a table with several
// runs of blocks per heap worker, at 1, 3 and 4 workers.
func TestParallelHeapPassRemovesExactlyTheDeadTuples(t *testing.T) {
	for _, workers := range []int{1, 3, 4} {
		t.Run(fmt.Sprintf("workers%d", workers), func(t *testing.T) {
			db, _ := newDB(t, testOpts())
			tb := createTable(t, db, "t", 2, 12000, 100)
			deleted := deletePercent(t, db, tb, 30, rand.New(rand.NewSource(int64(workers))))
			opts := unthrottled()
			opts.HeapWorkers = workers
			rep, err := db.Vacuum(context.Background(), "t", opts)
			if err != nil {
				t.Fatal(err)
			}
			if rep.TuplesRemoved != int64(deleted) || rep.DeadItemsFreed != int64(deleted) {
				t.Errorf("removed %d tuples and freed %d slots, want %d", rep.TuplesRemoved, rep.DeadItemsFreed, deleted)
			}
			if rep.TuplesRemaining != int64(len(tb.live)) {
				t.Errorf("tuples remaining = %d, want %d", rep.TuplesRemaining, len(tb.live))
			}
			if rep.PagesVacuumed != rep.PagesTotal {
				t.Errorf("%d of %d pages vacuumed (every page had dead tuples)", rep.PagesVacuumed, rep.PagesTotal)
			}
			checkClean(t, db)
			verifyRows(t, db, tb)
		})
	}
}
