package adaptive

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Binding names what limits the vacuum's budget now, as a VacuumRun's
// status shows it.
type Binding string

// The bindings.
const (
	// ForegroundLatency: the foreground's latency percentile holds the
	// budget below the ceiling.
	ForegroundLatency Binding = "ForegroundLatency"
	// ReplicationLag: a standby's replication lag does.
	ReplicationLag Binding = "ReplicationLag"
	// Ceiling: the static throttle does; no signal is near its target.
	Ceiling Binding = "Ceiling"
	// Floor: the signals want less than the floor, which the law never
	// goes below outside HardStop.
	Floor Binding = "Floor"
	// HardStop: a signal is above HardStopFactor times its target and the
	// vacuum is paused.
	HardStop Binding = "HardStop"
)

// Kind is how a signal responds to the vacuum's rate.
type Kind int

// The kinds of signal.
const (
	// Level: the signal follows the rate, as a latency percentile does.
	Level Kind = iota
	// Integrating: the signal grows while the rate is above what drains it
	// and shrinks while below, as a standby's lag does.
	Integrating
)

// Signal is one signal the law keeps at or under its target.
type Signal struct {
	// Binding is what status calls the signal when it binds.
	Binding Binding
	// Kind says how it responds to the rate.
	Kind Kind
	// Target is the value not to exceed, in the signal's unit (> 0).
	Target float64
}

// Sample is one period's reading of a signal.
type Sample struct {
	// Value in the signal's unit.
	Value float64
	// Fresh is false when there was no new reading this period (no
	// foreground statements, the standby gone): the budget then holds.
	Fresh bool
}

// Config sets the law. Zero fields take the defaults named on each.
type Config struct {
	// Signals are the signals to steer by, at least one.
	Signals []Signal
	// Floor is the smallest budget outside HardStop, as a fraction of the
	// ceiling in (0, 1]; default 0.1 (floorPerMille 100).
	Floor float64
	// Period is the control period; default 100ms.
	Period time.Duration
	// DeadBand is the relative distance from a target within which the
	// budget holds; default 0.05.
	DeadBand float64
	// Dwell is how many periods after a change the law waits before it
	// judges again; default 3. It should cover the window the signals are
	// measured over. A negative Dwell is none: a law stepped between
	// PostgreSQL tables judges each table, run whole at the budget in force.
	Dwell int
	// MaxCut is the smallest factor one step may multiply the budget by;
	// default 0.5.
	MaxCut float64
	// MaxRaise is the largest relative raise of one step; default 0.10.
	MaxRaise float64
	// UsedToRaise is the share of the budget the vacuum must have used in
	// the last period for a raise; default 0.9.
	UsedToRaise float64
	// HardStopFactor: a signal above this multiple of its target pauses the
	// vacuum; default 2.
	HardStopFactor float64
	// HardStopMax is the longest single pause; default 5s.
	HardStopMax time.Duration
	// Horizon is how far ahead an integrating signal is predicted from its
	// trend; default 1s.
	Horizon time.Duration
	// Start is the budget the law starts at, in (0, 1]. By default it is 1
	// (the ceiling) when every signal is a Level, and the floor when any is
	// Integrating: a latency falls as soon as the vacuum slows, but a lag
	// that a start too fast has built is a debt the standby must replay
	// before it shrinks, so a lag target is approached from below, by the
	// law's slow raises. A controller that replaces another (the targets
	// changed) starts at the budget in force, raised to the floor if below
	// it.
	Start float64
	// Recovery, when above 1+MaxRaise, is the largest factor of one raise
	// while the budget climbs back after a HardStop to the rate it
	// remembers, as TCP's slow start climbs back to its ssthresh: the last
	// budget a judgement found holding every target, or, when none did
	// since the last cut, half the budget the HardStop began at. Above that
	// rate the raises are MaxRaise's again. Default 0: no recovery, every
	// raise is at most MaxRaise (a law resumed at the floor then climbs back
	// by 10 % a judgement: 33 judgements from a 12-per-mille floor to 0.25).
	Recovery float64
}

