package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot/plotter"

	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum/throttle"
)

// parMode is one way of running experiment 2: a shared budget, or none.
type parMode struct {
	name     string
	throttle func(Sizes) *throttle.Settings
}

var parModes = []parMode{
	{"budget", func(sz Sizes) *throttle.Settings { return costSettings(sz.CostLimit, sz.ParCostDelay) }},
	{"unthrottled", func(Sizes) *throttle.Settings { return &throttle.Settings{} }},
}

// runParallel is experiment 2: ParTables equal tables vacuumed with
// parallelism 1, 2, 4, 8, under one shared budget and unthrottled.
func runParallel(ctx context.Context, r *runner) (*Section, error) {
	sz := r.sz
	opts := r.engineOpts(sz.ParPoolBytes, sz.WALSegmentSize)
	var specs []TableSpec
	var names []string
	for i := range sz.ParTables {
		n := fmt.Sprintf("p%d", i)
		names = append(names, n)
		specs = append(specs, TableSpec{Name: n, Rows: sz.ParRows, Payload: sz.ParPayload, DeadPct: sz.ParDeadPct, Seed: int64(100 + i)})
	}
	tmpl, err := r.template("par", opts, specs)
	if err != nil {
		return nil, err
	}
	sec := &Section{Title: parText.title, Claim: parText.claim, Setup: parSetup(sz, tmpl)}
	tb := NewTable("exp2_parallel", 1, "mode", "parallelism", "seconds", "heap_mb_per_s", "read_mb_per_s",
		"speedup", "cost_per_s", "limit_cost_per_s", "slept_s", "cpu_cores_used")
	sec.Tables = append(sec.Tables, tb)
	for _, mode := range parModes {
		var first float64
		for _, p := range sz.Parallelisms {
			vo := vacuum.DefaultOptions()
			vo.Parallelism = p
			vo.IndexWorkers = sz.ParIndexWorks
			vo.RingSize = sz.ParRingBytes
			vo.Throttle = mode.throttle(sz)
			m, err := r.parallelOnce(ctx, tmpl, names, vo)
			if err != nil {
				return nil, fmt.Errorf("%s parallelism %d: %w", mode.name, p, err)
			}
			if first == 0 {
				first = m.secs
			}
			if err := tb.Add([]string{mode.name}, float64(p), m.secs, m.heapMB, m.readMB, first/m.secs,
				m.cost, vo.Throttle.Rate(throttle.Cost), m.slept, m.cores); err != nil {
				return nil, err
			}
			r.logf("  %s parallelism %d: %.2f s, %.1f MB/s heap, %.1f MB/s read", mode.name, p, m.secs, m.heapMB, m.readMB)
		}
	}
	if err := r.parPlots(sec, tb); err != nil {
		return nil, err
	}
	sec.Rules, sec.Verdict = parConclusions(tb, r.probe)
	sec.Caveats = parCaveats()
	return sec, nil
}

// parRun is what one run of experiment 2 measured.
type parRun struct {
	secs, heapMB, readMB, cost, slept, cores float64
}

func (r *runner) parallelOnce(ctx context.Context, tmpl string, names []string, vo vacuum.Options) (parRun, error) {
	var m parRun
	db, dir, err := r.fresh(tmpl, r.engineOpts(r.sz.ParPoolBytes, r.sz.WALSegmentSize))
	if err != nil {
		return m, err
	}
	batch, err := vacuum.NewBatch(vo)
	if err != nil {
		return m, errors.Join(err, finish(db, dir))
	}
	start, cpu0 := time.Now(), cpuTime()
	rr, err := db.VacuumBatch(ctx, batch, names)
	wall, cpu := time.Since(start), cpuTime()-cpu0
	if ferr := finish(db, dir); err == nil {
		err = ferr
	}
	if err != nil {
		return m, err
	}
	var pages, read, cost int64
	var slept time.Duration
	for _, t := range rr.Tables {
		pages += t.PagesScanned
		read += t.Usage.ReadBytes
		cost += t.Usage.Hits + 2*t.Usage.Misses + 20*t.Usage.Dirtied
		slept += t.Slept
	}
	m.secs = wall.Seconds()
	m.heapMB = pagesMiB(pages) * (1 << 20) / 1e6 / m.secs
	m.readMB = float64(read) / 1e6 / m.secs
	m.cost = float64(cost) / m.secs
	m.slept = slept.Seconds()
	m.cores = cpu.Seconds() / m.secs
	return m, nil
}

