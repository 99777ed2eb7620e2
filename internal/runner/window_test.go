package runner

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// A FULL's estimate is its table's pages over the policy's last measured FULL rate when the
// RunSpec carries one, else over the pages per second its throttle allows (decisions.md,
// WindowTooShort): each way round, one of the two fits the window and the other does not.
func TestFullEstimateUsesTheLastFullsMeasuredRateWhenThereIsOne(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := engine.Init(dir, engine.Options{}); err != nil {
		t.Fatal(err)
	}
	db, err := engine.Open(dir, engine.Options{BufferPoolBytes: 32 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := bloat(context.Background(), db, bloatParams{table: "t", rows: 5000, deadFraction: 0.2, indexes: 1, payloadBytes: 100, seed: 1, batch: 5000}); err != nil {
		t.Fatal(err)
	}
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