func (c Config) withDefaults() Config {
	def := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Floor, 0.1)
	def(&c.DeadBand, 0.05)
	def(&c.MaxCut, 0.5)
	def(&c.MaxRaise, 0.10)
	def(&c.UsedToRaise, 0.9)
	def(&c.HardStopFactor, 2)
	if c.Period == 0 {
		c.Period = 100 * time.Millisecond
	}
	if c.Dwell == 0 {
		c.Dwell = 3
	} else if c.Dwell < 0 {
		c.Dwell = 0
	}
	if c.HardStopMax == 0 {
		c.HardStopMax = 5 * time.Second
	}
	if c.Horizon == 0 {
		c.Horizon = time.Second
	}
	if c.Start == 0 {
		c.Start = 1
		for _, s := range c.Signals {
			if s.Kind == Integrating {
				c.Start = c.Floor
			}
		}
	}
	return c
}

// Validate reports the first setting out of range.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case len(c.Signals) == 0:
		return errors.New("adaptive: no signal to steer by")
	case c.Floor <= 0 || c.Floor > 1:
		return fmt.Errorf("adaptive: floor %g is not in (0, 1]", c.Floor)
	case c.Period < 0 || c.HardStopMax < 0 || c.Horizon < 0:
		return errors.New("adaptive: negative period, hard-stop limit or horizon")
	case c.DeadBand < 0 || c.DeadBand >= 1:
		return fmt.Errorf("adaptive: dead band %g is not in [0, 1)", c.DeadBand)
	case c.MaxCut <= 0 || c.MaxCut >= 1:
		return fmt.Errorf("adaptive: largest cut factor %g is not in (0, 1)", c.MaxCut)
	case c.MaxRaise <= 0:
		return fmt.Errorf("adaptive: largest raise %g is not positive", c.MaxRaise)
	case c.HardStopFactor <= 1:
		return fmt.Errorf("adaptive: hard-stop factor %g is not above 1", c.HardStopFactor)
	case c.Start < 0 || c.Start > 1 || math.IsNaN(c.Start):
		return fmt.Errorf("adaptive: start budget %g is not in (0, 1]", c.Start)
	case c.Recovery < 0 || math.IsNaN(c.Recovery) || math.IsInf(c.Recovery, 0):
		return fmt.Errorf("adaptive: recovery factor %g is not 0 or a positive number", c.Recovery)
	}
	for i, s := range c.Signals {
		if !(s.Target > 0) || math.IsInf(s.Target, 0) {
			return fmt.Errorf("adaptive: signal %d (%s) has target %g, want a positive number", i, s.Binding, s.Target)
		}
	}
	return nil
}

// Decision is what the vacuum should do for the next period.
type Decision struct {
	// Budget is the rate to run at, as a fraction of the static ceiling,
	// in [Floor, 1]. While Paused it is the rate to resume at.
	Budget float64
	// Paused: stop at the next delay point (HardStop).
	Paused bool
	// Binding is what limits the budget now.
	Binding Binding
}

// Controller is the law's state between periods. It is not safe for
// concurrent use: one goroutine steps it.
type Controller struct {
	cfg       Config
	budget    float64
	binding   Binding
	wait      int // periods of dwell left
	paused    int // periods paused in the current hard stop (0: running)
	maxPaused int // HardStopMax in periods
	calm      int // periods after a hard stop's resume before another may start
	futile    int // pauses in a row that ran out with the signal still over (0 after one that helped)
	sigs      []signalState
	// held is the budget of the last judgement that found every signal
	// fresh and at or under its target (within the dead band), lowered to
	// the budget a cut chose when a cut refutes it; 0: none.
	held float64
	// recoverTo is the rate a climb after a HardStop returns to by
	// Config.Recovery's raises; 0 when none is under way.
	recoverTo float64
}

// signalState is what the law remembers of one signal.
type signalState struct {
	// Level signals: the last judged point, for the secant.
	lastLogBudget, lastLogValue float64
	haveLast                    bool
	elasticity                  float64 // d log(value) / d log(budget)
	// Integrating signals: the value at the last judgement and the periods
	// since, the trend then, and the gain: how much the trend changes per
	// unit of budget (learnt from the last two judgements; 0 until then).
	judged      float64
	haveJudged  bool
	periods     int
	judgedSlope float64
	judgedAt    float64 // the budget the trend was measured at
	haveSlope   bool
	gain        float64
}

// initialElasticity is the secant's first guess: a signal that reacts twice
// as strongly as the rate (log-log). Guessing high makes the first cut
// smaller than a proportional one, which avoids undershooting a plant that
// is convex, as a queue near saturation is.
const initialElasticity = 2

