package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vacuumops/vacuum-operator/internal/online"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// Experiment 10: adaptive throttling against the best fixed setting (the adaptive-throttling
// issue's figure of merit), side by side in one run. Two targets, each chosen from what the
// experiment measures at its start:
//
//   - a foreground p99 target: pgbench select-only at a fixed rate (-R) beside an online lazy
//     VACUUM of pgbench_accounts (package online, the runner pod's path), on the engine server
//     and on PostgreSQL 15;
//   - a replication-lag target: pgbench tpcb-like at a fixed rate beside an online VACUUM FULL
//     of a table the load does not touch, on an engine-server primary with a synchronous
//     standby (experiment 5's pair) and on PostgreSQL 15 with its own.
//
// For each target, the VACUUM's time with adaptive throttling (the vacuum_adaptive_* settings,
// the static throttle as the ceiling: for the foreground p99 target AdaptCeiling, below the
// grid, so that the law sets the rate; for the lag target the grid's fastest delay) against
// the fastest fixed cost delay that holds the target: experiment 1's delays, then bisection
// between the two that bracket the target (never below the adaptive ceiling: when the grid's
// fastest delay holds, between the ceiling and it), 3 interleaved runs of each
// (from the second round on, the grid passes over the delays slower than one that has held in
// every round so far: heldFaster);
// PostgreSQL 15 with its best fixed
// setting is the third column. Every run also counts the 1-second windows that held the
// target.

const (
	exp10Table    = "pgbench_accounts"
	exp10Full     = "adapt_full"
	exp10Window   = time.Second
	exp10Goal     = 0.95 // share of 1-second windows that must hold the target
	exp10LagFloor = 8192 // one WAL page: a smaller lag alone is a standby that keeps up
	exp10Latency  = "foreground p99"
	exp10Lag      = "replication lag"
	exp10Adaptive = "adaptive"
	exp10Fixed    = "fixed"
	exp10PollTime = 250 * time.Millisecond
	// exp10SchedPeriod is how often the scheduling-latency histogram is read (exp10_sched.go).
	exp10SchedPeriod = 100 * time.Millisecond
)

// exp10Setting is one VACUUM to run: a fixed cost delay, or adaptive throttling with delay
// as its ceiling.
type exp10Setting struct {
	delay    time.Duration // 0: unthrottled
	adaptive bool
	phase    string // calibration, grid, bisection
	round    int
}

func (s exp10Setting) name() string {
	if s.adaptive {
		return exp10Adaptive
	}
	return exp10Fixed
}

// exp10Run is one measured VACUUM.
type exp10Run struct {
	exp10Setting
	system      string
	start, end  time.Time // the VACUUM's
	spanEnd     time.Time // the end of what is judged (lag: until the standby replayed the VACUUM)
	seconds     float64   // the VACUUM's time
	figure      float64   // p99 in ms (latency) or peak lag in MB (lag) over [start, spanEnd]
	n           int       // transactions (latency) or lag samples (lag) in it
	held, total int       // 1-second windows that held the target, of all
	bound       float64   // seconds bound by the target's signal (adaptive runs)
	floor       float64   // seconds bound by the floor or HardStop (adaptive runs)
	failed      int64
	law         []lawPoint // what the adaptive throttle reported at each poll (adaptive runs)
	// server is the engine server's own p99 of the load's statements over the VACUUM, in ms
	// (its /metrics histogram, serverView); -1 where there is none (PostgreSQL, the lag half).
	server float64
	marks  []mark // when each step before the VACUUM ended (lag runs)
	// capped: a fixed run stopped at its part's cap (seconds is then the cap, a lower bound
	// of its time; figure and windows are of the span it ran).
	capped bool
}

// mark is when a step of a run ended.
type mark struct {
	name string
	at   time.Time
}

// lawPoint is one poll of an adaptive run's progress: the budget in per mille of the
// ceiling and the binding signal then.
type lawPoint struct {
	at       time.Time
	perMille int32
	binding  string
	server   float64 // the server's own foreground p99 then (its view, the last 10 s), ms; -1: none
	phase    string  // the VACUUM's phase then
	wal      int64   // the WAL bytes the VACUUM had inserted by then
}

// serverP99s lists the server's own foreground p99 of each poll.
func serverP99s(law []lawPoint) string {
	var b strings.Builder
	for _, l := range law {
		if l.server >= 0 {
			fmt.Fprintf(&b, "%.2f ", l.server)
		} else {
			b.WriteString("none ")
		}
	}
	return strings.TrimSpace(b.String())
}

// exp10Limits is the fixed throttle at cost delay d.
func (r *runner) exp10Limits(d time.Duration) runnerwire.Limits {
	l := runnerwire.DefaultLimits()
	l.CostDelay, l.CostLimit = d, r.sz.CostLimit
	return l
}

// exp10Floor is the adaptive floor in per mille of ceiling: the grid's slowest delay, so the
// adaptive throttle can go as slow as the slowest fixed setting and no slower.
func exp10Floor(ceiling time.Duration, delays []time.Duration) int {
	return max(1, int(1000*ceiling/delays[len(delays)-1]))
}

