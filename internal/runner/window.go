package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// This file is a run's window: RunSpec.StopAt (--stop-after) stops every table's vacuum at
// its next delay point and the run ends with exit 0, its unfinished tables complete false;
// a VACUUM FULL that would not fit in the time left is not started.

// errWindowClosed is the cause of a run's context when StopAt stopped it.
var errWindowClosed = errors.New("stopped at the window's end")

// windowContext returns ctx, stopped at stopAt (with cause errWindowClosed) when it is set.
func windowContext(ctx context.Context, stopAt time.Time) (context.Context, context.CancelFunc) {
	if stopAt.IsZero() {
		return context.WithCancel(ctx)
	}
	return context.WithDeadlineCause(ctx, stopAt, errWindowClosed)
}

// windowClosed reports whether ctx, made by windowContext from parent, was stopped by its
// window rather than by parent (a signal) or an error.
func windowClosed(parent, ctx context.Context) bool {
	return parent.Err() == nil && errors.Is(context.Cause(ctx), errWindowClosed)
}

// fullPagesPerSecond is how many pages per second limits l let a VACUUM FULL process: each
// page is read (a miss) and written again (dirtied), and the byte-rate limits count one page
// each way. +Inf when nothing limits it.
func fullPagesPerSecond(l runnerwire.Limits) float64 {
	rate := math.Inf(1)
	if per := l.PageMissCost + l.PageDirtyCost; l.CostDelay > 0 && per > 0 {
		rate = min(rate, float64(l.CostLimit)/l.CostDelay.Seconds()/float64(per))
	}
	if l.MaxReadBytesPerSecond > 0 {
		rate = min(rate, float64(l.MaxReadBytesPerSecond)/page.Size)
	}
	if l.MaxWriteBytesPerSecond > 0 {
		rate = min(rate, float64(l.MaxWriteBytesPerSecond)/page.Size)
	}
	return rate
}

// WindowCycles is how many dead-items cycles a windowed run sizes its cycles for: each is
// 1/WindowCycles of the heap blocks its throttle lets it scan (and dirty) in the time left,
// so a stop loses at most about that share of the window's work, at the cost of one pass
// over every index per cycle.
const WindowCycles = 2

// windowCycleBlocks is the vacuum.Options.CycleBlocks of a run that stops at stopAt (0,
// memory decides, without a window or a limit).
func windowCycleBlocks(l runnerwire.Limits, stopAt, now time.Time) int64 {
	if stopAt.IsZero() {
		return 0
	}
	return WindowCycleBlocks(l, stopAt.Sub(now), WindowCycles)
}

// WindowCycleBlocks is the cycle length, in heap blocks, of a vacuum under limits l with
// left to go, sized for cycles cycles: the blocks l lets it scan in left, over cycles (at
// least 1; 0 when nothing limits it). Bench experiment 9 measures it for several cycles.
func WindowCycleBlocks(l runnerwire.Limits, left time.Duration, cycles int) int64 {
	rate := fullPagesPerSecond(l)
	if math.IsInf(rate, 1) || cycles <= 0 {
		return 0
	}
	return max(1, int64(rate*left.Seconds()/float64(cycles)))
}

// fullEstimate is how long a VACUUM FULL of pages pages takes: the table's pages divided by
// the rate the policy's last complete FULL achieved (RunSpec fullPagesPerSecond) when there
// is one, else by the pages per second the run's limits and the table's own allow.
func fullEstimate(r runnerwire.Resolved, table string, pages int64) time.Duration {
	rate := min(fullPagesPerSecond(r.Throttle), fullPagesPerSecond(r.LimitsFor(table)))
	if r.FullPagesPerSecond > 0 {
		rate = float64(r.FullPagesPerSecond)
	}
	if math.IsInf(rate, 1) || pages <= 0 {
		return 0
	}
	return time.Duration(float64(pages) / rate * float64(time.Second))
}

