package sql

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/adaptive"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum/throttle"
	"github.com/vacuumops/vacuum-operator/internal/server/latency"
	"github.com/vacuumops/vacuum-operator/internal/server/pgerr"
)

// The adaptive throttle inside the server: a VACUUM whose session set a vacuum_adaptive_*
// target runs with a goroutine beside it that, every adaptivePeriod, reads the server's
// own foreground latency (package latency's recent window) and the standbys' replication
// lag, steps an adaptive.Controller and applies its decision through the throttle's live
// re-throttle (the static settings' rates scaled by the budget: the static throttle stays
// the ceiling) and its pause primitive (HardStop).

// adaptivePeriod is the control period.
const adaptivePeriod = 100 * time.Millisecond

// adaptiveSettings are the targets' setting names, as SET and vacuum_set_throttle take them.
var adaptiveSettings = []string{"vacuum_adaptive_latency_target", "vacuum_adaptive_latency_percentile_per_mille",
	"vacuum_adaptive_max_lag_bytes", "vacuum_adaptive_max_lag_seconds", "vacuum_adaptive_floor_per_mille"}

func isAdaptiveSetting(name string) bool {
	for _, n := range adaptiveSettings {
		if n == name {
			return true
		}
	}
	return false
}

// adaptiveTargets are a VACUUM's adaptive settings; zero targets are off.
type adaptiveTargets struct {
	latency  time.Duration // the foreground percentile's target
	perMille int           // which percentile: 990 = p99
	lagBytes int64         // the largest standby lag in bytes
	lagDelay time.Duration // the largest standby replay lag
	floor    int           // per mille of the ceiling
}

// on reports whether a target is set.
func (t adaptiveTargets) on() bool { return t.latency > 0 || t.lagBytes > 0 || t.lagDelay > 0 }

func defaultAdaptiveTargets() adaptiveTargets { return adaptiveTargets{perMille: 990, floor: 100} }

func badAdaptive(name, value, why string) error {
	return pgerr.New(pgerr.InvalidParameterValue, "invalid value for parameter \"%s\": \"%s\" (%s)", name, value, why)
}

// applyAdaptiveSetting returns t with one setting changed, parsed as SET parses it.
func applyAdaptiveSetting(t adaptiveTargets, name, value string) (adaptiveTargets, error) {
	v := strings.TrimSpace(value)
	perMille := func(lo, hi int) (int, error) {
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi {
			return 0, badAdaptive(name, value, "an integer between "+strconv.Itoa(lo)+" and "+strconv.Itoa(hi))
		}
		return n, nil
	}
	var err error
	switch name {
	case "vacuum_adaptive_latency_target":
		var d time.Duration
		if d, err = durationSetting(name, v); err == nil {
			t.latency = d
		} else {
			err = badAdaptive(name, value, "a duration such as 5ms or 0 for off; a bare number is milliseconds")
		}
	case "vacuum_adaptive_latency_percentile_per_mille":
		t.perMille, err = perMille(500, 999)
	case "vacuum_adaptive_floor_per_mille":
		t.floor, err = perMille(1, 1000)
	case "vacuum_adaptive_max_lag_bytes":
		var b int64
		if b, err = memoryBytes(v, 1); err == nil {
			t.lagBytes = b
		} else {
			err = badAdaptive(name, value, "a size such as 16MB or 0 for off; valid units are B, kB, MB, GB and TB")
		}
	case "vacuum_adaptive_max_lag_seconds":
		d, perr := secondsSetting(v)
		if perr != nil {
			err = badAdaptive(name, value, "seconds such as 5, 1.5 or 500ms, or 0 for off")
		} else {
			t.lagDelay = d
		}
	default:
		err = pgerr.New(pgerr.InvalidParameterValue, "\"%s\" is not an adaptive setting (one of %v)", name, adaptiveSettings)
	}
	return t, err
}

