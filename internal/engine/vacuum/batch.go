package vacuum

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/buffer"
	"github.com/vacuumops/vacuum-operator/internal/engine/osthread"
	"github.com/vacuumops/vacuum-operator/internal/engine/usage"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum/throttle"
	"github.com/vacuumops/vacuum-operator/internal/engine/vm"
)

// Batch is the tables one caller vacuums together (the runner's whole run,
// or one DB.Vacuum call): one throttle budget (shared by every worker and
// every table of the batch, re-throttleable live), batch-wide usage
// counters, and the live progress of its tables. (It is not a VacuumRun,
// the Kubernetes object, nor MVCC's snapshot; it is what one of those
// drives in the engine.) Its methods are safe for
// concurrent use; Progress and UpdateThrottle are meant to be called from
// other goroutines (the runner's HTTP handlers) while tables are vacuumed.
type Batch struct {
	opts  Options
	thr   *throttle.Throttle
	usage *usage.Counters
	start time.Time
	smp   sampler

	// lowered counts the goroutines whose thread lowerThread lowered; lowerErr
	// is the first error of a thread it could not lower (Options.ThreadPriority).
	lowered  atomic.Int64
	lowerErr atomic.Pointer[error]

	mu      sync.Mutex
	tables  []*tableState // in start order
	total   int           // tables announced by VacuumTables (or started)
	reports []*Report
}

// NewBatch validates opts and starts a batch: its throttle's clock starts now.
func NewBatch(opts Options) (*Batch, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	thr, err := throttle.New(opts.settings(), opts.ThrottleOptions)
	if err != nil {
		return nil, err
	}
	r := &Batch{opts: opts, thr: thr, usage: &usage.Counters{}, start: time.Now()}
	r.smp.add(sample{at: r.start})
	return r, nil
}

// Options returns the run's options (as given; throttle changes made with
// UpdateThrottle are in Settings).
func (r *Batch) Options() Options { return r.opts }

// Settings returns the run-wide throttle settings now.
func (r *Batch) Settings() throttle.Settings { return r.thr.Settings() }

// Usage returns the run-wide usage counters (every worker's usage sums
// into them).
func (r *Batch) Usage() usage.Reading { return r.usage.Read() }

// ThrottleStats returns the run-wide throttle's accounting.
func (r *Batch) ThrottleStats() throttle.Stats { return r.thr.Stats() }

// SetWALLagBound sets the run's WAL lag bound (throttle.Throttle.SetWALLagBound;
// the standbys are seen through Options.ThrottleOptions.WALGate): every worker,
// whatever its table's overrides, is held by it from its next delay point.
func (r *Batch) SetWALLagBound(bytes int64) error { return r.thr.SetWALLagBound(bytes) }

