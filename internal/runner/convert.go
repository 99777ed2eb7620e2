package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/utils/ptr"

	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum/throttle"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// This file translates between the wire contract (package runnerwire) and the engine's vacuum
// package, in both directions, and nowhere else.

// settingsFrom turns resolved limits into the engine's throttle settings. The two types have
// the same fields, so this is a conversion the compiler checks: a limit added to one and not
// the other stops the build here.
func settingsFrom(l runnerwire.Limits) throttle.Settings { return throttle.Settings(l) }

// overrideFrom expresses a table's resolved limits as an override of the run's: every field
// is set, so a later PUT /throttle changes only tables without an override.
func overrideFrom(l runnerwire.Limits) vacuum.TableThrottle {
	s := settingsFrom(l)
	return vacuum.TableThrottle{
		CostDelay: &s.CostDelay, CostLimit: &s.CostLimit, PageHitCost: &s.PageHitCost,
		PageMissCost: &s.PageMissCost, PageDirtyCost: &s.PageDirtyCost,
		MaxReadBytesPerSecond: &s.MaxReadBytesPerSecond, MaxWriteBytesPerSecond: &s.MaxWriteBytesPerSecond,
		MaxWALBytesPerSecond: &s.MaxWALBytesPerSecond,
	}
}

// SortDirName is the directory, inside the data directory, that holds VACUUM FULL's sort
// runs (PostgreSQL's pgsql_tmp). On the data volume, the engine's space check counts them;
// in a pod's /tmp (a 64Mi emptyDir) a large FULL would fill it, or the node's disk unseen
// (security review S4).
const SortDirName = "pgsql_tmp"

// sortDir is the sort directory of a FULL run ("" for a lazy one, which sorts nothing).
func sortDir(r runnerwire.Resolved) string {
	if r.Mode != runnerwire.ModeFull {
		return ""
	}
	return filepath.Join(r.DataDir, SortDirName)
}

// makeSortDir creates the sort directory of a FULL run (0700; runs inside it are unlinked as
// soon as they are made, so it stays empty).
func makeSortDir(r runnerwire.Resolved) error {
	dir := sortDir(r)
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create sort directory: %w", err)
	}
	return nil
}

// optionsFrom turns a resolved RunSpec into vacuum options.
func optionsFrom(r runnerwire.Resolved) vacuum.Options {
	s := settingsFrom(r.Throttle)
	o := vacuum.Options{
		Throttle:            &s,
		RingSize:            r.RingSize,
		MaintenanceWorkMem:  r.MaintenanceWorkMem,
		Parallelism:         r.Parallelism,
		IndexWorkers:        r.IndexWorkers,
		DisableTruncate:     !r.Truncate,
		MinDeadTuplePercent: float64(r.MinDeadTuplePercent),
		Full:                r.Mode == runnerwire.ModeFull,
		TempDir:             sortDir(r),
		Resume:              r.Resume,
		CycleBlocks:         windowCycleBlocks(r.Throttle, r.StopAt, time.Now()),
	}
	if len(r.TableThrottles) > 0 {
		o.TableOverrides = map[string]vacuum.TableThrottle{}
		for name, l := range r.TableThrottles {
			o.TableOverrides[name] = overrideFrom(l)
		}
	}
	return o
}

func rateFrom(r vacuum.Rate) runnerwire.Rate {
	return runnerwire.Rate{Configured: r.Configured, Achieved: r.Achieved}
}

// tableResultFrom converts one table's report.
func tableResultFrom(r *vacuum.Report) runnerwire.TableResult {
	u := r.Usage
	t := runnerwire.TableResult{
		Table: r.Table, Mode: runnerwire.Mode(r.Mode), Skipped: r.Skipped,
		PagesTotal: r.PagesTotal, PagesScanned: r.PagesScanned, PagesRemoved: r.PagesRemoved,
		PagesRemaining: r.PagesRemaining, TuplesRemoved: r.TuplesRemoved, TuplesRemaining: r.TuplesRemaining,
		IndexPasses: r.IndexPasses, ElapsedSeconds: r.Elapsed.Seconds(), PagesPerSecond: r.PagesPerSecond,
		BytesRead: u.ReadBytes, BytesWritten: u.WriteBytes, WALBytes: u.WALBytes, WALFlushes: u.WALFlushes,
		WALRecords: u.WALRecords, WALFullPageImages: u.WALFPIs, RingDirtyEvictions: u.RingDirtyEvictions,
		BufferHits: u.Hits, BufferMisses: u.Misses, BuffersDirtied: u.Dirtied,
		SleptSeconds: ptr.To(r.Slept.Seconds()), Indexes: []runnerwire.IndexResult{}, Notices: []string{},
		CostRate: rateFrom(r.Rates.Cost), ReadRate: rateFrom(r.Rates.Read),
		WriteRate: rateFrom(r.Rates.Write), WALRate: rateFrom(r.Rates.WAL),
		Complete: r.Complete, BlockReached: r.BlockReached, ResumedFromBlock: r.ResumedFromBlock,
		PagesLeftBehind: r.PagesLeftBehind,
	}
	for _, ix := range r.Indexes {
		t.Indexes = append(t.Indexes, runnerwire.IndexResult{Name: ix.Name, Pages: ix.Pages, EntriesRemoved: ix.EntriesRemoved})
	}
	return t
}

