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
	updated chan struct{} // closed and replaced by every Update

	// Guarded by root.mu.
	settings Settings
	lims     [numKinds]limit
	slept    time.Duration // by waiters of this throttle and its children
	sleeps   int64
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
	c := &Throttle{root: r, parent: t, start: r.now()}
	c.apply(c.start, s)
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
	t.apply(r.now(), s)
	close(r.updated)
	r.updated = make(chan struct{})
	return nil
}

func (t *Throttle) apply(now time.Duration, s Settings) {
	t.settings = s
	for k := range numKinds {
		rate := s.Rate(k)
		t.lims[k].set(now, rate, rate*t.root.opts.Burst.Seconds())
	}
}

// now is the time since the run started; call it on the root.
func (t *Throttle) now() time.Duration { return time.Since(t.epoch) }

// target is a position one waiter must see the allowance reach.
type target struct {
	t   *Throttle
	k   Kind
	gen uint64
	pos float64
}

// charge records usage d on t and its ancestors, appends the waiter's
// targets to ts and returns them. Callers hold
// root.mu.
func (t *Throttle) charge(now time.Duration, d usage.Reading, ts []target) []target {
	for n := t; n != nil; n = n.parent {
		for k := range numKinds {
			u := n.settings.Units(k, d)
			if pos, on := n.lims[k].charge(now, u); on {
				ts = append(ts, target{n, k, n.lims[k].gen, pos})
			}
		}
	}
	return ts
}

// wakeAt is the time at which every target is cleared under the current
// rates; targets of limits since turned off or re-enabled are ignored.
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
// they are less than MinSleep away. m holds the waiter's reusable timer and
// target buffer.
func (t *Throttle) wait(ctx context.Context, m *Meter, d usage.Reading) error {
	r := t.root
	r.mu.Lock()
	now := r.now()
	m.targets = t.charge(now, d, m.targets[:0])
	wake := wakeAt(m.targets)
	updated := r.updated
	r.mu.Unlock()
	if wake-now < r.opts.MinSleep {
		return ctx.Err()
	}

	began := now
	var err error
	for wake-now >= r.opts.MinSleep {
		m.arm(wake - now)
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-m.timer.C:
		case <-updated: // settings changed: recompute wake
		}
		r.mu.Lock()
		now = r.now()
		wake = wakeAt(m.targets)
		updated = r.updated
		r.mu.Unlock()
		if err != nil {
			break
		}
	}
	m.disarm()
	r.mu.Lock()
	for n := t; n != nil; n = n.parent {
		n.slept += now - began
		n.sleeps++
	}
	r.mu.Unlock()
	if err == nil {
		err = ctx.Err()
	}
	return err
}
