package online

import (
	"context"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vacuumops/vacuum-operator/internal/adaptive"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// PostgreSQL cannot re-throttle a running VACUUM, so there the adaptive throttle works
// between tables: before each table the runner steps the same control law the engine
// server runs every 100 ms (internal/adaptive), once, with what the signals did during the
// tables before, and gives the table a cost limit of the budget's share of the static
// one (vacuum_cost_delay stays: PostgreSQL caps it at 100ms, and the cost limit scales the
// rate as well). The signals:
//   - the foreground's latency percentile: PostgreSQL has no latency histogram, so the
//     runner samples pg_stat_activity every 100 ms and takes the percentile of the ages of
//     the foreground statements in flight (active client backends that are not a VACUUM
//     and not the runner's own sessions). An in-flight age is a statement's latency so
//     far, so the percentile of ages tracks the percentile of latencies from below for
//     statements alike in length, and from above where long statements dominate;
//   - the standbys' lag in bytes and in seconds, from pg_stat_replication (replication.go).
// A signal with no reading since the last table (no foreground statement in flight, no
// standby) holds the budget. HardStop waits before the next table, at most 5 s at a time,
// then the next table runs at the floor.

// foregroundSampleInterval is how often the foreground's in-flight statements are sampled.
const foregroundSampleInterval = 100 * time.Millisecond

// minForegroundSamples is the fewest in-flight ages a percentile is taken of; fewer is no
// reading (the budget holds).
const minForegroundSamples = 5

// betweenPeriod is the control law's period between tables: a HardStop waits this long
// before it looks again, for at most HardStopMax (5 s) in all.
const betweenPeriod = time.Second

// foregroundAgesQuery is the age in seconds of each foreground statement in flight.
const foregroundAgesQuery = `SELECT EXTRACT(EPOCH FROM clock_timestamp() - query_start)::float8 FROM pg_stat_activity
	WHERE state = 'active' AND backend_type = 'client backend' AND pid <> pg_backend_pid() AND query_start IS NOT NULL
	AND coalesce(application_name, '') NOT LIKE '` + ApplicationName + `%' AND query !~* '^\s*vacuum'`

// betweenTables is the adaptive throttle of a run on PostgreSQL.
type betweenTables struct {
	mu      sync.Mutex
	targets runnerwire.AdaptiveTargets // the targets ctl was made for
	ctl     *adaptive.Controller
	ages    []float64 // in-flight foreground ages (seconds) sampled since the last step
	paused  bool      // a HardStop waits before the next table now
	stopped float64   // seconds HardStop has held tables back in all
}

// percentile is the perMille-th percentile of v (nearest rank); v is sorted in place.
func percentile(v []float64, perMille int) float64 {
	slices.Sort(v)
	i := int(math.Ceil(float64(perMille)/1000*float64(len(v)))) - 1
	return v[min(max(i, 0), len(v)-1)]
}

// samples are the readings of a's signals since the last step; lag is the standbys' lag
// now (nil: none seen).
func (b *betweenTables) samples(a runnerwire.AdaptiveTargets, lag *runnerwire.Replication) []adaptive.Sample {
	var out []adaptive.Sample
	standby := lag != nil && lag.Standbys > 0
	if a.LatencyTarget > 0 {
		s := adaptive.Sample{}
		if len(b.ages) >= minForegroundSamples {
			s = adaptive.Sample{Value: percentile(b.ages, a.PercentilePerMille), Fresh: true}
		}
		out = append(out, s)
	}
	if a.MaxLagBytes > 0 {
		s := adaptive.Sample{}
		if standby {
			s = adaptive.Sample{Value: float64(lag.LagBytes), Fresh: true}
		}
		out = append(out, s)
	}
	if a.MaxLagDelay > 0 {
		s := adaptive.Sample{}
		if standby {
			s = adaptive.Sample{Value: lag.LagSeconds, Fresh: true}
		}
		out = append(out, s)
	}
	return out
}

// step judges the signals since the last step for targets a and returns the decision for
// the next table. A change of targets starts a new law at the budget in force.
func (b *betweenTables) step(a runnerwire.AdaptiveTargets, lag *runnerwire.Replication) (adaptive.Decision, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ctl == nil || b.targets != a {
		start := 0.0 // the law's own start: the ceiling, or the floor for a lag target
		if b.ctl != nil {
			start = b.ctl.Budget().Budget
		}
		floor := a.FloorPerMille
		if floor == 0 {
			floor = runnerwire.DefaultAdaptiveFloorPerMille
		}
		ctl, err := adaptive.New(adaptive.Config{Signals: adaptive.Targets{Latency: a.LatencyTarget, LagBytes: a.MaxLagBytes, LagDelay: a.MaxLagDelay}.Signals(), Floor: float64(floor) / 1000,
			Period: betweenPeriod, Dwell: -1, Start: start})
		if err != nil {
			return adaptive.Decision{}, err
		}
		b.ctl, b.targets = ctl, a
	}
	// A PostgreSQL VACUUM under the cost throttle is held to its budget for as long as it
	// runs, so the budget counts as used (the law's anti-windup needs a share).
	d := b.ctl.Step(b.samples(a, lag), 1)
	b.ages = b.ages[:0]
	return d, nil
}

// sample adds the ages of the foreground statements in flight now.
func (b *betweenTables) sample(ages []float64) {
	b.mu.Lock()
	b.ages = append(b.ages, ages...)
	b.mu.Unlock()
}

// scaled is l with its cost limit at budget's share (at least 1).
func scaled(l runnerwire.Limits, budget float64) runnerwire.Limits {
	l.CostLimit = max(1, int(math.Round(float64(l.CostLimit)*budget)))
	return l
}

// anyLatencyTarget reports whether the run or an override has a foreground target.
func (o Options) anyLatencyTarget() bool {
	if o.Adaptive.LatencyTarget > 0 {
		return true
	}
	for _, a := range o.TableAdaptive {
		if a.LatencyTarget > 0 {
			return true
		}
	}
	return false
}

// sampleForeground samples the foreground's in-flight statements into b every
// foregroundSampleInterval on a session of its own until done is closed. A failed read
// is skipped (no reading: the budget holds).
func (r *Run) sampleForeground(ctx context.Context, b *betweenTables, done <-chan struct{}) {
	conn, err := Connect(ctx, r.target, r.cfg.Copy())
	if err != nil {
		return
	}
	defer func() { _ = conn.Close(context.Background()) }() // it only read
	tick := time.NewTicker(foregroundSampleInterval)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		rows, err := conn.Query(ctx, foregroundAgesQuery)
		if err != nil {
			continue
		}
		ages, err := pgx.CollectRows(rows, pgx.RowTo[float64])
		if err == nil {
			b.sample(ages)
		}
	}
}

