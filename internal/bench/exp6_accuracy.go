package bench

import (
	"context"
	"fmt"
	"math"
	"strings"

	"gonum.org/v1/plot/plotter"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum/throttle"
)

const accTable = "a"

// rates are the four rates a vacuum achieved, in their limit's units per
// second.
type rates struct{ cost, read, write, wal float64 }

func ratesOfReport(rep *vacuum.Report) rates {
	s := rep.Elapsed.Seconds()
	u := rep.Usage
	return rates{costRate(rep), float64(u.ReadBytes) / s, float64(u.WriteBytes) / s, float64(u.WALBytes) / s}
}

func (r *runner) lazyOnce(ctx context.Context, tmpl string, opts engine.Options, table string, vo vacuum.Options) (*vacuum.Report, error) {
	db, dir, err := r.fresh(tmpl, opts)
	if err != nil {
		return nil, err
	}
	rep, err := db.Vacuum(ctx, table, vo)
	if ferr := finish(db, dir); err == nil {
		err = ferr
	}
	return rep, err
}

// runAccuracy is experiment 6: achieved against configured rate for cost
// limits (our rate pacing and PostgreSQL's nap rule) and byte limits.
func runAccuracy(ctx context.Context, r *runner) (*Section, error) {
	sz := r.sz
	opts := r.engineOpts(sz.FgPoolBytes, sz.WALSegmentSize)
	tmpl, err := r.template("acc", opts, []TableSpec{{Name: accTable, Rows: sz.AccRows, Payload: sz.AccPayload, DeadPct: 20, Seed: 6}})
	if err != nil {
		return nil, err
	}
	un := vacuum.DefaultOptions()
	un.Throttle = &throttle.Settings{}
	base, err := r.lazyOnce(ctx, tmpl, opts, accTable, un)
	if err != nil {
		return nil, fmt.Errorf("unthrottled: %w", err)
	}
	ceil := ratesOfReport(base)
	tb := NewTable("exp6_throttle_accuracy", 2, "limit", "pacing", "configured_per_s", "achieved_per_s",
		"achieved_over_configured", "seconds", "binding")
	runs := accRuns(sz, ceil)
	costXY := map[string]plotter.XYs{}
	byteXY := map[string]plotter.XYs{}
	var costIdeal, byteIdeal plotter.XYs
	for _, ru := range runs {
		vo := vacuum.DefaultOptions()
		s := ru.s
		vo.Throttle = &s
		vo.Pacing = ru.p
		rep, err := r.lazyOnce(ctx, tmpl, opts, accTable, vo)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", ru.limit, ru.pacing, err)
		}
		ach := ru.pick(ratesOfReport(rep))
		if err := tb.Add([]string{ru.limit, ru.pacing}, ru.conf, ach, ach/ru.conf, rep.Elapsed.Seconds(),
			b2f(ru.conf < ru.pick(ceil))); err != nil {
			return nil, err
		}
		r.logf("  %s (%s): configured %.0f, achieved %.0f (%.2f), %.2f s",
			ru.limit, ru.pacing, ru.conf, ach, ach/ru.conf, rep.Elapsed.Seconds())
		if ru.kind == "cost" {
			costXY[ru.pacing] = append(costXY[ru.pacing], plotter.XY{X: ru.conf, Y: ach})
			if ru.pacing == "rate" {
				costIdeal = append(costIdeal, plotter.XY{X: ru.conf, Y: ru.conf})
			}
		} else {
			byteXY[ru.kind] = append(byteXY[ru.kind], plotter.XY{X: ru.conf / 1e6, Y: ach / 1e6})
			byteIdeal = append(byteIdeal, plotter.XY{X: ru.conf / 1e6, Y: ru.conf / 1e6})
		}
	}
	sortXY(costIdeal)
	sortXY(byteIdeal)
	ceilXY := plotter.XYs{}
	if len(costIdeal) > 0 {
		ceilXY = plotter.XYs{{X: costIdeal[0].X, Y: ceil.cost}, {X: costIdeal[len(costIdeal)-1].X, Y: ceil.cost}}
	}
	sec := &Section{
		Title:   accText.title,
		Claim:   accText.claim,
		Caveats: accText.caveats,
		Tables:  []*Table{tb},
		Setup: []string{
			sentence("table: %d rows (%d-byte payload, two indexes, 20 %% dead), %s on disk, buffer pool %s; "+
				"lazy vacuum, ring 2 MiB, fresh copy per run",
				sz.AccRows, sz.AccPayload, mib(dirBytes(tmpl)), mib(sz.FgPoolBytes)),
			sentence("unthrottled ceiling on this run: %.0f cost units/s, read %.2f MB/s, write %.2f MB/s, "+
				"WAL %.2f MB/s (%.2f s)",
				ceil.cost, ceil.read/1e6, ceil.write/1e6, ceil.wal/1e6, base.Elapsed.Seconds()),
			sentence("cost limit %d at delays %v, with our rate pacing and with PostgreSQL's nap rule as re-implemented "+
				"in Go (throttle.PostgresNap: sleep delay x balance/limit after each limit's worth of cost; not "+
				"PostgreSQL itself); byte limits at %v of the unthrottled rate",
				sz.CostLimit, sz.AccDelays, sz.AccByteShare),
			"achieved = units the vacuum's own counters recorded / its wall time; binding = 1 when the configured " +
				"rate is below the unthrottled ceiling (otherwise the machine, not the limit, decides)",
		},
	}
	for _, lp := range []LinePlot{
		{File: "exp6_cost_accuracy.png", Title: "Cost limit: achieved against configured",
			X: "configured cost units/s (limit 200 / delay)", Y: "achieved cost units/s", LogX: true, LogY: true,
			Series: []Series{{Name: "rate pacing (ours)", XY: costXY["rate"]},
				{Name: "PostgreSQL nap rule (Go)", XY: costXY["postgres-nap"]},
				{Name: "achieved = configured", XY: costIdeal, Dashed: true},
				{Name: "unthrottled ceiling", XY: ceilXY, Dashed: true}}},
		{File: "exp6_byte_accuracy.png", Title: "Byte limits: achieved against configured",
			X: "configured MB/s", Y: "achieved MB/s",
			Series: []Series{{Name: "read limit", XY: byteXY["read"]}, {Name: "write limit", XY: byteXY["write"]},
				{Name: "WAL limit", XY: byteXY["WAL"]}, {Name: "achieved = configured", XY: byteIdeal, Dashed: true}}},
	} {
		f, err := lp.Save(r.cfg.OutDir)
		if err != nil {
			return nil, err
		}
		sec.Plots = append(sec.Plots, baseName(f))
	}
	sec.Rules, sec.Verdict = accConclusions(tablesOf(sec.Tables))
	return sec, nil
}

