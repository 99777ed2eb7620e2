package latency

import (
	"sync"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestPercentilesCoverTheLastTenSecondsOnly(t *testing.T) {
	c := &clock{t: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	r := newAt(c.now)
	// 990 fast selects of 1 ms and 10 slow ones of 100 ms: p50 1 ms, p99 1 ms, p99.9 100 ms.
	for i := range 1000 {
		d := time.Millisecond
		if i%100 == 0 {
			d = 100 * time.Millisecond
		}
		r.Observe("select", d)
	}
	r.Observe("vacuum", time.Second) // an unknown kind counts as other
	got := r.Snapshot()
	if len(got) != 3 || got[0].Kind != "select" || got[1].Kind != "other" || got[2].Kind != All || got[2].Count != 1001 {
		t.Fatalf("kinds %+v, want select, other and all (1001 statements)", got)
	}
	s := got[0]
	within := func(d, want time.Duration) bool { return d >= want*999/1000 && d <= want*1001/1000 }
	if s.Count != 1000 || !within(s.P50, time.Millisecond) || !within(s.P99, time.Millisecond) ||
		!within(s.P999, 100*time.Millisecond) || !within(s.Max, 100*time.Millisecond) {
		t.Fatalf("select figures %+v", s)
	}
	// Nine seconds on, the slow ones are still in the window; after eleven they are gone.
	c.add(9 * time.Second)
	r.Observe("select", 2*time.Millisecond)
	if s := r.Snapshot()[0]; s.Count != 1001 {
		t.Fatalf("after 9 s: count %d, want 1001", s.Count)
	}
	c.add(2 * time.Second)
	got = r.Snapshot()
	if len(got) != 2 || got[0].Count != 1 || !within(got[0].Max, 2*time.Millisecond) || got[1].Kind != All || got[1].Count != 1 {
		t.Fatalf("after 11 s: %+v, want only the one 2 ms select (and all)", got)
	}
	c.add(time.Hour)
	if got := r.Snapshot(); len(got) != 0 {
		t.Fatalf("an hour later: %+v, want nothing", got)
	}
	// /metrics keeps everything (cumulative).
	if n := testutil.CollectAndCount(r.Collector(), "vacuumops_statement_latency_seconds"); n != 2 {
		t.Fatalf("metric series %d, want 2 (select, other)", n)
	}
	var m dto.Metric
	obs, err := r.prom.GetMetricWithLabelValues("select")
	if err != nil {
		t.Fatal(err)
	}
	h, ok := obs.(prometheus.Histogram)
	if !ok {
		t.Fatalf("%T is not a histogram", obs)
	}
	if err := h.Write(&m); err != nil {
		t.Fatal(err)
	}
	if n := m.GetHistogram().GetSampleCount(); n != 1001 {
		t.Fatalf("/metrics select count %d, want 1001 (cumulative)", n)
	}
}

// TestAllRowIsOneHistogramOfEveryKindsStatements records selects and updates of different
// latencies: the all row counts both, and its percentiles are those of one histogram of the
// same range and precision fed every statement (not a mix of the kinds' percentiles).
func TestAllRowIsOneHistogramOfEveryKindsStatements(t *testing.T) {
	c := &clock{t: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	r := newAt(c.now)
	ref := hdrhistogram.New(lowestMicros, highestMicros, sigFigs)
	observe := func(kind string, d time.Duration) {
		r.Observe(kind, d)
		if err := ref.RecordValue(d.Microseconds()); err != nil {
			t.Fatal(err)
		}
	}
	// 900 selects of 1 ms, 100 updates of 10 ms (one of 50 ms): each kind's p99 is its own
	// latency; the foreground's p99 is an update's, its p50 a select's.
	for i := range 900 {
		observe("select", time.Millisecond+time.Duration(i)*time.Microsecond)
	}
	for i := range 100 {
		d := 10 * time.Millisecond
		if i == 0 {
			d = 50 * time.Millisecond
		}
		observe("update", d)
	}
	c.add(3 * time.Second) // a later slot of the window: the row still covers both
	observe("select", 2*time.Millisecond)
	got := map[string]Stats{}
	for _, s := range r.Snapshot() {
		got[s.Kind] = s
	}
	all, ok := got[All]
	if !ok || len(got) != 3 {
		t.Fatalf("rows %+v, want select, update and all", got)
	}
	us := func(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
	want := Stats{Kind: All, Count: 1001, P50: us(ref.ValueAtQuantile(50)), P90: us(ref.ValueAtQuantile(90)),
		P99: us(ref.ValueAtQuantile(99)), P999: us(ref.ValueAtQuantile(99.9)), Max: us(ref.Max()),
		Mean: time.Duration(ref.Mean() * float64(time.Microsecond))}
	if all != want {
		t.Fatalf("all row %+v, want %+v (one histogram of every statement)", all, want)
	}
	if all.Count != got["select"].Count+got["update"].Count {
		t.Errorf("all counts %d, the kinds %d + %d", all.Count, got["select"].Count, got["update"].Count)
	}
	if all.P99 < 9*time.Millisecond || got["select"].P99 > 3*time.Millisecond {
		t.Errorf("all p99 %v (want an update's 10 ms), select p99 %v (want about 2 ms)", all.P99, got["select"].P99)
	}
	c.add(Window)
	if rows := r.Snapshot(); len(rows) != 0 {
		t.Errorf("a window later: %+v, want no row, all included", rows)
	}
}

// TestRecentQuantileCoversTheLastHalfSecondInTenthsOfASecond checks the adaptive
// throttle's signal: statements older than Recent leave it one 100 ms slot at a time.
func TestRecentQuantileCoversTheLastHalfSecondInTenthsOfASecond(t *testing.T) {
	c := &clock{t: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	r := newAt(c.now)
	if d, n := r.RecentQuantile(99); d != 0 || n != 0 {
		t.Fatalf("empty recorder: %v over %d statements, want 0 over 0", d, n)
	}
	for range 100 {
		r.Observe("select", 50*time.Millisecond)
	}
	c.add(300 * time.Millisecond)
	for range 100 {
		r.Observe("update", time.Millisecond)
	}
	within := func(d, want time.Duration) bool { return d >= want*999/1000 && d <= want*1001/1000 }
	if d, n := r.RecentQuantile(99); n != 200 || !within(d, 50*time.Millisecond) {
		t.Fatalf("p99 over both bursts: %v over %d, want 50ms over 200", d, n)
	}
	// 500 ms after the slow burst its slot has left the window; the fast one stays.
	c.add(200 * time.Millisecond)
	if d, n := r.RecentQuantile(99); n != 100 || !within(d, time.Millisecond) {
		t.Fatalf("p99 after 500 ms: %v over %d, want 1ms over 100", d, n)
	}
	c.add(time.Second)
	if d, n := r.RecentQuantile(99); d != 0 || n != 0 {
		t.Fatalf("after 1.5 s: %v over %d, want nothing", d, n)
	}
}

// fill records perSlot statements of d in each of n RecentSlot slots, one slot after
// another from the clock's time, and leaves the clock in the last of them.
func fill(c *clock, r *Recorder, n, perSlot int, d time.Duration) {
	for i := range n {
		if i > 0 {
			c.add(RecentSlot)
		}
		for range perSlot {
			r.Observe("select", d)
		}
	}
}

// TestRecentQuantileSinceCoversEnoughStatementsThatAStallIsNotTheP99: at 500 statements a
// second, the last Recent holds 250 statements, whose p99 four slow ones set; the signal
// over at least 1000 statements reaches back 2 s, where those four are 0.4 %.
func TestRecentQuantileSinceCoversEnoughStatementsThatAStallIsNotTheP99(t *testing.T) {
	c := &clock{t: time.Date(2026, 12, 1, 0, 0, 0, 50_000_000, time.UTC)}
	r := newAt(c.now)
	fill(c, r, 30, 50, 100*time.Microsecond) // 3 s at 500/s
	for range 4 {
		r.Observe("select", 50*time.Millisecond)
	}
	if d, n := r.RecentQuantile(99); n != 254 || d < 49*time.Millisecond {
		t.Fatalf("p99 over the last %v: %v over %d statements, want the stall's 50ms over 254", Recent, d, n)
	}
	d, n, enough := r.RecentQuantileSince(99, time.Time{}, 1000)
	if !enough || n != 1004 || d > 101*time.Microsecond {
		t.Fatalf("p99 over at least 1000 statements: %v over %d (enough %v), want 100µs over 1004 (20 slots), enough", d, n, enough)
	}
}

// TestRecentQuantileSinceCountsNothingFromBeforeSince: statements from before the
// throttle's last change (since) are not judged; while too few came after it the signal is
// not enough, and a foreground too slow to fill the count is judged over RecentMax.
func TestRecentQuantileSinceCountsNothingFromBeforeSince(t *testing.T) {
	c := &clock{t: time.Date(2026, 12, 1, 0, 0, 0, 50_000_000, time.UTC)}
	r := newAt(c.now)
	fill(c, r, 10, 40, 20*time.Millisecond) // 1 s slow, before the change
	c.add(RecentSlot)
	since := c.now()                         // the change, 50 ms into a slot: that slot is not counted
	fill(c, r, 10, 40, 100*time.Microsecond) // 1 s fast after it
	d, n, enough := r.RecentQuantileSince(99, since, 1000)
	if enough || n != 360 || d > 101*time.Microsecond {
		t.Fatalf("1 s after the change: %v over %d (enough %v), want 100µs over the 360 of the 9 slots after the change's, not enough", d, n, enough)
	}
	if d, n, enough := r.RecentQuantileSince(99, since, 300); !enough || n != 320 || d > 101*time.Microsecond {
		t.Fatalf("at least 300 statements: %v over %d (enough %v), want 100µs over 320 (8 slots), enough", d, n, enough)
	}

	slow := newAt(c.now)
	fill(c, slow, 40, 1, time.Millisecond) // 10 a second for 4 s
	if d, n, enough := slow.RecentQuantileSince(99, time.Time{}, 1000); !enough || n != int64(RecentMax/RecentSlot) || d < 999*time.Microsecond {
		t.Fatalf("a foreground at 10/s: %v over %d (enough %v), want 1ms over the %d statements of RecentMax, enough", d, n, enough, RecentMax/RecentSlot)
	}
}

// TestRecentJudgementIsOverAsSoonAsTheSlowStatementsDecideIt: at 200 statements a second a
// full judgement covers the 400 statements of RecentMax, whose p99 five slow ones set; 300
// ms after a change, four slow statements leave the verdict open (the judgement waits),
// five decide it: over, at once, on the least the full judgement's p99 could be.
func TestRecentJudgementIsOverAsSoonAsTheSlowStatementsDecideIt(t *testing.T) {
	c := &clock{t: time.Date(2026, 12, 1, 0, 0, 0, 50_000_000, time.UTC)}
	r := newAt(c.now)
	fill(c, r, 20, 20, 100*time.Microsecond) // 2 s at 200/s before the change
	c.add(RecentSlot)
	since := c.now()
	fill(c, r, 3, 20, 100*time.Microsecond) // 60 fast statements after it (3 slots, from the change's)
	for range 4 {
		r.Observe("select", 40*time.Millisecond)
	}
	// The change's own slot is not judged: 40 fast and 4 slow statements are.
	if j := r.RecentJudgement(99, 99, since, 1000, 1000, 10*time.Millisecond); j.Enough || j.Over || j.Count != 44 {
		t.Fatalf("4 slow of 44 after the change: %+v, want neither enough nor over (the full judgement of 400 allows 4)", j)
	}
	r.Observe("select", 50*time.Millisecond)
	j := r.RecentJudgement(99, 99, since, 1000, 1000, 10*time.Millisecond)
	if !j.Enough || !j.Over || j.Quantile < 39*time.Millisecond || j.Quantile > 41*time.Millisecond {
		t.Fatalf("5 slow of 45 after the change: %+v, want over at 40ms, the fifth slowest", j)
	}
	if j := r.RecentJudgement(99, 99, since, 1000, 1000, 100*time.Millisecond); j.Enough || j.Over {
		t.Fatalf("the same statements against a limit of 100ms: %+v, want no verdict", j)
	}
	// A stricter quantile judged (the p99.6) with the early verdict at the p99: the five
	// slow statements decide it as before, and the figure is still the p99's bound.
	if j := r.RecentJudgement(99.6, 99, since, 1000, 1000, 10*time.Millisecond); !j.Over || j.Quantile < 39*time.Millisecond || j.Quantile > 41*time.Millisecond {
		t.Fatalf("judged at the p99.6, early at the p99: %+v, want over at 40ms, the fifth slowest", j)
	}
}

// TestRecentRateIsTheStatementsPerSecondOfTheLastRecentMax: 3 s at 200 a second, of which
// the last RecentMax counts.
func TestRecentRateIsTheStatementsPerSecondOfTheLastRecentMax(t *testing.T) {
	c := &clock{t: time.Date(2026, 12, 1, 0, 0, 0, 50_000_000, time.UTC)}
	r := newAt(c.now)
	if got := r.RecentRate(); got != 0 {
		t.Fatalf("no statement yet: rate %g, want 0", got)
	}
	fill(c, r, 30, 20, 100*time.Microsecond)
	if got := r.RecentRate(); got != 200 {
		t.Fatalf("rate %g a second, want 200", got)
	}
}

// TestSnapshotBesideObservesAcrossSecondsCountsEveryStatementOnce reads snapshots while
// statements are observed and the seconds roll over: Snapshot merges the older seconds
// outside the lock, so a rotation must never reset a histogram a snapshot is still merging
// (the race detector fails this test if one does), and each snapshot counts every statement
// of its window exactly once.
func TestSnapshotBesideObservesAcrossSecondsCountsEveryStatementOnce(t *testing.T) {
	c := &clock{t: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	r := newAt(c.now)
	const perSecond, seconds = 200, 25
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(done)
		for range seconds {
			for range perSecond {
				r.Observe("select", time.Millisecond)
			}
			c.add(time.Second)
		}
	})
	for stop := false; !stop; {
		select {
		case <-done:
			stop = true
		default:
		}
		for _, s := range r.Snapshot() {
			if s.Count > int64(slots*perSecond) {
				t.Fatalf("%s: %d statements in a %d-second window of %d a second", s.Kind, s.Count, slots, perSecond)
			}
		}
	}
	wg.Wait()
	// The clock is a second past the last statements: the window holds the nine seconds
	// before the current (empty) one.
	want := int64((slots - 1) * perSecond)
	got := r.Snapshot()
	if len(got) != 2 || got[0].Count != want || got[1].Count != want {
		t.Fatalf("after the load: %+v, want select and all at %d statements each", got, want)
	}
}

// TestAFullJudgementNeedsMinCountWhileTheEarlyVerdictNeedsEarlyCountsShare: at 200
// statements a second with a full judgement of 169 statements (the adaptive throttle's
// rule for the p99.59) and the early verdict's at 1000: 100 statements after a change (500
// ms) are not enough and one slow statement among them decides nothing (the early verdict
// needs five of the 400 RecentMax holds); 180 statements are a full judgement.
func TestAFullJudgementNeedsMinCountWhileTheEarlyVerdictNeedsEarlyCountsShare(t *testing.T) {
	c := &clock{t: time.Date(2026, 12, 1, 0, 0, 0, 50_000_000, time.UTC)}
	r := newAt(c.now)
	fill(c, r, 20, 20, 100*time.Microsecond) // 2 s at 200/s before the change
	c.add(RecentSlot)
	since := c.now()
	c.add(RecentSlot) // the change's own slot is not judged
	fill(c, r, 5, 20, 100*time.Microsecond)
	r.Observe("select", 40*time.Millisecond)
	if j := r.RecentJudgement(99.59, 99, since, 169, 1000, 10*time.Millisecond); j.Enough || j.Over || j.Count != 101 {
		t.Fatalf("101 statements since the change, one slow: %+v, want neither enough nor over", j)
	}
	c.add(RecentSlot)
	fill(c, r, 4, 20, 100*time.Microsecond)
	j := r.RecentJudgement(99.59, 99, since, 169, 1000, 10*time.Millisecond)
	if !j.Enough || j.Over || j.Count != 181 || j.Quantile < 39*time.Millisecond {
		t.Fatalf("181 statements since the change, one slow: %+v, want a full judgement at its slowest (40ms)", j)
	}
}

// TestTheJudgedFigureIsAsLikelyAboveTheQuantileAsBelow: the rank read for quantile q of n
// statements is n-j+1, j the most slow statements expected at least half the time
// (P(Poisson(n (100-q)/100) >= j) >= 1/2): the p99.59 of 181 (m 0.74: P(>=1) 0.52, P(>=2)
// 0.17) is the slowest, the p99 of 1000 (m 10: P(>=10) 0.54, P(>=11) 0.42) the tenth
// slowest, where the histogram's nearest rank is the eleventh; the p50 of 200 (m 100, the
// Poisson median 100) rank 101; with m under ln 2 (the p99.59 of 100) the slowest.
func TestTheJudgedFigureIsAsLikelyAboveTheQuantileAsBelow(t *testing.T) {
	for _, tc := range []struct {
		q       float64
		n, rank int64
	}{{99.59, 181, 181}, {99, 1000, 991}, {50, 200, 101}, {99.59, 100, 100}, {99, 1, 1}} {
		h := newHistogram()
		for v := int64(1); v <= tc.n; v++ {
			_ = h.RecordValue(v * 10) // distinct values, rank v at 10 v µs
		}
		got := h.ValueAtQuantile(unbiasedQuantile(tc.q, tc.n))
		if want := tc.rank * 10; got < want-1 || got > want+1 {
			t.Errorf("p%g of %d: read %d µs, want rank %d (%d µs)", tc.q, tc.n, got, tc.rank, want)
		}
	}
}

// TestAJudgementCountsTheStatementsSlowerThanItsLimit: Above is the count of judged
// statements over the limit, capped at AboveMax, and 0 without a limit.
func TestAJudgementCountsTheStatementsSlowerThanItsLimit(t *testing.T) {
	for _, c := range []struct {
		name      string
		slow      int
		limit     time.Duration
		wantAbove int64
	}{
		{"none slower", 0, 5 * time.Millisecond, 0},
		{"one slower", 1, 5 * time.Millisecond, 1},
		{"seven slower", 7, 5 * time.Millisecond, 7},
		{"more than it counts", 100, 5 * time.Millisecond, AboveMax},
		{"the fast ones too, under a lower limit", 7, 100 * time.Microsecond, AboveMax},
		{"no limit", 7, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			now := time.Unix(1000, 0)
			r := newAt(func() time.Time { return now })
			for i := range 400 {
				d := 300 * time.Microsecond
				if i < c.slow {
					d = 9 * time.Millisecond
				}
				r.Observe("select", d)
			}
			now = now.Add(RecentSlot)
			j := r.RecentJudgement(99, 99, time.Time{}, 100, 1000, c.limit)
			if j.Count != 400 || j.Above != c.wantAbove {
				t.Fatalf("judged %d statements, %d above %v; want 400 and %d", j.Count, j.Above, c.limit, c.wantAbove)
			}
		})
	}
}
