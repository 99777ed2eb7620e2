package sql

import (
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/osthread"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum/throttle"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
	"github.com/vacuumops/vacuum-operator/internal/server/pgerr"
	"github.com/vacuumops/vacuum-operator/internal/server/types"
)

// DatabaseOID is the one database's OID, as pg_stat_progress_vacuum.datid shows it
// (PostgreSQL's initdb gives the postgres database 5).
const DatabaseOID = 5

// Vacuums is the server's registry of running VACUUM statements, one per session at most,
// shared by every session: the progress views read it and vacuum_set_throttle changes a
// registered run's throttle. Its methods are safe for concurrent use.
type Vacuums struct {
	mu   sync.Mutex
	runs map[uint32]*runningVacuum
	done map[uint32]vacuumed   // by table OID, since the server started
	lag  func() ReplicationLag // the standbys' lag, for the adaptive throttle (adaptive.go)
	// replay is the slowest standby's replay position, for the WAL lag bound (walgate.go).
	replay   func() (replayed wal.LSN, standbys int, changed <-chan struct{})
	priority osthread.Priority // vacuum.Options.ThreadPriority of every VACUUM (SetThreadPriority)
	// logf tells the server's log, once (lowerWarn), that VACUUM threads could not be lowered.
	logf      func(format string, args ...any)
	lowerWarn sync.Once
	// adaptiveLog: every change of an adaptive throttle's decision goes to adaptiveLogf
	// (SetAdaptiveLog).
	adaptiveLogf func(format string, args ...any)
}

// SetAdaptiveLog makes every VACUUM of the server that an adaptive throttle steers log
// each change of the law's decision (budget, binding, HardStop's pause) through logf, with
// what its last judgement read: a line per change, never one per control period. A nil
// logf logs nothing (the default).
func (v *Vacuums) SetAdaptiveLog(logf func(format string, args ...any)) {
	if v == nil {
		return
	}
	v.mu.Lock()
	v.adaptiveLogf = logf
	v.mu.Unlock()
}

// adaptiveLogger is SetAdaptiveLog's logf (nil: none).
func (v *Vacuums) adaptiveLogger() func(format string, args ...any) {
	if v == nil {
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.adaptiveLogf
}

// SetThreadPriority makes every VACUUM of the server run its workers on OS threads
// lowered to p (vacuum.Options.ThreadPriority; the zero value: unchanged). The first
// VACUUM whose threads could not be lowered (off Linux, or a call the kernel refused) is
// reported through logf, once for the server's life; the VACUUM itself goes on at the
// foreground's priority. logf may be nil.
func (v *Vacuums) SetThreadPriority(p osthread.Priority, logf func(format string, args ...any)) {
	if v == nil {
		return
	}
	v.mu.Lock()
	v.priority, v.logf = p, logf
	v.mu.Unlock()
}

// noteLowering reports err, the first thread of a VACUUM that could not be lowered
// (vacuum.Batch.LoweredThreads), once per server; nil says nothing.
func (v *Vacuums) noteLowering(err error) {
	if v == nil {
		return
	}
	v.mu.Lock()
	logf := v.logf
	v.mu.Unlock()
	if err == nil || logf == nil {
		return
	}
	v.lowerWarn.Do(func() {
		logf("VACUUM threads run at the foreground's priority (reported once): %v", err)
	})
}

func (v *Vacuums) threadPriority() osthread.Priority {
	if v == nil {
		return osthread.Priority{}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.priority
}

// vacuumed is what pg_stat_user_tables shows of a table's finished vacuums.
type vacuumed struct {
	last  time.Time
	count int64
}

// NewVacuums returns an empty registry.
func NewVacuums() *Vacuums {
	return &Vacuums{runs: map[uint32]*runningVacuum{}, done: map[uint32]vacuumed{}}
}

// finished records a completed vacuum (lazy or FULL) of the table with OID relid.
func (v *Vacuums) finished(relid uint32, at time.Time) {
	if v == nil {
		return
	}
	v.mu.Lock()
	d := v.done[relid]
	d.last, d.count = at, d.count+1
	v.done[relid] = d
	v.mu.Unlock()
}

func (v *Vacuums) vacuumedOf(relid uint32) vacuumed {
	if v == nil {
		return vacuumed{}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.done[relid]
}

// runningVacuum is one session's VACUUM statement: the engine run (one throttle budget for
// all its tables, as PostgreSQL's cost balance is one per VACUUM) and the table it is on.
type runningVacuum struct {
	pid  uint32
	run  *vacuum.Batch
	full bool
	mwm  int64 // maintenance_work_mem in bytes
	// adapt is the run's adaptive throttle (adaptive.go; nil in tests that build a run by hand).
	adapt *adaptiveRun

	mu    sync.Mutex
	table string
	relid uint32
}

func (rv *runningVacuum) setTable(name string, relid uint32) {
	rv.mu.Lock()
	rv.table, rv.relid = name, relid
	rv.mu.Unlock()
}

func (v *Vacuums) add(rv *runningVacuum) {
	if v == nil {
		return
	}
	v.mu.Lock()
	v.runs[rv.pid] = rv
	v.mu.Unlock()
}

func (v *Vacuums) remove(pid uint32) {
	if v == nil {
		return
	}
	v.mu.Lock()
	delete(v.runs, pid)
	v.mu.Unlock()
}

// list returns the running vacuums in pid order.
func (v *Vacuums) list() []*runningVacuum {
	if v == nil {
		return nil
	}
	v.mu.Lock()
	out := make([]*runningVacuum, 0, len(v.runs))
	for _, rv := range v.runs {
		out = append(out, rv)
	}
	v.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].pid < out[j].pid })
	return out
}

