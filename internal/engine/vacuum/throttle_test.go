package vacuum_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/usage"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum/throttle"
)

// costOf is the cost units of usage d with PostgreSQL's default weights.
func costOf(d usage.Reading) float64 {
	return float64(d.Hits*1 + d.Misses*2 + d.Dirtied*20)
}

// slowOpts throttles to rate cost units per second (limit per 10 ms).
func slowOpts(rate int) vacuum.Options {
	o := vacuum.DefaultOptions()
	s := throttle.Settings{CostDelay: 10 * time.Millisecond, CostLimit: rate / 100, PageHitCost: 1, PageMissCost: 2, PageDirtyCost: 20}
	o.Throttle = &s
	return o
}

func loadDeleted(t testing.TB, db *engine.DB, name string, rows int, pct float64) *table {
	tb := createTable(t, db, name, 2, rows, 100)
	deletePercent(t, db, tb, pct, rand.New(rand.NewSource(int64(len(name)))))
	// Write everything out, so that the vacuum dirties clean pages (a page
	// already dirty costs nothing to dirty again).
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	return tb
}

func TestCancelledVacuumStopsPromptlyAndLeavesTableConsistent(t *testing.T) {
	db, _ := newDB(t, testOpts())
	tb := loadDeleted(t, db, "t", 4000, 30)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var rep *vacuum.Report
	// The first pass costs a few units a page (misses, no dirtying): at
	// 300 units/s the 73 pages take well over a second, and no sleep is
	// longer than a dirty page's 20 units (67 ms).
	run, err := vacuum.NewBatch(slowOpts(300))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		rr, err := db.VacuumBatch(ctx, run, []string{"t"})
		if rr != nil && len(rr.Tables) == 1 {
			rep = rr.Tables[0]
		}
		done <- err
	}()
	// Cancel once the scan is under way (a fixed sleep would depend on the
	// machine's speed).
	for deadline := time.Now().Add(10 * time.Second); run.Progress().HeapBlocksScanned < 3 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	cancelled := time.Now()
	cancel()
	err = <-done
	took := time.Since(cancelled)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled vacuum returned %v, want context.Canceled", err)
	}
	// 100 ms plus at most one sleep (a dirty page is 20 units: 10 ms here).
	if took > 110*time.Millisecond {
		t.Errorf("vacuum took %v to stop after cancellation", took)
	}
	t.Logf("stopped %v after cancel, having scanned %d of %d pages", took, rep.PagesScanned, rep.PagesTotal)
	if rep.PagesScanned == 0 || rep.PagesScanned >= rep.PagesTotal {
		t.Errorf("cancellation did not land mid-scan (%d of %d pages)", rep.PagesScanned, rep.PagesTotal)
	}
	checkClean(t, db)
	verifyRows(t, db, tb)

	// A later vacuum finishes the job: together they removed every deleted row.
	rep2, err := db.Vacuum(context.Background(), "t", unthrottled())
	if err != nil {
		t.Fatal(err)
	}
	if got := rep.TuplesRemoved + rep2.TuplesRemoved; got != int64(tb.deleted) {
		t.Errorf("the two vacuums removed %d tuples, want %d", got, tb.deleted)
	}
	checkClean(t, db)
	verifyRows(t, db, tb)
}

// costRate measures the run's achieved cost rate over window from the
// engine's counters.
func costRate(run *vacuum.Batch, window time.Duration) float64 {
	a, t0 := run.Usage(), time.Now()
	time.Sleep(window)
	b := run.Usage()
	return costOf(b.Sub(a)) / time.Since(t0).Seconds()
}

func TestUpdateThrottleChangesTheRateOfARunningVacuum(t *testing.T) {
	db, _ := newDB(t, testOpts())
	loadDeleted(t, db, "t", 6000, 30)
	run, err := vacuum.NewBatch(slowOpts(1000))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := db.VacuumBatch(context.Background(), run, []string{"t"})
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	slow := costRate(run, 600*time.Millisecond)
	s := run.Settings()
	s.CostLimit *= 4
	if err := run.UpdateThrottle(s); err != nil {
		t.Fatal(err)
	}
	fast := costRate(run, 300*time.Millisecond)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	t.Logf("achieved %.0f units/s at limit 1000/s, %.0f units/s after raising it to 4000/s", slow, fast)
	if slow > 1000*1.10 || slow < 1000*0.6 {
		t.Errorf("achieved %.0f units/s at a limit of 1000/s", slow)
	}
	if fast < 2.5*slow {
		t.Errorf("raising the limit 4x changed the rate from %.0f to %.0f units/s only", slow, fast)
	}
	checkClean(t, db)
}