// secondsSetting parses a time in seconds: a bare number is seconds, a unit (ms, s, min
// as Go spells it: m) is taken as given.
func secondsSetting(v string) (time.Duration, error) {
	if n, err := strconv.ParseFloat(v, 64); err == nil {
		if n < 0 || math.IsNaN(n) || n > 1e9 {
			return 0, strconv.ErrRange
		}
		return time.Duration(n * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, strconv.ErrSyntax
	}
	return d, nil
}

// checkAdaptive is SET's check of an adaptive setting: the value is kept as written.
func checkAdaptive(name string) func(string) (string, error) {
	return func(v string) (string, error) {
		if _, err := applyAdaptiveSetting(defaultAdaptiveTargets(), name, v); err != nil {
			return "", err
		}
		return strings.TrimSpace(v), nil
	}
}

// adaptiveSettingsOf reads the session's targets.
func (s *Session) adaptiveSettingsOf() (adaptiveTargets, error) {
	t := defaultAdaptiveTargets()
	for _, name := range adaptiveSettings {
		v, _ := s.settings.get(name)
		var err error
		if t, err = applyAdaptiveSetting(t, name, v); err != nil {
			return t, err
		}
	}
	return t, nil
}

// hasCeiling reports whether th limits anything: the budget scales its rates, so an
// unthrottled ceiling leaves the adaptive throttle nothing to scale.
func hasCeiling(th throttle.Settings) bool {
	return th.CostDelay > 0 || th.MaxReadBytesPerSecond > 0 || th.MaxWriteBytesPerSecond > 0 || th.MaxWALBytesPerSecond > 0
}

func errNoCeiling() error {
	return pgerr.New(pgerr.InvalidParameterValue,
		"adaptive throttling needs a static throttle as its ceiling: set vacuum_cost_delay above 0 or a vacuum_max_*_rate")
}

// scaled is the ceiling's rates multiplied by budget (in (0, 1]): the cost delay
// stretched, the byte rates cut (at least 1 byte/s, so a limit stays a limit).
func scaled(ceiling throttle.Settings, budget float64) throttle.Settings {
	if budget >= 1 || budget <= 0 {
		return ceiling
	}
	th := ceiling
	if th.CostDelay > 0 {
		th.CostDelay = time.Duration(float64(th.CostDelay) / budget)
	}
	for _, r := range []*int64{&th.MaxReadBytesPerSecond, &th.MaxWriteBytesPerSecond, &th.MaxWALBytesPerSecond} {
		if *r > 0 {
			*r = max(1, int64(float64(*r)*budget))
		}
	}
	return th
}

// ReplicationLag is the lag of the standby furthest behind, as the adaptive throttle reads
// it: bytes of WAL not yet replayed, and the replay delay (negative: not known yet).
// Standbys is 0 when none is connected (the signal is then stale).
type ReplicationLag struct {
	Bytes    int64
	Delay    time.Duration
	Standbys int
}

// SetReplicationLag gives the registry the server's replication lag (package replication's
// standbys, wired by the server that runs both). Without it the lag targets see no standby.
func (v *Vacuums) SetReplicationLag(fn func() ReplicationLag) {
	if v == nil {
		return
	}
	v.mu.Lock()
	v.lag = fn
	v.mu.Unlock()
}

func (v *Vacuums) replicationLag() ReplicationLag {
	if v == nil {
		return ReplicationLag{}
	}
	v.mu.Lock()
	fn := v.lag
	v.mu.Unlock()
	if fn == nil {
		return ReplicationLag{}
	}
	return fn()
}

// adaptiveRun is one VACUUM's adaptive state, shared by its control goroutine, the
// progress views and vacuum_set_throttle.
type adaptiveRun struct {
	run *vacuum.Batch
	lat *latency.Recorder
	lag func() ReplicationLag

	mu         sync.Mutex
	targets    adaptiveTargets
	ceiling    throttle.Settings
	rebuild    bool // targets or ceiling changed since the goroutine last looked
	on         bool // a controller steers the run now
	ever       bool // one did at some time (the views show the columns from then on)
	dec        adaptive.Decision
	bound      map[adaptive.Binding]time.Duration
	ownPause   bool // the run is paused by HardStop
	userPaused bool // vacuum_pause holds the run: HardStop's end does not resume it

	ctx     context.Context // the VACUUM's: the control goroutine ends with it (nil before start)
	running bool            // the control goroutine runs (only while a target is set)
	wg      sync.WaitGroup

	// logf, when set, gets a line at each change of the decision (Vacuums.SetAdaptiveLog),
	// with what the control goroutine's last sample read (read, its own).
	logf func(format string, args ...any)
	read string
}

func newAdaptiveRun(run *vacuum.Batch, t adaptiveTargets, ceiling throttle.Settings, lat *latency.Recorder, lag func() ReplicationLag) *adaptiveRun {
	return &adaptiveRun{run: run, lat: lat, lag: lag, targets: t, ceiling: ceiling, rebuild: true,
		dec: adaptive.Decision{Budget: 1, Binding: adaptive.Ceiling}, bound: map[adaptive.Binding]time.Duration{}}
}

// setTarget changes one target live (vacuum_set_throttle): the controller starts again
// with the new targets from the budget in force (not from the ceiling), and the control
// goroutine starts if this is the first target set.
func (a *adaptiveRun) setTarget(name, value string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, err := applyAdaptiveSetting(a.targets, name, value)
	if err != nil {
		return err
	}
	if t.on() && !hasCeiling(a.ceiling) {
		return errNoCeiling()
	}
	// The lag target is also the run's WAL lag bound (walgate.go), in force at once.
	if err := a.run.SetWALLagBound(walHoldAt(t.lagBytes)); err != nil {
		return pgerr.Wrap(err, pgerr.InvalidParameterValue, "%v", err)
	}
	a.targets, a.rebuild = t, true
	a.launchLocked()
	return nil
}

// start runs the control goroutine beside the VACUUM whose context ctx is, if a target is
// set (a target set later through vacuum_set_throttle starts it then). stop ends it.
func (a *adaptiveRun) start(ctx context.Context) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ctx = ctx
	a.launchLocked()
}