// New returns a controller that starts at Config.Start (by default the
// ceiling, or the floor when a signal integrates). It fails on a
// configuration Validate refuses.
func New(cfg Config) (*Controller, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	c := &Controller{cfg: cfg, budget: max(cfg.Floor, cfg.Start), binding: Ceiling, sigs: make([]signalState, len(cfg.Signals))}
	switch {
	case c.budget <= cfg.Floor:
		c.binding = Floor
	case c.budget < 1:
		c.binding = cfg.Signals[0].Binding // what held it there is not known; the first judgement says
	}
	for i := range c.sigs {
		c.sigs[i].elasticity = initialElasticity
	}
	c.maxPaused = max(1, int(cfg.HardStopMax/cfg.Period))
	return c, nil
}

// Budget returns the current decision without stepping.
func (c *Controller) Budget() Decision {
	return Decision{Budget: c.budget, Paused: c.paused > 0, Binding: c.binding}
}

// Step takes one period's samples (in the order of Config.Signals; a
// missing one counts as stale) and the share of the budget the vacuum used
// in that period (its measured rate divided by the budget's rate; 0 when it
// was paused or idle), and returns the decision for the next period.
func (c *Controller) Step(samples []Sample, used float64) Decision {
	sample := func(i int) Sample {
		if i < len(samples) && !math.IsNaN(samples[i].Value) && !math.IsInf(samples[i].Value, 0) {
			return samples[i]
		}
		return Sample{}
	}
	for i := range c.sigs {
		c.sigs[i].periods++
	}
	if d, ok := c.hardStop(sample); ok {
		return d
	}
	if c.wait > 0 {
		c.wait--
		return c.Budget()
	}

	// A climb back after a HardStop may raise by up to Recovery at once,
	// never past the rate it returns to: as far as each signal's own step
	// (the secant's estimate of the rate that holds it) goes.
	hi := 1 + c.cfg.MaxRaise
	if c.cfg.Recovery > hi && c.budget < c.recoverTo {
		hi = max(hi, min(c.cfg.Recovery, c.recoverTo/c.budget))
	}
	next, allFresh, worst := math.Inf(1), true, -1
	worstRatio := math.Inf(-1)
	for i, s := range c.cfg.Signals {
		x := sample(i)
		if !x.Fresh {
			allFresh = false
			next = min(next, c.budget)
			continue
		}
		if r := x.Value / s.Target; r > worstRatio {
			worstRatio, worst = r, i
		}
		next = min(next, c.budget*c.factor(i, x.Value, hi))
	}
	if next > c.budget && (!allFresh || used < c.cfg.UsedToRaise) {
		next = c.budget // anti-windup, and stale signals never raise
	}
	next = min(1, max(c.cfg.Floor, next))
	c.remember(allFresh, worstRatio, next)

	switch {
	case next >= 1:
		c.binding = Ceiling
	case next <= c.cfg.Floor:
		c.binding = Floor
	case worst >= 0:
		c.binding = c.cfg.Signals[worst].Binding
	}
	if math.Abs(next-c.budget) > 1e-9*c.budget {
		c.budget = next
		c.wait = c.cfg.Dwell
	}
	return c.Budget()
}

// remember keeps the rates a recovery returns to: a judgement with every
// signal fresh and at most its target (the dead band's top) found the
// budget in force holding; one over a target refutes a held rate at or above
// the budget it was judged at, and the cut's choice next is then the best
// estimate. A climb back ends once it reaches its rate, or at a cut.
func (c *Controller) remember(allFresh bool, worstRatio, next float64) {
	switch {
	case allFresh && worstRatio <= 1+c.cfg.DeadBand:
		c.held = c.budget
		c.futile, c.calm = 0, 0 // an overload that outlasted the pauses is over
	case worstRatio > 1+c.cfg.DeadBand:
		if c.held >= c.budget {
			c.held = next
		}
		if next < c.budget {
			// Over before the climb reached its rate: that rate does not
			// hold now (TCP leaves slow start on a loss too).
			c.recoverTo = 0
		}
	}
	if next >= c.recoverTo {
		c.recoverTo = 0
	}
}

// futileCalmShift bounds the wait before the next pause after pauses that did not help:
// at most 2^futileCalmShift pauses' length (40 s at the default 5 s).
const futileCalmShift = 3

