package vacuum_test

import (
	"context"
	"math/rand"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
)

// watchBound samples the run's usage every millisecond until stop is
// closed and records the worst excess of consumed cost units over the
// throttle's strict bound rate*(t - start + 1 ms) plus slack (the work of
// pages done but not yet charged: usage is post-paid, one page per
// worker), and once more after stop is closed (the run has returned). start is taken before the run exists, so the bound it gives is
// never tighter than the throttle's own.
func watchBound(run *vacuum.Batch, start time.Time, rate, slack float64, stop <-chan struct{}) (worst *atomic.Value, done <-chan struct{}) {
	worst = &atomic.Value{}
	worst.Store(excess{})
	d := make(chan struct{})
	go func() {
		defer close(d)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for last := false; !last; {
			select {
			case <-stop:
				last = true // one more sample: what the run left uncharged at its end
			case <-tick.C:
			}
			used := costOf(run.Usage())
			t := time.Since(start)
			over := used - (rate*(t+time.Millisecond).Seconds() + slack)
			if w, _ := worst.Load().(excess); over > w.units {
				worst.Store(excess{units: over, at: t, used: used, phase: run.Progress().Phase})
			}
		}
	}()
	return worst, d
}

type excess struct {
	units float64
	at    time.Duration
	used  float64
	phase string
}

// TestEveryPassOfFullAndLazyIsPacedPageByPage runs the passes that used to
// be charged in one lump after the fact (VACUUM FULL's counting pass, lazy
// vacuum's index cleanup scan when there was no index pass) under a cost
// limit and checks, every millisecond, that the engine's own counters never
// get ahead of the throttle's strict bound by more than one page's work.
func TestEveryPassOfFullAndLazyIsPacedPageByPage(t *testing.T) {
	const rate = 8000.0 // cost units per second: limit 80 per 10 ms
	// One page of work in flight, charged at the next delay point: FULL
	// reads an old page (a miss, 2) and may dirty two new heap pages and an
	// FSM page (3 x 20), plus hits.
	const slack = 100.0
	cases := []struct {
		name    string
		full    bool
		deadPct float64
		indexes int
	}{
		{"full counting pass and rewrite", true, 30, 2},
		{"lazy index cleanup without an index pass", false, 0, 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db, _ := newDB(t, engine.Options{BufferPoolBytes: 4096 * 8192})
			tb := createTable(t, db, "t", c.indexes, 20000, 100)
			if c.deadPct > 0 {
				deletePercent(t, db, tb, c.deadPct, rand.New(rand.NewSource(1)))
			}
			if err := db.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			opts := slowOpts(int(rate))
			opts.Full = c.full
			start := time.Now()
			run, err := vacuum.NewBatch(opts)
			if err != nil {
				t.Fatal(err)
			}
			stop := make(chan struct{})
			worst, done := watchBound(run, start, rate, slack, stop)
			_, err = db.VacuumBatch(context.Background(), run, []string{"t"})
			close(stop)
			<-done
			if err != nil {
				t.Fatal(err)
			}
			tot := run.Report().Totals
			w, _ := worst.Load().(excess)
			t.Logf("%.0f units in %v (%.0f units/s, limit %.0f); worst excess over the bound %.1f units at %v (%.0f used, phase %q)",
				costOf(tot.Usage), tot.Elapsed, costOf(tot.Usage)/tot.Elapsed.Seconds(), rate, w.units, w.at, w.used, w.phase)
			if w.units > 0 {
				t.Errorf("consumption got %.1f units ahead of rate x (t + 1 ms) + %.0f at %v (phase %q)", w.units, slack, w.at, w.phase)
			}
			checkClean(t, db)
			if c.full {
				refreshTIDs(t, db, tb)
			}
			verifyRows(t, db, tb)
		})
	}
}
