package throttle

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/usage"
)

// Throttle paces the workers of a vacuum run against its rate limits. One
// root Throttle is shared by all workers of a run; Child adds a table's own
// limits under it. Workers charge and wait through a Meter each. All
// methods are safe for concurrent use.
type Throttle struct {
	root   *Throttle
	parent *Throttle
	start  time.Duration // creation time, since root.epoch

	// Root only.
	mu      sync.Mutex
	epoch   time.Time
	opts    Options
	updated chan struct{} // closed and replaced by every Update, Pause and Resume

	// Root only, guarded by mu: the run's pause (see Pause).
	paused      bool
	pausedAt    time.Duration // when the current pause began
	pausedTotal time.Duration // length of the pauses that have ended
	pauses      int64
	walLagBound int64 // SetWALLagBound's bytes; 0 = off

	// Guarded by root.mu.
	settings Settings
	lims     [numKinds]limit
	slept    time.Duration // by waiters of this throttle and its children
	sleeps   int64
	walHeld  time.Duration // waiters held by the WAL lag bound (holdWAL)
	walHolds int64
}

// New returns a root throttle with settings s. Zero fields of o take their
// defaults.
func New(s Settings, o Options) (*Throttle, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	t := &Throttle{epoch: time.Now(), opts: o.withDefaults(), updated: make(chan struct{})}
	t.root = t
	t.apply(0, s)
	return t, nil
}

// Child returns a throttle whose limits s apply to the waiters of its own
// Meters (one table) and whose consumption also counts against t and t's
// ancestors: a waiter waits for the most restrictive limit along the chain.
// s is complete: a zero limit in s means no table limit, not "inherit".
func (t *Throttle) Child(s Settings) (*Throttle, error) {
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("table throttle: %w", err)
	}
	r := t.root
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	c := &Throttle{root: r, parent: t, start: now}
	c.apply(r.active(now), s)
	return c, nil
}

// Started is when the run (the root throttle) started: rates are measured
// on wall-clock time from then.
func (t *Throttle) Started() time.Time { return t.root.epoch }

// Options returns the pacing options of the run.
func (t *Throttle) Options() Options { return t.root.opts }

// Settings returns the current settings of t.
func (t *Throttle) Settings() Settings {
	t.root.mu.Lock()
	defer t.root.mu.Unlock()
	return t.settings
}

// Update replaces t's settings. It takes effect for every waiter at once,
// including those already sleeping: their remaining debt is kept in units
// and repaid at the new rate.
func (t *Throttle) Update(s Settings) error {
	if err := s.Validate(); err != nil {
		return err
	}
	r := t.root
	r.mu.Lock()
	defer r.mu.Unlock()
	t.apply(r.active(r.now()), s)
	r.wake()
	return nil
}

// Pause stops the whole run (the root throttle and all its children,
// whichever of them it is called on): every waiter stops at its next
// delay point (Meter.Wait) and waits there, without polling, until Resume
// or until its context is done. A worker sleeping to repay debt is woken
// and stops too. It works the same when no limit is on (an unthrottled
// run still passes delay points). While paused, no allowance accrues (the
// limits' clock stops), so a resumed run does not burst to catch up, and
// the time paused is counted in Stats (PausedFor), not in Slept. Pause
// reports whether it paused a running run (false: already paused).
func (t *Throttle) Pause() bool {
	r := t.root
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.paused {
		return false
	}
	r.paused, r.pausedAt = true, r.now()
	r.pauses++
	r.wake()
	return true
}

// Resume lets a paused run continue: waiters stopped at their delay point
// return from it (or finish repaying their debt first). It reports whether
// the run was paused.
func (t *Throttle) Resume() bool {
	r := t.root
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.paused {
		return false
	}
	r.pausedTotal += r.now() - r.pausedAt
	r.paused = false
	r.wake()
	return true
}