// UpdateThrottle replaces the run-wide throttle settings. Every worker
// sees the new rates at its next delay point (sleeping ones are woken).
// Tables with overrides keep their overridden fields and inherit the new
// values of the others.
func (r *Batch) UpdateThrottle(s throttle.Settings) error {
	if err := s.Validate(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ts := range r.tables {
		if ts.over != nil {
			if err := ts.over.Merge(s).Validate(); err != nil {
				return fmt.Errorf("override of table %q under the new settings: %w", ts.name, err)
			}
		}
	}
	if err := r.thr.Update(s); err != nil {
		return err
	}
	var errs []error
	for _, ts := range r.tables {
		if ts.over != nil && Phase(ts.phase.Load()) != PhaseDone {
			errs = append(errs, ts.thr.Update(ts.over.Merge(s)))
		}
	}
	return errors.Join(errs...)
}

// Pause stops the batch at every worker's next delay point, until Resume
// (or cancellation of the batch's context): the batch's throttle pauses,
// see throttle.Throttle.Pause. It reports whether the batch was running.
func (r *Batch) Pause() bool { return r.thr.Pause() }

// Resume lets a paused batch continue. It reports whether it was paused.
func (r *Batch) Resume() bool { return r.thr.Resume() }

// beginTable registers a table of the run and gives it its counters and
// throttle: a child of the run's throttle carrying the table's override
// (or no limit of its own, so that only the run's applies).
func (r *Batch) beginTable(name string, mode Mode) (*tableState, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ts := &tableState{name: name, mode: mode, start: time.Now(), usage: &usage.Counters{Parent: r.usage}}
	var own throttle.Settings
	if o, ok := r.opts.TableOverrides[name]; ok {
		ts.over = &o
		own = o.Merge(r.thr.Settings())
	}
	thr, err := r.thr.Child(own)
	if err != nil {
		return nil, fmt.Errorf("vacuum %q: %w", name, err)
	}
	ts.thr = thr
	r.tables = append(r.tables, ts)
	if len(r.tables) > r.total {
		r.total = len(r.tables)
	}
	return ts, nil
}

// endTable marks a table done and keeps its report.
func (r *Batch) endTable(ts *tableState, rep *Report) {
	ts.elapsed.Store(int64(max(time.Since(ts.start), 1)))
	ts.setPhase(PhaseDone)
	ts.deadTIDs.Store(0)
	ts.deadBytes.Store(0)
	if rep != nil {
		r.mu.Lock()
		r.reports = append(r.reports, rep)
		r.mu.Unlock()
	}
}

// tick is called at every delay point: it records a rate sample when one
// is due.
func (r *Batch) tick() {
	r.smp.maybe(time.Now(), r.takeSample)
}

func (r *Batch) takeSample() sample {
	r.mu.Lock()
	tables := append([]*tableState(nil), r.tables...)
	r.mu.Unlock()
	sm := sample{at: time.Now(), u: r.usage.Read()}
	for _, ts := range tables {
		sm.scanned += ts.blocksScanned.Load()
	}
	return sm
}

// Progress returns the batch's progress now: safe to call at any moment from
// any goroutine.
func (r *Batch) Progress() Progress {
	now := time.Now()
	r.tick()
	cur := r.takeSample()
	r.mu.Lock()
	tables := append([]*tableState(nil), r.tables...)
	total := r.total
	r.mu.Unlock()
	s := Progress{Phase: PhaseInitializing.String(), TablesTotal: total, Usage: cur.u,
		Elapsed: now.Sub(r.start), Slept: r.thr.Stats().Slept}
	var pct float64
	for _, ts := range tables {
		tp := ts.snapshot(now)
		s.Tables = append(s.Tables, tp)
		s.Phase, s.Table = tp.Phase, tp.Table
		if tp.Phase == PhaseDone.String() {
			s.TablesDone++
		}
		s.HeapBlocksTotal += tp.HeapBlocksTotal
		s.HeapBlocksScanned += tp.HeapBlocksScanned
		s.HeapBlocksVacuumed += tp.HeapBlocksVacuumed
		s.IndexPasses += tp.IndexPasses
		s.DeadTIDs += tp.DeadTIDs
		s.DeadTIDBytes += tp.DeadTIDBytes
		s.TuplesRemoved += tp.TuplesRemoved
		pct += tp.Percent
	}
	if total > 0 {
		s.Percent = pct / float64(total)
	}
	if b, ok := r.smp.base(now); ok {
		if secs := now.Sub(b.at).Seconds(); secs > 0 {
			d := cur.u.Sub(b.u)
			s.PagesPerSecond = float64(cur.scanned-b.scanned) / secs
			s.ReadBytesPerSecond = float64(d.ReadBytes) / secs
			s.WriteBytesPerSecond = float64(d.WriteBytes) / secs
			s.WALBytesPerSecond = float64(d.WALBytes) / secs
			s.CostPerSecond = r.thr.Settings().Units(throttle.Cost, d) / secs
		}
	}
	return s
}

// worker is one goroutine's vacuum context: its own usage counters (a
// child of its table's), buffer strategy and throttle meter.
type worker struct {
	ctx   context.Context
	run   *Batch
	ts    *tableState
	u     *usage.Counters
	s     *buffer.Strategy
	meter pacer

	indexAhead *aheadRing // the index passes' read-ahead ring (lazy.go), made on first use
	heapAhead  *aheadRing // a parallel heap pass worker's read-ahead ring (lazy.go), made on first use

	// vmr reads and sets the heap passes' VM bits with the VM page pinned,
	// one buffer access per VM page rather than per heap block (as
	// PostgreSQL keeps its vmbuffer); made on first use, released at the end
	// of each pass so nothing holds it across truncation.
	vmr *vm.Reader
}

// vmReader is w's VM reader of t's heap.
func (w *worker) vmReader(t *Target) *vm.Reader {
	if w.vmr == nil {
		w.vmr = t.Heap.VM().Reader(w.s.Plain())
	}
	return w.vmr
}

// releaseVM drops w's pinned VM page, if any.
func (w *worker) releaseVM() {
	if w.vmr != nil {
		w.vmr.Release()
		w.vmr = nil
	}
}

// pacer is a worker's delay-point rule: a throttle.Meter, or
// throttle.PostgresNap for comparison.
type pacer interface {
	Wait(ctx context.Context) error
}

// newWorker returns a worker for table ts using a strategy of kind on
// pool (ringBytes applies to buffer.Vacuum).
func (r *Batch) newWorker(ctx context.Context, ts *tableState, pool *buffer.Pool, kind buffer.StrategyKind, ringBytes int64) *worker {
	u := &usage.Counters{Parent: ts.usage}
	w := &worker{ctx: ctx, run: r, ts: ts, u: u, s: pool.NewStrategy(kind, ringBytes, u), meter: ts.thr.Meter(u)}
	if r.opts.Pacing == PacingPostgresNap {
		s := r.thr.Settings()
		if ts.over != nil {
			s = ts.over.Merge(s)
		}
		if nap, err := throttle.NewPostgresNap(s, u); err == nil { // s was validated by NewBatch
			w.meter = nap
		}
	}
	return w
}

// lowerThread lowers the calling goroutine's OS thread by Options.ThreadPriority
// (package osthread). Call it first in a goroutine the batch starts; the
// goroutine must then not unlock its thread, so that the thread ends with it
// and never serves a foreground goroutine. A thread that cannot be lowered
// (ErrUnsupported off Linux) does the work at its priority: the error is kept
// (LoweredThreads), the vacuum goes on.
func (r *Batch) lowerThread() {
	if !r.opts.ThreadPriority.Lowers() {
		return
	}
	if err := osthread.Lower(r.opts.ThreadPriority); err != nil {
		err = fmt.Errorf("lower a vacuum thread (%s): %w", r.opts.ThreadPriority, err)
		r.lowerErr.CompareAndSwap(nil, &err)
		return
	}
	r.lowered.Add(1)
}

// LoweredThreads is how many of the batch's goroutines ran on a thread
// lowered by Options.ThreadPriority, and the first error of one that could not be
// lowered (nil: none).
func (r *Batch) LoweredThreads() (int64, error) {
	if p := r.lowerErr.Load(); p != nil {
		return r.lowered.Load(), *p
	}
	return r.lowered.Load(), nil
}

// delay is the worker's delay point: rate sample, throttle, cancellation.
func (w *worker) delay() error {
	w.run.tick()
	if _, ok := w.meter.(*throttle.Meter); !ok {
		// PostgresNap knows no pause: hold it here.
		if err := w.run.thr.WaitWhilePaused(w.ctx); err != nil {
			return err
		}
	}
	return w.meter.Wait(w.ctx)
}

// VacuumTables vacuums the named tables, Parallelism at a time, lazily or
// FULL per Options.Full, all under the run's one budget. resolve turns a
// name into a Target when the table's turn comes (the engine waits there
// for the table's vacuum lock, with the run's context). It stops starting new
// tables at the first error (or cancellation) and returns the reports of
// the tables finished so far with that error. A batch that vacuumed every
// table is not an error because its context ended after the last one.
func (r *Batch) VacuumTables(ctx context.Context, names []string, resolve func(context.Context, string) (*Target, error)) (*BatchReport, error) {
	r.mu.Lock()
	r.total = max(r.total, len(r.tables)+len(names))
	r.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		errMu    sync.Mutex
		firstErr error
	)
	sem := make(chan struct{}, r.opts.parallelism())
	started := 0
	for _, name := range names {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		started++
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r.lowerThread()
			err := func() (err error) {
				defer recoverInto(&err)
				return r.vacuumOne(ctx, name, resolve)
			}()
			if err != nil {
				errMu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				errMu.Unlock()
				cancel()
			}
		}()
	}
	wg.Wait()
	if firstErr == nil && started < len(names) {
		firstErr = ctx.Err()
	}
	return r.Report(), firstErr
}

func (r *Batch) vacuumOne(ctx context.Context, name string, resolve func(context.Context, string) (*Target, error)) error {
	t, err := resolve(ctx, name)
	if err != nil {
		return fmt.Errorf("vacuum %q: %w", name, err)
	}
	if r.opts.Full {
		_, err = r.VacuumFull(ctx, t)
	} else {
		_, err = r.Vacuum(ctx, t)
	}
	return err
}