func runAdaptive(ctx context.Context, r *runner) (*Section, error) {
	sz := r.sz
	if len(sz.AdaptDelays) < 2 || sz.AdaptDelays[0] <= 0 || sz.AdaptRuns < 1 {
		return nil, fmt.Errorf("experiment 10 wants at least two increasing cost delays above 0 and a run of each, got %v, %d", sz.AdaptDelays, sz.AdaptRuns)
	}
	if sz.AdaptCeiling <= 0 || sz.AdaptCeiling > sz.AdaptDelays[0] {
		return nil, fmt.Errorf("experiment 10 wants the foreground p99 target's adaptive ceiling in (0, %s], got %s", sz.AdaptDelays[0], sz.AdaptCeiling)
	}
	var parts []*exp10Part
	for _, h := range []struct {
		name, env string
		run       func(context.Context) (*exp10Part, error)
	}{{exp10Latency, "latency", r.exp10Latency}, {exp10Lag, "lag", r.exp10Lag}} {
		if !exp10PartWanted(h.env) {
			r.logf("  %s: left out (%s=%s)", h.name, Exp10PartsEnv, os.Getenv(Exp10PartsEnv))
			continue
		}
		p, err := h.run(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", h.name, err)
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("%s=%q names neither half of experiment 10 (latency, lag)", Exp10PartsEnv, os.Getenv(Exp10PartsEnv))
	}
	return exp10Section(r, parts...)
}

// Exp10PartsEnv names, when set, the halves of experiment 10 that run, comma-separated:
// "latency" (the foreground p99 target) and "lag" (the replication-lag target); unset, both
// run. A half left out has no rows in the report, whose rules and headline then speak of the
// other alone: for measuring one half in the time of one (the lag half alone takes a few
// minutes).
const Exp10PartsEnv = "VACBENCH_EXP10_PARTS"

// Exp10ServeArgsEnv names the variable that adds flags to the engine server's serve in the
// foreground p99 half of experiment 10 (e.g. "--vacuum-sched idle"), split at spaces: for an
// A/B of a server setting on the law and the fixed delays alike.
const Exp10ServeArgsEnv = "VACBENCH_EXP10_SERVE_ARGS"

// exp10PartWanted reports whether Exp10PartsEnv lets the half named name run.
func exp10PartWanted(name string) bool {
	v := os.Getenv(Exp10PartsEnv)
	return v == "" || slices.Contains(strings.Split(v, ","), name)
}

// exp10Part is one target's runs.
type exp10Part struct {
	name                     string
	alone, unthrottled, goal float64 // the start's figures and the target chosen from them
	// serverAlone and serverUnthrottled are the engine server's own view of the start's
	// latency figures (-1: none), and lawGoal the target the adaptive runs are given
	// (lawTarget); 0 for the lag half, whose law is given goal.
	serverAlone, serverUnthrottled, lawGoal float64
	// aloneWindows and aloneHeld are the 1-second windows of the start's stretches of the
	// load alone and those whose figure held the target (0 where not measured: the lag
	// half): the share no VACUUM setting can raise.
	aloneWindows, aloneHeld int
	runs                    []exp10Run
	// ceiling is the adaptive runs' static ceiling, at most the grid's fastest delay; the
	// bisection's fast end when that delay holds.
	ceiling time.Duration
	// capFactor, when above 0, stops each fixed run at that multiple of the longest adaptive
	// run of the part before it, or at capMin if that is longer, and never later than capMax
	// when that is above 0 (capAt).
	capFactor      float64
	capMin, capMax time.Duration
}

// capAt is the time a fixed run of p may take before it is stopped: capFactor times the
// longest adaptive run so far, or capMin if that is longer, but at most capMax (0: no cap).
// A run stopped there took longer than every adaptive run measured before it, so it is slower
// than the adaptive runs' median whenever the later adaptive runs are no longer than capAt.
// capMax keeps one long adaptive run from stretching every later fixed run (the make bench of
// 2026-12-07: one adaptive run of 36 s let the slow fixed delays run 54 s each); a run
// stopped there may be faster than the adaptive runs, and the verdict, which compares their
// median time with the capped runs' lower bound, then finds the adaptive runs not sooner.
func (p *exp10Part) capAt() time.Duration {
	if p.capFactor <= 0 {
		return 0
	}
	var longest float64
	for _, x := range p.runs {
		if x.adaptive {
			longest = max(longest, x.seconds)
		}
	}
	c := max(p.capMin, time.Duration(p.capFactor*longest*float64(time.Second)))
	if p.capMax > 0 {
		c = min(c, p.capMax)
	}
	return c
}

// medianOf is the median figure and time of the runs of one system and setting at delay d.
func medianOf(runs []exp10Run, system, setting string, d time.Duration) (figure, seconds float64, n int) {
	var f, s []float64
	for _, x := range runs {
		if x.system == system && x.name() == setting && x.delay == d && x.phase != "calibration" {
			f, s = append(f, x.figure), append(s, x.seconds)
		}
	}
	return medianF(f), medianF(s), len(f)
}

// exp10Search runs the grid (AdaptRuns rounds, each measuring, for the adaptive system, adaptive
// throttling, then the delays not passed over by heldFaster, with stopAtHold in increasing order
// up to the first that holds the target in that round) and then bisects each system's bracket
// steps times; measure runs the settings of one system in order. stopAtHold costs a block (a
// load started and settled) per delay: it pays where a fast delay holds and the slow ones
// would take most of a round (the foreground p99 target), not where only the slowest holds
// (the lag target's FULL).
func (r *runner) exp10Search(ctx context.Context, part *exp10Part, systems []string, adaptiveOn string, steps int, stopAtHold bool,
	grid func(system string) []time.Duration,
	measure func(ctx context.Context, system string, set []exp10Setting) ([]exp10Run, error)) error {
	for round := 1; round <= r.sz.AdaptRuns; round++ {
		for _, sys := range systems {
			var set []exp10Setting
			if sys == adaptiveOn {
				set = append(set, exp10Setting{delay: part.ceiling, adaptive: true, phase: "grid", round: round})
			}
			// With stopAtHold, the delays in increasing order, each measured before the next is
			// chosen: once one holds the target in this round, the slower ones cannot be the
			// fastest that holds, and the round ends there. Without it, in one block.
			for _, d := range grid(sys) {
				if heldFaster(part.runs, sys, d, part.goal) {
					continue
				}
				set = append(set, exp10Setting{delay: d, phase: "grid", round: round})
				if !stopAtHold {
					continue
				}
				runs, err := measure(ctx, sys, set)
				if err != nil {
					return err
				}
				part.runs, set = append(part.runs, runs...), nil
				if last := runs[len(runs)-1]; last.figure <= part.goal {
					break
				}
			}
			if len(set) > 0 {
				runs, err := measure(ctx, sys, set)
				if err != nil {
					return err
				}
				part.runs = append(part.runs, runs...)
			}
		}
	}
	bs := map[string]*bisection{}
	for _, sys := range systems {
		g := grid(sys)
		figs := make([]float64, len(g))
		for i, d := range g {
			figs[i], _, _ = medianOf(part.runs, sys, exp10Fixed, d)
		}
		if lo, hi, ok := gridBracket(part.ceiling, g, figs, part.goal); ok {
			bs[sys] = &bisection{lo: lo, hi: hi}
		}
	}
	for step := range steps {
		// The systems alternate by run: 3 runs of each system's midpoint, interleaved.
		mids := map[string]time.Duration{}
		for _, sys := range systems {
			if b := bs[sys]; b != nil {
				if m, ok := b.mid(); ok {
					mids[sys] = m
				}
			}
		}
		if len(mids) == 0 {
			break
		}
		for round := 1; round <= r.sz.AdaptRuns; round++ {
			for _, sys := range systems {
				m, ok := mids[sys]
				if !ok {
					continue
				}
				runs, err := measure(ctx, sys, []exp10Setting{{delay: m, phase: "bisection", round: round}})
				if err != nil {
					return err
				}
				part.runs = append(part.runs, runs...)
			}
		}
		for sys, m := range mids {
			f, _, _ := medianOf(part.runs, sys, exp10Fixed, m)
			bs[sys].update(m, f <= part.goal)
			r.logf("  %s bisection %d on %s: %s median %.3f against target %.3f: bracket now %s..%s",
				part.name, step+1, sys, m, f, part.goal, bs[sys].lo, bs[sys].hi)
		}
	}
	return nil
}

// heldFaster reports whether a fixed grid delay of system faster than d has held the target in
// every grid run so far: then d, slower, cannot be the fastest fixed delay that holds it (that
// one's median holds as long as it keeps holding), and the grid's later rounds pass it over.
// The slow delays are most of a round's time (each takes its delay's multiple of the fastest's
// time), so a round costs little more than the delays up to the one that holds. Should the
// faster delay miss the target in a later round, the next round measures the slower ones again.
func heldFaster(runs []exp10Run, system string, d time.Duration, target float64) bool {
	held := map[time.Duration]bool{}
	for _, x := range runs {
		if x.system != system || x.adaptive || x.phase != "grid" || x.delay >= d {
			continue
		}
		ok, seen := held[x.delay]
		held[x.delay] = x.figure <= target && (ok || !seen)
	}
	for _, ok := range held {
		if ok {
			return true
		}
	}
	return false
}

// ----- the foreground p99 target: lazy VACUUM beside select-only at a fixed rate -----

func (r *runner) exp10Latency(ctx context.Context) (*exp10Part, error) {
	sz := r.sz
	// Both servers get AdaptPoolBytes, a pool that holds pgbench_accounts and its index, so
	// that the load's latency is the CPU's and the VACUUM's, not the disk's. Ours checkpoints
	// where PostgreSQL's default max_wal_size does (exp8CheckpointWAL), as in experiments 7 and
	// 8. At the engine's own 64 MiB the bloating UPDATE and the VACUUM's full-page images
	// started a checkpoint every 1.4 s of a VACUUM at 1.5 ms, and each stalled every
	// statement of the load for 2-6 ms (the probe of 2026-12-07 in docs/benchmarks/online-cost.md):
	// the fixed delays and the law were then judged on the checkpoints' stalls, not the VACUUM's.
	metrics, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	// --log-adaptive: each change of the law's decision, with what its judgement read, goes
	// to the server's log (kept with --work), so a run the law lost can be read afterwards.
	args := append([]string{"--buffer-pool", strconv.FormatInt(sz.AdaptPoolBytes, 10),
		"--checkpoint-wal-size", exp8CheckpointWAL, "--metrics-listen", metrics, "--log-adaptive"}, strings.Fields(os.Getenv(Exp10ServeArgsEnv))...)
	ours, err := r.startOurs(ctx, "exp10-engine-server", args...)
	if err != nil {
		return nil, err
	}
	defer func() { ours.stop() }()
	ours.metrics = "http://" + metrics + "/metrics"
	pg, err := r.startPostgres(ctx, fmt.Sprintf("shared_buffers=%dkB", sz.AdaptPoolBytes>>10))
	if err != nil {
		return nil, err
	}
	defer func() { pg.stop() }()
	systems := map[string]*srvSystem{sysOurs: ours, sysPostgres: pg}
	for _, s := range []*srvSystem{ours, pg} {
		t0 := time.Now()
		if _, err := r.pgbench(ctx, s, false, "-i", "-I", "dtgp", "-s", strconv.Itoa(sz.AdaptScale)); err != nil {
			return nil, err
		}
		r.logf("  %s: pgbench -i -s %d took %.1f s", s.name, sz.AdaptScale, time.Since(t0).Seconds())
	}
	part := &exp10Part{name: exp10Latency, ceiling: sz.AdaptCeiling, capFactor: sz.AdaptCap, capMin: sz.AdaptCapMin, capMax: sz.AdaptCapMax}
	// The start: the load alone, then beside the unthrottled VACUUM, on the engine server.
	var cal []exp10Setting
	for i := range sz.AdaptRuns {
		cal = append(cal, exp10Setting{phase: "calibration", round: i + 1})
	}
	alone, runs, err := r.latencyBlock(ctx, ours, part, 0, sz.AdaptAlone, cal)
	if err != nil {
		return nil, err
	}
	part.runs = append(part.runs, runs...)
	var un, serverUn []float64
	for _, x := range runs {
		un = append(un, x.figure)
		serverUn = append(serverUn, x.server)
	}
	part.alone, part.unthrottled = alone.client, medianF(un)
	part.goal = chooseTarget(part.alone, part.unthrottled, 0)
	target := time.Duration(part.goal * float64(time.Millisecond))
	r.logf("  foreground p99 alone %.2f ms, beside the unthrottled VACUUM %.2f ms (median of %d): target %.2f ms",
		part.alone, part.unthrottled, len(un), part.goal)
	for _, sp := range alone.spans {
		held, total := windowsHeld(alone.pts, sp[0], sp[1], exp10Window, p99Stat, part.goal)
		part.aloneHeld, part.aloneWindows = part.aloneHeld+held, part.aloneWindows+total
	}
	r.logf("  the load alone held the target in %d of its %d windows", part.aloneHeld, part.aloneWindows)
	part.serverAlone, part.serverUnthrottled = alone.server, medianF(serverUn)
	part.lawGoal = lawTarget(part.alone, part.unthrottled, part.goal, part.serverAlone, part.serverUnthrottled)
	r.logf("  the server's own view: p99 alone %.3f ms, beside the unthrottled VACUUM %.3f ms: the law's target %.3f ms",
		part.serverAlone, part.serverUnthrottled, part.lawGoal)
	measure := func(ctx context.Context, sys string, set []exp10Setting) ([]exp10Run, error) {
		_, runs, err := r.latencyBlock(ctx, systems[sys], part, target, 0, set)
		return runs, err
	}
	grid := func(string) []time.Duration { return sz.AdaptDelays }
	if err := r.exp10Search(ctx, part, []string{sysOurs, sysPostgres}, sysOurs, sz.AdaptBisect, true, grid, measure); err != nil {
		return nil, err
	}
	return part, nil
}

// latencyBlock starts the fixed-rate select-only load on s, waits for its sessions and
// AdaptWarmup, then runs each setting's VACUUM in turn (each after a bloating UPDATE and
// AdaptSettle; a fixed one stopped at part's cap), and judges each VACUUM's transactions
// against target (0: not judged). With alone above 0 it measures, before each VACUUM, a
// stretch of alone of the load alone, and returns the median of their p99s.
func (r *runner) latencyBlock(ctx context.Context, s *srvSystem, part *exp10Part, target, alone time.Duration, set []exp10Setting) (aloneFigures, []exp10Run, error) {
	sz := r.sz
	c, err := pgx.Connect(ctx, s.url())
	if err != nil {
		return aloneFigures{}, nil, err
	}
	defer func() { _ = c.Close(context.Background()) }()
	ld := r.startChunkedLoad(ctx, s, sz.AdaptChunk, "-b", "select-only", "-M", "prepared", "-R", strconv.Itoa(sz.AdaptRate),
		"-c", strconv.Itoa(sz.AdaptClients), "-j", strconv.Itoa(sz.AdaptThreads))
	fail := func(err error) (aloneFigures, []exp10Run, error) {
		_, lerr := ld.Stop()
		return aloneFigures{}, nil, errors.Join(err, lerr)
	}
	if err := waitPgbench(ctx, s, sz.AdaptClients); err != nil {
		return fail(err)
	}
	sched := startSched(exp10SchedPeriod)
	defer sched.Stop()
	sleepCtx(ctx, sz.AdaptWarmup)
	var aloneSpans [][2]time.Time
	var serverAlone []float64
	var runs []exp10Run
	for i, st := range set {
		if alone > 0 {
			// A stretch of the load alone before each VACUUM (after the last one's tail has
			// settled): the figure alone is the median of their p99s, as the figure beside the
			// unthrottled VACUUM is the median of its runs', so that one stall of a busy
			// machine in a single stretch does not set the target.
			if i > 0 {
				sleepCtx(ctx, sz.AdaptSettle)
			}
			v := r.serverView(ctx, s)
			from := time.Now()
			sleepCtx(ctx, alone)
			aloneSpans = append(aloneSpans, [2]time.Time{from, time.Now()})
			serverAlone = append(serverAlone, v.p99(ctx))
		}
		var limit time.Duration
		if !st.adaptive && st.phase != "calibration" {
			// The adaptive runs of this block count too: the round's adaptive run comes first.
			limit = (&exp10Part{runs: append(slices.Clone(part.runs), runs...), capFactor: part.capFactor, capMin: part.capMin, capMax: part.capMax}).capAt()
		}
		run, err := r.latencyVacuum(ctx, c, s, part, target, limit, st)
		if err != nil {
			return fail(err)
		}
		runs = append(runs, run)
	}
	// The load outlasts the last VACUUM by a little, so late transactions are counted.
	sleepCtx(ctx, 200*time.Millisecond)
	all, err := ld.Stop()
	if err != nil {
		return aloneFigures{}, nil, err
	}
	var af aloneFigures
	if len(aloneSpans) > 0 {
		var p99s []float64
		for i, sp := range aloneSpans {
			p99, n := all.between(sp[0], sp[1])
			p99s = append(p99s, ms(p99))
			r.logf("  %s load alone, stretch %d: p99 %.2f ms (%d transactions), the server's view %s; %s", s.name, i+1, ms(p99), n,
				serverName(serverAlone[i]), sched.cpuSummary(sp[0], sp[1]))
		}
		af = aloneFigures{client: medianF(p99s), server: medianF(serverAlone), spans: aloneSpans}
	}
	pts := make([]point, len(all.lat))
	for i := range all.lat {
		pts[i] = point{at: all.ends[i], v: ms(all.lat[i])}
	}
	for _, p := range pts {
		for _, sp := range af.spans {
			if !p.at.Before(sp[0]) && p.at.Before(sp[1]) {
				af.pts = append(af.pts, p)
				break
			}
		}
	}
	for i := range runs {
		x := &runs[i]
		p99, n := p99Through(all, x.start, x.end)
		x.figure, x.n, x.failed = ms(p99), n, all.fails
		if target > 0 {
			x.held, x.total = windowsHeld(pts, x.start, x.end, exp10Window, p99Stat, ms(target))
		}
		capped := ""
		if x.capped {
			capped = " (stopped at the cap: slower than the cap)"
		}
		r.logf("  %s %s %s %s round %d: VACUUM %.2f s%s, p99 %.2f ms (%d transactions; the server's view %s), %d of %d windows held; %s",
			s.name, x.phase, x.name(), delayName(x.delay), x.round, x.seconds, capped, x.figure, x.n, serverName(x.server), x.held, x.total,
			sched.cpuSummary(x.start, x.end))
		if x.adaptive && target > 0 {
			r.logf("    windows (p99 ms, transactions; the law's budget per mille and binding at each poll): %s",
				windowTimeline(pts, x.start, x.end, exp10Window, p99Stat, 1, "%.2f ms", x.law))
			r.logf("    windows' go: Go scheduling latency p99 (ms; runnable to running, every goroutine of this process); psi: the machine's CPU pressure stall (ms/s, /proc/pressure/cpu some); rq: this process's threads' run-queue wait (ms/s): %s",
				sched.schedTimeline(x.start, x.end, exp10Window))
			r.logf("    the server's own foreground p99 (its view's last 10 s) at each poll, ms: %s", serverP99s(x.law))
		}
	}
	return af, runs, nil
}

// p99Through is the p99 and count of the load's transactions that ended while the VACUUM
// ran; when none did (the foreground stalled for all of it), of those that ended from its
// start to the first one after its end, which waited through it: a stall is never a p99 of 0.
func p99Through(run pgbenchRun, start, end time.Time) (time.Duration, int) {
	if p99, n := run.between(start, end); n > 0 {
		return p99, n
	}
	var next time.Time
	for _, e := range run.ends {
		if e.After(end) && (next.IsZero() || e.Before(next)) {
			next = e
		}
	}
	if next.IsZero() {
		return 0, 0
	}
	return run.between(start, next)
}

// exp10Target is the online run's connection to s.
func (r *runner) exp10Target(s *srvSystem) (online.Target, error) {
	pw := filepath.Join(r.work, "exp10-password-"+s.name)
	if err := os.WriteFile(pw, []byte(s.password), 0o600); err != nil {
		return online.Target{}, err
	}
	return online.Target{Address: s.addr, Database: "postgres", User: s.user, PasswordFile: pw,
		SSLMode: online.SSLDisable, NoEnvironment: true}, nil
}

// onlineVacuum runs one online VACUUM of table on s at setting st (adaptive with targets a),
// returning its run with the time and, for an adaptive run, the time bound by each signal.
// A run still going after limit (0: none) is cancelled and marked capped.
func (r *runner) onlineVacuum(ctx context.Context, s *srvSystem, table string, full bool, st exp10Setting, a runnerwire.AdaptiveTargets, limit time.Duration) (exp10Run, error) {
	run := exp10Run{exp10Setting: st, system: s.name}
	tg, err := r.exp10Target(s)
	if err != nil {
		return run, err
	}
	o := online.Options{Tables: []string{table}, Full: full, Throttle: r.exp10Limits(st.delay), Parallelism: 1,
		PollInterval: exp10PollTime}
	var mu sync.Mutex
	var last *runnerwire.AdaptiveProgress
	if st.adaptive {
		o.Adaptive = a
		o.OnProgress = func(p runnerwire.Progress) {
			if p.Adaptive != nil {
				mu.Lock()
				last = p.Adaptive
				server := -1.0
				if p.Foreground != nil {
					server = float64(p.Foreground.P99Microseconds) / 1e3
				}
				run.law = append(run.law, lawPoint{at: time.Now(), perMille: p.Adaptive.BudgetPerMille, binding: p.Adaptive.Binding, server: server,
					phase: string(p.Phase), wal: p.WALBytes})
				mu.Unlock()
			}
		}
	}
	vr, err := online.New(ctx, tg, o)
	if err != nil {
		return run, err
	}
	vctx, cancel := ctx, context.CancelFunc(func() {})
	if limit > 0 {
		vctx, cancel = context.WithTimeout(ctx, limit)
	}
	view := r.serverView(ctx, s)
	run.start = time.Now()
	_, verr := vr.Vacuum(vctx)
	run.end = time.Now()
	run.server = view.p99(ctx)
	run.spanEnd = run.end
	if verr != nil && limit > 0 && ctx.Err() == nil && errors.Is(verr, context.DeadlineExceeded) {
		// Stopped at the cap: the time is a lower bound, recorded as the cap.
		run.capped, verr = true, nil
		run.end = run.start.Add(limit)
		run.spanEnd = run.end
	}
	cancel()
	cerr := vr.Close()
	if err := errors.Join(verr, cerr); err != nil {
		return run, fmt.Errorf("%s: online VACUUM %s (%s %s): %w", s.name, table, st.name(), delayName(st.delay), err)
	}
	run.seconds = run.end.Sub(run.start).Seconds()
	mu.Lock()
	defer mu.Unlock()
	if last != nil {
		b := last.BoundSeconds
		run.bound = b["ForegroundLatency"] + b["ReplicationLag"]
		run.floor = b["Floor"] + b["HardStop"]
	}
	return run, nil
}

// latencyVacuum bloats pgbench_accounts (a dead version of every AdaptDeadEvery-th account),
// lets the load settle and vacuums it online at st, stopping it after limit (0: none). A
// stopped VACUUM's table is then vacuumed unthrottled, unmeasured, so that the next run
// starts from the same state as every other.
func (r *runner) latencyVacuum(ctx context.Context, c *pgx.Conn, s *srvSystem, part *exp10Part, target, limit time.Duration, st exp10Setting) (exp10Run, error) {
	// The bloating UPDATE, then, as the lag half does, a scan that sets the new versions'
	// hint bits and a checkpoint that writes the pages out, so that the VACUUM meets the
	// table as a VACUUM long after its updates does: the load does not set those hint bits
	// (and log a full-page image for each page, on our engine) and no checkpoint writes the
	// UPDATE's pages during it. Without them the first seconds after the UPDATE held the
	// load up with no VACUUM at all (hack/fgprobe --no-vacuum --late-update: p99 0.54-1.25
	// ms against 0.45-0.6 alone), in the first windows of every run, fixed or adaptive.
	for _, q := range []string{
		fmt.Sprintf("UPDATE %s SET abalance = abalance + 1 WHERE aid %% %d = 0", exp10Table, r.sz.AdaptDeadEvery),
		"SELECT count(*) FROM " + exp10Table, "CHECKPOINT"} {
		if _, err := c.Exec(ctx, q); err != nil {
			return exp10Run{}, fmt.Errorf("%s: before the VACUUM: %s: %w", s.name, q, err)
		}
	}
	sleepCtx(ctx, r.sz.AdaptSettle)
	a := runnerwire.DefaultAdaptive()
	if part.lawGoal > 0 {
		target = time.Duration(part.lawGoal * float64(time.Millisecond))
	}
	a.LatencyTarget, a.FloorPerMille = target, exp10Floor(part.ceiling, r.sz.AdaptDelays)
	run, err := r.onlineVacuum(ctx, s, exp10Table, false, st, a, limit)
	if err != nil || !run.capped {
		return run, err
	}
	t0 := time.Now()
	if _, err := c.Exec(ctx, "SET vacuum_cost_delay = 0"); err != nil {
		return run, fmt.Errorf("%s: before finishing a capped VACUUM: %w", s.name, err)
	}
	if _, err := c.Exec(ctx, "VACUUM "+exp10Table); err != nil {
		return run, fmt.Errorf("%s: finishing a capped VACUUM: %w", s.name, err)
	}
	r.logf("  %s %s %s round %d stopped at the cap %.2f s; the rest of the VACUUM, unthrottled and not measured, took %.2f s",
		s.name, st.name(), delayName(st.delay), st.round, limit.Seconds(), time.Since(t0).Seconds())
	return run, nil
}

// ----- the replication-lag target: VACUUM FULL beside tpcb-like with a synchronous standby -----

func (r *runner) exp10Lag(ctx context.Context) (*exp10Part, error) {
	sz := r.sz
	part := &exp10Part{name: exp10Lag, ceiling: sz.AdaptDelays[0], capFactor: sz.AdaptCap, capMin: sz.AdaptCapMin, capMax: sz.AdaptCapMax}
	ours, err := r.startOursPair(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { ours.stop() }()
	if err := r.fullLagSetup(ctx, ours, exp10Full, r.sz.AdaptFullRows); err != nil {
		return nil, err
	}
	var cal []exp10Setting
	for i := range sz.AdaptRuns {
		cal = append(cal, exp10Setting{phase: "calibration", round: i + 1})
	}
	alone, runs, err := r.lagBlock(ctx, ours, part, 0, cal)
	if err != nil {
		return nil, err
	}
	part.runs = append(part.runs, runs...)
	var un []float64
	for _, x := range runs {
		un = append(un, x.figure*1e6)
	}
	part.alone, part.unthrottled = float64(alone), medianF(un)
	part.goal = chooseTarget(part.alone, part.unthrottled, exp10LagFloor)
	r.logf("  replication lag alone %.0f bytes, peak beside the unthrottled FULL %.2f MB (median of %d): target %.3f MB",
		part.alone, part.unthrottled/1e6, len(un), part.goal/1e6)
	// The figures of the lag part are in MB from here on.
	part.alone, part.unthrottled, part.goal = part.alone/1e6, part.unthrottled/1e6, part.goal/1e6
	target := int64(part.goal * 1e6)
	measureOurs := func(ctx context.Context, _ string, set []exp10Setting) ([]exp10Run, error) {
		_, runs, err := r.lagBlock(ctx, ours, part, target, set)
		return runs, err
	}
	grid := func(string) []time.Duration { return sz.AdaptDelays }
	if err := r.exp10Search(ctx, part, []string{sysOurs}, sysOurs, sz.AdaptBisect, false, grid, measureOurs); err != nil {
		return nil, err
	}
	ours.stop()
	ours.stop = func() {}

	// PostgreSQL 15: its VACUUM FULL takes the same settings; it has no adaptive throttle and,
	// per its documentation of cost-based delay, a FULL is not throttled: the grid there is
	// unthrottled and the slowest delay, which shows whether the delay does anything.
	pg, err := r.startPostgresPair(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { pg.stop() }()
	if err := r.fullLagSetup(ctx, pg, exp10Full, r.sz.AdaptFullRows); err != nil {
		return nil, err
	}
	pgGrid := func(string) []time.Duration { return []time.Duration{0, sz.AdaptDelays[len(sz.AdaptDelays)-1]} }
	measurePG := func(ctx context.Context, _ string, set []exp10Setting) ([]exp10Run, error) {
		_, runs, err := r.lagBlock(ctx, pg, part, target, set)
		return runs, err
	}
	// Two settings, no bracket to narrow: no bisection.
	if err := r.exp10Search(ctx, part, []string{sysPostgres}, "", 0, false, pgGrid, measurePG); err != nil {
		return nil, err
	}
	return part, nil
}

// lagBlock starts experiment 5's fixed-rate tpcb-like load and the lag sampler on the
// pair's primary, then for each setting bloats the table, waits until the standby has
// replayed everything, lets AdaptSettle pass and runs the VACUUM FULL online, sampling until
// the standby has replayed all FULL wrote (DrainFactor times FULL's time at most). It returns
// the largest lag sampled before the first FULL (the load's alone) and the runs, each judged
// against target (0: not judged) over the FULL and its drain.
func (r *runner) lagBlock(ctx context.Context, p *replicaPair, part *exp10Part, target int64, set []exp10Setting) (int64, []exp10Run, error) {
	wctx, cancel := p.watch(ctx)
	defer cancel()
	alone, runs, err := r.lagBlockUntil(wctx, p, part, target, set)
	if cause := context.Cause(wctx); err != nil && cause != nil && !errors.Is(cause, context.Canceled) {
		err = cause
	}
	return alone, runs, err
}

func (r *runner) lagBlockUntil(ctx context.Context, p *replicaPair, part *exp10Part, target int64, set []exp10Setting) (int64, []exp10Run, error) {
	sz := r.sz
	c, err := pgx.Connect(ctx, p.primary.url())
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = c.Close(context.Background()) }()
	// The set-up's WAL (or the last block's) replayed first: the lag alone is the load's.
	if err := waitReplayed(ctx, c, 120*time.Second); err != nil {
		return 0, nil, fmt.Errorf("%s: %w", p.primary.name, err)
	}
	ls, err := sampleLag(ctx, p.primary, sz.LagSample)
	if err != nil {
		return 0, nil, err
	}
	ld := r.startChunkedLoad(ctx, p.primary, sz.AdaptChunk, "-b", "tpcb-like", "-R", strconv.Itoa(sz.FullLoadRate),
		"-c", strconv.Itoa(sz.FullLoadClients), "-j", "1")
	stopAll := func() ([]LagSample, pgbenchRun, error) {
		samples, serr := ls.Stop()
		run, lerr := ld.Stop()
		return samples, run, errors.Join(serr, lerr)
	}
	fail := func(err error) (int64, []exp10Run, error) {
		_, _, serr := stopAll()
		return 0, nil, errors.Join(err, serr)
	}
	if err := waitPgbench(ctx, p.primary, sz.FullLoadClients); err != nil {
		return fail(err)
	}
	sleepCtx(ctx, sz.AdaptSettle)
	firstFull := time.Now()
	var runs []exp10Run
	for _, st := range set {
		// The bloating UPDATE, then, as experiment 5 learnt (fullBesideUntil), a scan that sets
		// the hint bits and a checkpoint that makes them durable. Without them the FULL's own
		// scan set the hint bits, and when a checkpoint had come between, our engine logged a
		// full-page image of every old page for it, as much WAL again as the rewrite. Which
		// settings met a checkpoint depended on the WAL before them, much the same each round:
		// in one run the 2 ms and 10 ms FULLs peaked at 7 to 13 MB of lag in five of their six
		// runs, the 5 ms and 20 ms ones under 1 MB in all six.
		var marks []mark
		for _, q := range []string{"UPDATE " + exp10Full + " SET n = n + 1 WHERE id % 2 = 0",
			"SELECT count(*) FROM " + exp10Full, "CHECKPOINT"} {
			if _, err := c.Exec(ctx, q); err != nil {
				return fail(fmt.Errorf("%s: %s: %w", p.primary.name, q, err))
			}
			marks = append(marks, mark{strings.Fields(q)[0], time.Now()})
		}
		if err := waitReplayed(ctx, c, 120*time.Second); err != nil {
			return fail(fmt.Errorf("%s: %w", p.primary.name, err))
		}
		marks = append(marks, mark{"replayed", time.Now()})
		sleepCtx(ctx, sz.AdaptSettle)
		a := runnerwire.DefaultAdaptive()
		a.MaxLagBytes, a.FloorPerMille = target, exp10Floor(sz.AdaptDelays[0], sz.AdaptDelays)
		var limit time.Duration
		if !st.adaptive && st.phase != "calibration" {
			// The adaptive runs of this block count too: the round's adaptive run comes first.
			limit = (&exp10Part{runs: append(slices.Clone(part.runs), runs...), capFactor: part.capFactor, capMin: part.capMin, capMax: part.capMax}).capAt()
		}
		run, err := r.onlineVacuum(ctx, p.primary, exp10Full, true, st, a, limit)
		if err != nil {
			return fail(err)
		}
		var end string
		if err := c.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&end); err != nil {
			return fail(err)
		}
		endLSN, err := parseLSN(end)
		if err != nil {
			return fail(err)
		}
		deadline := run.end.Add(time.Duration(sz.DrainFactor * float64(run.end.Sub(run.start))))
		for time.Now().Before(deadline) && ctx.Err() == nil {
			if s, err := ls.last(); err != nil || s.Replayed >= endLSN {
				break
			}
			sleepCtx(ctx, sz.LagSample)
		}
		run.spanEnd = time.Now()
		run.marks = marks
		runs = append(runs, run)
		if run.capped {
			// A cancelled FULL left the old table as it was: the rest of it, unthrottled and
			// not measured, so that the next run starts from the same state as every other
			// (the next run waits for the standby to replay it).
			t0 := time.Now()
			for _, q := range []string{"SET vacuum_cost_delay = 0", "VACUUM (FULL) " + exp10Full} {
				if _, err := c.Exec(ctx, q); err != nil {
					return fail(fmt.Errorf("%s: finishing a capped FULL: %s: %w", p.primary.name, q, err))
				}
			}
			r.logf("  %s %s %s round %d stopped at the cap %.2f s; the FULL again, unthrottled and not measured, took %.2f s",
				p.primary.name, st.name(), delayName(st.delay), st.round, limit.Seconds(), time.Since(t0).Seconds())
		}
	}
	samples, load, err := stopAll()
	if err != nil {
		return 0, nil, err
	}
	at := func(s LagSample) time.Time { return ls.start.Add(s.At) }
	var alone int64
	for _, s := range samples {
		if at(s).Before(firstFull) {
			alone = max(alone, s.Lag())
		}
	}
	pts := make([]point, len(samples))
	for i, s := range samples {
		pts[i] = point{at: at(s), v: float64(s.Lag())}
	}
	for i := range runs {
		x := &runs[i]
		var peak int64
		var peakAt time.Duration // from the FULL's start
		var atStart int64        // the last sample before the FULL: a lag it did not make
		for _, s := range samples {
			if t := at(s); t.Before(x.start) {
				atStart = s.Lag()
			} else if !t.After(x.spanEnd) {
				if s.Lag() > peak {
					peak, peakAt = s.Lag(), t.Sub(x.start)
				}
				x.n++
			}
		}
		x.figure, x.failed = float64(peak)/1e6, load.fails
		if target > 0 {
			x.held, x.total = windowsHeld(pts, x.start, x.spanEnd, exp10Window, maxStat, float64(target))
		}
		capped := ""
		if x.capped {
			capped = " (stopped at the cap: slower than the cap)"
		}
		r.logf("  %s %s %s %s round %d: FULL %.2f s%s, peak lag %.3f MB at %.2f s (%.3f MB before it; %.2f s to replay), %d of %d windows held",
			p.primary.name, x.phase, x.name(), delayName(x.delay), x.round, x.seconds, capped, x.figure, peakAt.Seconds(), float64(atStart)/1e6,
			x.spanEnd.Sub(x.start).Seconds(), x.held, x.total)
		var ms []string
		for _, m := range x.marks {
			ms = append(ms, fmt.Sprintf("%s %.2f", m.name, m.at.Sub(x.start).Seconds()))
		}
		r.logf("    steps before (s from the FULL's start): %s; lag samples (s from the FULL's start: KB): %s", strings.Join(ms, ", "),
			lagSeries(samples, at, x.start.Add(-3*time.Second), x.start, x.spanEnd))
		if x.adaptive && target > 0 {
			r.logf("    windows (peak lag MB, samples; the law's budget per mille and binding at each poll): %s",
				windowTimeline(pts, x.start, x.spanEnd, exp10Window, maxStat, 1e-6, "%.3f MB", x.law))
			r.logf("    polls (s from the FULL's start: phase, WAL MB inserted by the FULL, budget per mille and binding): %s", lawSeries(x.law, x.start))
		}
	}
	return alone, runs, nil
}

// lagSeries lists the lag samples of [start, end] (at gives a sample's time), each as its
// time from start and its lag in KB, with the query's round trip in ms when it took 5 ms or
// more: a run's log shows when a peak came, not only which window held it.
func lagSeries(samples []LagSample, at func(LagSample) time.Time, from, start, end time.Time) string {
	var b strings.Builder
	for _, s := range samples {
		if t := at(s); !t.Before(from) && !t.After(end) {
			fmt.Fprintf(&b, "%.2f:%.0f", t.Sub(start).Seconds(), float64(s.Lag())/1e3)
			if s.Took >= 5*time.Millisecond {
				fmt.Fprintf(&b, "(%.0fms)", s.Took.Seconds()*1e3)
			}
			b.WriteString(" ")
		}
	}
	return strings.TrimSpace(b.String())
}

// lawSeries lists an adaptive run's polls: time from start, phase, WAL inserted, budget
// and binding.
func lawSeries(law []lawPoint, start time.Time) string {
	var b strings.Builder
	for _, l := range law {
		fmt.Fprintf(&b, "%.2f:%s,%.2f,%d%s ", l.at.Sub(start).Seconds(), l.phase, float64(l.wal)/1e6, l.perMille, bindingLetter(l.binding))
	}
	return strings.TrimSpace(b.String())
}
