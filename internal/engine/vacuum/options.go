package vacuum

import (
	"errors"
	"fmt"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/osthread"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum/throttle"
)

// Defaults of Options (see DefaultOptions).
const (
	DefaultRingSize           = 2 << 20
	DefaultMaintenanceWorkMem = 64 << 20
	// MinMaintenanceWorkMem is the smallest dead-TID budget accepted: one
	// store segment per array, so that a pass always makes progress.
	MinMaintenanceWorkMem = 64 << 10
	// MaxRingSize is the largest ring accepted (the pool clamps it to 1/8
	// of its frames anyway).
	MaxRingSize = 16 << 30
)

// ErrInvalidOptions is wrapped by every Options validation error.
var ErrInvalidOptions = errors.New("invalid vacuum options")

// TableThrottle overrides some of the run's throttle settings for one
// table. A nil field inherits the run's value (also after the run is
// re-throttled). The run-wide limits still cap the sum of all tables.
type TableThrottle struct {
	CostDelay              *time.Duration
	CostLimit              *int
	PageHitCost            *int
	PageMissCost           *int
	PageDirtyCost          *int
	MaxReadBytesPerSecond  *int64
	MaxWriteBytesPerSecond *int64
	MaxWALBytesPerSecond   *int64
}

// Merge returns run with the fields set in t replaced.
func (t TableThrottle) Merge(run throttle.Settings) throttle.Settings {
	s := run
	setIf(&s.CostDelay, t.CostDelay)
	setIf(&s.CostLimit, t.CostLimit)
	setIf(&s.PageHitCost, t.PageHitCost)
	setIf(&s.PageMissCost, t.PageMissCost)
	setIf(&s.PageDirtyCost, t.PageDirtyCost)
	setIf(&s.MaxReadBytesPerSecond, t.MaxReadBytesPerSecond)
	setIf(&s.MaxWriteBytesPerSecond, t.MaxWriteBytesPerSecond)
	setIf(&s.MaxWALBytesPerSecond, t.MaxWALBytesPerSecond)
	return s
}