// totalsFrom converts a run's totals.
func totalsFrom(t vacuum.Totals) runnerwire.Totals {
	u := t.Usage
	return runnerwire.Totals{
		TablesVacuumed: int64(t.TablesVacuumed), TablesSkipped: int64(t.TablesSkipped),
		PagesTotal: t.PagesTotal, PagesScanned: t.PagesScanned, PagesRemoved: t.PagesRemoved,
		PagesRemaining: t.PagesRemaining, TuplesRemoved: t.TuplesRemoved, TuplesRemaining: t.TuplesRemaining,
		IndexPasses: t.IndexPasses, ElapsedSeconds: t.Elapsed.Seconds(), PagesPerSecond: t.PagesPerSecond,
		BytesRead: u.ReadBytes, BytesWritten: u.WriteBytes, WALBytes: u.WALBytes, WALFlushes: u.WALFlushes,
		WALRecords: u.WALRecords, WALFullPageImages: u.WALFPIs, RingDirtyEvictions: u.RingDirtyEvictions,
		BufferHits: u.Hits, BufferMisses: u.Misses, BuffersDirtied: u.Dirtied, SleptSeconds: ptr.To(t.Slept.Seconds()),
		CostRate: rateFrom(t.Rates.Cost), ReadRate: rateFrom(t.Rates.Read),
		WriteRate: rateFrom(t.Rates.Write), WALRate: rateFrom(t.Rates.WAL),
	}
}

// reportFrom converts a run report (nil = nothing done) to `vacuum --json`.
func reportFrom(rr *vacuum.BatchReport) runnerwire.Report {
	out := runnerwire.Report{Tables: []runnerwire.TableResult{}}
	if rr == nil {
		return out
	}
	for _, r := range rr.Tables {
		out.Tables = append(out.Tables, tableResultFrom(r))
	}
	out.Totals = totalsFrom(rr.Totals)
	return out
}

// progressFrom converts a progress snapshot to GET /progress.
func progressFrom(s vacuum.Progress) runnerwire.Progress {
	u := s.Usage
	p := runnerwire.Progress{
		Phase: wirePhase(s.Phase), Table: s.Table, TablesDone: int64(s.TablesDone), TablesTotal: int64(s.TablesTotal),
		PagesTotal: s.HeapBlocksTotal, PagesScanned: s.HeapBlocksScanned,
		PagesVacuumed: s.HeapBlocksVacuumed, IndexPasses: s.IndexPasses,
		DeadTuples: s.DeadTIDs, DeadTupleBytes: s.DeadTIDBytes, TuplesRemoved: s.TuplesRemoved,
		BytesRead: u.ReadBytes, BytesWritten: u.WriteBytes, WALBytes: u.WALBytes, WALFlushes: u.WALFlushes,
		BufferHits: u.Hits, BufferMisses: u.Misses, BuffersDirtied: u.Dirtied,
		SleptSeconds: ptr.To(s.Slept.Seconds()), ElapsedSeconds: s.Elapsed.Seconds(),
		PagesPerSecond: s.PagesPerSecond, ReadBytesPerSecond: s.ReadBytesPerSecond,
		WriteBytesPerSecond: s.WriteBytesPerSecond, WALBytesPerSecond: s.WALBytesPerSecond,
		Percent: s.Percent, Tables: []runnerwire.TableProgress{},
		ThrottleApplies: runnerwire.ThrottleAppliesImmediately,
	}
	for _, t := range s.Tables {
		p.Tables = append(p.Tables, runnerwire.TableProgress{Name: t.Table, Phase: wirePhase(t.Phase), Percent: t.Percent, TuplesRemoved: t.TuplesRemoved})
	}
	return p
}

// wirePhases maps each of the engine's phases to its wire name.
var wirePhases = [...]runnerwire.Phase{
	vacuum.PhaseInitializing:      runnerwire.PhaseInitializing,
	vacuum.PhaseScanningHeap:      runnerwire.PhaseScanningHeap,
	vacuum.PhaseVacuumingIndexes:  runnerwire.PhaseVacuumingIndexes,
	vacuum.PhaseVacuumingHeap:     runnerwire.PhaseVacuumingHeap,
	vacuum.PhaseCleaningUpIndexes: runnerwire.PhaseCleaningUpIndexes,
	vacuum.PhaseTruncatingHeap:    runnerwire.PhaseTruncatingHeap,
	vacuum.PhaseRewritingHeap:     runnerwire.PhaseRewritingHeap,
	vacuum.PhaseRebuildingIndexes: runnerwire.PhaseRebuildingIndexes,
	vacuum.PhaseDone:              runnerwire.PhaseDone,
}

// wirePhase is the wire name of the engine phase a progress snapshot names (by its String).
// A phase the engine adds without a wire name here is reported as initializing, and
// TestEveryEnginePhaseHasAWireName fails.
func wirePhase(engine string) runnerwire.Phase {
	for p, w := range wirePhases {
		if vacuum.Phase(p).String() == engine {
			return w
		}
	}
	return runnerwire.PhaseInitializing
}

// initialProgress is /progress before the run has started (opening, waiting for the lock).
func initialProgress(tables int, since time.Time) runnerwire.Progress {
	return runnerwire.Progress{Phase: runnerwire.PhaseInitializing, TablesTotal: int64(tables),
		ElapsedSeconds: time.Since(since).Seconds(), Tables: []runnerwire.TableProgress{},
		ThrottleApplies: runnerwire.ThrottleAppliesImmediately}
}