// Paused reports whether the run is paused now.
func (t *Throttle) Paused() bool {
	r := t.root
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.paused
}

// WaitWhilePaused returns at once when the run is not paused; otherwise it
// waits until Resume or until ctx is done (returning ctx.Err()). It is the
// pause alone, for delay points that do not go through a Meter
// (PostgresNap).
func (t *Throttle) WaitWhilePaused(ctx context.Context) error {
	r := t.root
	for {
		r.mu.Lock()
		paused, updated := r.paused, r.updated
		r.mu.Unlock()
		if !paused {
			return ctx.Err()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-updated:
		}
	}
}

// wake wakes every waiter to recompute (settings or pause changed); call
// it on the root with mu held.
func (t *Throttle) wake() {
	close(t.updated)
	t.updated = make(chan struct{})
}

func (t *Throttle) apply(act time.Duration, s Settings) {
	t.settings = s
	for k := range numKinds {
		rate := s.Rate(k)
		t.lims[k].set(act, rate, rate*t.root.opts.burst(k).Seconds())
	}
}

// now is the time since the run started; call it on the root.
func (t *Throttle) now() time.Duration { return time.Since(t.epoch) }

// active is the run's active clock at wall time now (since the start):
// now minus the time paused; it stands still during a pause. Call it on
// the root with mu held.
func (t *Throttle) active(now time.Duration) time.Duration {
	return now - t.pausedFor(now)
}

// pausedFor is the time the run has been paused by wall time now, the
// current pause included. Call it on the root with mu held.
func (t *Throttle) pausedFor(now time.Duration) time.Duration {
	if t.paused {
		return t.pausedTotal + now - t.pausedAt
	}
	return t.pausedTotal
}

// target is a position one waiter must see the allowance reach.
type target struct {
	t   *Throttle
	k   Kind
	gen uint64
	pos float64
}

// charge records usage d on t and its ancestors at wall time now (active
// time act), appends the waiter's targets to ts and returns them. Callers
// hold root.mu.
func (t *Throttle) charge(now, act time.Duration, d usage.Reading, ts []target) []target {
	for n := t; n != nil; n = n.parent {
		for k := range numKinds {
			u := n.settings.Units(k, d)
			if pos, on := n.lims[k].charge(now, act, u); on {
				ts = append(ts, target{n, k, n.lims[k].gen, pos})
			}
		}
	}
	return ts
}

// wakeAt is the active time at which every target is cleared under the
// current rates; targets of limits since turned off or re-enabled are ignored.
func wakeAt(ts []target) time.Duration {
	var wake time.Duration
	for _, tg := range ts {
		l := &tg.t.lims[tg.k]
		if l.rate > 0 && l.gen == tg.gen {
			wake = max(wake, l.timeAt(tg.pos))
		}
	}
	return wake
}

// wait charges d and sleeps until the waiter's targets are cleared, unless
// they are less than MinSleep away; while the run is paused it waits for
// Resume instead (without a timer). m holds the waiter's reusable timer and
// target buffer. Sleeps to repay debt count in Slept; pauses do not (they
// are the run's PausedFor).
func (t *Throttle) wait(ctx context.Context, m *Meter, d usage.Reading) error {
	r := t.root
	r.mu.Lock()
	now := r.now()
	act := r.active(now)
	m.targets = t.charge(now, act, d, m.targets[:0])
	wake := wakeAt(m.targets)
	paused, updated := r.paused, r.updated
	r.mu.Unlock()
	if !paused && wake-act < r.opts.MinSleep {
		return ctx.Err()
	}

	var slept time.Duration
	sleeps := int64(0)
	var err error
	for paused || wake-act >= r.opts.MinSleep {
		var timer <-chan time.Time
		if paused {
			m.disarm()
		} else {
			m.arm(wake - act)
			timer = m.timer.C
			sleeps = 1
		}
		began := now
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-timer:
		case <-updated: // settings or pause changed: recompute wake
		}
		r.mu.Lock()
		now = r.now()
		if !paused {
			slept += now - began
		}
		act = r.active(now)
		wake = wakeAt(m.targets)
		paused, updated = r.paused, r.updated
		r.mu.Unlock()
		if err != nil {
			break
		}
	}
	m.disarm()
	if sleeps > 0 {
		r.mu.Lock()
		for n := t; n != nil; n = n.parent {
			n.slept += slept
			n.sleeps += sleeps
		}
		r.mu.Unlock()
	}
	if err == nil {
		err = ctx.Err()
	}
	return err
}

