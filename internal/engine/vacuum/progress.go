package vacuum

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/usage"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum/throttle"
)

// Phase is where one table's vacuum is. Its String is for logs and the
// runner's terminal; the runner maps each phase to its wire name itself.
type Phase int32

// Phases in the order a table may pass through them.
const (
	PhaseInitializing Phase = iota
	PhaseScanningHeap
	PhaseVacuumingIndexes
	PhaseVacuumingHeap
	PhaseCleaningUpIndexes
	PhaseTruncatingHeap
	PhaseRewritingHeap
	PhaseRebuildingIndexes
	PhaseDone
)

var phaseNames = [...]string{"initializing", "scanning heap", "vacuuming indexes", "vacuuming heap",
	"cleaning up indexes", "truncating heap", "rewriting heap", "rebuilding indexes", "done"}

// String names the phase.
func (p Phase) String() string {
	if p < 0 || int(p) >= len(phaseNames) {
		return "unknown"
	}
	return phaseNames[p]
}

// Mode is lazy vacuum or VACUUM FULL (runner wire values).
type Mode string

// Modes.
const (
	ModeLazy Mode = "Lazy"
	ModeFull Mode = "Full"
)

// rateWindow is the span the snapshot's rates cover.
const rateWindow = 5 * time.Second

// sampleEvery is the spacing of the samples rates are computed from.
const sampleEvery = 100 * time.Millisecond

// tableState is one table's live progress: written by its workers with
// atomics, read by Progress from any goroutine.
type tableState struct {
	name  string
	mode  Mode
	start time.Time
	usage *usage.Counters // the table's total (parent: the run's)
	thr   *throttle.Throttle
	over  *TableThrottle // the table's override, nil when none

	phase         atomic.Int32
	blocksTotal   atomic.Int64
	blocksScanned atomic.Int64
	blocksVacuumd atomic.Int64
	indexPasses   atomic.Int64
	deadTIDs      atomic.Int64
	deadBytes     atomic.Int64
	tuplesRemoved atomic.Int64
	elapsed       atomic.Int64 // nanoseconds, set when done

	// The table's usage by phase: phaseUse[p] is what the table's counters
	// gained while it was in phase p, phaseAt the reading at the last change;
	// phaseTime[p] the wall time spent in p, phaseSince the last change's
	// time (zero: the table's start).
	phaseMu    sync.Mutex
	phaseAt    usage.Reading
	phaseUse   [PhaseDone + 1]usage.Reading
	phaseSince time.Time
	phaseTime  [PhaseDone + 1]time.Duration
}

// setPhase moves the table to phase p, charging the usage since the last
// change to the phase it leaves.
func (ts *tableState) setPhase(p Phase) {
	ts.phaseMu.Lock()
	defer ts.phaseMu.Unlock()
	ts.closePhaseLocked()
	ts.phase.Store(int32(p))
}

func (ts *tableState) closePhaseLocked() {
	now, at := ts.usage.Read(), time.Now()
	if ts.phaseSince.IsZero() {
		ts.phaseSince = ts.start
	}
	cur := Phase(ts.phase.Load())
	if cur >= 0 && cur <= PhaseDone {
		ts.phaseUse[cur] = ts.phaseUse[cur].Add(now.Sub(ts.phaseAt))
		ts.phaseTime[cur] += at.Sub(ts.phaseSince)
	}
	ts.phaseAt, ts.phaseSince = now, at
}

// PhaseUsage is what a table's vacuum used while in one phase, and the
// wall time it spent there (every time it was in that phase: the
// dead-items cycles' passes add up).
type PhaseUsage struct {
	Phase   string
	Usage   usage.Reading
	Elapsed time.Duration
}

// phaseUsage is the table's usage by phase so far, in phase order, the
// phases that read, dirtied or wrote nothing left out.
func (ts *tableState) phaseUsage() []PhaseUsage {
	ts.phaseMu.Lock()
	defer ts.phaseMu.Unlock()
	ts.closePhaseLocked()
	var out []PhaseUsage
	for p, u := range ts.phaseUse {
		if u.Hits == 0 && u.Misses == 0 && u.Dirtied == 0 && u.Written == 0 {
			continue
		}
		out = append(out, PhaseUsage{Phase: Phase(p).String(), Usage: u, Elapsed: ts.phaseTime[p]})
	}
	return out
}

