package bench

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum/throttle"
)

const ringTable = "r"

func ringName(b int64) string {
	switch {
	case b == 0:
		return "no ring"
	case b >= 1<<20:
		return fmt.Sprintf("%d MiB", b>>20)
	default:
		return fmt.Sprintf("%d KiB", b>>10)
	}
}

func hitRatio(h, m int64) float64 {
	if h+m <= 0 {
		return 0
	}
	return float64(h) / float64(h+m)
}

// Steady state of the foreground before the vacuum: its hit ratio over
// consecutive windows of RingWarmup/ringWindows changes by less than
// ringSteady, within at most ringMaxWindows windows.
const (
	ringWindows    = 4
	ringMaxWindows = 12
	ringSteady     = 0.002
)

// runRing is experiment 3: vacuum time, WAL flushes and the foreground's
// buffer hit ratio for each ring size.
func runRing(ctx context.Context, r *runner) (*Section, error) {
	sz := r.sz
	opts := r.engineOpts(sz.RingPoolBytes, sz.WALSegmentSize)
	tmpl, err := r.template("ring", opts, []TableSpec{{Name: ringTable, Rows: sz.RingRows, Payload: sz.RingPayload, DeadPct: 20, Seed: 3}})
	if err != nil {
		return nil, err
	}
	hot := int64(float64(sz.RingRows) * sz.RingHotPct / 100)
	sec := &Section{Title: ringText.title, Claim: ringText.claim, Setup: ringSetup(sz, tmpl, hot)}
	tb := NewTable("exp3_ring", 1, "ring", "ring_kib", "vacuum_s", "wal_flushes", "ring_wal_flushes",
		"ring_dirty_evictions", "wal_mb", "warmup_s", "steady", "fg_hit_ratio_before", "fg_hit_ratio_during", "fg_p99_ms")
	sec.Tables = append(sec.Tables, tb)
	for _, ring := range sz.Rings {
		m, err := r.ringOnce(ctx, tmpl, opts, hot, ring)
		if err != nil {
			return nil, fmt.Errorf("ring %s: %w", ringName(ring), err)
		}
		u := m.rep.Usage
		if err := tb.Add([]string{ringName(ring)}, float64(ring>>10), m.rep.Elapsed.Seconds(), float64(u.WALFlushes),
			float64(u.RingWALFlushes), float64(u.RingDirtyEvictions), float64(u.WALBytes)/1e6,
			m.warmup.Seconds(), b2f(m.steady), m.before, m.during, ms(m.lat.P99)); err != nil {
			return nil, err
		}
		r.logf("  ring %s: %.2f s, %d WAL flushes, fg hit ratio %.3f -> %.3f (warm-up %s, steady %v)",
			ringName(ring), m.rep.Elapsed.Seconds(), u.WALFlushes, m.before, m.during, m.warmup.Round(time.Millisecond), m.steady)
	}
	if err := r.ringPlots(sec, tb); err != nil {
		return nil, err
	}
	sec.Rules, sec.Verdict = ringConclusions(tb, r.probe)
	sec.Caveats = []string{sentence("WAL flushes are counted, not timed: the engine has no per-fsync timer. "+
		"The estimate above multiplies them by the probe's median 8 KiB O_DSYNC write (%.3f ms), a lower bound "+
		"for one flush.", r.probe.DSyncWriteMs)}
	return sec, nil
}

// ringRun is one run of experiment 3.
type ringRun struct {
	rep            *vacuum.Report
	lat            Latency
	warmup         time.Duration
	steady         bool
	before, during float64
}

func (r *runner) ringOnce(ctx context.Context, tmpl string, opts engine.Options, hot, ring int64) (ringRun, error) {
	var m ringRun
	db, dir, err := r.fresh(tmpl, opts)
	if err != nil {
		return m, err
	}
	fg := StartForeground(db, IDIndex(ringTable), hot, r.sz.FgWorkers, r.sz.FgThink, 11)
	start := time.Now()
	m.before, m.steady = warmToSteadyState(ctx, db, r.sz.RingWarmup/ringWindows)
	m.warmup = time.Since(start)
	p1 := poolOf(db)
	fg.Reset()
	vo := vacuum.DefaultOptions()
	vo.Throttle = &throttle.Settings{}
	vo.RingSize = ring
	rep, verr := db.Vacuum(ctx, ringTable, vo)
	p2 := poolOf(db)
	lat, ferr := fg.Stop()
	if err := finish(db, dir); verr == nil {
		verr = err
	}
	if verr == nil {
		verr = ferr
	}
	if verr != nil {
		return m, verr
	}
	m.rep, m.lat = rep, lat
	m.during = hitRatio(max(0, p2.hits-p1.hits-rep.Usage.Hits), max(0, p2.misses-p1.misses-rep.Usage.Misses))
	return m, nil
}

