package runner

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// A FULL's estimate is its table's pages over the policy's last measured FULL rate when the
// RunSpec carries one, else over the pages per second its throttle allows (decisions.md,
// WindowTooShort): each way round, one of the two fits the window and the other does not.
func TestFullEstimateUsesTheLastFullsMeasuredRateWhenThereIsOne(t *testing.T) {
	db := bloatedTable(t, 5000, 0.2)
	pages, err := db.TablePages("t")
	if err != nil || pages < 20 {
		t.Fatalf("table t has %d pages (%v), want at least 20", pages, err)
	}
	now := time.Now()
	window := 10 * time.Second
	// Pages per second the throttle allows: cost limit over delay, over one miss plus one
	// dirty page (2 + 20 units).
	throttle := func(pagesPerSecond float64) runnerwire.Limits {
		return runnerwire.Limits{CostDelay: 100 * time.Millisecond, CostLimit: max(1, int(pagesPerSecond*22/10)), PageMissCost: 2, PageDirtyCost: 20}
	}
	fast := float64(pages) / window.Seconds() * 4 // the table in a quarter of the window
	slow := float64(pages) / window.Seconds() / 4 // in four windows
	for _, c := range []struct {
		name     string
		throttle float64 // pages per second the throttle allows
		measured int64   // the last FULL's pages per second (0: none)
		fits     bool
	}{
		{"the throttle fits it and nothing was measured", fast, 0, true},
		{"the throttle would not fit it and nothing was measured", slow, 0, false},
		{"the throttle would fit it but the last FULL's rate would not", fast, int64(slow), false},
		{"the throttle would not fit it but the last FULL's rate would", slow, int64(fast), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := runnerwire.Resolved{Mode: runnerwire.ModeFull, Throttle: throttle(c.throttle), StopAt: now.Add(window), FullPagesPerSecond: c.measured}
			todo, refused, err := fullsThatFit(db, r, []string{"t"}, now)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(todo) == 1; got != c.fits {
				t.Fatalf("%d pages, throttle %.0f pages/s, measured %d pages/s: started %v, want %v (%s)", pages, c.throttle, c.measured, got, c.fits, refused)
			}
			if !c.fits && !strings.Contains(refused, `"t"`) {
				t.Errorf("the refusal %q does not name the table", refused)
			}
		})
	}
}

// A table a run never reached (its window closed first) is reported where it stands: with
// resume, at its saved position (the block the next run resumes from), not at block 0.
func TestATableTheRunNeverReachedIsReportedAtItsSavedPosition(t *testing.T) {
	db := bloatedTable(t, 20000, 0.3)
	lazy := func(stopAt time.Time, resume bool) runnerwire.Resolved {
		return runnerwire.Resolved{Mode: runnerwire.ModeLazy, StopAt: stopAt, Resume: resume,
			Throttle: runnerwire.Limits{CostDelay: 10 * time.Millisecond, CostLimit: 5, PageHitCost: 1, PageMissCost: 2, PageDirtyCost: 20}}
	}
	window := func(r runnerwire.Resolved) runnerwire.TableResult {
		t.Helper()
		b, err := vacuum.NewBatch(optionsFrom(r))
		if err != nil {
			t.Fatal(err)
		}
		rep, err := vacuumWindowed(context.Background(), db, b, r, []string{"t"}, io.Discard)
		if err != nil || len(rep.Tables) != 1 {
			t.Fatalf("vacuum: %v, %d tables", err, len(rep.Tables))
		}
		return rep.Tables[0]
	}
	// Windows of 1 s, each resuming the last, until one has kept some work.
	var saved runnerwire.TableResult
	for i := 0; saved.BlockReached == 0; i++ {
		if i == 10 {
			t.Fatal("ten 1 s windows kept no work")
		}
		saved = window(lazy(time.Now().Add(time.Second), i > 0))
		if saved.Complete {
			t.Fatalf("the table was done within a window (%+v); make it bigger", saved)
		}
	}
	closed := time.Now().Add(-time.Second) // the window closed before the run began
	got := window(lazy(closed, true))
	if got.Complete || got.PagesScanned != 0 || got.BlockReached != saved.BlockReached || got.ResumedFromBlock != saved.BlockReached || got.PagesTotal != saved.PagesTotal {
		t.Errorf("unreached table with resume: %+v, want block %d of %d (its saved position), not complete", got, saved.BlockReached, saved.PagesTotal)
	}
	if got := window(lazy(closed, false)); got.BlockReached != 0 || got.Complete {
		t.Errorf("unreached table without resume: block %d complete %v, want 0 (a run without resume starts at 0)", got.BlockReached, got.Complete)
	}
}

// bloatedTable is a new database with table "t" of rows rows, deadFraction of them deleted,
// and one index; it is closed when t ends.
func bloatedTable(t *testing.T, rows int64, deadFraction float64) *engine.DB {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	if err := engine.Init(dir, engine.Options{}); err != nil {
		t.Fatal(err)
	}
	db, err := engine.Open(dir, engine.Options{BufferPoolBytes: 32 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	p := bloatParams{table: "t", rows: rows, deadFraction: deadFraction, indexes: 1, payloadBytes: 100, seed: 1, batch: int(min(rows, 10000))}
	if _, err := bloat(context.Background(), db, p); err != nil {
		t.Fatal(err)
	}
	return db
}