// walGatePoll is how often a waiter held by the WAL lag bound asks the gate
// again when the gate's channel has not fired: a safety net for a gate that
// misses a change, not the way the hold normally ends.
const walGatePoll = 20 * time.Millisecond

// SetWALLagBound closes the loop on the WAL the run inserts: while the
// throttle's Options.WALGate sees a standby, a delay point whose charge
// inserted WAL is held, after its rate limits, while the slowest standby has
// more than bytes of the inserted WAL left to replay, and released as it
// catches up. It is a bound, not a rate: it holds whatever the standby's
// apply rate does, where a rate limit is set once from a guess of that rate.
// 0 turns it off. It applies to the whole run (called on a child, to the
// root) and takes effect at once, for waiters already held too.
func (t *Throttle) SetWALLagBound(bytes int64) error {
	if bytes < 0 {
		return fmt.Errorf("WAL lag bound %d bytes must not be negative: %w", bytes, ErrInvalidSettings)
	}
	r := t.root
	r.mu.Lock()
	defer r.mu.Unlock()
	r.walLagBound = bytes
	r.wake()
	return nil
}

// WALLagBound is the bound SetWALLagBound set (0: off).
func (t *Throttle) WALLagBound() int64 {
	r := t.root
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.walLagBound
}

// holdWAL is the closed loop of SetWALLagBound: a waiter whose
// charge inserted WAL waits here, after its rate limits, while the gate says
// the slowest standby is more than the bound behind (having flushed the WAL,
// once per hold, so that the standby can be sent it), and goes on as soon as
// a report brings it within the bound. The gate is asked without the
// throttle's lock held, and the wait holds no lock: other workers of the run
// wait here too, or at their own delay points. It ends at once when the
// bound is turned off or the standby leaves, and returns ctx.Err() within a
// timer tick when ctx is cancelled. A pause that begins while held is
// waited out here (no allowance accrues meanwhile, as for any pause).
func (t *Throttle) holdWAL(ctx context.Context, m *Meter) error {
	r := t.root
	gate := r.opts.WALGate
	if gate == nil {
		return nil
	}
	var began time.Time
	var err error
	for {
		r.mu.Lock()
		bound, paused, updated := r.walLagBound, r.paused, r.updated
		r.mu.Unlock()
		if bound == 0 {
			break
		}
		if paused {
			if err = t.WaitWhilePaused(ctx); err != nil {
				break
			}
			continue
		}
		behind, attached, changed := gate.WALBehind()
		if !attached || behind <= bound {
			break
		}
		if began.IsZero() {
			began = time.Now()
			// Held from here on, this worker inserts nothing more: make what it and
			// the others inserted sendable, so the standby can catch up with it.
			if err = gate.FlushWAL(m.c); err != nil {
				err = fmt.Errorf("flush the WAL before waiting for the standbys: %w", err)
				break
			}
		}
		m.arm(walGatePoll)
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-changed:
		case <-updated: // the bound changed, or a pause began
		case <-m.timer.C:
		}
		m.disarm()
		if err != nil {
			break
		}
	}
	if !began.IsZero() {
		held := time.Since(began)
		r.mu.Lock()
		for n := t; n != nil; n = n.parent {
			n.walHeld += held
			n.walHolds++
		}
		r.mu.Unlock()
	}
	return err
}