// accRun is one row of experiment 6: a limit, a pacing, and which of the
// achieved rates it is held to.
type accRun struct {
	kind, limit, pacing string
	s                   throttle.Settings
	p                   vacuum.Pacing
	conf                float64
	pick                func(rates) float64
}

// accRuns lists experiment 6's runs: each cost delay under both pacings,
// then each byte limit at its share of the unthrottled rate.
func accRuns(sz Sizes, ceil rates) []accRun {
	var runs []accRun
	for _, p := range []struct {
		name string
		p    vacuum.Pacing
	}{{"rate", vacuum.PacingRate}, {"postgres-nap", vacuum.PacingPostgresNap}} {
		for _, d := range sz.AccDelays {
			s := *costSettings(sz.CostLimit, d)
			runs = append(runs, accRun{"cost", fmt.Sprintf("cost %d/%s", sz.CostLimit, d), p.name, s, p.p,
				s.Rate(throttle.Cost), func(x rates) float64 { return x.cost }})
		}
	}
	for _, share := range sz.AccByteShare {
		for _, b := range []struct {
			kind, name string
			pick       func(rates) float64
			set        func(*throttle.Settings, int64)
		}{
			{"read", "read", func(x rates) float64 { return x.read }, func(s *throttle.Settings, v int64) { s.MaxReadBytesPerSecond = v }},
			{"write", "write", func(x rates) float64 { return x.write }, func(s *throttle.Settings, v int64) { s.MaxWriteBytesPerSecond = v }},
			{"WAL", "WAL", func(x rates) float64 { return x.wal }, func(s *throttle.Settings, v int64) { s.MaxWALBytesPerSecond = v }},
		} {
			v := int64(share * b.pick(ceil))
			var s throttle.Settings
			b.set(&s, v)
			runs = append(runs, accRun{b.kind, fmt.Sprintf("%s %.2f MB/s", b.name, float64(v)/1e6), "rate", s,
				vacuum.PacingRate, float64(v), b.pick})
		}
	}
	return runs
}

