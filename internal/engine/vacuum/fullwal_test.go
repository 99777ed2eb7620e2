package vacuum_test

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum/throttle"
)

// walSample is where the WAL stood, read between two clock readings: its insert position
// (what the throttle charges) and its flushed end (what a standby can be sent), with the
// FULL's phase.
type walSample struct {
	before, after     time.Time
	inserted, flushed uint64
	phase             string
}

// sampleWAL reads the WAL's positions and b's phase every 2 ms until the returned stop.
func sampleWAL(db *engine.DB, b *vacuum.Batch) (stop func() []walSample) {
	var (
		mu      sync.Mutex
		samples []walSample
	)
	sample := func() {
		s := walSample{before: time.Now()}
		s.inserted, s.flushed = uint64(db.WAL().InsertLSN()), uint64(db.CurrentLSN())
		s.phase = b.Progress().Phase
		s.after = time.Now()
		mu.Lock()
		samples = append(samples, s)
		mu.Unlock()
	}
	sample()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				sample()
			}
		}
	})
	return func() []walSample {
		close(done)
		wg.Wait()
		sample()
		return samples
	}
}

// worstWindow is the largest ratio, over every pair of samples, of the WAL pos moved by
// to what rate allows in that window: rate x (window + slack) + perPoint. The window is
// taken from the first sample's clock before to the second's after, so a sampler delayed
// by the scheduler can only make it longer.
func worstWindow(samples []walSample, pos func(walSample) uint64, rate float64, slack time.Duration, perPoint float64) (float64, string) {
	worst, at := 0.0, ""
	for i := range samples {
		for j := i + 1; j < len(samples); j++ {
			win := samples[j].after.Sub(samples[i].before)
			allowed := rate*(win+slack).Seconds() + perPoint
			moved := pos(samples[j]) - pos(samples[i])
			if r := float64(moved) / allowed; r > worst {
				worst = r
				at = fmt.Sprintf("%d bytes in %v (%.0f allowed) from %s at %v to %s", moved, win, allowed,
					samples[i].phase, samples[i].before.Sub(samples[0].before), samples[j].phase)
			}
		}
	}
	return worst, at
}

// A VACUUM FULL writes WAL in three places: hint-bit full-page images of the old heap (after
// a checkpoint), the new heap's tuples and the new indexes' pages. The WAL-rate limit must
// bound all of it, as inserted (what the throttle charges) and as flushed (what a standby is
// sent): over every window, at most the limit's rate times (window + WALBurst + MinSleep) plus
// one delay point's work, and the throttle counted every byte the WAL grew by.
func TestVacuumFullWALLimitBoundsTheWALItInsertsAndFlushesInHeapCopyAndIndexRebuild(t *testing.T) {
	opts := testOpts()
	opts.BufferPoolBytes = 8 << 20
	db, _ := newDB(t, opts)
	tb := createTable(t, db, "t", 3, 30000, 100)
	deletePercent(t, db, tb, 50, rand.New(rand.NewSource(3)))
	if err := db.Checkpoint(); err != nil { // the FULL's scan now logs hint-bit images
		t.Fatal(err)
	}

	const limit = 8 << 20          // bytes per second
	const perDelayPoint = 64 << 10 // a heap page's tuples or an index page, and a hint image
	vo := unthrottled()
	vo.Full = true
	vo.Throttle = &throttle.Settings{MaxWALBytesPerSecond: limit}
	vo.ThrottleOptions = throttle.Options{MinSleep: time.Millisecond, Burst: throttle.DefaultBurst}
	// The WAL limit's own burst (WALBurst, 10 ms), not the other limits' 100 ms: what it
	// banks reaches a standby at once.
	slack := throttle.DefaultWALBurst + vo.ThrottleOptions.MinSleep
	b, err := vacuum.NewBatch(vo)
	if err != nil {
		t.Fatal(err)
	}
	stop := sampleWAL(db, b)
	rep, err := db.VacuumBatch(context.Background(), b, []string{"t"})
	samples := stop()
	if err != nil {
		t.Fatal(err)
	}

	first, last := samples[0], samples[len(samples)-1]
	wal := last.inserted - first.inserted
	elapsed := last.after.Sub(first.before)
	counted := rep.Tables[0].Usage.WALBytes
	byPhase := map[string]uint64{}
	for i := 1; i < len(samples); i++ {
		byPhase[samples[i].phase] += samples[i].inserted - samples[i-1].inserted
	}
	t.Logf("FULL: %d bytes of WAL (%d counted by its throttle, %d full-page images, %d flushes) in %v; by phase %v",
		wal, counted, rep.Tables[0].Usage.WALFPIs, rep.Tables[0].Usage.WALFlushes, elapsed, byPhase)
	for _, ph := range []vacuum.Phase{vacuum.PhaseRewritingHeap, vacuum.PhaseRebuildingIndexes} {
		if byPhase[ph.String()] < 100<<10 {
			t.Fatalf("only %d bytes of WAL sampled while %s: the test does not exercise it", byPhase[ph.String()], ph)
		}
	}
	if uncounted := int64(wal) - counted; uncounted > 16<<10 {
		t.Errorf("the WAL grew by %d bytes during FULL, its throttle counted %d: %d bytes escaped the limit", wal, counted, uncounted)
	}
	if floor := time.Duration(float64(wal)/limit*float64(time.Second)) - slack; elapsed < floor {
		t.Errorf("FULL wrote %d bytes of WAL in %v under a %d B/s limit: at least %v expected", wal, elapsed, limit, floor)
	}
	// The flushed end moves by the FULL's flush piece at once (256 KiB, walFlushAfter).
	const flushPiece = 256 << 10
	for _, p := range []struct {
		name  string
		pos   func(walSample) uint64
		extra float64
	}{
		{"inserted", func(s walSample) uint64 { return s.inserted }, perDelayPoint},
		{"flushed (sent to a standby)", func(s walSample) uint64 { return s.flushed }, perDelayPoint + flushPiece},
	} {
		worst, at := worstWindow(samples, p.pos, limit, slack, p.extra)
		t.Logf("WAL %s: largest window against what the limit allows %.3f: %s", p.name, worst, at)
		if worst > 1 {
			t.Errorf("WAL %s: a window wrote %.2fx what a %d B/s limit allows: %s", p.name, worst, limit, at)
		}
	}
	refreshTIDs(t, db, tb)
	checkClean(t, db)
	verifyRows(t, db, tb)
}