func (v *Vacuums) get(pid uint32) *runningVacuum {
	if v == nil {
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.runs[pid]
}

// Count is the number of VACUUM statements running.
func (v *Vacuums) Count() int {
	if v == nil {
		return 0
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.runs)
}

// Running reports whether the session pid runs a VACUUM now (it is then not foreground).
func (v *Vacuums) Running(pid uint32) bool { return v.get(pid) != nil }

// current is the progress of the table the vacuum is on: the last table started, or a
// fresh one in phase initializing while the next table's vacuum lock is being taken.
func (rv *runningVacuum) current() (vacuum.TableProgress, vacuum.Progress, string, uint32) {
	snap := rv.run.Progress()
	rv.mu.Lock()
	table, relid := rv.table, rv.relid
	rv.mu.Unlock()
	for i := len(snap.Tables) - 1; i >= 0; i-- {
		if snap.Tables[i].Table == table {
			return snap.Tables[i], snap, table, relid
		}
	}
	return vacuum.TableProgress{Table: table, Phase: vacuum.PhaseInitializing.String()}, snap, table, relid
}

// lazyPhase is PostgreSQL 15's pg_stat_progress_vacuum phase for an engine phase.
func lazyPhase(p string) string {
	switch p {
	case vacuum.PhaseDone.String():
		return "performing final cleanup"
	case vacuum.PhaseRewritingHeap.String(), vacuum.PhaseRebuildingIndexes.String():
		return "initializing" // not a lazy phase
	}
	return p // the engine's lazy phases carry PostgreSQL's names
}

// clusterPhase is PostgreSQL 15's pg_stat_progress_cluster phase for VACUUM FULL: the
// rewrite copies the heap in one sequential pass, as PostgreSQL's VACUUM FULL does without
// sorting, then rebuilds the indexes.
func clusterPhase(p string) string {
	switch p {
	case vacuum.PhaseRewritingHeap.String():
		return "seq scanning heap"
	case vacuum.PhaseRebuildingIndexes.String():
		return "rebuilding index"
	case vacuum.PhaseDone.String():
		return "performing final cleanup"
	}
	return "initializing"
}

// maxHeapTuplesPerPage is PostgreSQL's MaxHeapTuplesPerPage for 8 kB pages.
const maxHeapTuplesPerPage = 291

// progressVacuumColumns are pg_stat_progress_vacuum's columns: PostgreSQL 15's, in its
// order, then this server's own (rates, usage, time slept and the throttle in force).
var progressVacuumColumns = append([]column{
	{name: "pid", t: types.Int4},
	{name: "datid", t: types.Oid},
	{name: "datname", t: types.Text},
	{name: "relid", t: types.Oid},
	{name: "phase", t: types.Text},
	{name: "heap_blks_total", t: types.Int8},
	{name: "heap_blks_scanned", t: types.Int8},
	{name: "heap_blks_vacuumed", t: types.Int8},
	{name: "index_vacuum_count", t: types.Int8},
	{name: "max_dead_tuples", t: types.Int8},
	{name: "num_dead_tuples", t: types.Int8},
	// PostgreSQL 17's names for the dead-TID store's memory, which the engine's store
	// (like 17's) is bounded by.
	{name: "max_dead_tuple_bytes", t: types.Int8},
	{name: "dead_tuple_bytes", t: types.Int8},
	{name: "tuples_removed", t: types.Int8},
	{name: "pages_per_second", t: types.Int8},
	{name: "bytes_read", t: types.Int8},
	{name: "bytes_written", t: types.Int8},
	{name: "wal_bytes", t: types.Int8},
	{name: "time_slept_ms", t: types.Int8},
	{name: "cost_delay_us", t: types.Int8},
	{name: "cost_limit", t: types.Int4},
	{name: "max_read_rate", t: types.Int8},
	{name: "max_write_rate", t: types.Int8},
	{name: "max_wal_rate", t: types.Int8},
	{name: "paused", t: types.Bool},
	{name: "time_paused_ms", t: types.Int8},
}, adaptiveColumns...)

// adaptiveColumns are both progress views' last columns: the adaptive throttle's binding
// signal, its budget and the time bound by each binding (NULL while no target was set).
var adaptiveColumns = []column{
	{name: "adaptive_binding", t: types.Text},
	{name: "adaptive_budget_per_mille", t: types.Int4},
	{name: "adaptive_foreground_latency_ms", t: types.Int8},
	{name: "adaptive_replication_lag_ms", t: types.Int8},
	{name: "adaptive_ceiling_ms", t: types.Int8},
	{name: "adaptive_floor_ms", t: types.Int8},
	{name: "adaptive_hard_stop_ms", t: types.Int8},
}

// progressClusterColumns are PostgreSQL 15's pg_stat_progress_cluster columns.
var progressClusterColumns = append([]column{
	{name: "pid", t: types.Int4},
	{name: "datid", t: types.Oid},
	{name: "datname", t: types.Text},
	{name: "relid", t: types.Oid},
	{name: "command", t: types.Text},
	{name: "phase", t: types.Text},
	{name: "cluster_index_relid", t: types.Oid},
	{name: "heap_tuples_scanned", t: types.Int8},
	{name: "heap_tuples_written", t: types.Int8},
	{name: "heap_blks_total", t: types.Int8},
	{name: "heap_blks_scanned", t: types.Int8},
	{name: "index_rebuild_count", t: types.Int8},
	// This server's own: vacuum_pause.
	{name: "paused", t: types.Bool},
	{name: "time_paused_ms", t: types.Int8},
}, adaptiveColumns...)

// progressVacuumRows are the rows of pg_stat_progress_vacuum: one per lazy VACUUM running.
func (s *Session) progressVacuumRows(*execCtx) ([][]any, error) {
	var rows [][]any
	for _, rv := range s.vacuums.list() {
		if rv.full {
			continue
		}
		tp, snap, _, relid := rv.current()
		th := rv.run.Settings()
		st := rv.run.ThrottleStats()
		maxDead := rv.mwm / 6 // PostgreSQL 15's bound: 6-byte item pointers
		if bound := tp.HeapBlocksTotal * maxHeapTuplesPerPage; tp.HeapBlocksTotal > 0 && bound < maxDead {
			maxDead = bound
		}
		rows = append(rows, append([]any{int64(rv.pid), int64(DatabaseOID), s.database, int64(relid), lazyPhase(tp.Phase),
			tp.HeapBlocksTotal, tp.HeapBlocksScanned, tp.HeapBlocksVacuumed, tp.IndexPasses,
			maxDead, tp.DeadTIDs, rv.mwm, tp.DeadTIDBytes, tp.TuplesRemoved,
			int64(snap.PagesPerSecond), tp.Usage.ReadBytes, tp.Usage.WriteBytes, tp.Usage.WALBytes,
			tp.Slept.Milliseconds(), th.CostDelay.Microseconds(), int64(th.CostLimit),
			th.MaxReadBytesPerSecond, th.MaxWriteBytesPerSecond, th.MaxWALBytesPerSecond,
			st.Paused, st.PausedFor.Milliseconds()}, rv.adapt.view().columns()...))
	}
	return rows, nil
}

// progressClusterRows are the rows of pg_stat_progress_cluster: one per VACUUM FULL. The
// engine counts heap blocks, not tuples, so heap_tuples_scanned/written are NULL until the
// rewrite reports them; index_rebuild_count counts the indexes rebuilt once done.
func (s *Session) progressClusterRows(*execCtx) ([][]any, error) {
	var rows [][]any
	for _, rv := range s.vacuums.list() {
		if !rv.full {
			continue
		}
		tp, _, _, relid := rv.current()
		st := rv.run.ThrottleStats()
		rows = append(rows, append([]any{int64(rv.pid), int64(DatabaseOID), s.database, int64(relid), "VACUUM FULL", clusterPhase(tp.Phase),
			int64(0), nil, nil, tp.HeapBlocksTotal, tp.HeapBlocksScanned, tp.IndexPasses,
			st.Paused, st.PausedFor.Milliseconds()}, rv.adapt.view().columns()...))
	}
	return rows, nil
}

// throttleSettings are the settings vacuum_set_throttle changes, as their SQL names.
var throttleSettings = []string{"vacuum_cost_delay", "vacuum_cost_limit", "vacuum_cost_page_hit",
	"vacuum_cost_page_miss", "vacuum_cost_page_dirty", "vacuum_max_read_rate", "vacuum_max_write_rate",
	"vacuum_max_wal_rate"}

// applyThrottleSetting returns th with one setting changed, parsed as SET parses it.
func applyThrottleSetting(th throttle.Settings, name, value string) (throttle.Settings, error) {
	switch name {
	case "vacuum_cost_delay":
		d, err := durationSetting(name, value)
		if err != nil {
			return th, err
		}
		th.CostDelay = d
		return th, nil
	case "vacuum_cost_limit", "vacuum_cost_page_hit", "vacuum_cost_page_miss", "vacuum_cost_page_dirty":
		n, err := intSetting(name, value)
		if err != nil {
			return th, err
		}
		switch name {
		case "vacuum_cost_limit":
			th.CostLimit = n
		case "vacuum_cost_page_hit":
			th.PageHitCost = n
		case "vacuum_cost_page_miss":
			th.PageMissCost = n
		default:
			th.PageDirtyCost = n
		}
		return th, nil
	case "vacuum_max_read_rate", "vacuum_max_write_rate", "vacuum_max_wal_rate":
		b, err := memoryBytes(value, 1)
		if err != nil {
			return th, err
		}
		switch name {
		case "vacuum_max_read_rate":
			th.MaxReadBytesPerSecond = b
		case "vacuum_max_write_rate":
			th.MaxWriteBytesPerSecond = b
		default:
			th.MaxWALBytesPerSecond = b
		}
		return th, nil
	}
	return th, pgerr.New(pgerr.InvalidParameterValue, "vacuum_set_throttle cannot change \"%s\" (one of %v, %v)", name, throttleSettings, adaptiveSettings)
}

// setThrottle changes the throttle of the VACUUM session pid runs, at its next delay
// point (false: that session runs no VACUUM).
func (v *Vacuums) setThrottle(pid uint32, name, value string) (bool, error) {
	if isAdaptiveSetting(name) {
		if _, err := applyAdaptiveSetting(defaultAdaptiveTargets(), name, value); err != nil {
			return false, err
		}
		rv := v.get(pid)
		if rv == nil || rv.adapt == nil {
			return false, nil
		}
		return true, rv.adapt.setTarget(name, value)
	}
	if _, err := applyThrottleSetting(throttle.Settings{}, name, value); err != nil {
		return false, err
	}
	rv := v.get(pid)
	if rv == nil {
		return false, nil
	}
	if rv.adapt != nil {
		// The static throttle is the adaptive throttle's ceiling.
		th, err := applyThrottleSetting(rv.adapt.ceilingSettings(), name, value)
		if err != nil {
			return false, err
		}
		return true, rv.adapt.setCeiling(th)
	}
	th, err := applyThrottleSetting(rv.run.Settings(), name, value)
	if err != nil {
		return false, err
	}
	if err := rv.run.UpdateThrottle(th); err != nil {
		return false, pgerr.Wrap(err, pgerr.InvalidParameterValue, "%v", err)
	}
	return true, nil
}

// setPaused pauses (or resumes) the VACUUM session pid runs at its next delay point: its
// workers wait there, without giving up the locks they hold, until resumed or cancelled.
// It reports whether that session runs a VACUUM (which is then paused, or running).
func (v *Vacuums) setPaused(pid uint32, paused bool) bool {
	rv := v.get(pid)
	if rv == nil {
		return false
	}
	if rv.adapt != nil {
		rv.adapt.setUserPaused(paused)
	}
	if paused {
		rv.run.Pause()
	} else {
		rv.run.Resume()
	}
	return true
}

// intSetting parses an integer setting's value.
func intSetting(name, v string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 {
		return 0, pgerr.New(pgerr.InvalidParameterValue, "invalid value for parameter \"%s\": \"%s\"", name, v)
	}
	return n, nil
}