// launchLocked starts the control goroutine when a target is set, none runs and the
// VACUUM has not ended. a.mu is held.
func (a *adaptiveRun) launchLocked() {
	if a.running || a.ctx == nil || a.ctx.Err() != nil || !a.targets.on() {
		return
	}
	ctl, err := a.targets.controller(a.targets.start())
	if err != nil {
		return // the settings were validated when set: not reached
	}
	// The law's start is in force before the VACUUM's next page, not a period later: where
	// it is the floor (a lag target without the bound), one period at the ceiling could
	// already put a standby's lag over its target.
	targets := a.targets
	a.rebuild, a.on, a.ever, a.dec = false, true, true, ctl.Budget()
	_ = a.run.UpdateThrottle(scaled(a.ceiling, a.dec.Budget)) // validated with the ceiling
	a.running = true
	a.wg.Add(1)
	ctx := a.ctx
	go func() {
		defer a.wg.Done()
		a.steer(ctx, ctl, targets)
	}()
}

// stop waits for the control goroutine to end; the caller has cancelled start's context.
func (a *adaptiveRun) stop() { a.wg.Wait() }

// steering reports whether the control goroutine runs.
func (a *adaptiveRun) steering() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.running
}

// ceilingSettings is the static throttle in force (the ceiling the budget scales).
func (a *adaptiveRun) ceilingSettings() throttle.Settings {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ceiling
}

// setCeiling changes the static throttle live and applies it scaled by the budget now.
func (a *adaptiveRun) setCeiling(th throttle.Settings) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := th.Validate(); err != nil {
		return pgerr.Wrap(err, pgerr.InvalidParameterValue, "%v", err)
	}
	if a.targets.on() && !hasCeiling(th) {
		return errNoCeiling()
	}
	budget := 1.0
	if a.on {
		budget = a.dec.Budget
	}
	if err := a.run.UpdateThrottle(scaled(th, budget)); err != nil {
		return pgerr.Wrap(err, pgerr.InvalidParameterValue, "%v", err)
	}
	a.ceiling = th
	return nil
}

// setUserPaused records vacuum_pause/vacuum_resume, so that HardStop leaves a user's pause
// alone.
func (a *adaptiveRun) setUserPaused(p bool) {
	a.mu.Lock()
	a.userPaused = p
	if !p {
		a.ownPause = false // the user resumed the run: a HardStop in force is over
	}
	a.mu.Unlock()
}

// adaptiveView is what the progress views show of a run's adaptive throttle.
type adaptiveView struct {
	on      bool
	binding adaptive.Binding
	budget  float64
	bound   map[adaptive.Binding]time.Duration
}