// fullsThatFit returns the longest prefix of tables whose VACUUM FULLs, one after the other
// under the run's one budget, are estimated to end before stopAt, and a message naming the
// first table refused ("" when all fit).
func fullsThatFit(db *engine.DB, r runnerwire.Resolved, tables []string, now time.Time) ([]string, string, error) {
	left := r.StopAt.Sub(now)
	var sum time.Duration
	for i, name := range tables {
		pages, err := db.TablePages(name)
		if err != nil {
			return nil, "", err
		}
		est := fullEstimate(r, name, pages)
		if sum+est > left {
			return tables[:i], fmt.Sprintf("VACUUM FULL of %q (%d pages) is estimated at %s, more than the %s left in the window",
				name, pages, (sum + est).Round(time.Second), left.Round(time.Second)), nil
		}
		sum += est
	}
	return tables, "", nil
}

// withUnreached lists in rep, after the tables it reports, every table of the run it does not
// report (not started before the stop), complete false at block 0, or with resume, where its
// saved position stands (a resume from a finished position has nothing to do: complete).
func withUnreached(db *engine.DB, rep runnerwire.Report, tables []string, mode runnerwire.Mode, resume bool) (runnerwire.Report, error) {
	seen := map[string]bool{}
	for _, t := range rep.Tables {
		seen[t.Table] = true
	}
	for _, name := range tables {
		if seen[name] {
			continue
		}
		t := runnerwire.TableResult{Table: name, Mode: mode, Indexes: []runnerwire.IndexResult{}, Notices: []string{}}
		if resume && mode == runnerwire.ModeLazy {
			pos, err := db.VacuumPosition(name)
			if err != nil {
				return rep, fmt.Errorf("position of %q, not reached before the stop: %w", name, err)
			}
			if pos.Found {
				t.BlockReached, t.ResumedFromBlock, t.PagesTotal = int64(pos.Block), int64(pos.Block), int64(pos.Blocks)
				t.Complete = pos.Finished
			}
		}
		rep.Tables = append(rep.Tables, t)
	}
	return rep, nil
}

// noteResume tells w about each table whose saved position was not trusted.
func noteResume(w io.Writer, rr *vacuum.BatchReport) {
	if rr == nil {
		return
	}
	for _, t := range rr.Tables {
		if t.ResumeUntrusted != "" {
			_, _ = fmt.Fprintf(w, "vacuum-runner: %q starts at block 0: its saved position is not used: %s\n", t.Table, t.ResumeUntrusted)
		}
		if t.PagesLeftBehind > 0 {
			_, _ = fmt.Fprintf(w, "vacuum-runner: %q resumed at block %d; %d pages below it are not all-visible (changed since, or not yet removable then), left for the next vacuum without --resume\n",
				t.Table, t.ResumedFromBlock, t.PagesLeftBehind)
		}
	}
}

// vacuumWindowed vacuums tables of db within r's window (if any): a FULL that does not fit is
// not started, and a stop at StopAt is not an error. It returns the report (every table of
// the run listed) and the run's error.
func vacuumWindowed(ctx context.Context, db *engine.DB, run *vacuum.Batch, r runnerwire.Resolved, tables []string,
	stderr io.Writer) (runnerwire.Report, error) {
	wctx, cancel := windowContext(ctx, r.StopAt)
	defer cancel()
	todo, refused := tables, ""
	if r.Mode == runnerwire.ModeFull && !r.StopAt.IsZero() {
		var err error
		if todo, refused, err = fullsThatFit(db, r, tables, time.Now()); err != nil {
			return reportFrom(nil), err
		}
	}
	var rr *vacuum.BatchReport
	var err error
	if len(todo) > 0 {
		rr, err = db.VacuumBatch(wctx, run, todo)
	}
	if rr == nil {
		rr = run.Report()
	}
	noteResume(stderr, rr)
	rep, uerr := withUnreached(db, reportFrom(rr), tables, r.Mode, r.Resume)
	switch {
	case err != nil && windowClosed(ctx, wctx):
		rep.StopReason, err = runnerwire.StopReasonWindowClosed, nil
	case err == nil && refused != "":
		_, _ = fmt.Fprintf(stderr, "vacuum-runner: %s: not started (WindowTooShort)\n", refused)
		rep.StopReason = runnerwire.StopReasonWindowTooShort
	}
	if err == nil {
		err = uerr
	}
	return rep, err
}
