package vacuum

import (
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/usage"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum/throttle"
)

// IndexReport is one index of a vacuumed table (PostgreSQL's "index
// scan" lines of VACUUM VERBOSE).
type IndexReport struct {
	Name             string
	Pages            int64 // blocks after the vacuum, meta page included
	PagesScanned     int64 // pages visited by bulk-delete passes
	EntriesRemoved   int64
	EntriesRemaining int64
}

// Rate compares a limit with what was achieved, in units (cost units or
// bytes) per second of wall clock. Configured 0 means no limit.
type Rate struct {
	Configured float64
	Achieved   float64
}

// Rates are the four limits of a throttle.
type Rates struct {
	Cost, Read, Write, WAL Rate
}

// Report is what vacuuming one table did: the facts PostgreSQL's VACUUM
// VERBOSE prints, plus pages per second and each limit's achieved rate.
type Report struct {
	Table      string
	Mode       Mode
	Skipped    bool
	SkipReason string

	PagesTotal     int64 // heap pages when the vacuum started
	PagesScanned   int64 // heap pages scanned (lazy: not skipped by the VM) or read (FULL)
	PagesSkipped   int64 // all-visible pages not scanned
	PagesRemoved   int64 // heap pages given back (truncation, or FULL's shrink)
	PagesRemaining int64 // heap pages afterwards
	PagesVacuumed  int64 // heap pages whose dead line pointers were freed

	TuplesRemoved int64 // dead tuples removed
	// TuplesRemaining is the tuples left in the whole table (live,
	// recently dead, in progress): counted on the pages scanned, plus, for
	// the all-visible pages skipped, counted on a sample of up to
	// SkippedSamplePages of them and scaled to all (PostgreSQL likewise
	// estimates the pages it did not scan). Exact when no more pages were
	// skipped than sampled; TuplesRemainingEstimated says which.
	TuplesRemaining          int64
	TuplesRemainingEstimated bool
	RecentlyDead             int64 // deleted but still visible to some snapshot (on the pages scanned)
	DeadItemsFreed           int64 // line pointers made unused after the index passes
	IndexPasses              int64
	Indexes                  []IndexReport
	TruncateSkippedWhy       string // why truncation did not happen, when it could have
	RelfilenodesRemoved      int    // FULL: old files dropped (heap + indexes)

	// RemovableCutoff is the horizon: tuples deleted by a transaction that committed below it
	// were removed; CutoffAge is how many xids were assigned after it by the time the
	// vacuum ended (PostgreSQL 15's "removable cutoff: N, which was M XIDs old").
	RemovableCutoff uint64
	CutoffAge       int64

	// Complete: the vacuum ran to its end (or had nothing to do). A lazy
	// vacuum that was stopped is not complete; BlockReached is then the
	// position it recorded, where a resume continues.
	Complete     bool
	BlockReached int64
	// Resumed: the scan started at ResumedFromBlock, the saved position
	// (Options.Resume), rather than at block 0. PagesLeftBehind counts the
	// blocks below it that are not all-visible (rows changed there since,
	// or not yet removable then): the next vacuum without resume covers
	// them. ResumeUntrusted says why a saved position was not used.
	Resumed          bool
	ResumedFromBlock int64
	PagesLeftBehind  int64
	ResumeUntrusted  string
	PositionsSaved   int64 // positions recorded (Table.SavePosition)

	Elapsed time.Duration
	Slept   time.Duration
	Usage   usage.Reading
	// PhaseUsage splits Usage by the phase the table was in (scanning heap,
	// vacuuming indexes, vacuuming heap, ...), so a reader can see which
	// pass paid the pages read and dirtied.
	PhaseUsage []PhaseUsage
	Rates      Rates

	PagesPerSecond      float64 // PagesScanned per second of Elapsed
	ReadBytesPerSecond  float64 // average read rate
	WriteBytesPerSecond float64 // average write rate, from bytes actually written
}

// BatchReport is a whole run: each table's report and the totals.
type BatchReport struct {
	Tables []*Report
	Totals Totals
}

