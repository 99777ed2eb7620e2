package throttle

import (
	"context"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/usage"
)

// PostgresNap is PostgreSQL's vacuum_delay_point rule, kept only to measure
// what the rate-based Throttle improves on. It accumulates a cost balance;
// when the balance reaches CostLimit it sleeps
// CostDelay*balance/CostLimit, capped at 4*CostDelay, and resets the
// balance to 0. Work time between naps is not counted and the sleep's
// rounding up to the timer floor is not repaid, so at small delays it
// undershoots the configured rate. Byte limits are ignored (PostgreSQL has
// none). Not safe for concurrent use: one per worker, like a backend.
type PostgresNap struct {
	s       Settings
	c       *usage.Counters
	last    usage.Reading
	pending usage.Reading
	balance float64
	timer   *time.Timer

	start     time.Time
	consumed  float64
	naps      int64
	requested time.Duration
	slept     time.Duration
	lastNap   time.Duration
}

// NewPostgresNap returns the PostgreSQL rule with settings s, reading usage
// from c (which may be nil when charging with Charge).
func NewPostgresNap(s Settings, c *usage.Counters) (*PostgresNap, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &PostgresNap{s: s, c: c, last: c.Read(), start: time.Now()}, nil
}

// Charge adds usage d to what the next Wait counts.
func (p *PostgresNap) Charge(d usage.Reading) { p.pending = addUsage(p.pending, d) }

// Wait is PostgreSQL's vacuum_delay_point.
func (p *PostgresNap) Wait(ctx context.Context) error {
	snap := p.c.Read()
	cost := p.s.Units(Cost, addUsage(snap.Sub(p.last), p.pending))
	p.last, p.pending = snap, usage.Reading{}
	p.balance += cost
	p.consumed += cost
	if err := ctx.Err(); err != nil {
		return err
	}
	if p.s.CostDelay <= 0 || p.balance < float64(p.s.CostLimit) {
		return nil
	}
	nap := time.Duration(float64(p.s.CostDelay) * p.balance / float64(p.s.CostLimit))
	nap = min(nap, 4*p.s.CostDelay)
	p.balance = 0
	p.naps++
	p.requested += nap
	p.lastNap = nap
	began := time.Now()
	if p.timer == nil {
		p.timer = time.NewTimer(nap)
	} else {
		p.timer.Reset(nap)
	}
	var err error
	select {
	case <-ctx.Done():
		p.timer.Stop()
		err = ctx.Err()
	case <-p.timer.C:
	}
	p.slept += time.Since(began)
	return err
}

// PostgresNapStats is PostgresNap's accounting.
type PostgresNapStats struct {
	Elapsed   time.Duration // since NewPostgresNap
	Consumed  float64       // cost units charged
	Naps      int64         // sleeps taken
	Requested time.Duration // sum of the sleeps asked for
	Slept     time.Duration // sum of the sleeps measured
	LastNap   time.Duration // the last sleep asked for
}

// Stats returns the accounting so far.
func (p *PostgresNap) Stats() PostgresNapStats {
	return PostgresNapStats{
		Elapsed: time.Since(p.start), Consumed: p.consumed, Naps: p.naps,
		Requested: p.requested, Slept: p.slept, LastNap: p.lastNap,
	}
}
