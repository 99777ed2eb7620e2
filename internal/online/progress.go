package online

import (
	"context"
	"errors"
	"math"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/utils/ptr"

	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// lazyPhases maps pg_stat_progress_vacuum's phases to the runner's.
var lazyPhases = map[string]runnerwire.Phase{
	"initializing":             runnerwire.PhaseInitializing,
	"scanning heap":            runnerwire.PhaseScanningHeap,
	"vacuuming indexes":        runnerwire.PhaseVacuumingIndexes,
	"vacuuming heap":           runnerwire.PhaseVacuumingHeap,
	"cleaning up indexes":      runnerwire.PhaseCleaningUpIndexes,
	"truncating heap":          runnerwire.PhaseTruncatingHeap,
	"performing final cleanup": runnerwire.PhaseCleaningUpIndexes,
}

// fullPhases maps pg_stat_progress_cluster's phases to the runner's.
var fullPhases = map[string]runnerwire.Phase{
	"initializing":             runnerwire.PhaseInitializing,
	"seq scanning heap":        runnerwire.PhaseRewritingHeap,
	"index scanning heap":      runnerwire.PhaseRewritingHeap,
	"sorting tuples":           runnerwire.PhaseRewritingHeap,
	"writing new heap":         runnerwire.PhaseRewritingHeap,
	"swapping relation files":  runnerwire.PhaseRebuildingIndexes,
	"rebuilding index":         runnerwire.PhaseRebuildingIndexes,
	"performing final cleanup": runnerwire.PhaseRebuildingIndexes,
}

// begin marks st running on backend pid.
func (r *Run) begin(st *tableState, pid uint32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st.pid, st.running, st.began = pid, true, time.Now()
	st.blocksTotal = st.table.Bytes / max(r.block, 1)
	for i, s := range r.states {
		if s == st {
			r.started = i
		}
	}
}

// end records st's result from its notices and sizes.
func (r *Run) end(st *tableState, l runnerwire.Limits, notices []string, elapsed time.Duration, after int64, err error) {
	v := ParseVerbose(notices)
	blk := max(r.block, 1)
	before := st.table.Bytes / blk
	res := runnerwire.TableResult{
		Table: st.table.Qualified(), Mode: r.mode(), PagesTotal: before,
		ElapsedSeconds: elapsed.Seconds(), IndexPasses: v.IndexScans,
		BufferHits: v.Hits, BufferMisses: v.Misses, BuffersDirtied: v.Dirtied,
		BytesRead: v.Misses * blk, BytesWritten: v.Dirtied * blk,
		WALRecords: v.WALRecords, WALFullPageImages: v.WALFullPageImages, WALBytes: v.WALBytes,
		TuplesRemoved: v.TuplesRemoved, TuplesRemaining: v.TuplesRemaining,
		Indexes: []runnerwire.IndexResult{}, Notices: append([]string{}, notices...),
	}
	if r.opts.Full {
		res.PagesScanned = v.PagesScanned
		if err == nil {
			res.PagesRemaining = after / blk
			res.PagesRemoved = max(before-res.PagesRemaining, 0)
		}
	} else {
		res.PagesScanned, res.PagesRemoved, res.PagesRemaining = v.PagesScanned, v.PagesRemoved, v.PagesRemaining
	}
	if err == nil {
		res.Complete, res.BlockReached = true, res.PagesTotal
	}
	if err == nil && !v.Found && warned(notices) {
		// The server skipped the table with a warning (a role that may not vacuum it):
		// skipped, as vacuumdb reports it, with the warning in the notices.
		res.Skipped = true
	}
	for _, ix := range v.Indexes {
		res.Indexes = append(res.Indexes, runnerwire.IndexResult{Name: ix.Name, Pages: ix.Pages, EntriesRemoved: ix.EntriesRemoved})
	}
	if r.server.Kind == KindEngineServer {
		// The engine server counts its sleep: the table's VERBOSE says it at the end; a
		// table stopped before its notices keeps what the last poll read.
		slept := v.Slept
		if !v.SleptReported {
			r.mu.Lock()
			slept = st.slept
			r.mu.Unlock()
		}
		res.SleptSeconds = ptr.To(slept.Seconds())
	}
	secs := math.Max(elapsed.Seconds(), 1e-9)
	res.PagesPerSecond = float64(res.PagesScanned) / secs
	res.CostRate, res.ReadRate, res.WriteRate, res.WALRate = rates(l, secs,
		v.Hits*int64(l.PageHitCost)+v.Misses*int64(l.PageMissCost)+v.Dirtied*int64(l.PageDirtyCost), res.BytesRead, res.BytesWritten, res.WALBytes)
	r.mu.Lock()
	defer r.mu.Unlock()
	st.running = false
	st.result = res
	if a := st.adaptive; a != nil && r.between != nil {
		a.BoundSeconds[a.Binding] = elapsed.Seconds() // PostgreSQL: the whole table ran at its budget
	}
	if err == nil {
		st.done = true
		st.phase = runnerwire.PhaseDone
	}
}

// warned says whether a notice is a WARNING.
func warned(notices []string) bool {
	for _, n := range notices {
		if strings.HasPrefix(n, "WARNING:") {
			return true
		}
	}
	return false
}

// rates are the configured against achieved rates of a table or run.
func rates(l runnerwire.Limits, secs float64, cost, read, written, wal int64) (c, rd, w, wl runnerwire.Rate) {
	if l.CostDelay > 0 {
		c.Configured = float64(l.CostLimit) / l.CostDelay.Seconds()
	}
	c.Achieved = float64(cost) / secs
	rd.Achieved = float64(read) / secs
	w.Achieved = float64(written) / secs
	wl.Achieved = float64(wal) / secs
	return c, rd, w, wl
}

func (r *Run) mode() runnerwire.Mode {
	if r.opts.Full {
		return runnerwire.ModeFull
	}
	return runnerwire.ModeLazy
}

func skippedResult(t Table, full bool) runnerwire.TableResult {
	m := runnerwire.ModeLazy
	if full {
		m = runnerwire.ModeFull
	}
	return runnerwire.TableResult{Table: t.Qualified(), Mode: m, Skipped: true, Complete: true,
		Indexes: []runnerwire.IndexResult{}, Notices: []string{}}
}

// poll reads the progress view of the running VACUUMs (pg_stat_progress_vacuum for lazy
// runs, pg_stat_progress_cluster for FULL) into their states. A failed poll leaves the
// last figures; the vacuum itself is what matters.
func (r *Run) poll(ctx context.Context) {
	pids := r.runningPIDs()
	if len(pids) > 0 {
		ids := make([]int32, len(pids))
		for i, p := range pids {
			ids[i] = int32(p)
		}
		if rows, err := r.ctl.Query(ctx, r.progressQuery(), ids); err == nil {
			type row struct {
				pid                                    int32
				phase                                  string
				total, scanned, vacuumed, passes, dead int64
				sleptMS                                *int64
				adaptive                               adaptiveRow
			}
			got, err := pgx.CollectRows(rows, func(cr pgx.CollectableRow) (row, error) {
				var x row
				dest := append([]any{&x.pid, &x.phase, &x.total, &x.scanned, &x.vacuumed, &x.passes, &x.dead, &x.sleptMS},
					x.adaptive.dest()...)
				err := cr.Scan(dest...)
				return x, err
			})
			if err == nil {
				r.mu.Lock()
				for _, x := range got {
					for _, st := range r.states {
						if st.running && int32(st.pid) == x.pid {
							if ph, ok := r.phase(x.phase); ok {
								st.phase = ph
							}
							st.blocksTotal, st.blocksScanned, st.blocksVacuumed = x.total, x.scanned, x.vacuumed
							st.indexPasses, st.deadTuples = x.passes, x.dead
							if x.sleptMS != nil {
								st.slept = time.Duration(*x.sleptMS) * time.Millisecond
							}
							if a := x.adaptive.progress(); a != nil {
								st.adaptive = a
							}
						}
					}
				}
				r.mu.Unlock()
			}
		}
	}
	if fg := r.readForeground(ctx); fg != nil {
		r.mu.Lock()
		r.foreground = fg
		r.mu.Unlock()
	}
	if now, ok := r.readReplication(ctx); ok {
		r.noteReplication(now)
	}
	if r.opts.OnProgress != nil {
		r.opts.OnProgress(r.Progress())
	}
}

// foregroundQuery reads the engine server's row of all foreground statements. The runner's
// own sessions (application_name vacuum-runner) are not foreground, so reading it does not
// count itself.
const foregroundQuery = `SELECT window_seconds, count, p50_us, p99_us FROM vacuumops_statement_latency WHERE kind = 'all'`

// readForeground reads the foreground from the engine server's latency view; nil on
// PostgreSQL, which has no such view, and when the read fails (the last figures stay).
func (r *Run) readForeground(ctx context.Context) *runnerwire.Foreground {
	if r.server.Kind != KindEngineServer {
		return nil
	}
	var window int32
	fg := runnerwire.Foreground{}
	err := r.ctl.QueryRow(ctx, foregroundQuery).Scan(&window, &fg.Statements, &fg.P50Microseconds, &fg.P99Microseconds)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		// No foreground statement in the window: the view has no row.
		return &fg
	case err != nil:
		return nil
	}
	fg.WindowSeconds = int64(window)
	if window > 0 {
		fg.StatementsPerSecond = float64(fg.Statements) / float64(window)
	}
	return &fg
}