// Totals sum every table of a run; rates are run-wide, over the run's
// wall-clock time.
type Totals struct {
	TablesVacuumed  int
	TablesSkipped   int
	PagesTotal      int64
	PagesScanned    int64
	PagesRemoved    int64
	PagesRemaining  int64
	TuplesRemoved   int64
	TuplesRemaining int64
	IndexPasses     int64
	Elapsed         time.Duration
	Slept           time.Duration
	Usage           usage.Reading
	Rates           Rates
	PagesPerSecond  float64
}

// effectiveRate is the rate limit k actually has for a table: the
// smaller of its own (child) limit and the run's, 0 when neither is on.
func effectiveRate(table, run throttle.Settings, k throttle.Kind) float64 {
	a, b := table.Rate(k), run.Rate(k)
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return min(a, b)
}

// ratesOf computes the achieved rate of every limit from the engine's
// own counters d over elapsed, cost with weights w.
func ratesOf(d usage.Reading, elapsed time.Duration, w throttle.Settings, conf func(throttle.Kind) float64) Rates {
	if w.PageHitCost == 0 && w.PageMissCost == 0 && w.PageDirtyCost == 0 {
		// Unthrottled settings carry no weights: report cost with the
		// default ones, so that the figure still means something.
		def := throttle.DefaultSettings()
		w.PageHitCost, w.PageMissCost, w.PageDirtyCost = def.PageHitCost, def.PageMissCost, def.PageDirtyCost
	}
	secs := elapsed.Seconds()
	ach := func(k throttle.Kind) float64 {
		if secs <= 0 {
			return 0
		}
		return w.Units(k, d) / secs
	}
	mk := func(k throttle.Kind) Rate { return Rate{Configured: conf(k), Achieved: ach(k)} }
	return Rates{Cost: mk(throttle.Cost), Read: mk(throttle.ReadBytes), Write: mk(throttle.WriteBytes), WAL: mk(throttle.WALBytes)}
}

// finish fills the usage, timing and rate fields of rep from ts.
func (r *Batch) finish(ts *tableState, rep *Report) {
	rep.PhaseUsage = ts.phaseUsage() // first: its phases' times add up to no more than Elapsed
	rep.Elapsed = max(time.Since(ts.start), time.Nanosecond)
	rep.Usage = ts.usage.Read()
	rep.Slept = ts.thr.Stats().Slept
	run := r.thr.Settings()
	own := ts.thr.Settings()
	weights := run
	if ts.over != nil {
		weights = own
	}
	rep.Rates = ratesOf(rep.Usage, rep.Elapsed, weights, func(k throttle.Kind) float64 { return effectiveRate(own, run, k) })
	secs := rep.Elapsed.Seconds()
	rep.PagesPerSecond = float64(rep.PagesScanned) / secs
	rep.ReadBytesPerSecond = float64(rep.Usage.ReadBytes) / secs
	rep.WriteBytesPerSecond = float64(rep.Usage.WriteBytes) / secs
}

// Report returns the reports of the tables finished so far and the
// run's totals.
func (r *Batch) Report() *BatchReport {
	r.mu.Lock()
	reps := append([]*Report(nil), r.reports...)
	r.mu.Unlock()
	rr := &BatchReport{Tables: reps}
	t := &rr.Totals
	for _, rep := range reps {
		if rep.Skipped {
			t.TablesSkipped++
		} else {
			t.TablesVacuumed++
		}
		t.PagesTotal += rep.PagesTotal
		t.PagesScanned += rep.PagesScanned
		t.PagesRemoved += rep.PagesRemoved
		t.PagesRemaining += rep.PagesRemaining
		t.TuplesRemoved += rep.TuplesRemoved
		t.TuplesRemaining += rep.TuplesRemaining
		t.IndexPasses += rep.IndexPasses
	}
	t.Elapsed = max(time.Since(r.start), time.Nanosecond)
	t.Slept = r.thr.Stats().Slept
	t.Usage = r.usage.Read()
	s := r.thr.Settings()
	t.Rates = ratesOf(t.Usage, t.Elapsed, s, s.Rate)
	t.PagesPerSecond = float64(t.PagesScanned) / t.Elapsed.Seconds()
	return rr
}
