package vacuum_test

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
)

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
					for _, ix := range rep.Indexes {
						if ix.EntriesRemoved != int64(deleted) {
							t.Errorf("index %s: entries removed = %d, want %d", ix.Name, ix.EntriesRemoved, deleted)
						}
						if ix.EntriesRemaining != int64(len(tb.live)) {
							t.Errorf("index %s: entries remaining = %d, want %d", ix.Name, ix.EntriesRemaining, len(tb.live))
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
	for round := range 3 {
		n := deletePercent(t, db, tb, 40, rng)
		opts := unthrottled()
		opts.DisableTruncate = true // measure reuse, not truncation
		if _, err := db.Vacuum(context.Background(), "t", opts); err != nil {
			t.Fatal(err)
		}
		next := int64(1_000_000 * (round + 1))
		insertRows(t, db, tb, next, next+int64(n))
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
	rr, err := db.VacuumTables(context.Background(), []string{"t"}, unthrottled())
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
	rr, err := db.VacuumTables(context.Background(), []string{"clean", "dirty"}, opts)
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