// hardStop runs the HardStop tier: it reports ok with the decision while
// the tier decides the period.
func (c *Controller) hardStop(sample func(int) Sample) (Decision, bool) {
	over := false
	for i, s := range c.cfg.Signals {
		if x := sample(i); x.Fresh && x.Value > c.cfg.HardStopFactor*s.Target {
			over = true
		}
	}
	if c.paused > 0 {
		if !over || c.paused >= c.maxPaused {
			// Resume at the floor. A pause that ran out with the signal still
			// over did not help: the foreground stayed slow with the vacuum
			// stopped, so the vacuum is not what makes it slow. The next pause
			// then waits until the vacuum has run at the floor for as long as it
			// paused, twice that after a second such pause, and so on up to
			// futileCalmMax pauses' length: a vacuum never gives up more than
			// half its floor to an overload that is not its own, and one that
			// stays gives it back nearly all.
			c.paused, c.budget, c.binding, c.wait = 0, c.cfg.Floor, Floor, c.cfg.Dwell
			if over {
				c.futile++
				c.calm = max(c.cfg.Dwell, c.maxPaused<<min(c.futile-1, futileCalmShift))
			} else {
				c.futile = 0
			}
			return c.Budget(), true
		}
		c.paused++
		return c.Budget(), true
	}
	if c.calm > 0 {
		c.calm--
		return Decision{}, false
	}
	if over {
		// The rate to climb back to: the last that held (above the budget
		// when a stop comes during a climb back: the climb starts again),
		// or, when none has, as TCP's ssthresh after a timeout, half of the
		// one the stop began at.
		c.recoverTo = c.held
		if c.recoverTo <= 0 {
			c.recoverTo = c.budget * c.cfg.MaxCut
		}
		c.paused, c.budget, c.binding = 1, c.cfg.Floor, HardStop
		return c.Budget(), true
	}
	return Decision{}, false
}

// factor is the step signal i asks for: the budget multiplied by it
// brings the signal to its target, as far as the law can tell, bounded by
// MaxCut and hi (1+MaxRaise, or more in a climb back); 1 inside the dead
// band.
func (c *Controller) factor(i int, v, hi float64) float64 {
	s, st := c.cfg.Signals[i], &c.sigs[i]
	lo := c.cfg.MaxCut
	if s.Kind == Integrating {
		return c.integratingFactor(s, st, v, hi)
	}
	lb := math.Log(c.budget)
	if v > 0 {
		lv := math.Log(v)
		if st.haveLast && math.Abs(lb-st.lastLogBudget) > 0.01 {
			if e := (lv - st.lastLogValue) / (lb - st.lastLogBudget); e > 0 {
				st.elasticity = min(4, max(0.25, e))
			}
		}
		st.lastLogBudget, st.lastLogValue, st.haveLast = lb, lv, true
	}
	if math.Abs(v/s.Target-1) <= c.cfg.DeadBand {
		return 1
	}
	if v <= 0 {
		return hi
	}
	return min(hi, max(lo, math.Pow(s.Target/v, 1/st.elasticity)))
}

// integratingFactor steers a lag. Its trend over the periods since the last
// judgement is how fast the budget of those periods made it grow or shrink;
// comparing two judgements' trends and budgets gives the gain (trend per
// unit of budget), and from it the budget whose trend brings the lag to its
// target within Horizon. Until two judgements exist it steps on the ratio
// of the target to the lag predicted a horizon ahead.
func (c *Controller) integratingFactor(s Signal, st *signalState, v, hi float64) float64 {
	lo := c.cfg.MaxCut
	h := c.cfg.Horizon.Seconds()
	var slope float64
	haveSlope := st.haveJudged && st.periods > 0
	if haveSlope {
		slope = (v - st.judged) / (float64(st.periods) * c.cfg.Period.Seconds())
		if st.haveSlope && math.Abs(c.budget/st.judgedAt-1) > 0.02 && !(v == 0 && st.judged == 0) {
			if g := (slope - st.judgedSlope) / (c.budget - st.judgedAt); g > 0 {
				st.gain = g
			}
		}
		st.judgedSlope, st.judgedAt, st.haveSlope = slope, c.budget, true
	}
	st.judged, st.haveJudged, st.periods = v, true, 0

	p := v + slope*h
	if math.Abs(p/s.Target-1) <= c.cfg.DeadBand {
		return 1
	}
	if st.gain > 0 && haveSlope {
		want := c.budget + ((s.Target-v)/h-slope)/st.gain
		return min(hi, max(lo, want/c.budget))
	}
	if p <= 0 {
		return hi
	}
	return min(hi, max(lo, s.Target/p))
}