func parSetup(sz Sizes, tmpl string) []string {
	budget := costSettings(sz.CostLimit, sz.ParCostDelay)
	return []string{
		sentence("%d equal tables of %d rows (%d-byte payload, two indexes, %.0f %% dead), %s on disk in all",
			sz.ParTables, sz.ParRows, sz.ParPayload, sz.ParDeadPct, mib(dirBytes(tmpl))),
		sentence("buffer pool %s; ring %s per worker; one index worker per table", mib(sz.ParPoolBytes), mib(sz.ParRingBytes)),
		sentence("parallelism %v; \"budget\": one cost budget shared by every worker of the run, limit %d per %s "+
			"(%.0f cost units/s); \"unthrottled\": no limit",
			sz.Parallelisms, sz.CostLimit, sz.ParCostDelay, budget.Rate(throttle.Cost)),
		"MB/s = heap pages scanned x 8 KiB / wall time of the whole run; read MB/s = bytes read from relation " +
			"files (heap and indexes) / wall time",
	}
}

func (r *runner) parPlots(sec *Section, tb *Table) error {
	c := &cells{ts: tablesOf([]*Table{tb})}
	const t = "exp2_parallel"
	series := func(mode, col string) plotter.XYs {
		var xy plotter.XYs
		for _, row := range c.rows(t, mode) {
			xy = append(xy, plotter.XY{X: c.num(t, row, "parallelism"), Y: c.num(t, row, col)})
		}
		return xy
	}
	n := r.sz.ParTables
	for _, lp := range []LinePlot{
		{File: "exp2_time_vs_parallelism.png", Title: fmt.Sprintf("%d tables: total vacuum time", n),
			X: "tables vacuumed at once", Y: "seconds",
			Series: []Series{{Name: "one shared budget", XY: series("budget", "seconds")},
				{Name: "unthrottled", XY: series("unthrottled", "seconds")}}},
		{File: "exp2_mbps_vs_parallelism.png", Title: fmt.Sprintf("%d tables: heap MB/s", n),
			X: "tables vacuumed at once", Y: "MB/s of heap scanned",
			Series: []Series{{Name: "one shared budget", XY: series("budget", "heap_mb_per_s")},
				{Name: "unthrottled", XY: series("unthrottled", "heap_mb_per_s")}}},
	} {
		if c.err != nil {
			return c.err
		}
		f, err := lp.Save(r.cfg.OutDir)
		if err != nil {
			return err
		}
		sec.Plots = append(sec.Plots, baseName(f))
	}
	return nil
}

// parFastest is the unthrottled row with the shortest time.
func parFastest(c *cells) []string {
	const t = "exp2_parallel"
	var best []string
	for _, row := range c.rows(t, "unthrottled") {
		if best == nil || c.num(t, row, "seconds") < c.num(t, best, "seconds") {
			best = row
		}
	}
	return best
}

func parallelHeadline(ts tables) (string, error) {
	c := &cells{ts: ts}
	const t = "exp2_parallel"
	un, bud := c.rows(t, "unthrottled"), c.rows(t, "budget")
	best := parFastest(c)
	if c.err != nil {
		return "", c.err
	}
	one := un[0]
	s := sentence("Unthrottled: %.2f s one table at a time (%.1f MB/s), %.2f s at parallelism %.0f (%.1f MB/s): "+
		"%.2fx (the field report: 4x).",
		c.num(t, one, "seconds"), c.num(t, one, "heap_mb_per_s"), c.num(t, best, "seconds"),
		c.num(t, best, "parallelism"), c.num(t, best, "heap_mb_per_s"),
		c.num(t, one, "seconds")/c.num(t, best, "seconds"))
	lo, hi := math.Inf(1), 0.0
	for _, row := range bud {
		lo, hi = math.Min(lo, c.num(t, row, "cost_per_s")), math.Max(hi, c.num(t, row, "cost_per_s"))
	}
	rate, b0, bn := c.num(t, bud[0], "limit_cost_per_s"), bud[0], bud[len(bud)-1]
	s += sentence(" Under one shared budget of %.0f cost units/s: %.2f s at parallelism %.0f and %.2f s at %.0f, "+
		"a total cost rate of %.0f to %.0f units/s (%.2f to %.2f of the budget).",
		rate, c.num(t, b0, "seconds"), c.num(t, b0, "parallelism"), c.num(t, bn, "seconds"),
		c.num(t, bn, "parallelism"), lo, hi, lo/rate, hi/rate)
	return s, c.err
}

