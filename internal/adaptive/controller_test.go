package adaptive

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// The plants below are simulated in simulated time: one call of step is one
// control period (100 ms by default) during which the vacuum ran at rate
// (a fraction of its ceiling; 0 while paused).

type plant interface {
	// step runs one period at rate and returns the signal's reading at its end.
	step(rate float64) float64
}

// levelPlant is a foreground whose latency percentile grows with the
// vacuum's rate, measured over the last window periods (as a percentile over
// a sliding window is), with multiplicative noise.
type levelPlant struct {
	latency func(rate float64) float64
	window  int
	noise   float64
	rng     *rand.Rand
	hist    []float64
}

func (p *levelPlant) step(rate float64) float64 {
	v := p.latency(rate)
	if p.noise > 0 {
		v *= 1 + p.noise*(2*p.rng.Float64()-1)
	}
	p.hist = append(p.hist, v)
	if len(p.hist) > p.window {
		p.hist = p.hist[1:]
	}
	sum := 0.0
	for _, x := range p.hist {
		sum += x
	}
	return sum / float64(len(p.hist))
}

// linear is latency base + gain*rate.
func linear(base, gain float64) func(float64) float64 {
	return func(r float64) float64 { return base + gain*r }
}

// queue is a foreground sharing a device with the vacuum: latency
// base/(1 - rho*rate), the M/M/1 shape, rho the utilization at the ceiling.
func queue(base, rho float64) func(float64) float64 {
	return func(r float64) float64 { return base / (1 - rho*r) }
}

// standbyPlant is a standby applying WAL at a fixed rate while the vacuum
// writes walAtCeiling bytes per second at budget 1: the lag integrates the
// difference. With inFlight above 0 the reading also counts the WAL of the
// last inFlight seconds, sent but not yet replayed, as a real standby's lag
// does even while it keeps up.
type standbyPlant struct {
	walAtCeiling, apply float64
	dt                  float64
	inFlight            float64
	lag                 float64
}

func (p *standbyPlant) step(rate float64) float64 {
	p.lag = max(0, p.lag+(rate*p.walAtCeiling-p.apply)*p.dt)
	return p.lag + rate*p.walAtCeiling*p.inFlight
}

// trace is what a simulation recorded per period.
type trace struct {
	budget  []float64 // the rate the vacuum ran at (0 while paused)
	value   []float64
	binding []Binding
	paused  []bool
}

// simulate runs c against p for n periods; change, when set, is called
// before each period and may swap the plant.
func simulate(t *testing.T, c *Controller, p plant, n int, change func(k int) plant) trace {
	t.Helper()
	var tr trace
	d := c.Budget()
	for k := range n {
		if change != nil {
			if q := change(k); q != nil {
				p = q
			}
		}
		rate := d.Budget
		if d.Paused {
			rate = 0
		}
		v := p.step(rate)
		used := 1.0
		if d.Paused {
			used = 0
		}
		tr.budget = append(tr.budget, rate)
		tr.value = append(tr.value, v)
		tr.binding = append(tr.binding, d.Binding)
		tr.paused = append(tr.paused, d.Paused)
		d = c.Step([]Sample{{Value: v, Fresh: true}}, used)
	}
	return tr
}

// settling returns the first period from which every budget in [from, to)
// stays within tol of want, or -1.
func settling(budgets []float64, from, to int, want, tol float64) int {
	at := -1
	for k := from; k < to; k++ {
		if math.Abs(budgets[k]/want-1) <= tol {
			if at < 0 {
				at = k
			}
		} else {
			at = -1
		}
	}
	return at
}