// TableProgress is one table in a progress snapshot.
type TableProgress struct {
	Table              string
	Mode               Mode
	Phase              string
	HeapBlocksTotal    int64
	HeapBlocksScanned  int64
	HeapBlocksVacuumed int64
	IndexPasses        int64
	DeadTIDs           int64 // held in the dead-TID store now
	DeadTIDBytes       int64 // the store's memory now
	TuplesRemoved      int64
	Usage              usage.Reading
	Slept              time.Duration
	Elapsed            time.Duration
	Percent            float64
}

// Progress is the progress of a whole Batch at one moment. Phase and Table
// are those of the table started last; counters sum the run so far; the
// per-second rates cover the last 5 s.
type Progress struct {
	Phase              string
	Table              string
	TablesDone         int
	TablesTotal        int
	HeapBlocksTotal    int64
	HeapBlocksScanned  int64
	HeapBlocksVacuumed int64
	IndexPasses        int64
	DeadTIDs           int64
	DeadTIDBytes       int64
	TuplesRemoved      int64
	Usage              usage.Reading
	Slept              time.Duration
	Elapsed            time.Duration
	Percent            float64

	PagesPerSecond      float64 // heap blocks scanned per second
	ReadBytesPerSecond  float64
	WriteBytesPerSecond float64
	WALBytesPerSecond   float64
	CostPerSecond       float64 // with the run's page costs

	// Tables has one entry per table started, in start order (done ones
	// included, with Phase "done").
	Tables []TableProgress
}

// sample is the run's totals at one instant, for windowed rates.
type sample struct {
	at      time.Time
	scanned int64
	u       usage.Reading
}

// sampler keeps about rateWindow of samples.
type sampler struct {
	mu      sync.Mutex
	samples []sample
	last    atomic.Int64 // unix nanos of the newest sample
}

// maybe records a sample if the newest is older than sampleEvery. It is
// cheap when not due (one atomic load), so delay points call it.
func (s *sampler) maybe(now time.Time, take func() sample) {
	if now.UnixNano()-s.last.Load() < int64(sampleEvery) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.UnixNano()-s.last.Load() < int64(sampleEvery) {
		return
	}
	s.add(take())
}

func (s *sampler) add(sm sample) {
	s.samples = append(s.samples, sm)
	s.last.Store(sm.at.UnixNano())
	// Keep the newest sample older than the window (the rate's base) and
	// everything after it.
	cut := 0
	for i := range s.samples {
		if sm.at.Sub(s.samples[i].at) >= rateWindow {
			cut = i
		}
	}
	if cut > 0 {
		s.samples = append(s.samples[:0], s.samples[cut:]...)
	}
}

// base returns the sample rates are measured from at now: the newest one
// at least rateWindow old, else the oldest.
func (s *sampler) base(now time.Time) (sample, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.samples) == 0 {
		return sample{}, false
	}
	b := s.samples[0]
	for _, sm := range s.samples {
		if now.Sub(sm.at) >= rateWindow {
			b = sm
		}
	}
	return b, true
}

func percentOf(ts *tableState) float64 {
	if Phase(ts.phase.Load()) == PhaseDone {
		return 100
	}
	total := ts.blocksTotal.Load()
	if total <= 0 {
		return 0
	}
	return min(99, 100*float64(ts.blocksScanned.Load())/float64(total))
}

func (ts *tableState) snapshot(now time.Time) TableProgress {
	tp := TableProgress{
		Table: ts.name, Mode: ts.mode, Phase: Phase(ts.phase.Load()).String(),
		HeapBlocksTotal: ts.blocksTotal.Load(), HeapBlocksScanned: ts.blocksScanned.Load(),
		HeapBlocksVacuumed: ts.blocksVacuumd.Load(), IndexPasses: ts.indexPasses.Load(),
		DeadTIDs: ts.deadTIDs.Load(), DeadTIDBytes: ts.deadBytes.Load(), TuplesRemoved: ts.tuplesRemoved.Load(),
		Usage: ts.usage.Read(), Percent: percentOf(ts),
	}
	if ts.thr != nil {
		tp.Slept = ts.thr.Stats().Slept
	}
	if e := ts.elapsed.Load(); e > 0 {
		tp.Elapsed = time.Duration(e)
	} else {
		tp.Elapsed = now.Sub(ts.start)
	}
	return tp
}
