package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"gonum.org/v1/plot/plotter"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum/throttle"
	vacuumrunner "github.com/vacuumops/vacuum-operator/internal/runner"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// Experiment 9: the cost of resuming. One throttled lazy vacuum of a table, uninterrupted,
// against the same vacuum split over N maintenance windows of 1/N of the uninterrupted time
// each, each window's vacuum stopped at its end and the next resumed from the recorded
// position, until the table is done (the blocks a stop redoes make more than N windows
// necessary). Each window's dead-items cycles are sized as the runner sizes them
// (vacuumrunner.WindowCycleBlocks), for each number of cycles per window in WinCycles.

const winTable = "w"

// winLabel is the label of a row: the uninterrupted vacuum, or the cycles per window.
func winLabel(cycles int) string {
	if cycles == 0 {
		return "uninterrupted"
	}
	return fmt.Sprintf("%d cycles per window", cycles)
}

// winRun is one whole vacuum of experiment 9, over all the windows it took.
type winRun struct {
	windows                     int
	heap, index, passes, tuples int64
	elapsed                     time.Duration
	complete                    bool // false: winStall windows in a row kept no work
}

// winStall is how many windows in a row that keep no work (the position does not move: a
// window too short for one pass over the indexes) end a split as incomplete.
const winStall = 3

func runWindows(ctx context.Context, r *runner) (*Section, error) {
	sz := r.sz
	opts := r.engineOpts(sz.WinPoolBytes, sz.WALSegmentSize)
	tmpl, err := r.template("windows", opts, []TableSpec{{Name: winTable, Rows: sz.WinRows, Payload: sz.WinPayload, DeadPct: 20, Seed: 9}})
	if err != nil {
		return nil, err
	}
	limits := runnerwire.Limits{CostDelay: sz.WinCostDelay, CostLimit: sz.WinCostLimit, PageHitCost: 1, PageMissCost: 2, PageDirtyCost: 20}
	sec := &Section{Title: windowsText.title, Claim: windowsText.claim, Setup: windowsSetup(sz, tmpl, limits)}
	tb := NewTable("exp9_windows", 1, "split", "windows_asked", "window_s", "complete", "windows_used", "heap_pages", "index_pages",
		"index_passes", "seconds", "tuples_removed")
	sec.Tables = append(sec.Tables, tb)
	whole, err := r.windowsOnce(ctx, tmpl, opts, limits, 0, 0)
	if err != nil {
		return nil, fmt.Errorf("uninterrupted: %w", err)
	}
	add := func(cycles, n int, window time.Duration, m winRun) error {
		r.logf("  %s, %d windows of %s: %d windows used, %d heap + %d index pages, %d index passes, %.2f s",
			winLabel(cycles), n, window.Round(time.Millisecond), m.windows, m.heap, m.index, m.passes, m.elapsed.Seconds())
		return tb.Add([]string{winLabel(cycles)}, float64(n), window.Seconds(), b2f(m.complete), float64(m.windows), float64(m.heap),
			float64(m.index), float64(m.passes), m.elapsed.Seconds(), float64(m.tuples))
	}
	if err := add(0, 1, whole.elapsed, whole); err != nil {
		return nil, err
	}
	for _, cycles := range sz.WinCycles {
		for _, n := range sz.WinSplits {
			if n <= 1 {
				continue
			}
			window := whole.elapsed / time.Duration(n)
			m, err := r.windowsOnce(ctx, tmpl, opts, limits, window, cycles)
			if err != nil {
				return nil, fmt.Errorf("%s, %d windows: %w", winLabel(cycles), n, err)
			}
			if m.complete && m.tuples != whole.tuples {
				return nil, fmt.Errorf("%s, %d windows removed %d tuples, the uninterrupted vacuum %d", winLabel(cycles), n, m.tuples, whole.tuples)
			}
			if err := add(cycles, n, window, m); err != nil {
				return nil, err
			}
		}
	}
	if err := r.windowsPlots(sec, tb); err != nil {
		return nil, err
	}
	sec.Findings = []string{sentence("Every split that completed removed exactly the %d dead tuples the uninterrupted vacuum "+
		"removed. A split stops as incomplete after %d windows in a row that kept no work (the position did not move: "+
		"the window was too short for one pass over the indexes).", whole.tuples, winStall)}
	sec.Caveats = []string{"Each window reopens the data directory (a cold buffer pool), as a runner pod does; its " +
		"window starts once the directory is open, and the seconds count the opening too. Windows are 1/N of the " +
		"uninterrupted time, so any work a stop redoes shows as windows beyond N."}
	return sec, nil
}