func (a *adaptiveRun) view() adaptiveView {
	if a == nil {
		return adaptiveView{}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.ever {
		return adaptiveView{}
	}
	b := make(map[adaptive.Binding]time.Duration, len(a.bound))
	for k, d := range a.bound {
		b[k] = d
	}
	v := adaptiveView{on: true, binding: a.dec.Binding, budget: a.dec.Budget, bound: b}
	if !a.on {
		v.binding, v.budget = adaptive.Ceiling, 1
	}
	return v
}

// adaptiveBindings are the bindings the views show the time bound by, in column order.
var adaptiveBindings = []adaptive.Binding{adaptive.ForegroundLatency, adaptive.ReplicationLag,
	adaptive.Ceiling, adaptive.Floor, adaptive.HardStop}

// columns are the views' adaptive columns (all NULL while no target was ever set).
func (v adaptiveView) columns() []any {
	out := make([]any, 2+len(adaptiveBindings))
	if !v.on {
		return out
	}
	out[0], out[1] = string(v.binding), int64(math.Round(v.budget*1000))
	for i, b := range adaptiveBindings {
		out[2+i] = v.bound[b].Milliseconds()
	}
	return out
}

// start is the budget a law for t starts at when it starts a VACUUM's steering: the
// ceiling (1) when a lag target in bytes is set, since that target is also the run's WAL
// lag bound (walgate.go), which holds the vacuum's WAL writers from its first page, so a
// start at the ceiling cannot run the standby past the target and the law cuts from there;
// otherwise the law's own start (0: the ceiling for a latency target, the floor for a lag
// target in seconds, which no bound backs). Starting at the floor under the bound cost
// experiment 5's bounded FULL 7.14 s against 1.22-1.76 s from the ceiling.
func (t adaptiveTargets) start() float64 {
	if t.lagBytes > 0 {
		return 1
	}
	return 0
}

// controller returns a fresh controller for t (nil when no target is set), starting at
// budget start (0: the law's own start, the ceiling or, for a lag target, the floor). The
// latency signal is a percentile over at least latency.Recent of statements run since the
// last change (sample): the controller dwells that long after a change, then holds until
// judgementStatements of them ran, so it judges the change on statements that ran under it.
func (t adaptiveTargets) controller(start float64) (*adaptive.Controller, error) {
	if !t.on() {
		return nil, nil
	}
	cfg := adaptive.Config{Signals: adaptive.Targets{Latency: t.latency, LagBytes: t.lagBytes, LagDelay: t.lagDelay}.Signals(), Floor: float64(t.floor) / 1000, Period: adaptivePeriod, Start: start}
	if t.latency > 0 {
		cfg.Dwell = int(latency.Recent / adaptivePeriod)
		cfg.Recovery, cfg.HardStopFactor = adaptiveRecovery, adaptiveHardStopFactor
	}
	return adaptive.New(cfg)
}

// adaptiveHardStopFactor is the law's HardStopFactor (its default): a latency above this
// multiple of the target pauses the vacuum.
const adaptiveHardStopFactor = 2

// adaptiveRecovery is the law's Config.Recovery for a latency target: after a HardStop
// the budget doubles back to the last rate that held (the last make bench's law, raising
// by 10 % a judgement, took 15 s from its 12-per-mille floor to 21).
const adaptiveRecovery = 2

// adaptiveEarlyStatements is the judgement the early verdict over the target is measured
// against (latency.RecentJudgement's earlyCount): before a full judgement, the statements
// since a change are over when more of them were slow than the p99 of this many (or of
// the last RecentMax's, if fewer) allows: five of the 400 that 2 s hold at 200 a second,
// so that one stall of the machine (a statement of each client held up at once) is not a
// verdict.
const adaptiveEarlyStatements = 1000

// judgementRisk is the chance a full judgement may be wrong about which side of its target
// the foreground is on before the budget moves (testedLatency): a cut needs so many slow
// statements, and a raise so few, that a foreground exactly at its target would show them
// with at most this probability; in between the budget holds.
const judgementRisk = 0.2

// judgementStatements is the fewest statements since a change a full judgement of quantile
// q (0..100) covers: ln(1/judgementRisk) / (1 - q/100), the fewest among which none slower
// than the target is evidence enough for a raise (a foreground at its target leaves none
// slower with probability e^-m, m = n (1-q/100) the slower ones it leaves on average:
// judgementRisk at m = 1.61). At 400 statements a second the window quantile is the
// p99.59 and a judgement takes 393 statements, 0.98 s. The rule before, ln 2 / (1-q/100)
// (169 statements), read the order statistic as likely above the quantile as below: at
// the rate that held the target half the judgements cut (by up to half) and half raised (by
// 10 %), and the law drifted to its floor (experiment 10, 2026-12-07: 83 and 104 s at the
// floor where a fixed 2 ms took 18 s).
func judgementStatements(q float64) int64 {
	p := 1 - q/100
	if !(p > 0) {
		return adaptiveEarlyStatements
	}
	return max(1, int64(math.Ceil(math.Log(1/judgementRisk)/p)))
}

// testedLatency is a full judgement's latency signal for the law: the figure v read (an
// order statistic of count statements, as likely above the foreground's q-quantile as
// below) when the count of statements slower than the target, above, says on which side
// of the target that quantile is, and the target itself (the law's dead band: the budget
// holds) when it does not. Over: a foreground at its target would leave above or more
// slower statements with probability at most judgementRisk. Under: it would leave that few
// with probability at most judgementRisk; with too few statements for that (a foreground
// slower than judgementStatements a RecentMax), none slower is taken for under. A busy
// foreground whose judgement expects more than testedMaxSlow slower statements (thousands
// a second) is judged on v as it is: an order statistic that deep in the tail is steady
// (its rank moves by about the root of m), and latency counts only latency.AboveMax.
func testedLatency(v, target time.Duration, q float64, count, above int64) time.Duration {
	m := float64(count) * (100 - q) / 100
	switch {
	case m > testedMaxSlow || poissonAtLeast(m, above) <= judgementRisk:
		return v
	case above == 0 || poissonAtMost(m, above) <= judgementRisk:
		return min(v, target)
	default:
		return target
	}
}

// testedMaxSlow is the most slower statements testedLatency tests a judgement on; a
// quarter of latency.AboveMax, so that the count is never cut short where it decides.
const testedMaxSlow = latency.AboveMax / 4

// poissonAtLeast is P(X >= k) for X ~ Poisson(m).
func poissonAtLeast(m float64, k int64) float64 {
	if k <= 0 {
		return 1
	}
	return 1 - poissonAtMost(m, k-1)
}

// poissonAtMost is P(X <= k) for X ~ Poisson(m), k at most latency.AboveMax and m at most
// windowExactMaxSlow (e^-m does not underflow, the sum is k terms).
func poissonAtMost(m float64, k int64) float64 {
	term := math.Exp(-m)
	sum := term
	for i := int64(1); i <= k; i++ {
		term *= m / float64(i)
		sum += term
	}
	return min(1, sum)
}

// adaptiveWindowShare is the share of one-second windows in which the law means the
// foreground's percentile to hold the target (the adaptive-throttling issue's goal).
const adaptiveWindowShare = 0.95

// windowQuantile is the quantile (0..100) the law judges so that the foreground's
// percentile q of each one-second window holds the target in adaptiveWindowShare of them,
// at perSecond statements a second. A window of n statements is over the target when more
// than its (100-q) % of them were, k = n - ceil(q n/100) + 1 at least (3 of 200 for the
// p99): held at exactly the target over a judgement, a percentile lets λ = (100-q) n/100
// statements a second be slower (2 of 200), and as slow statements come one by one, the
// windows with k or more of them (Poisson) are a third of all. The law judges instead the
// quantile whose share of slower statements leaves k or more in a window only 5 % of the
// time (at 200 a second, 0.82 slower statements a second: the p99.59).
func windowQuantile(q, perSecond float64) float64 {
	n := math.Round(perSecond)
	if n < 1 || q >= 100 {
		return q
	}
	k := n - math.Ceil(q/100*n-1e-9) + 1
	return max(q, 100*(1-windowSlowRate(k)/n))
}

// windowExactMaxSlow is the largest k windowSlowRate sums the Poisson terms for: e^-λ
// needs no care below it (λ < k), and the sum is k terms for each of 60 halvings.
const windowExactMaxSlow = 50

// windowShareZ is the standard normal's quantile at adaptiveWindowShare (95 %).
const windowShareZ = 1.6448536269514722

// windowSlowRate is the rate λ of slower statements at which a one-second window has k or
// more of them with probability 1-adaptiveWindowShare: P(Poisson(λ) >= k) = 5 %. Up to
// windowExactMaxSlow it halves the interval over the exact sum; above, where e^-λ would
// underflow (λ over about 745: the p99 at 75,000 statements a second) and the sum would
// cost k terms each step, it takes Wilson and Hilferty's cube-root normal approximation
// of the Gamma(k) quantile (P(Poisson(λ) >= k) = P(Gamma(k) <= λ)), within 2e-6 of the
// exact λ in relative terms at k 51, 101 and 201 (mpmath): a fixed few operations at any rate.
func windowSlowRate(k float64) float64 {
	if k > windowExactMaxSlow {
		return k * math.Pow(1-1/(9*k)-windowShareZ/(3*math.Sqrt(k)), 3)
	}
	lo, hi := 0.0, k
	for range 60 {
		if mid := (lo + hi) / 2; poissonAtLeast(mid, int64(k)) > 1-adaptiveWindowShare {
			hi = mid
		} else {
			lo = mid
		}
	}
	return lo
}

// sample reads one period's signals for t; the latency signal covers only statements
// recorded in 100 ms slots that began at or after since (the last change of the decision),
// at the quantile that holds the target's percentile in 95 % of one-second windows
// (windowQuantile), and is fresh once a full judgement of them is possible or, before
// that, once so many of them were over the target that the full judgement's verdict is
// known (latency.RecentJudgement): a budget over the target is cut as soon as that shows,
// not a RecentMax later.
func (a *adaptiveRun) sample(t adaptiveTargets, since time.Time) []adaptive.Sample {
	var out []adaptive.Sample
	if t.latency > 0 {
		var s adaptive.Sample
		if a.lat != nil {
			// The early verdict at the target's own percentile: at the windows' stricter
			// one it would come on two slow statements at 200 a second, which one stall of
			// two clients makes; it waits for five.
			p := float64(t.perMille) / 10
			q := windowQuantile(p, a.lat.RecentRate())
			j := a.lat.RecentJudgement(q, p, since, judgementStatements(q), adaptiveEarlyStatements, t.latency)
			v := j.Quantile
			if j.Enough && !j.Over {
				v = testedLatency(v, t.latency, q, j.Count, j.Above)
			}
			if stop := adaptiveHardStopFactor * t.latency; v > stop && j.Firm <= stop {
				// Above HardStop's bound on fewer slow statements than the early verdict
				// needs (one stall of the machine can make the slowest of 169): a cut,
				// not a pause.
				v = stop
			}
			s = adaptive.Sample{Value: v.Seconds(), Fresh: j.Count > 0 && j.Enough}
			if a.logf != nil {
				a.read = fmt.Sprintf("latency p%.2f of %d statements %s (%d over the %s target; judged as %s, fresh %v)",
					q, j.Count, j.Quantile, j.Above, t.latency, v, s.Fresh)
			}
		}
		out = append(out, s)
	}
	if t.lagBytes > 0 || t.lagDelay > 0 {
		var lag ReplicationLag
		if a.lag != nil {
			lag = a.lag()
		}
		if t.lagBytes > 0 {
			out = append(out, adaptive.Sample{Value: float64(lag.Bytes), Fresh: lag.Standbys > 0})
		}
		if a.logf != nil {
			l := fmt.Sprintf("lag %d bytes, %s over %d standbys", lag.Bytes, lag.Delay, lag.Standbys)
			if a.read != "" {
				l = a.read + "; " + l
			}
			a.read = l
		}
		if t.lagDelay > 0 {
			out = append(out, adaptive.Sample{Value: lag.Delay.Seconds(), Fresh: lag.Standbys > 0 && lag.Delay >= 0})
		}
	}
	return out
}

// usage is the throttle's consumption per limit, to measure the share of the budget used.
type usage [4]float64

func consumed(st throttle.Stats) usage {
	var u usage
	for k := range min(len(u), len(st.Limits)) {
		u[k] = st.Limits[k].Consumed
	}
	return u
}

// used is the share of the budget the vacuum used over dt: the largest, over the limits
// on, of the units consumed per second over the limit's rate (0 when paused).
func used(st throttle.Stats, prev usage, dt time.Duration) float64 {
	if st.Paused || dt <= 0 {
		return 0
	}
	best := 0.0
	for k := range min(len(prev), len(st.Limits)) {
		l := st.Limits[k]
		if !l.Active || l.Configured <= 0 {
			continue
		}
		best = max(best, (l.Consumed-prev[k])/dt.Seconds()/l.Configured)
	}
	return best
}

// steer runs the control loop, from controller ctl for targets (launchLocked put its
// start in force), until ctx ends (the VACUUM's end) or the targets are all set to 0 (the
// ceiling is then restored), then resumes a run its HardStop paused.
func (a *adaptiveRun) steer(ctx context.Context, ctl *adaptive.Controller, targets adaptiveTargets) {
	tick := time.NewTicker(adaptivePeriod)
	defer tick.Stop()
	last := time.Now()
	prev := consumed(a.run.ThrottleStats())
	// changed is when the decision in force was made: the latency signal judges only
	// statements run under it. The start counts as a change: before it the foreground ran
	// without this VACUUM, and a judgement reaching back over that fast time held the
	// start's budget (the ceiling, for a latency target) for up to latency.RecentMax after
	// it had already put the foreground over its target (the last make bench: its adaptive
	// runs never left the ceiling). While HardStop pauses the run it judges every recent
	// statement, so that the overload that started the pause holds it until the foreground
	// has recovered.
	dec, changed := ctl.Budget(), time.Now()
	// end stops steering: a HardStop pause ends (not a user's), the goroutine is no longer
	// running. a.mu is held.
	end := func() {
		if a.ownPause && !a.userPaused {
			a.run.Resume()
		}
		a.ownPause, a.running, a.on = false, false, false
	}
	for {
		select {
		case <-ctx.Done():
			a.mu.Lock()
			end()
			a.mu.Unlock()
			return
		case now := <-tick.C:
			dt := now.Sub(last)
			last = now
			st := a.run.ThrottleStats()
			u := used(st, prev, dt)
			prev = consumed(st)

			a.mu.Lock()
			if a.rebuild {
				a.rebuild, targets = false, a.targets
				if !targets.on() {
					// Every target is off: back to the ceiling, and no goroutine until one is set.
					a.dec = adaptive.Decision{Budget: 1, Binding: adaptive.Ceiling}
					_ = a.run.UpdateThrottle(a.ceiling)
					end()
					a.mu.Unlock()
					return
				}
				// A changed target keeps the budget in force.
				c, err := targets.controller(a.dec.Budget)
				if err != nil {
					// The settings were validated when set: not reached. Hold the budget.
					a.mu.Unlock()
					continue
				}
				ctl = c
			}
			a.mu.Unlock()
			since := changed
			if dec.Paused {
				since = time.Time{}
			}
			a.read = ""
			d := ctl.Step(a.sample(targets, since), u)
			if d.Budget != dec.Budget || d.Paused != dec.Paused {
				changed = now
			}
			if a.logf != nil && d != dec {
				a.logf("%s; budget %.0f -> %.0f per mille%s, bound by %s; the budget's use %.2f", a.read,
					1000*dec.Budget, 1000*d.Budget, pausedNote(d.Paused), d.Binding, u)
			}
			dec = d
			a.apply(d, dt)
		}
	}
}

// apply puts a decision in force: the ceiling scaled by its budget, HardStop's pause.
func (a *adaptiveRun) apply(d adaptive.Decision, dt time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.rebuild {
		return // the targets changed under this step: the next one starts afresh
	}
	a.bound[a.dec.Binding] += dt
	if d.Budget != a.dec.Budget {
		// Validated when the ceiling was set; a scaled ceiling is as valid.
		_ = a.run.UpdateThrottle(scaled(a.ceiling, d.Budget))
	}
	switch {
	case d.Paused && !a.ownPause && !a.userPaused:
		a.run.Pause()
		a.ownPause = true
	case !d.Paused && a.ownPause:
		if !a.userPaused {
			a.run.Resume()
		}
		a.ownPause = false
	}
	a.dec = d
}

// pausedNote is ", paused" for a decision HardStop pauses the run with.
func pausedNote(paused bool) string {
	if paused {
		return ", paused"
	}
	return ""
}