// adaptBetweenTables steps the law before st on PostgreSQL and returns st's limits: l
// scaled to the budget. While HardStop holds, it waits (at most HardStopMax in all, in
// betweenPeriod steps) before the table starts, unless stop or ctx ends it first.
func (r *Run) adaptBetweenTables(ctx context.Context, st *tableState, l runnerwire.Limits, a runnerwire.AdaptiveTargets, stop <-chan struct{}) (runnerwire.Limits, error) {
	b := r.between
	for {
		r.mu.Lock()
		lag := copyReplication(r.replication)
		r.mu.Unlock()
		d, err := b.step(a, lag)
		if err != nil {
			return l, err
		}
		if !d.Paused {
			b.mu.Lock()
			b.paused = false
			b.mu.Unlock()
			r.mu.Lock()
			st.adaptive = &runnerwire.AdaptiveProgress{Binding: string(d.Binding),
				BudgetPerMille: int32(math.Round(d.Budget * 1000)), BoundSeconds: map[string]float64{string(d.Binding): 0}}
			r.mu.Unlock()
			return scaled(l, d.Budget), nil
		}
		b.mu.Lock()
		b.paused = true
		b.mu.Unlock()
		began := time.Now()
		select {
		case <-stop:
		case <-ctx.Done():
		case <-time.After(betweenPeriod):
		}
		b.mu.Lock()
		b.stopped += time.Since(began).Seconds()
		b.mu.Unlock()
		select {
		case <-stop:
			return l, nil
		case <-ctx.Done():
			return l, ctx.Err()
		default:
		}
	}
}

// boundSoFar updates the running tables' time bound (PostgreSQL's between-tables law:
// a table is bound by what set its budget for as long as it runs). Call with r.mu held.
func (r *Run) boundSoFar(now time.Time) {
	for _, st := range r.states {
		if a := st.adaptive; a != nil && st.running && !st.done {
			a.BoundSeconds[a.Binding] = now.Sub(st.began).Seconds()
		}
	}
}

// fold gives p (the tables' adaptive progress) the law's binding and budget now and the
// time HardStop held tables back (r.mu held).
func (b *betweenTables) fold(p *runnerwire.AdaptiveProgress) *runnerwire.AdaptiveProgress {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ctl == nil {
		return p
	}
	if p == nil {
		p = &runnerwire.AdaptiveProgress{BoundSeconds: map[string]float64{}}
	}
	if b.stopped > 0 {
		p.BoundSeconds[string(adaptive.HardStop)] += b.stopped
	}
	d := b.ctl.Budget() // the law's decision now: what the running table (or the next) got
	p.Binding, p.BudgetPerMille = string(d.Binding), int32(math.Round(d.Budget*1000))
	if b.paused {
		p.Binding, p.BudgetPerMille = string(adaptive.HardStop), 0
	}
	return p
}

// startSampler starts the foreground sampler once (PostgreSQL runs only).
func (r *Run) startSampler(ctx context.Context) {
	r.samplerOnce.Do(func() {
		r.samplerGroup.Add(1)
		go func() {
			defer r.samplerGroup.Done()
			r.sampleForeground(ctx, r.between, r.samplerDone)
		}()
	})
}