// phase maps a progress view's phase to the runner's; a phase this package does not know
// (a later PostgreSQL's) is not reported, the table keeps its last one.
func (r *Run) phase(p string) (runnerwire.Phase, bool) {
	m := lazyPhases
	if r.opts.Full {
		m = fullPhases
	}
	q, ok := m[p]
	return q, ok
}

// progressQuery selects pid, phase, heap blocks total/scanned/vacuumed, index passes, dead
// tuples and time slept (the engine server's lazy view; NULL elsewhere) of the given
// backends. heap_tuples_written is coalesced: the engine server, which counts blocks, not
// tuples, leaves it NULL, and a NULL would fail the row's scan.
func (r *Run) progressQuery() string {
	if r.opts.Full {
		return `SELECT pid, phase, heap_blks_total, heap_blks_scanned, coalesce(heap_tuples_written, 0),
			index_rebuild_count, 0::bigint, NULL::int8` + r.adaptiveColumns() + ` FROM pg_stat_progress_cluster WHERE pid = ANY($1)`
	}
	dead := "num_dead_tuples"
	if r.server.Major >= 17 {
		dead = "num_dead_item_ids"
	}
	slept := "NULL::int8"
	if r.server.Kind == KindEngineServer {
		slept = "time_slept_ms"
	}
	return `SELECT pid, phase, heap_blks_total, heap_blks_scanned, heap_blks_vacuumed,
		index_vacuum_count, ` + dead + `, ` + slept + r.adaptiveColumns() + ` FROM pg_stat_progress_vacuum WHERE pid = ANY($1)`
}

