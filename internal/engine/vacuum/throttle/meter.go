package throttle

import (
	"context"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/usage"
)

// Meter is one worker's handle on a throttle: it turns the worker's usage
// counters into charges and waits at the worker's delay points. A Meter is
// used by one goroutine at a time; give each worker its own.
type Meter struct {
	t       *Throttle
	c       *usage.Counters
	last    usage.Reading
	pending usage.Reading
	timer   *time.Timer
	targets []target
}

// Meter returns a meter charging t with what c counts from now on. c may be
// nil when the worker charges explicitly with Charge.
func (t *Throttle) Meter(c *usage.Counters) *Meter {
	return &Meter{t: t, c: c, last: c.Read()}
}

// Charge adds usage d to what the next Wait charges, for work that is not
// counted in the meter's Counters.
func (m *Meter) Charge(d usage.Reading) { m.pending = addUsage(m.pending, d) }

// Wait is a delay point: it charges the usage since the previous Wait (the
// Counters' delta plus explicit charges) to the throttle and its ancestors,
// then sleeps while the worker is ahead of schedule by at least MinSleep,
// and waits while the run is paused (Throttle.Pause) until it is resumed.
// When the usage inserted WAL, it then waits while a standby is further
// behind than the bound of Throttle.SetWALLagBound (see Options.WALGate).
// It returns ctx.Err() when ctx is done, at once if it was done already and
// within a timer tick if it is cancelled during the sleep or the pause.
func (m *Meter) Wait(ctx context.Context) error {
	snap := m.c.Read()
	d := addUsage(snap.Sub(m.last), m.pending)
	m.last, m.pending = snap, usage.Reading{}
	if err := ctx.Err(); err != nil {
		// Still charge, so the accounting sees all usage.
		r := m.t.root
		r.mu.Lock()
		now := r.now()
		m.targets = m.t.charge(now, r.active(now), d, m.targets[:0])
		r.mu.Unlock()
		return err
	}
	if err := m.t.wait(ctx, m, d); err != nil {
		return err
	}
	if d.WALBytes > 0 {
		return m.t.holdWAL(ctx, m)
	}
	return nil
}

// Hook returns Wait bound to ctx, in the shape of the engine's per-page
// delay-point callbacks (B-tree bulk delete, heap rewrite).
func (m *Meter) Hook(ctx context.Context) func() error {
	return func() error { return m.Wait(ctx) }
}

func (m *Meter) arm(d time.Duration) {
	if m.timer == nil {
		m.timer = time.NewTimer(d)
		return
	}
	m.timer.Reset(d)
}

func (m *Meter) disarm() {
	if m.timer != nil {
		m.timer.Stop()
	}
}