func TestParallelTablesShareOneBudgetAndOverridesCapATable(t *testing.T) {
	db, _ := newDB(t, testOpts())
	names := []string{"t0", "t1", "t2", "t3"}
	for _, n := range names {
		loadDeleted(t, db, n, 1500, 40)
	}
	opts := slowOpts(2000)
	opts.Parallelism = 4
	slowLimit, slowDelay := 5, 20*time.Millisecond
	opts.TableOverrides = map[string]vacuum.TableThrottle{"t3": {CostLimit: &slowLimit, CostDelay: &slowDelay}} // 250 units/s
	rr, err := vacuumTables(context.Background(), db, names, opts)
	if err != nil {
		t.Fatal(err)
	}
	tot := rr.Totals
	achieved := costOf(tot.Usage) / tot.Elapsed.Seconds()
	t.Logf("run: %.0f units/s over %v (limit 2000/s); report says %.0f", achieved, tot.Elapsed, tot.Rates.Cost.Achieved)
	if achieved > 2000*1.05 {
		t.Errorf("4 parallel tables achieved %.0f units/s together, above the run's 2000/s", achieved)
	}
	if tot.TablesVacuumed != 4 {
		t.Errorf("%d tables vacuumed, want 4", tot.TablesVacuumed)
	}
	for _, rep := range rr.Tables {
		a := costOf(rep.Usage) / rep.Elapsed.Seconds()
		t.Logf("%s: %.0f units/s (configured %.0f), %v", rep.Table, a, rep.Rates.Cost.Configured, rep.Elapsed)
		if rep.Table == "t3" {
			if rep.Rates.Cost.Configured != 250 {
				t.Errorf("t3 configured rate %.0f, want its override 250", rep.Rates.Cost.Configured)
			}
			if a > 250*1.10 {
				t.Errorf("t3 achieved %.0f units/s, above its override of 250/s", a)
			}
		}
	}
	checkClean(t, db)
}

func TestProgressIsReadableWhileTablesAreVacuumed(t *testing.T) {
	db, _ := newDB(t, testOpts())
	for i := range 2 {
		loadDeleted(t, db, fmt.Sprintf("p%d", i), 2000, 30)
	}
	opts := slowOpts(3000)
	opts.Parallelism = 2
	run, err := vacuum.NewBatch(opts)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := db.VacuumBatch(context.Background(), run, []string{"p0", "p1"})
		done <- err
	}()
	phases := map[string]bool{}
	var last vacuum.Progress
	for finished := false; !finished; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			finished = true
		case <-time.After(20 * time.Millisecond):
		}
		s := run.Progress()
		for _, tp := range s.Tables {
			phases[tp.Phase] = true
		}
		if s.HeapBlocksScanned < last.HeapBlocksScanned || s.TuplesRemoved < last.TuplesRemoved {
			t.Errorf("progress went backwards: %+v after %+v", s, last)
		}
		if len(s.Tables) == 2 && s.Tables[0].Phase != "done" && s.Tables[1].Phase != "done" && s.PagesPerSecond <= 0 && s.Elapsed > time.Second {
			t.Errorf("no pages/s while two tables are in flight: %+v", s)
		}
		last = s
	}
	if last.TablesDone != 2 || last.TablesTotal != 2 || last.Percent != 100 || last.Phase != "done" {
		t.Errorf("final progress: %d/%d tables done, %.0f%%, phase %q", last.TablesDone, last.TablesTotal, last.Percent, last.Phase)
	}
	for _, p := range []string{"scanning heap", "done"} {
		if !phases[p] {
			t.Errorf("phase %q never seen (saw %v)", p, phases)
		}
	}
	if last.TuplesRemoved != run.Report().Totals.TuplesRemoved || last.Usage.Dirtied == 0 || last.Slept == 0 {
		t.Errorf("final progress %+v disagrees with the report %+v", last, run.Report().Totals)
	}
}