// adaptiveColumns are the engine server's adaptive columns of both progress views (NULL
// while no target was set), in runnerwire.AdaptiveBindings' order; NULLs elsewhere.
func (r *Run) adaptiveColumns() string {
	if r.server.Kind != KindEngineServer {
		return ", NULL::text, NULL::int4, NULL::int8, NULL::int8, NULL::int8, NULL::int8, NULL::int8"
	}
	return `, adaptive_binding, adaptive_budget_per_mille, adaptive_foreground_latency_ms,
		adaptive_replication_lag_ms, adaptive_ceiling_ms, adaptive_floor_ms, adaptive_hard_stop_ms`
}

// adaptiveRow is the adaptive columns of one progress row.
type adaptiveRow struct {
	binding *string
	budget  *int32
	bound   [5]*int64
}

func (a *adaptiveRow) dest() []any {
	out := []any{&a.binding, &a.budget}
	for i := range a.bound {
		out = append(out, &a.bound[i])
	}
	return out
}

func (a *adaptiveRow) progress() *runnerwire.AdaptiveProgress {
	if a.binding == nil || a.budget == nil {
		return nil
	}
	p := &runnerwire.AdaptiveProgress{Binding: *a.binding, BudgetPerMille: *a.budget, BoundSeconds: map[string]float64{}}
	for i, b := range runnerwire.AdaptiveBindings {
		if a.bound[i] != nil {
			p.BoundSeconds[b] = float64(*a.bound[i]) / 1000
		}
	}
	return p
}