// accBound is how far a binding limit's achieved rate may be from its
// configured rate for the requirement to count as met.
const accLow, accHigh = 0.9, 1.02

func accuracyHeadline(ts tables) (string, error) {
	c := &cells{ts: ts}
	const t = "exp6_throttle_accuracy"
	var ratios []float64
	byDelay := map[string][2]float64{}
	var delays []string
	for _, row := range c.rows(t, "") {
		ratio := c.num(t, row, "achieved_over_configured")
		if row[1] == "rate" && c.num(t, row, "binding") == 1 {
			ratios = append(ratios, ratio)
		}
		if d, ok := strings.CutPrefix(row[0], "cost "); ok {
			d = d[strings.Index(d, "/")+1:]
			pair := byDelay[d]
			if _, seen := byDelay[d]; !seen {
				delays = append(delays, d)
			}
			if row[1] == "rate" {
				pair[0] = ratio
			} else {
				pair[1] = ratio
			}
			byDelay[d] = pair
		}
	}
	if c.err != nil {
		return "", c.err
	}
	var s string
	if len(ratios) > 0 {
		s = sentence("Rate pacing, binding limits: achieved/configured from %.3f to %.3f over %d runs.",
			minOf(ratios), maxOf(ratios), len(ratios))
	}
	var parts []string
	for _, d := range delays {
		parts = append(parts, sentence("%s: %.2f vs %.2f", d, byDelay[d][0], byDelay[d][1]))
	}
	if len(parts) > 0 {
		s += " Cost limit 200, achieved/configured with our rate pacing vs the nap rule, by delay: " +
			strings.Join(parts, "; ") + " (where the configured rate is above the unthrottled ceiling, neither " +
			"can reach it)."
	}
	return strings.TrimSpace(s), nil
}

func accConclusions(ts tables) ([]Rule, *Verdict) {
	c := &cells{ts: ts}
	const t = "exp6_throttle_accuracy"
	lo, hi, n := math.Inf(1), 0.0, 0
	for _, row := range c.rows(t, "") {
		if row[1] == "rate" && c.num(t, row, "binding") == 1 {
			r := c.num(t, row, "achieved_over_configured")
			lo, hi, n = math.Min(lo, r), math.Max(hi, r), n+1
		}
	}
	rule := Rule{
		Statement: sentence("the requirement is met when every binding limit under rate pacing achieves between "+
			"%.2f and %.2f of its configured rate", accLow, accHigh),
		Holds: n > 0 && lo >= accLow && hi <= accHigh,
		Then:  sentence("Met: %.3f to %.3f over %d binding runs.", lo, hi, n),
		Else:  sentence("Not met: %.3f to %.3f over %d binding runs.", lo, hi, n),
	}
	v := &Verdict{Field: "(our own requirement)", Run: sentence("%.3f to %.3f", lo, hi), Outcome: "not met"}
	if rule.Holds {
		v.Outcome = "met"
	}
	return []Rule{rule}, v
}

var accText = struct {
	title, claim string
	caveats      []string
}{
	title: "Throttle accuracy",
	claim: "(our own requirement) a limit is a rate: sustained units per second never exceed the configured " +
		"rate, and come close to it when the limit binds.",
	caveats: []string{
		"Short runs weigh the first and last pages more: the ratio over a few seconds is noisier than the " +
			"throttle's own long-run accounting.",
		"The nap rule is a Go re-implementation of PostgreSQL's rule (throttle.PostgresNap) running on Go " +
			"timers, not PostgreSQL; docs/benchmarks/vacuum-speed.md compares with PostgreSQL 15 itself.",
	},
}

func sortXY(xy plotter.XYs) {
	for i := 1; i < len(xy); i++ {
		for j := i; j > 0 && xy[j].X < xy[j-1].X; j-- {
			xy[j], xy[j-1] = xy[j-1], xy[j]
		}
	}
}
