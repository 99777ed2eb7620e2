package bench

import (
	"context"
	"fmt"
	"math"
	"strconv"
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
	tb := NewTable("exp6_throttle_accuracy", 2, "limit", "pacing", "configured_per_s", "achieved_per_s", "achieved_over_configured", "seconds", "binding")
	type run struct {
		kind, limit, pacing string
		s                   throttle.Settings
		p                   vacuum.Pacing
		conf                float64
		pick                func(rates) float64
		ceiling             float64
	}
	var runs []run
	for _, p := range []struct {
		name string
		p    vacuum.Pacing
	}{{"rate", vacuum.PacingRate}, {"postgres-nap", vacuum.PacingPostgresNap}} {
		for _, d := range sz.AccDelays {
			s := *costSettings(sz.CostLimit, d)
			runs = append(runs, run{"cost", fmt.Sprintf("cost %d/%s", sz.CostLimit, d), p.name, s, p.p, s.Rate(throttle.Cost),
				func(x rates) float64 { return x.cost }, ceil.cost})
		}
	}
	for _, share := range sz.AccByteShare {
		rd := int64(share * ceil.read)
		wr := int64(share * ceil.write)
		wl := int64(share * ceil.wal)
		runs = append(runs,
			run{"read", fmt.Sprintf("read %.2f MB/s", float64(rd)/1e6), "rate", throttle.Settings{MaxReadBytesPerSecond: rd}, vacuum.PacingRate, float64(rd), func(x rates) float64 { return x.read }, ceil.read},
			run{"write", fmt.Sprintf("write %.2f MB/s", float64(wr)/1e6), "rate", throttle.Settings{MaxWriteBytesPerSecond: wr}, vacuum.PacingRate, float64(wr), func(x rates) float64 { return x.write }, ceil.write},
			run{"WAL", fmt.Sprintf("WAL %.2f MB/s", float64(wl)/1e6), "rate", throttle.Settings{MaxWALBytesPerSecond: wl}, vacuum.PacingRate, float64(wl), func(x rates) float64 { return x.wal }, ceil.wal})
	}
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
		binding := 0.0
		if ru.conf < ru.ceiling {
			binding = 1
		}
		if err := tb.Add([]string{ru.limit, ru.pacing}, ru.conf, ach, ach/ru.conf, rep.Elapsed.Seconds(), binding); err != nil {
			return nil, err
		}
		r.logf("  %s (%s): configured %.0f, achieved %.0f (%.2f), %.2f s", ru.limit, ru.pacing, ru.conf, ach, ach/ru.conf, rep.Elapsed.Seconds())
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
	f1, err := LinePlot{File: "exp6_cost_accuracy.png", Title: "Cost limit: achieved against configured",
		X: "configured cost units/s (limit 200 / delay)", Y: "achieved cost units/s", LogX: true, LogY: true,
		Series: []Series{{Name: "rate pacing (ours)", XY: costXY["rate"]}, {Name: "PostgreSQL nap rule", XY: costXY["postgres-nap"]},
			{Name: "achieved = configured", XY: costIdeal, Dashed: true}, {Name: "unthrottled ceiling", XY: ceilXY, Dashed: true}}}.Save(r.cfg.OutDir)
	if err != nil {
		return nil, err
	}
	f2, err := LinePlot{File: "exp6_byte_accuracy.png", Title: "Byte limits: achieved against configured",
		X: "configured MB/s", Y: "achieved MB/s",
		Series: []Series{{Name: "read limit", XY: byteXY["read"]}, {Name: "write limit", XY: byteXY["write"]}, {Name: "WAL limit", XY: byteXY["WAL"]},
			{Name: "achieved = configured", XY: byteIdeal, Dashed: true}}}.Save(r.cfg.OutDir)
	if err != nil {
		return nil, err
	}
	sec := &Section{
		Title: "Throttle accuracy",
		Claim: "(our own requirement) a limit is a rate: sustained units per second never exceed the configured rate, and come close to it when the limit binds.",
		Setup: []string{
			fmt.Sprintf("table: %d rows (%d-byte payload, two indexes, 20 %% dead), %s on disk, buffer pool %s; lazy vacuum, ring 2 MiB, fresh copy per run", sz.AccRows, sz.AccPayload, mib(dirBytes(tmpl)), mib(sz.FgPoolBytes)),
			fmt.Sprintf("unthrottled ceiling on this run: %.0f cost units/s, read %.2f MB/s, write %.2f MB/s, WAL %.2f MB/s (%.2f s)", ceil.cost, ceil.read/1e6, ceil.write/1e6, ceil.wal/1e6, base.Elapsed.Seconds()),
			fmt.Sprintf("cost limit %d at delays %v, with our rate pacing and with PostgreSQL's nap rule (sleep delay x balance/limit after each limit's worth of cost); byte limits at %v of the unthrottled rate", sz.CostLimit, sz.AccDelays, sz.AccByteShare),
			"achieved = units the vacuum's own counters recorded / its wall time; binding = 1 when the configured rate is below the unthrottled ceiling (otherwise the machine, not the limit, decides)",
		},
		Tables: []*Table{tb},
		Plots:  []string{baseName(f1), baseName(f2)},
	}
	var worstOver float64
	var bindingRatios []float64
	for _, row := range tb.Rows {
		if row[1] != "rate" || row[6] != "1" {
			continue
		}
		ratio, err := strconv.ParseFloat(row[4], 64)
		if err != nil {
			return nil, fmt.Errorf("exp6: ratio %q: %w", row[4], err)
		}
		bindingRatios = append(bindingRatios, ratio)
		worstOver = math.Max(worstOver, ratio)
	}
	if len(bindingRatios) > 0 {
		sec.Findings = append(sec.Findings, fmt.Sprintf("Rate pacing, binding limits: achieved/configured from %.3f to %.3f over %d runs.",
			minOf(bindingRatios), maxOf(bindingRatios), len(bindingRatios)))
	}
	if n := len(sz.AccDelays); n > 0 && len(costXY["rate"]) == n && len(costXY["postgres-nap"]) == n {
		var parts []string
		for i, d := range sz.AccDelays {
			c := costXY["rate"][i].X
			parts = append(parts, fmt.Sprintf("%s: %.2f vs %.2f", d, costXY["rate"][i].Y/c, costXY["postgres-nap"][i].Y/c))
		}
		sec.Findings = append(sec.Findings, "Cost limit 200, achieved/configured with our rate pacing vs PostgreSQL's nap rule, by delay: "+strings.Join(parts, "; ")+
			" (where the configured rate is above the unthrottled ceiling, neither can reach it).")
	}
	sec.Caveats = append(sec.Caveats, "Short runs weigh the first and last pages more: the ratio over a few seconds is noisier than the throttle's own long-run accounting.")
	return sec, nil
}

func sortXY(xy plotter.XYs) {
	for i := 1; i < len(xy); i++ {
		for j := i; j > 0 && xy[j].X < xy[j-1].X; j-- {
			xy[j], xy[j-1] = xy[j-1], xy[j]
		}
	}
}