// foldAdaptive is the run's adaptive progress over its tables: the binding and budget of
// the running table bound tightest (the lowest budget), the time bound summed over every
// table run so far; nil while no table ever had a target.
func foldAdaptive(states []*tableState) *runnerwire.AdaptiveProgress {
	var out *runnerwire.AdaptiveProgress
	for _, st := range states {
		a := st.adaptive
		if a == nil {
			continue
		}
		if out == nil {
			out = &runnerwire.AdaptiveProgress{Binding: a.Binding, BudgetPerMille: a.BudgetPerMille, BoundSeconds: map[string]float64{}}
		}
		if st.running && (a.BudgetPerMille < out.BudgetPerMille || out.Binding == "") {
			out.Binding, out.BudgetPerMille = a.Binding, a.BudgetPerMille
		}
		for b, s := range a.BoundSeconds {
			out.BoundSeconds[b] += s
		}
	}
	return out
}

func copyForeground(f *runnerwire.Foreground) *runnerwire.Foreground {
	if f == nil {
		return nil
	}
	c := *f
	return &c
}

// percent of one table: 100 when done, else the share of its heap scanned (at most 99).
func (st *tableState) percent() float64 {
	switch {
	case st.done || st.skipped:
		return 100
	case st.blocksTotal <= 0 || !st.running && st.blocksScanned == 0:
		return 0
	}
	return math.Min(99, 100*float64(st.blocksScanned)/float64(st.blocksTotal))
}

// Progress is a snapshot of the run for GET /progress and the progress bar.
func (r *Run) Progress() runnerwire.Progress {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := runnerwire.Progress{Phase: runnerwire.PhaseInitializing, TablesTotal: int64(len(r.states)),
		Tables: []runnerwire.TableProgress{}, ThrottleApplies: r.ThrottleApplies(),
		Foreground: copyForeground(r.foreground), ForegroundBaseline: copyForeground(r.baseline),
		Replication: copyReplication(r.replication)}
	p.ElapsedSeconds = r.elapsed().Seconds()
	if r.started >= 0 {
		p.Phase, p.Table = r.states[r.started].phase, r.states[r.started].table.Qualified()
	}
	var weight, weighted float64
	var slept float64
	for _, st := range r.states {
		w := math.Max(1, float64(st.table.Bytes))
		weight += w
		weighted += w * st.percent()
		if st.done {
			p.TablesDone++
		}
		if st.done || st.running {
			p.Tables = append(p.Tables, runnerwire.TableProgress{Name: st.table.Qualified(), Phase: st.phase,
				Percent: st.percent(), TuplesRemoved: st.result.TuplesRemoved})
		}
		if st.skipped {
			continue
		}
		if st.done {
			res := st.result
			p.PagesTotal += res.PagesTotal
			p.PagesScanned += res.PagesScanned
			p.PagesVacuumed += res.PagesScanned
			p.IndexPasses += res.IndexPasses
			p.TuplesRemoved += res.TuplesRemoved
			p.BytesRead += res.BytesRead
			p.BytesWritten += res.BytesWritten
			p.WALBytes += res.WALBytes
			p.BufferHits += res.BufferHits
			p.BufferMisses += res.BufferMisses
			p.BuffersDirtied += res.BuffersDirtied
			slept += ptr.Deref(res.SleptSeconds, 0)
			continue
		}
		slept += st.slept.Seconds()
		p.PagesTotal += st.blocksTotal
		p.PagesScanned += st.blocksScanned
		p.PagesVacuumed += st.blocksVacuumed
		p.IndexPasses += st.indexPasses
		p.DeadTuples += st.deadTuples
	}
	if weight > 0 {
		p.Percent = weighted / weight
	}
	if r.server.Kind == KindEngineServer {
		p.SleptSeconds = &slept
	}
	if r.between != nil {
		r.boundSoFar(time.Now())
	}
	p.Adaptive = foldAdaptive(r.states)
	if r.between != nil {
		p.Adaptive = r.between.fold(p.Adaptive)
	}
	if len(r.states) == 0 && !r.start.IsZero() {
		p.Percent = 100
	}
	if secs := p.ElapsedSeconds; secs > 0 {
		p.PagesPerSecond = float64(p.PagesScanned) / secs
		p.ReadBytesPerSecond = float64(p.BytesRead) / secs
		p.WriteBytesPerSecond = float64(p.BytesWritten) / secs
		p.WALBytesPerSecond = float64(p.WALBytes) / secs
	}
	return p
}