// parConclusions decides what limited the parallel runs and whether the
// field report's 4x was reproduced.
func parConclusions(tb *Table, pr Probe) ([]Rule, *Verdict) {
	c := &cells{ts: tablesOf([]*Table{tb})}
	const t = "exp2_parallel"
	un, bud := c.rows(t, "unthrottled"), c.rows(t, "budget")
	best := parFastest(c)
	if c.err != nil {
		return nil, nil
	}
	speedup := c.num(t, un[0], "seconds") / c.num(t, best, "seconds")
	last := un[len(un)-1]
	cores, read := c.num(t, last, "cpu_cores_used"), c.num(t, last, "read_mb_per_s")
	n := float64(runtime.NumCPU())
	load, _ := strconv.ParseFloat(strings.Fields(LoadAvg() + " ?")[0], 64)
	hi := 0.0
	for _, row := range bud {
		hi = math.Max(hi, c.num(t, row, "cost_per_s")/c.num(t, row, "limit_cost_per_s"))
	}
	rules := []Rule{
		{
			Statement: "the field report's 4x is reproduced when the fastest parallelism is at least 3.2x " +
				"(80 % of 4x) faster than one table at a time",
			Holds: speedup >= 3.2,
			Then:  sentence("Reproduced: %.2fx.", speedup),
			Else:  sentence("Not reproduced: %.2fx.", speedup),
		},
		{
			Statement: sentence("the CPU limited the last unthrottled run when the process used at least 80 %% of "+
				"the machine's %.0f cores", n),
			Holds: cores >= 0.8*n,
			Then:  sentence("The CPU decided: the process used %.2f of %.0f cores.", cores, n),
			Else:  sentence("Not the CPU alone: the process used %.2f of %.0f cores.", cores, n),
		},
		{
			Statement: "the disk limited it when it read at least 80 % of the probe's one-reader rate in " +
				"128 KiB direct reads",
			Holds: read >= 0.8*pr.Read128KMBps,
			Then:  sentence("The disk decided: %.1f MB/s read against the probe's %.1f MB/s.", read, pr.Read128KMBps),
			Else:  sentence("Not the disk: %.1f MB/s read against the probe's %.1f MB/s.", read, pr.Read128KMBps),
		},
		{
			Statement: "other work limited it when the 1-minute load average exceeded the core count",
			Holds:     load > n,
			Then: sentence("Other work was running: load average %.1f on %.0f cores, so each extra worker also "+
				"won a larger share of the CPU from it.", load, n),
			Else: sentence("Load average %.1f on %.0f cores.", load, n),
		},
		{
			Statement: "one shared budget holds when no parallelism's total cost rate exceeds it by more than 5 %",
			Holds:     hi <= 1.05,
			Then:      "More workers never raised the run's total rate above its budget.",
			Else:      sentence("The budget was exceeded: up to %.2f of it.", hi),
		},
	}
	v := &Verdict{Field: "4x at parallelism 8", Run: sentence("%.2fx", speedup), Outcome: NotReproduced}
	if rules[0].Holds {
		v.Outcome = Reproduced
	} else {
		v.Why = sentence("This machine has %.0f cores and one virtual disk: the field report's 4x came from "+
			"many spindles. %s %s", n, rules[1].Conclusion(), rules[2].Conclusion())
	}
	return rules, v
}

func parCaveats() []string {
	n := runtime.NumCPU()
	return []string{
		sentence("This machine has %d cores and one virtio disk: beyond %d workers, extra parallelism can only "+
			"overlap I/O waits with CPU work; it cannot add CPU.", n, n),
		"On a machine loaded by other processes, more runnable threads also win a larger share of the CPU from " +
			"them, which flatters parallelism.",
		sentence("A budget near the machine's average speed still slows a run: fast phases are held to the budget "+
			"while slow phases cannot bank the unused allowance beyond the throttle's burst (%s, "+
			"throttle.DefaultBurst).", throttle.DefaultBurst),
	}
}

var parText = struct{ title, claim string }{
	title: "Parallel tables",
	claim: "2007 (as docs/design.md lists it): eight tables vacuumed at once instead of one after the other " +
		"finished 4x sooner (80 MB/s for one process, 360 MB/s for eight).",
}