// windowsOnce vacuums a fresh copy of tmpl: in one go (window 0), or in windows of window
// each, its cycles sized for cycles per window, until the table is complete.
func (r *runner) windowsOnce(ctx context.Context, tmpl string, opts engine.Options, limits runnerwire.Limits,
	window time.Duration, cycles int) (winRun, error) {
	var m winRun
	db, dir, err := r.fresh(tmpl, opts)
	if err != nil {
		return m, err
	}
	if err := db.Close(); err != nil {
		return m, err
	}
	var reached int64
	for stalled := 0; stalled < winStall; {
		start := time.Now()
		rep, err := r.windowVacuum(ctx, dir, opts, limits, window, cycles, m.windows > 0)
		m.elapsed += time.Since(start)
		if err != nil {
			return m, err
		}
		m.windows++
		m.heap += rep.PagesScanned
		m.passes += rep.IndexPasses
		m.tuples += rep.TuplesRemoved
		for _, ix := range rep.Indexes {
			m.index += ix.PagesScanned
		}
		if rep.Complete {
			m.complete = true
			break
		}
		stalled++
		if rep.BlockReached > reached {
			reached, stalled = rep.BlockReached, 0
		}
	}
	db, err = engine.Open(dir, opts)
	if err != nil {
		return m, err
	}
	return m, finish(db, dir)
}

// windowVacuum is one window: open dir, vacuum the table until the window's end (none when
// window is 0), close.
func (r *runner) windowVacuum(ctx context.Context, dir string, opts engine.Options, limits runnerwire.Limits,
	window time.Duration, cycles int, resume bool) (*vacuum.Report, error) {
	db, err := engine.Open(dir, opts)
	if err != nil {
		return nil, err
	}
	// The window starts once the directory is open (a pod's start is not the vacuum's).
	wctx, cancel := context.WithCancel(ctx)
	if window > 0 {
		wctx, cancel = context.WithTimeout(ctx, window)
	}
	defer cancel()
	vo := vacuum.DefaultOptions()
	s := throttle.Settings(limits)
	vo.Throttle, vo.Resume = &s, resume
	if window > 0 {
		if d, ok := wctx.Deadline(); ok {
			vo.CycleBlocks = vacuumrunner.WindowCycleBlocks(limits, time.Until(d), cycles)
		}
	}
	b, err := vacuum.NewBatch(vo)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	rr, verr := db.VacuumBatch(wctx, b, []string{winTable})
	if cerr := db.Close(); verr == nil || wctx.Err() != nil && ctx.Err() == nil {
		verr = cerr
	}
	if verr != nil {
		return nil, verr
	}
	if rr == nil || len(rr.Tables) != 1 {
		if wctx.Err() != nil && ctx.Err() == nil {
			return &vacuum.Report{}, nil // the window closed before the table was reached: nothing done, nothing lost
		}
		return nil, fmt.Errorf("vacuum of %s reported no table", winTable)
	}
	return rr.Tables[0], nil
}

func windowsSetup(sz Sizes, tmpl string, l runnerwire.Limits) []string {
	return []string{
		sentence("table: %d rows of %d-byte payload, two indexes, 20 %% dead: %s on disk; buffer pool %s",
			sz.WinRows, sz.WinPayload, mib(dirBytes(tmpl)), mib(sz.WinPoolBytes)),
		sentence("vacuum: lazy, cost throttle %d per %s (page costs 1/2/20), as a runner pod runs it",
			l.CostLimit, l.CostDelay),
		sentence("split: windows of 1/N of the uninterrupted vacuum's time for N in %v, each stopped at its end "+
			"and the next resumed from the recorded position until the table is done; cycles sized by the "+
			"runner's rule for %v cycles per window (the runner uses %d)", sz.WinSplits, sz.WinCycles, vacuumrunner.WindowCycles),
		"pages: heap pages scanned and index pages visited by bulk-delete passes, summed over all windows",
	}
}