// warmToSteadyState lets the foreground run in windows of w until the
// pool's hit ratio of one window is within ringSteady of the previous
// one's (at least two windows, at most ringMaxWindows), and returns the
// last window's ratio and whether it settled.
func warmToSteadyState(ctx context.Context, db *engine.DB, w time.Duration) (float64, bool) {
	prev := -1.0
	for range ringMaxWindows {
		p0 := poolOf(db)
		sleepCtx(ctx, w)
		p1 := poolOf(db)
		h := hitRatio(p1.hits-p0.hits, p1.misses-p0.misses)
		if prev >= 0 && math.Abs(h-prev) < ringSteady {
			return h, true
		}
		if ctx.Err() != nil {
			return h, false
		}
		prev = h
	}
	return prev, false
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func ringSetup(sz Sizes, tmpl string, hot int64) []string {
	return []string{
		sentence("table: %d rows of %d-byte payload, two indexes, 20 %% dead: %s on disk; buffer pool %s "+
			"(the ring is capped at 1/8 of the pool, so %s is the largest ring that is not clamped)",
			sz.RingRows, sz.RingPayload, mib(dirBytes(tmpl)), mib(sz.RingPoolBytes), mib(sz.RingPoolBytes/8)),
		sentence("foreground: %d goroutines looking up random ids among the first %d (%.0f %% of the table: "+
			"a hot set that fits in the pool, about half of it), sleep %s between lookups",
			sz.FgWorkers, hot, sz.RingHotPct, sz.FgThink),
		sentence("warm-up until steady state: windows of %s, until one window's hit ratio is within %.3f of the "+
			"previous one's (at most %d windows; the steady column says whether it settled); \"before\" is the "+
			"last window's hit ratio", sz.RingWarmup/ringWindows, ringSteady, ringMaxWindows),
		sentence("vacuum: lazy, unthrottled, rings %v bytes (0 = no ring: vacuum pages go through the shared pool "+
			"like any reader)", sz.Rings),
		"hit ratio of the foreground during the vacuum = (pool hits - vacuum hits) / ((pool hits - vacuum hits) + " +
			"(pool misses - vacuum misses)) from vacuum start to vacuum end",
	}
}

func (r *runner) ringPlots(sec *Section, tb *Table) error {
	c := &cells{ts: tablesOf([]*Table{tb})}
	const t = "exp3_ring"
	var cats []string
	var secs, flushes, before, during []float64
	for _, row := range c.rows(t, "") {
		cats = append(cats, row[0])
		secs = append(secs, c.num(t, row, "vacuum_s"))
		flushes = append(flushes, c.num(t, row, "wal_flushes"))
		before = append(before, c.num(t, row, "fg_hit_ratio_before"))
		during = append(during, c.num(t, row, "fg_hit_ratio_during"))
	}
	if c.err != nil {
		return c.err
	}
	for _, bp := range []BarPlot{
		{File: "exp3_vacuum_time.png", Title: "Lazy vacuum time by ring size", Y: "seconds", Categories: cats,
			Groups: []BarGroup{{Name: "vacuum time", Values: secs}}},
		{File: "exp3_wal_flushes.png", Title: "WAL flushes (fsyncs) caused by the vacuum", Y: "WAL flushes",
			Categories: cats, Groups: []BarGroup{{Name: "WAL flushes", Values: flushes}}},
		{File: "exp3_hit_ratio.png", Title: "Foreground buffer hit ratio", Y: "hit ratio", Categories: cats,
			Groups:   []BarGroup{{Name: "before vacuum (steady)", Values: before}, {Name: "during vacuum", Values: during}},
			Headroom: 0.2},
	} {
		f, err := bp.Save(r.cfg.OutDir)
		if err != nil {
			return err
		}
		sec.Plots = append(sec.Plots, baseName(f))
	}
	return nil
}

// ringSmallest is the smallest ring that is not "no ring".
func ringSmallest(c *cells) []string {
	for _, row := range c.rows("exp3_ring", "") {
		if row[0] != ringName(0) {
			return row
		}
	}
	return nil
}

func ringHeadline(ts tables) (string, error) {
	c := &cells{ts: ts}
	const t = "exp3_ring"
	all := c.rows(t, "")
	small := ringSmallest(c)
	if c.err != nil || small == nil {
		return "", fmt.Errorf("exp3: no ring rows: %v", c.err)
	}
	large := all[len(all)-1]
	s := sentence("WAL flushes: %.0f with a %s ring against %.0f with %s; vacuum time %.2f s against %.2f s "+
		"(%.2fx; the field report: 5-7x).",
		c.num(t, small, "wal_flushes"), small[0], c.num(t, large, "wal_flushes"), large[0],
		c.num(t, small, "vacuum_s"), c.num(t, large, "vacuum_s"),
		c.num(t, small, "vacuum_s")/c.num(t, large, "vacuum_s"))
	lo, hi := math.Inf(1), 0.0
	var parts []string
	for _, row := range all {
		b := c.num(t, row, "fg_hit_ratio_before")
		lo, hi = math.Min(lo, b), math.Max(hi, b)
		parts = append(parts, sentence("%.3f with %s", c.num(t, row, "fg_hit_ratio_during"), row[0]))
	}
	s += sentence(" Foreground hit ratio during the vacuum: %s (in steady state before it: %.3f to %.3f).",
		joinComma(parts), lo, hi)
	return s, c.err
}

// ringConclusions decides whether the small ring's slowdown was
// reproduced, how much of it WAL flushes can explain, and whether the
// foreground's cache survived without a ring.
func ringConclusions(tb *Table, pr Probe) ([]Rule, *Verdict) {
	c := &cells{ts: tablesOf([]*Table{tb})}
	const t = "exp3_ring"
	all := c.rows(t, "")
	small := ringSmallest(c)
	if c.err != nil || small == nil {
		return nil, nil
	}
	large := all[len(all)-1]
	slow := c.num(t, small, "vacuum_s") / c.num(t, large, "vacuum_s")
	fsync := c.num(t, small, "wal_flushes") * pr.DSyncWriteMs / 1e3
	fsyncShare := fsync / c.num(t, small, "vacuum_s")
	rules := []Rule{
		{
			Statement: "the field report's slowdown is reproduced when the smallest ring's vacuum takes at least " +
				"4x (80 % of 5x) the largest ring's time",
			Holds: slow >= 4,
			Then:  sentence("Reproduced: %.2fx.", slow),
			Else:  sentence("Not reproduced: %.2fx.", slow),
		},
		{
			Statement: "WAL flushes explain the smallest ring's time when its flushes times the probe's O_DSYNC " +
				"write latency reach half of it",
			Holds: fsyncShare >= 0.5,
			Then: sentence("Its %.0f WAL flushes cost at least %.2f s (%.0f %% of its %.2f s): the fsyncs decide.",
				c.num(t, small, "wal_flushes"), fsync, 100*fsyncShare, c.num(t, small, "vacuum_s")),
			Else: sentence("Its %.0f WAL flushes cost at least %.2f s, %.0f %% of its %.2f s: an O_DSYNC write of "+
				"%.3f ms on this disk is too cheap for them to dominate.",
				c.num(t, small, "wal_flushes"), fsync, 100*fsyncShare, c.num(t, small, "vacuum_s"), pr.DSyncWriteMs),
		},
	}
	if none := c.row(t, ringName(0)); none != nil {
		before, during := c.num(t, none, "fg_hit_ratio_before"), c.num(t, none, "fg_hit_ratio_during")
		rules = append(rules, Rule{
			Statement: "the foreground's hot set survived a vacuum without a ring when its hit ratio during the " +
				"vacuum is no more than 0.01 below its steady state before",
			Holds: during >= before-0.01,
			Then: sentence("Without a ring the hot set survived (%.3f before, %.3f during): the clock sweep evicts "+
				"the vacuum's once-read pages before pages the lookups keep touching.", before, during),
			Else: sentence("Without a ring the foreground lost its cache: hit ratio %.3f before, %.3f during.",
				before, during),
		})
	}
	v := &Verdict{Field: "5-7x slower with a small ring", Run: sentence("%.2fx", slow), Outcome: NotReproduced}
	if rules[0].Holds {
		v.Outcome = Reproduced
	} else {
		v.Why = rules[1].Conclusion()
	}
	return rules, v
}

var ringText = struct{ title, claim string }{
	title: "Ring size",
	claim: "2017 and 2023 (as docs/design.md lists them): a small vacuum ring made vacuum spend over half its " +
		"time in WAL fsyncs (every dirty page leaving the ring forces a WAL flush), 5-7x slower; the ring is " +
		"also what keeps a vacuum from flushing the foreground's cache.",
}

func minOf(v []float64) float64 {
	m := v[0]
	for _, x := range v {
		m = min(m, x)
	}
	return m
}

func maxOf(v []float64) float64 {
	m := v[0]
	for _, x := range v {
		m = max(m, x)
	}
	return m
}