func setIf[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// Options configure a vacuum run. Start from DefaultOptions: the zero
// value means no ring and default throttle and memory.
type Options struct {
	// Throttle holds the run-wide limits, shared by every worker of the run.
	// nil = throttle.DefaultSettings() (PostgreSQL's cost defaults);
	// &throttle.Settings{} = unthrottled.
	Throttle *throttle.Settings
	// ThrottleOptions tune the pacing (MinSleep, Burst); zero = defaults.
	ThrottleOptions throttle.Options
	// TableOverrides holds per-table throttle overrides by table name.
	TableOverrides map[string]TableThrottle
	// RingSize is the vacuum ring in bytes: 0 = no ring (the shared pool,
	// like any reader); otherwise 128 KiB to 16 GiB, clamped by the buffer
	// pool to 1/8 of its size. DefaultOptions sets 2 MiB.
	RingSize int64
	// MaintenanceWorkMem bounds the dead-TID store in bytes; when it is
	// full the indexes and the heap are vacuumed before the scan resumes.
	// 0 = 64 MiB.
	MaintenanceWorkMem int64
	// Parallelism is how many tables are vacuumed at once (0 or 1 = one
	// after the other).
	Parallelism int
	// IndexWorkers is how many indexes of one table lazy vacuum cleans at
	// once (0 or 1 = the table's own worker does them one by one). VACUUM
	// FULL ignores it: it builds a table's indexes one after another.
	IndexWorkers int
	// DisableReadAhead turns off the read-ahead of lazy vacuum's heap
	// passes: by default, with a ring, a goroutine reads the next runs of
	// the blocks a pass will visit (one system call per run of up to 16)
	// into a ring of its own while the pass works, at most half that ring
	// ahead; counters, costs and results are the same either way.
	DisableReadAhead bool
	// DisableTruncate keeps trailing empty pages (lazy vacuum truncates
	// them by default, under the table's exclusive lock).
	DisableTruncate bool
	// MinDeadTuplePercent, when > 0, skips a table whose dead tuples (and
	// dead line pointers) are below this percentage of its tuples, measured
	// by a throttled counting pass first.
	MinDeadTuplePercent float64
	// Full selects VACUUM FULL (rewrite) instead of lazy vacuum for
	// multi-table runs.
	Full bool
	// TempDir holds VACUUM FULL's sort runs when an index's entries do not
	// fit in MaintenanceWorkMem ("" = os.TempDir()). Runs are unlinked as
	// soon as they are created, so a crash leaves nothing behind. When set,
	// the space check counts the runs against the data directory's volume:
	// set it on that volume (the runner uses <data>/pgsql_tmp).
	TempDir string
	// Pacing selects how workers sleep: PacingRate (default, the
	// throttle's rate pacing) or PacingPostgresNap (PostgreSQL's
	// sleep-after-balance rule, per worker, cost limit only, no live
	// re-throttle; for comparison benchmarks).
	Pacing Pacing
	// FullSpaceMargin is extra free space (bytes) VACUUM FULL requires on
	// top of its estimate. 0 = none.
	FullSpaceMargin int64
	// HeapWorkers is how many goroutines free the dead slots of one table
	// in the second heap pass, each on its own runs of blocks with its own
	// ring, all under the table's throttle (0 or 1 = the table's own worker
	// does it), each worker reading its runs of blocks ahead. PostgreSQL
	// has no counterpart: it is meant for idle cores (the pass costs about
	// half of a lazy vacuum's CPU). Before its workers read ahead, 2 gained
	// nothing beyond the noise on the 2-core machine it was measured on;
	// with read-ahead see docs/benchmarks/vacuum-speed.md (session h77).
	HeapWorkers int
	// NoWait makes a table that another vacuum (lazy or FULL) of the same
	// engine is working on fail at once with ErrVacuumInProgress, instead
	// of waiting (cancellably) for that vacuum to finish.
	NoWait bool
	// Resume makes a lazy vacuum continue each table from the position
	// its last unfinished lazy vacuum recorded (Position), with a fresh
	// horizon, or from block 0 where there is none or it cannot be
	// trusted. A table whose recorded vacuum finished is skipped. VACUUM
	// FULL ignores it (all or nothing).
	Resume bool
	// CycleBlocks, when > 0, ends a dead-items cycle (index pass, heap
	// reclaim, position recorded) at least every CycleBlocks heap blocks
	// scanned, not only when MaintenanceWorkMem is full: a run that may be
	// stopped (a window) keeps its work at that grain, at the cost of one
	// more pass over every index per cycle. 0 = memory decides alone.
	CycleBlocks int64
	// ThreadPriority, when it lowers at all, lowers the OS threads of the
	// goroutines a Batch starts (a table's worker, index and heap workers,
	// read-ahead, the WAL flusher): by its nice steps or into SCHED_IDLE, and
	// to the lowest best-effort I/O priority (package osthread), so that the
	// foreground's threads get the CPU first when both want it. Each such
	// goroutine stays locked to its thread, which ends with it. Linux only:
	// elsewhere it is ignored. A vacuum run in the caller's goroutine
	// (Batch.Vacuum) leaves the caller's thread alone. The zero value leaves
	// threads unchanged.
	ThreadPriority osthread.Priority
}

// Pacing names a pacing rule (see Options.Pacing).
type Pacing int

// Pacing rules.
const (
	PacingRate Pacing = iota
	PacingPostgresNap
)

// DefaultOptions returns the defaults: PostgreSQL's cost throttle (limit
// 200 per 2 ms, hit 1, miss 2, dirty 20), a 2 MiB ring, 64 MiB of
// dead-TID memory, one table and one index at a time, truncation on.
func DefaultOptions() Options {
	s := throttle.DefaultSettings()
	return Options{Throttle: &s, RingSize: DefaultRingSize, MaintenanceWorkMem: DefaultMaintenanceWorkMem}
}

// settings is the run's throttle settings.
func (o Options) settings() throttle.Settings {
	if o.Throttle == nil {
		return throttle.DefaultSettings()
	}
	return *o.Throttle
}

func (o Options) workMem() int64 {
	if o.MaintenanceWorkMem <= 0 {
		return DefaultMaintenanceWorkMem
	}
	return max(o.MaintenanceWorkMem, MinMaintenanceWorkMem)
}

func (o Options) indexWorkers() int { return max(o.IndexWorkers, 1) }

func (o Options) heapWorkers() int { return max(o.HeapWorkers, 1) }

func (o Options) parallelism() int { return max(o.Parallelism, 1) }

// Validate reports the first option out of range.
func (o Options) Validate() error {
	if err := o.settings().Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	if err := o.ThreadPriority.Validate(); err != nil {
		return fmt.Errorf("thread priority: %w: %w", err, ErrInvalidOptions)
	}
	switch {
	case o.RingSize < 0:
		return fmt.Errorf("ring size %d is negative: %w", o.RingSize, ErrInvalidOptions)
	case o.RingSize > 0 && o.RingSize < 128<<10:
		return fmt.Errorf("ring size %d is below 128 KiB (use 0 for no ring): %w", o.RingSize, ErrInvalidOptions)
	case o.RingSize > MaxRingSize:
		return fmt.Errorf("ring size %d is above 16 GiB: %w", o.RingSize, ErrInvalidOptions)
	case o.MaintenanceWorkMem < 0:
		return fmt.Errorf("maintenance work mem %d is negative: %w", o.MaintenanceWorkMem, ErrInvalidOptions)
	case o.Parallelism < 0 || o.IndexWorkers < 0 || o.HeapWorkers < 0:
		return fmt.Errorf("parallelism %d, index workers %d and heap workers %d must not be negative: %w",
			o.Parallelism, o.IndexWorkers, o.HeapWorkers, ErrInvalidOptions)
	case o.MinDeadTuplePercent < 0 || o.MinDeadTuplePercent > 100:
		return fmt.Errorf("min dead tuple percent %v is outside 0..100: %w", o.MinDeadTuplePercent, ErrInvalidOptions)
	case o.CycleBlocks < 0:
		return fmt.Errorf("cycle blocks %d is negative: %w", o.CycleBlocks, ErrInvalidOptions)
	case o.FullSpaceMargin < 0:
		return fmt.Errorf("full space margin %d is negative: %w", o.FullSpaceMargin, ErrInvalidOptions)
	}
	for name, t := range o.TableOverrides {
		if err := t.Merge(o.settings()).Validate(); err != nil {
			return fmt.Errorf("override of table %q: %w: %w", name, ErrInvalidOptions, err)
		}
	}
	return nil
}