func mustController(t *testing.T, cfg Config) *Controller {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestStepOfTwiceTheTargetSettlesWithinFiftyPeriods is the issue's
// acceptance of the law on simulated plants: from a rate whose signal is
// twice its target, the rate settles within ±10 % of the rate that holds
// the target within 50 control periods, overshoots it by at most 20 %, and
// stays within ±10 % afterwards.
func TestStepOfTwiceTheTargetSettlesWithinFiftyPeriods(t *testing.T) {
	const target = 0.010 // 10 ms
	cases := []struct {
		name   string
		signal Signal
		plant  func() plant
		want   float64 // the rate that holds the target
	}{
		{
			name:   "linear foreground",
			signal: Signal{Binding: ForegroundLatency, Target: target},
			// 5 ms alone, 20 ms at the ceiling: 10 ms at 1/3.
			plant: func() plant { return &levelPlant{latency: linear(0.005, 0.015), window: 3} },
			want:  1.0 / 3,
		},
		{
			name:   "queueing foreground",
			signal: Signal{Binding: ForegroundLatency, Target: target},
			// 3.9 ms alone; 19.5 ms at the ceiling (rho 0.8); 10 ms at rate 0.7625.
			plant: func() plant { return &levelPlant{latency: queue(0.0039, 0.8), window: 3} },
			want:  0.7625,
		},
		{
			name:   "noisy linear foreground",
			signal: Signal{Binding: ForegroundLatency, Target: target},
			plant: func() plant {
				// ±3 %: 19 ms at the ceiling, so the noise never reaches 2x.
				return &levelPlant{latency: linear(0.005, 0.014), window: 3, noise: 0.03, rng: rand.New(rand.NewPCG(1, 2))}
			},
			want: 5.0 / 14,
		},
		{
			name:   "standby applying half of the ceiling's WAL",
			signal: Signal{Binding: ReplicationLag, Kind: Integrating, Target: 1 << 20},
			// 16 MiB/s of WAL at the ceiling, the standby applies 8 MiB/s.
			plant: func() plant { return &standbyPlant{walAtCeiling: 16 << 20, apply: 8 << 20, dt: 0.1} },
			want:  0.5,
		},
	}
	// Each case with the law's default and with the engine server's Recovery
	// 2: every bound holds for both.
	for _, tc := range cases {
		for _, recovery := range recoveries {
			t.Run(tc.name+recoveryName(recovery), func(t *testing.T) {
				// Start 1: the step starts at the ceiling, where a lag target's law
				// would not start by default.
				c := mustController(t, Config{Signals: []Signal{tc.signal}, Start: 1, Recovery: recovery})
				tr := simulate(t, c, tc.plant(), 200, nil)
				at := settling(tr.budget, 0, len(tr.budget), tc.want, 0.10)
				if at < 0 || at > 50 {
					t.Fatalf("settled at period %d, want within 50; budgets %.3f", at, tr.budget[:60])
				}
				low, high := math.Inf(1), 0.0
				for _, b := range tr.budget {
					low, high = min(low, b), max(high, b)
				}
				if low < 0.8*tc.want {
					t.Errorf("undershoot to %.3f, more than 20 %% below %.3f", low, tc.want)
				}
				if tc.want < 1 && high > 1 {
					t.Errorf("budget %.3f above the ceiling", high)
				}
				t.Logf("settled at period %d; lowest %.3f, want %.3f; last value %.4g", at, low, tc.want, tr.value[len(tr.value)-1])
			})
		}
	}
}

// recoveries are the Config.Recovery values the settling tests run with: the
// law's default (none) and the engine server's.
var recoveries = []float64{0, 2}

func recoveryName(r float64) string {
	if r == 0 {
		return ""
	}
	return fmt.Sprintf(" with recovery %g", r)
}

// TestAPlantThatChangesMidRunIsFollowed: at period 100 the foreground gets
// twice as sensitive to the vacuum, or the standby applies half as fast, and
// the law settles on the new rate as it did on the first, within 50 periods
// of the change and without undershooting it by more than 20 %.
func TestAPlantThatChangesMidRunIsFollowed(t *testing.T) {
	standby := &standbyPlant{walAtCeiling: 16 << 20, apply: 8 << 20, dt: 0.1}
	cases := []struct {
		name          string
		signal        Signal
		first, second plant
		want1, want2  float64
	}{
		{
			name:   "foreground twice as sensitive",
			signal: Signal{Binding: ForegroundLatency, Target: 0.010},
			first:  &levelPlant{latency: linear(0.005, 0.015), window: 3},
			second: &levelPlant{latency: linear(0.005, 0.030), window: 3},
			want1:  1.0 / 3, want2: 1.0 / 6,
		},
		{
			name:   "standby half as fast",
			signal: Signal{Binding: ReplicationLag, Kind: Integrating, Target: 1 << 20},
			first:  standby,
			second: nil, // the same standby, slowed in change below
			want1:  0.5, want2: 0.25,
		},
	}
	for _, tc := range cases {
		for _, recovery := range recoveries {
			t.Run(tc.name+recoveryName(recovery), func(t *testing.T) {
				standby.apply, standby.lag = 8<<20, 0
				first, second := tc.first, tc.second
				if lp, ok := first.(*levelPlant); ok {
					// Fresh plants for each run: a levelPlant keeps its window.
					sp, _ := second.(*levelPlant)
					first, second = &levelPlant{latency: lp.latency, window: lp.window}, &levelPlant{latency: sp.latency, window: lp.window}
				}
				c := mustController(t, Config{Signals: []Signal{tc.signal}, Start: 1, Recovery: recovery})
				tr := simulate(t, c, first, 250, func(k int) plant {
					if k != 100 {
						return nil
					}
					if second == nil {
						standby.apply /= 2
						return nil
					}
					return second
				})
				if at := settling(tr.budget, 0, 100, tc.want1, 0.10); at < 0 || at > 50 {
					t.Fatalf("first plant: settled at %d", at)
				}
				at := settling(tr.budget, 100, 250, tc.want2, 0.10)
				if at < 0 || at > 150 {
					t.Fatalf("changed plant: settled at %d, want within 50 periods of the change; budgets %.3f", at, tr.budget[95:160])
				}
				for k := 100; k < 250; k++ {
					if tr.budget[k] < 0.8*tc.want2 {
						t.Fatalf("period %d: undershoot to %.3f below %.3f", k, tr.budget[k], tc.want2)
					}
				}
				t.Logf("re-settled %d periods after the change", at-100)
			})
		}
	}
}

// TestALagTargetIsApproachedFromBelowAndHeldFromTheFirstPeriod is experiment
// 10's replication-lag plant in small: a FULL whose WAL at the ceiling is ten
// times what the standby applies, so that one period at the ceiling already
// puts the lag over its target. A law that started at the ceiling goes over
// the target at once and pays it back for seconds (the standby must replay
// it); by default a lag target's law starts at the floor and raises slowly,
// so the lag stays under the target through the first second, never goes
// over it by more than the one raise (MaxRaise, 10 %) that crosses the
// standby's apply rate can add before the law sees it and cuts, and the rate
// still comes within 10 % of the rate that holds it within 50 periods.
func TestALagTargetIsApproachedFromBelowAndHeldFromTheFirstPeriod(t *testing.T) {
	const target = 250e3 // bytes
	sig := Signal{Binding: ReplicationLag, Kind: Integrating, Target: target}
	// 20 MB/s of WAL at the ceiling, 2 MB/s applied, 100 ms in flight: the
	// lag holds at rate 0.1 (200 kB in flight) and grows above it.
	standby := func() plant { return &standbyPlant{walAtCeiling: 20e6, apply: 2e6, dt: 0.1, inFlight: 0.1} }
	const want = 0.1

	atCeiling := simulate(t, mustController(t, Config{Signals: []Signal{sig}, Floor: 0.05, Start: 1}), standby(), 10, nil)
	if atCeiling.value[0] <= target {
		t.Fatalf("the plant is too gentle for this test: %.0f bytes after one period at the ceiling, want above %.0f", atCeiling.value[0], target)
	}

	c := mustController(t, Config{Signals: []Signal{sig}, Floor: 0.05})
	if d := c.Budget(); d.Budget != 0.05 || d.Binding != Floor {
		t.Fatalf("a lag target's law starts at %+v, want the floor 0.05", d)
	}
	tr := simulate(t, c, standby(), 200, nil)
	for k, v := range tr.value {
		most := (1 + c.cfg.MaxRaise) * target
		if k < 10 {
			most = target
		}
		if v > most || tr.paused[k] {
			t.Fatalf("period %d: lag %.0f bytes (paused %v) at rate %.3f, want at most %.0f and no HardStop; rates %.3f",
				k, v, tr.paused[k], tr.budget[k], most, tr.budget[:min(len(tr.budget), k+5)])
		}
	}
	if at := settling(tr.budget, 0, len(tr.budget), want, 0.10); at < 0 || at > 50 {
		t.Fatalf("settled at period %d, want within 50; rates %.3f", at, tr.budget[:80])
	}
}

// TestTheFloorHoldsWhenEvenItIsTooFast: a foreground over its target at any
// rate (but not twice over) keeps the vacuum at the floor, bound by Floor,
// never below.
func TestTheFloorHoldsWhenEvenItIsTooFast(t *testing.T) {
	c := mustController(t, Config{Signals: []Signal{{Binding: ForegroundLatency, Target: 0.010}}, Floor: 0.2})
	tr := simulate(t, c, &levelPlant{latency: linear(0.012, 0.006), window: 3}, 100, nil)
	for k, b := range tr.budget {
		if b < 0.2-1e-12 || tr.paused[k] {
			t.Fatalf("period %d: rate %.3f paused %v, want at least the floor 0.2 and no pause", k, b, tr.paused[k])
		}
	}
	if got := tr.binding[len(tr.binding)-1]; got != Floor || tr.budget[len(tr.budget)-1] != 0.2 {
		t.Fatalf("ended bound by %s at %.3f, want Floor at 0.2", got, tr.budget[len(tr.budget)-1])
	}
}

// TestHardStopPausesAtMostFiveSecondsThenResumesAtTheFloor: a foreground at
// more than twice its target pauses the vacuum; a pause lasts at most
// HardStopMax (50 periods), then the vacuum runs at the floor; once the
// foreground recovers, the budget climbs again.
func TestHardStopPausesAtMostFiveSecondsThenResumesAtTheFloor(t *testing.T) {
	for _, recovery := range recoveries {
		t.Run("recovery"+recoveryName(recovery), func(t *testing.T) { testHardStop(t, recovery) })
	}
}

func testHardStop(t *testing.T, recovery float64) {
	c := mustController(t, Config{Signals: []Signal{{Binding: ForegroundLatency, Target: 0.010}}, Recovery: recovery})
	bad := &levelPlant{latency: linear(0.025, 0.010), window: 1} // 25 ms even when paused
	good := &levelPlant{latency: linear(0.002, 0.004), window: 1}
	tr := simulate(t, c, bad, 300, func(k int) plant {
		if k == 200 {
			return good
		}
		return nil
	})
	run, pauses := 0, 0
	for k := range 200 {
		if tr.paused[k] {
			run++
			if run > 50 {
				t.Fatalf("period %d: paused for %d periods, more than 5 s", k, run)
			}
			if tr.binding[k] != HardStop {
				t.Fatalf("period %d: paused but bound by %s", k, tr.binding[k])
			}
			continue
		}
		if run > 0 {
			pauses++
		}
		run = 0
		if k > 0 && tr.budget[k] < c.cfg.Floor-1e-12 {
			t.Fatalf("period %d: ran at %.3f below the floor", k, tr.budget[k])
		}
	}
	if pauses < 2 {
		t.Fatalf("%d pauses in 20 s of a foreground over twice its target, want repeated 5-s pauses", pauses)
	}
	last := tr.budget[len(tr.budget)-1]
	if tr.paused[len(tr.paused)-1] || last <= c.cfg.Floor {
		t.Fatalf("after the foreground recovered: paused %v at %.3f, want running above the floor", tr.paused[len(tr.paused)-1], last)
	}
}

// TestPausesThatDoNotHelpGiveTheVacuumBackItsFloor: a foreground over twice its target
// whatever the vacuum does (25 ms against 10 ms, paused or not) for a minute: each pause
// runs out without helping, so the law pauses less and less often, and the vacuum keeps at
// least half of what the floor would have done in that minute (a pause of 5 s after every
// few periods at the floor kept a 184-s run of experiment 10 at HardStop and the floor for
// 132 s). Once the foreground holds its target again, an overload the vacuum does cause
// is paused at once, as before.
func TestPausesThatDoNotHelpGiveTheVacuumBackItsFloor(t *testing.T) {
	const (
		target   = 0.010
		floor    = 0.1
		overload = 600 // periods: a minute
		good     = 100
	)
	c := mustController(t, Config{Signals: []Signal{{Binding: ForegroundLatency, Target: target}}, Floor: floor, Recovery: 2})
	bad := &levelPlant{latency: linear(0.025, 0.010), window: 1}
	fine := &levelPlant{latency: linear(0.002, 0.004), window: 1}
	heavy := &levelPlant{latency: linear(0.002, 0.200), window: 1} // over twice the target above 0.09
	tr := simulate(t, c, bad, overload+good+100, func(k int) plant {
		switch k {
		case overload:
			return fine
		case overload + good:
			return heavy
		}
		return nil
	})
	work, pauses, run := 0.0, 0, 0
	for k := range overload {
		work += tr.budget[k]
		if tr.paused[k] {
			run++
			if run > 50 {
				t.Fatalf("period %d: paused for %d periods, more than 5 s", k, run)
			}
			continue
		}
		if run > 0 {
			pauses++
		}
		run = 0
		if tr.budget[k] < floor-1e-12 {
			t.Fatalf("period %d: ran at %.3f below the floor", k, tr.budget[k])
		}
	}
	if pauses < 2 {
		t.Fatalf("%d pauses in a minute over twice the target, want HardStop to keep trying", pauses)
	}
	if least := 0.5 * floor * overload; work < least {
		t.Fatalf("the vacuum did %.1f periods' worth at the ceiling in the minute, want at least half the floor's %.1f (%d pauses)",
			work, least, pauses)
	}
	t.Logf("%d pauses, %.1f of the floor's %.1f in the minute", pauses, work, floor*overload)
	for k := overload + good; k < overload+good+5; k++ {
		if tr.paused[k] {
			return
		}
	}
	t.Fatalf("no pause within 5 periods of an overload the vacuum causes, after the foreground had held its target; budgets %.3f",
		tr.budget[overload+good-5:overload+good+20])
}

// TestStaleSignalsHoldTheBudgetAndNeverRaiseIt: with no fresh sample the
// budget holds, however low it is.
func TestStaleSignalsHoldTheBudgetAndNeverRaiseIt(t *testing.T) {
	c := mustController(t, Config{Signals: []Signal{{Binding: ForegroundLatency, Target: 0.010}}})
	p := &levelPlant{latency: linear(0.005, 0.015), window: 3}
	simulate(t, c, p, 60, nil)
	held := c.Budget().Budget
	for k := range 100 {
		d := c.Step([]Sample{{Value: 0.001, Fresh: false}}, 1)
		if d.Budget != held || d.Paused {
			t.Fatalf("stale period %d: budget %.4f paused %v, want %.4f held", k, d.Budget, d.Paused, held)
		}
	}
	for k := range 100 {
		if d := c.Step(nil, 1); d.Budget != held {
			t.Fatalf("missing sample %d: budget %.4f, want %.4f held", k, d.Budget, held)
		}
	}
	// One of two signals stale: the fresh one may cut but not raise.
	c2 := mustController(t, Config{Signals: []Signal{
		{Binding: ForegroundLatency, Target: 0.010},
		{Binding: ReplicationLag, Kind: Integrating, Target: 1 << 20},
	}})
	c2.Step([]Sample{{Value: 0.020, Fresh: true}, {Value: 0, Fresh: true}}, 1)
	low := c2.Budget().Budget
	for range 50 {
		c2.Step([]Sample{{Value: 0.001, Fresh: true}, {Fresh: false}}, 1)
	}
	if got := c2.Budget().Budget; got > low {
		t.Fatalf("budget rose from %.3f to %.3f while the lag signal was stale", low, got)
	}
}

// TestNoRaiseWhileTheBudgetGoesUnused is the anti-windup rule: a vacuum
// that used half its budget (I/O-bound, or between tables) is not given
// more, however low the latency.
func TestNoRaiseWhileTheBudgetGoesUnused(t *testing.T) {
	c := mustController(t, Config{Signals: []Signal{{Binding: ForegroundLatency, Target: 0.010}}})
	c.Step([]Sample{{Value: 0.030, Fresh: false}}, 1) // stale: no change
	c.Step([]Sample{{Value: 0.015, Fresh: true}}, 1)  // a cut
	cut := c.Budget().Budget
	if cut >= 1 {
		t.Fatalf("no cut from a latency 1.5x the target: %.3f", cut)
	}
	for range 100 {
		c.Step([]Sample{{Value: 0.002, Fresh: true}}, 0.5)
	}
	if got := c.Budget().Budget; got != cut {
		t.Fatalf("budget %.3f after 100 periods of half use, want %.3f held", got, cut)
	}
	for range 100 {
		c.Step([]Sample{{Value: 0.002, Fresh: true}}, 1)
	}
	if d := c.Budget(); d.Budget != 1 || d.Binding != Ceiling {
		t.Fatalf("fully used with a low latency: %+v, want the ceiling", d)
	}
}

// TestRaisesAreSlowAndCutsFast: one raise adds at most 10 %, one cut may
// halve.
func TestRaisesAreSlowAndCutsFast(t *testing.T) {
	c := mustController(t, Config{Signals: []Signal{{Binding: ForegroundLatency, Target: 0.010}}, Dwell: 1})
	prev := c.Budget().Budget
	c.Step([]Sample{{Value: 1, Fresh: false}}, 1)
	for k := range 40 {
		v := 0.100
		if k >= 20 {
			v = 0.001
		}
		d := c.Step([]Sample{{Value: v, Fresh: true}}, 1)
		if d.Paused {
			prev = d.Budget
			continue
		}
		if d.Budget < 0.5*prev-1e-12 || d.Budget > 1.1*prev+1e-12 {
			t.Fatalf("period %d: %.4f after %.4f, want within [0.5x, 1.1x]", k, d.Budget, prev)
		}
		prev = d.Budget
	}
}

// TestBindingNamesTheSignalNearestItsTarget: two signals, the standby's lag
// binds when it is the one near its target.
func TestBindingNamesTheSignalNearestItsTarget(t *testing.T) {
	c := mustController(t, Config{Signals: []Signal{
		{Binding: ForegroundLatency, Target: 0.010},
		{Binding: ReplicationLag, Kind: Integrating, Target: 1 << 20},
	}})
	fg := &levelPlant{latency: linear(0.002, 0.002), window: 3} // never near 10 ms
	sb := &standbyPlant{walAtCeiling: 16 << 20, apply: 4 << 20, dt: 0.1}
	d := c.Budget()
	for range 200 {
		rate := d.Budget
		if d.Paused {
			rate = 0
		}
		d = c.Step([]Sample{{Value: fg.step(rate), Fresh: true}, {Value: sb.step(rate), Fresh: true}}, 1)
	}
	if d.Binding != ReplicationLag || math.Abs(d.Budget/0.25-1) > 0.10 {
		t.Fatalf("%+v, want bound by ReplicationLag near 0.25", d)
	}
}

// TestConfigValidateRefusesOutOfRangeSettings.
func TestConfigValidateRefusesOutOfRangeSettings(t *testing.T) {
	ok := []Signal{{Binding: ForegroundLatency, Target: 0.01}}
	for name, cfg := range map[string]Config{
		"no signal":         {},
		"floor above 1":     {Signals: ok, Floor: 1.5},
		"negative floor":    {Signals: ok, Floor: -0.1},
		"zero target":       {Signals: []Signal{{Binding: ForegroundLatency}}},
		"NaN target":        {Signals: []Signal{{Binding: ForegroundLatency, Target: math.NaN()}}},
		"dead band 1":       {Signals: ok, DeadBand: 1},
		"cut factor 1":      {Signals: ok, MaxCut: 1},
		"hard stop at 1x":   {Signals: ok, HardStopFactor: 1},
		"negative period":   {Signals: ok, Period: -time.Second},
		"negative raise":    {Signals: ok, MaxRaise: -0.1},
		"negative horizon":  {Signals: ok, Horizon: -time.Second},
		"negative recovery": {Signals: ok, Recovery: -2},
		"NaN recovery":      {Signals: ok, Recovery: math.NaN()},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := New(Config{Signals: ok}); err != nil {
		t.Fatalf("defaults refused: %v", err)
	}
}

// TestAControllerStartsAtItsStartBudgetRaisedToTheFloor: Config.Start sets the first
// budget (a controller that replaces another keeps the budget in force), never below the
// floor, and a start outside (0, 1] is refused.
func TestAControllerStartsAtItsStartBudgetRaisedToTheFloor(t *testing.T) {
	sig := []Signal{{Binding: ForegroundLatency, Kind: Level, Target: 1}}
	for _, tc := range []struct {
		start, want float64
		binding     Binding
	}{
		{0, 1, Ceiling}, {1, 1, Ceiling}, {0.4, 0.4, ForegroundLatency}, {0.05, 0.1, Floor},
	} {
		c, err := New(Config{Signals: sig, Start: tc.start})
		if err != nil {
			t.Fatalf("start %g: %v", tc.start, err)
		}
		if d := c.Budget(); d.Budget != tc.want || d.Binding != tc.binding {
			t.Errorf("start %g: %+v, want budget %g bound by %s", tc.start, d, tc.want, tc.binding)
		}
	}
	for _, bad := range []float64{-0.1, 1.5} {
		if _, err := New(Config{Signals: sig, Start: bad}); err == nil {
			t.Errorf("start %g accepted", bad)
		}
	}
}

// spikePlant is a foreground whose latency jumps by extra during periods
// [from, to) whatever the vacuum does (another load's burst), then returns.
type spikePlant struct {
	levelPlant
	k, from, to int
	extra       float64
}

func (p *spikePlant) step(rate float64) float64 {
	base := p.latency
	if p.k >= p.from && p.k < p.to {
		p.latency = func(r float64) float64 { return base(r) + p.extra }
	}
	v := p.levelPlant.step(rate)
	p.latency = base
	p.k++
	return v
}

// TestAfterATransientHardStopTheRateReturnsToTheRateThatHeld: a foreground
// holding its target at rate 1/3 has a burst of 30 ms for 5 periods (over
// twice the target, whatever the vacuum does): the law pauses, resumes at the
// floor once the burst has left the signal's window, and with Recovery 2
// climbs back by doublings to the rate its last judgement found holding.
// It is back within 10 % of 1/3 within N periods of the burst's end, N =
// window (the burst leaves the signal) + 1 (the resume) + (Dwell+1) per
// judgement, for one judgement after the resume's dwell and
// ceil(log2((1/3)/floor)) = 2 doublings from the floor 0.1: 3+1+4·3 = 16;
// it does not overshoot by more than 10 % nor leave the ±10 % band again.
// Without Recovery the same law needs 13 raises of 10 % (over 50 periods).
func TestAfterATransientHardStopTheRateReturnsToTheRateThatHeld(t *testing.T) {
	const (
		target           = 0.010
		window           = 3
		from, to         = 100, 105
		want             = 1.0 / 3
		floor            = 0.1
		dwell            = 3
		runFor           = 250
		withinPeriodsMax = window + 1 + (dwell+1)*3 // 16: see the comment
	)
	sig := Signal{Binding: ForegroundLatency, Target: target}
	run := func(recovery float64) trace {
		c := mustController(t, Config{Signals: []Signal{sig}, Start: 1, Floor: floor, Dwell: dwell, Recovery: recovery})
		p := &spikePlant{levelPlant: levelPlant{latency: linear(0.005, 0.015), window: window}, from: from, to: to, extra: 0.030}
		return simulate(t, c, p, runFor, nil)
	}
	tr := run(2)
	if at := settling(tr.budget, 0, from, want, 0.10); at < 0 || at > 50 {
		t.Fatalf("before the burst: settled at %d; budgets %.3f", at, tr.budget[:from])
	}
	stopped := false
	for k := from; k < to+window; k++ {
		stopped = stopped || tr.paused[k]
	}
	if !stopped {
		t.Fatalf("no HardStop during a burst of 30 ms against a 10 ms target; budgets %.3f", tr.budget[from:to+window])
	}
	at := settling(tr.budget, to, runFor, want, 0.10)
	if at < 0 || at-to > withinPeriodsMax {
		t.Fatalf("back within 10 %% of %.3f %d periods after the burst, want at most %d; budgets %.3f",
			want, at-to, withinPeriodsMax, tr.budget[to:to+40])
	}
	for k := to; k < runFor; k++ {
		if tr.budget[k] > 1.1*want {
			t.Fatalf("period %d: overshoot to %.3f above %.3f", k, tr.budget[k], want)
		}
	}
	t.Logf("back %d periods after the burst (at most %d)", at-to, withinPeriodsMax)

	slow := run(0)
	if at := settling(slow.budget, to, runFor, want, 0.10); at >= 0 && at-to <= withinPeriodsMax {
		t.Fatalf("without Recovery the law was back in %d periods: the test does not tell recovery from MaxRaise", at-to)
	}
}

// TestAClimbBackToARateThatNoLongerHoldsStopsAtTheFirstCut: the burst that
// stopped the vacuum leaves the foreground twice as sensitive (it holds its
// target at 1/6 now, not 1/3): the climb back doubles from the floor, is
// over before it reaches 1/3 and is cut; from then on no raise is above
// MaxRaise, and the rate settles within ±10 % of 1/6 within 50 periods of
// the burst's end. Here the secant's cut lands in the dead band, so this
// test passes with or without the rule that a cut ends the climb (tried):
// it checks the outcome (TestACutDuringTheClimbBackEndsIt checks the
// rule). A climb's last doubling may land above the new
// rate by up to the doubling itself (here 0.2, 20 % over 1/6): the
// overshoot bound of the step tests is not the climb's.
func TestAClimbBackToARateThatNoLongerHoldsStopsAtTheFirstCut(t *testing.T) {
	const from, to, want = 100, 105, 1.0 / 6
	c := mustController(t, Config{Signals: []Signal{{Binding: ForegroundLatency, Target: 0.010}}, Start: 1, Floor: 0.05, Recovery: 2})
	p := &spikePlant{levelPlant: levelPlant{latency: linear(0.005, 0.015), window: 3}, from: from, to: to, extra: 0.030}
	tr := simulate(t, c, p, 250, func(k int) plant {
		if k == to {
			p.latency = linear(0.005, 0.030)
		}
		return nil
	})
	if at := settling(tr.budget, to, len(tr.budget), want, 0.10); at < 0 || at-to > 50 {
		t.Fatalf("settled %d periods after the burst, want within 50; budgets %.3f", at-to, tr.budget[to:to+60])
	}
	cut, peak := false, 0.0
	for k := to + 1; k < len(tr.budget); k++ {
		peak = max(peak, tr.budget[k])
		prev, b := tr.budget[k-1], tr.budget[k]
		if tr.paused[k] || tr.paused[k-1] {
			continue
		}
		if b < prev {
			cut = true
		} else if cut && b > (1+c.cfg.MaxRaise)*prev+1e-12 {
			t.Fatalf("period %d: raised %.3f to %.3f after the climb's cut, more than MaxRaise; budgets %.3f", k, prev, b, tr.budget[to:to+60])
		}
	}
	if !cut {
		t.Fatalf("no cut after the burst: the climb did not cross the new rate; budgets %.3f", tr.budget[to:to+60])
	}
	t.Logf("peak %.3f after the burst, %.0f %% over %.3f", peak, 100*(peak/want-1), want)
}

// TestACutDuringTheClimbBackEndsIt drives the law judgement by judgement: a
// foreground that held its target at the ceiling, then a burst over twice
// the target (HardStop), then a foreground far under its target, so the
// law climbs back from the floor by Recovery's doublings towards the
// ceiling it remembers. One judgement over the target (but under twice it)
// cuts; from that cut on a raise is at most MaxRaise again, however far
// under its target the foreground then reads: the rate remembered no
// longer holds. Without the rule the next raise after the cut doubles.
func TestACutDuringTheClimbBackEndsIt(t *testing.T) {
	const target = 0.010
	c := mustController(t, Config{Signals: []Signal{{Binding: ForegroundLatency, Target: target}}, Start: 1, Floor: 0.05, Recovery: 2})
	step := func(v float64) Decision { return c.Step([]Sample{{Value: v, Fresh: true}}, 1) }
	// judge steps until the budget or the pause changes (the dwell over and
	// a judgement made), within 20 periods.
	judge := func(v float64) (before, after Decision) {
		t.Helper()
		before = c.Budget()
		for range 20 {
			if d := step(v); d.Budget != before.Budget || d.Paused != before.Paused {
				return before, d
			}
		}
		t.Fatalf("no change in 20 periods at %.4f from %+v", v, before)
		return before, before
	}

	if d := step(0.009); d.Budget != 1 {
		t.Fatalf("a foreground under its target at the ceiling: %+v, want the ceiling held", d)
	}
	if _, d := judge(3 * target); !d.Paused || d.Binding != HardStop {
		t.Fatalf("a burst at three times the target: %+v, want HardStop", d)
	}
	if _, d := judge(0.1 * target); d.Paused || d.Budget != 0.05 {
		t.Fatalf("the burst over: %+v, want running at the floor", d)
	}
	doubled := false
	for c.Budget().Budget < 0.15 {
		b, a := judge(0.1 * target)
		if a.Budget > (1+c.cfg.MaxRaise)*b.Budget+1e-12 {
			doubled = true
		}
	}
	if !doubled {
		t.Fatalf("the climb back from the floor raised by MaxRaise only: Recovery did not act")
	}
	b, a := judge(1.5 * target)
	if a.Paused || a.Budget >= b.Budget {
		t.Fatalf("one judgement at 1.5x the target during the climb: %+v from %+v, want a cut", a, b)
	}
	for range 3 {
		b, a := judge(0.1 * target)
		if a.Budget > (1+c.cfg.MaxRaise)*b.Budget+1e-12 {
			t.Fatalf("after the climb's cut: raised %.4f to %.4f, more than MaxRaise (%.2f): the climb went on", b.Budget, a.Budget, c.cfg.MaxRaise)
		}
	}
}