// Report is what the run has done so far: every table finished or skipped, and one that
// failed or was cancelled, in the order picked.
func (r *Run) Report() runnerwire.Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	rep := runnerwire.Report{Tables: []runnerwire.TableResult{}, Server: r.identity(), Replication: copyReplication(r.replication),
		Foreground: copyForeground(r.foreground), ForegroundBaseline: copyForeground(r.baseline)}
	t := &rep.Totals
	for _, st := range r.states {
		if !st.done && st.result.Table == "" {
			continue
		}
		res := st.result
		rep.Tables = append(rep.Tables, res)
		if res.Skipped {
			t.TablesSkipped++
			continue
		}
		if st.done {
			t.TablesVacuumed++
		}
		t.PagesTotal += res.PagesTotal
		t.PagesScanned += res.PagesScanned
		t.PagesRemoved += res.PagesRemoved
		t.PagesRemaining += res.PagesRemaining
		t.TuplesRemoved += res.TuplesRemoved
		t.TuplesRemaining += res.TuplesRemaining
		t.IndexPasses += res.IndexPasses
		t.BytesRead += res.BytesRead
		t.BytesWritten += res.BytesWritten
		t.WALBytes += res.WALBytes
		t.WALRecords += res.WALRecords
		t.WALFullPageImages += res.WALFullPageImages
		t.BufferHits += res.BufferHits
		t.BufferMisses += res.BufferMisses
		t.BuffersDirtied += res.BuffersDirtied
		if res.SleptSeconds != nil {
			t.SleptSeconds = ptr.To(ptr.Deref(t.SleptSeconds, 0) + *res.SleptSeconds)
		}
	}
	if r.server.Kind == KindEngineServer && t.SleptSeconds == nil {
		t.SleptSeconds = ptr.To(0.0) // nothing vacuumed yet: it slept for nothing
	}
	t.ElapsedSeconds = r.elapsed().Seconds()
	secs := math.Max(t.ElapsedSeconds, 1e-9)
	t.PagesPerSecond = float64(t.PagesScanned) / secs
	l := r.throttle
	t.CostRate, t.ReadRate, t.WriteRate, t.WALRate = rates(l, secs,
		t.BufferHits*int64(l.PageHitCost)+t.BufferMisses*int64(l.PageMissCost)+t.BuffersDirtied*int64(l.PageDirtyCost),
		t.BytesRead, t.BytesWritten, t.WALBytes)
	return rep
}

// elapsed is the run's wall time so far, or in all once it finished (0 before it started).
// r.mu is held.
func (r *Run) elapsed() time.Duration {
	switch {
	case r.start.IsZero():
		return 0
	case !r.finish.IsZero():
		return r.finish.Sub(r.start)
	}
	return time.Since(r.start)
}

// identity is the server for reports: its system identifier is the one the run checked
// (empty when it was started without one).
func (r *Run) identity() *runnerwire.ServerIdentity {
	return &runnerwire.ServerIdentity{Kind: string(r.server.Kind), Version: r.server.Version,
		SystemIdentifier: r.opts.SystemIdentifier}
}