func (r *runner) windowsPlots(sec *Section, tb *Table) error {
	c := &cells{ts: tablesOf([]*Table{tb})}
	const t = "exp9_windows"
	whole := c.row(t, winLabel(0))
	series := func(label, col string) plotter.XYs {
		xy := plotter.XYs{{X: 1, Y: c.num(t, whole, col)}}
		for _, row := range c.rows(t, label) {
			xy = append(xy, plotter.XY{X: c.num(t, row, "windows_asked"), Y: c.num(t, row, col)})
		}
		return xy
	}
	var pages, secs []Series
	for _, cy := range r.sz.WinCycles {
		pages = append(pages, Series{Name: winLabel(cy) + ": heap + index pages", XY: sumXY(series(winLabel(cy), "heap_pages"), series(winLabel(cy), "index_pages"))})
		secs = append(secs, Series{Name: winLabel(cy), XY: series(winLabel(cy), "seconds")})
	}
	if c.err != nil {
		return c.err
	}
	for _, lp := range []LinePlot{
		{File: "exp9_pages_vs_windows.png", Title: "Pages scanned by a vacuum split over N windows", X: "windows (N)", Y: "heap + index pages", Series: pages},
		{File: "exp9_time_vs_windows.png", Title: "Time of a vacuum split over N windows", X: "windows (N)", Y: "seconds (all windows)", Series: secs},
	} {
		f, err := lp.Save(r.cfg.OutDir)
		if err != nil {
			return err
		}
		sec.Plots = append(sec.Plots, baseName(f))
	}
	return nil
}

// sumXY adds the Y of two series with the same X.
func sumXY(a, b plotter.XYs) plotter.XYs {
	out := make(plotter.XYs, len(a))
	for i := range a {
		out[i] = plotter.XY{X: a[i].X, Y: a[i].Y + b[i].Y}
	}
	return out
}

func windowsHeadline(ts tables) (string, error) {
	c := &cells{ts: ts}
	const t = "exp9_windows"
	whole := c.row(t, winLabel(0))
	if c.err != nil {
		return "", c.err
	}
	wp := c.num(t, whole, "heap_pages") + c.num(t, whole, "index_pages")
	ws := c.num(t, whole, "seconds")
	s := sentence("One uninterrupted vacuum: %.0f heap + %.0f index pages in %.2f s.",
		c.num(t, whole, "heap_pages"), c.num(t, whole, "index_pages"), ws)
	var labels []string
	byLabel := map[string][][]string{}
	for _, row := range c.rows(t, "") {
		if row[0] == winLabel(0) {
			continue
		}
		if _, ok := byLabel[row[0]]; !ok {
			labels = append(labels, row[0])
		}
		byLabel[row[0]] = append(byLabel[row[0]], row)
	}
	for _, label := range labels {
		var parts []string
		for _, row := range byLabel[label] {
			p := c.num(t, row, "heap_pages") + c.num(t, row, "index_pages")
			if c.num(t, row, "complete") == 0 {
				parts = append(parts, sentence("%.0f windows: not complete after %.0f windows (the last ones kept no work)",
					c.num(t, row, "windows_asked"), c.num(t, row, "windows_used")))
				continue
			}
			parts = append(parts, sentence("%.0f windows: %.2fx the pages, %.2fx the time, %.0f windows used",
				c.num(t, row, "windows_asked"), p/wp, c.num(t, row, "seconds")/ws, c.num(t, row, "windows_used")))
		}
		s += sentence(" With %s: %s.", label, strings.Join(parts, "; "))
	}
	return s, c.err
}

var windowsText = struct{ title, claim string }{
	title: "A vacuum split over maintenance windows",
	claim: "PostgreSQL starts a cancelled VACUUM again from block 0; here a vacuum stopped at a " +
		"window's end resumes where it stopped. What resuming costs: the pages a split vacuum scans in all " +
		"and the time it takes, against one uninterrupted vacuum of the same table.",
}
