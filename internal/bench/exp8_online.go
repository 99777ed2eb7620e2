package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vacuumops/vacuum-operator/internal/online"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// Experiment 8: the product's own experiment. An online VACUUM of a live server beside its
// pgbench foreground, through the runner's online face (package online, what a runner pod
// runs for a server target), at each cost delay of experiment 1, on the engine server and
// on PostgreSQL 15: the same runner, the same settings, the same table and the same load,
// the two servers interleaved (at each delay the engine server, then PostgreSQL 15). Per
// run: the foreground's p99 alone and during the VACUUM (pgbench's per-transaction log;
// the engine server's own latency view beside it), and the VACUUM's time against its
// unthrottled time. One run's p99 ratio is noisy, so after the first pass over the delays the
// ones that could be chosen (the engine server's first run within Sizes.OnlineCandidateX of
// its unthrottled time; the smallest Sizes.OnlineMaxCandidates of them) run
// Sizes.OnlineRounds more times on both servers, interleaved, and the verdict reads each
// delay's medians.

const exp8Table = "pgbench_accounts"

// exp8CheckpointWAL is the engine server's --checkpoint-wal-size in experiment 8: where
// PostgreSQL 15 at its default max_wal_size (1GB, checkpoint_completion_target 0.9)
// requests a checkpoint, 32 segments of 16 MiB past its redo point. At the engine's own
// 64 MiB a checkpoint fell between each reload and its VACUUM, so the VACUUM found clean
// every page the UPDATE had dirtied and paid 20 cost units and a full-page image to dirty it
// again, where PostgreSQL's found most of them still dirty.
const exp8CheckpointWAL = "512Mi"

// Exp8DelaysEnv names the variable that, when set (e.g. "0,500us,1ms"), replaces experiment
// 8's cost delays, the first 0: a shorter run for an A/B (docs/benchmarks/online-cost.md).
const Exp8DelaysEnv = "VACBENCH_EXP8_DELAYS"

// Exp8ServeArgsEnv names the variable that adds flags to the engine server's serve in experiment 8 and its cost
// test (e.g. "--vacuum-nice 0"), split at spaces.
const Exp8ServeArgsEnv = "VACBENCH_EXP8_SERVE_ARGS"

// exp8Delays parses Exp8DelaysEnv's value v.
func exp8Delays(v string) ([]time.Duration, error) {
	var ds []time.Duration
	for _, f := range strings.Split(v, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", Exp8DelaysEnv, err)
		}
		ds = append(ds, d)
	}
	return ds, nil
}

func runOnline(ctx context.Context, r *runner) (*Section, error) {
	sz := r.sz
	if v := os.Getenv(Exp8DelaysEnv); v != "" {
		ds, err := exp8Delays(v)
		if err != nil {
			return nil, err
		}
		sz.OnlineDelays = ds
	}
	if len(sz.OnlineDelays) == 0 || sz.OnlineDelays[0] != 0 {
		return nil, fmt.Errorf("experiment 8's delays must start with 0 (unthrottled), got %v", sz.OnlineDelays)
	}
	extra := strings.Fields(os.Getenv(Exp8ServeArgsEnv))
	ours, err := r.startOurs(ctx, "exp8-engine-server", append([]string{"--checkpoint-wal-size", exp8CheckpointWAL}, extra...)...)
	if err != nil {
		return nil, err
	}
	defer func() { ours.stop() }()
	pg, err := r.startPostgres(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { pg.stop() }()
	systems := []*srvSystem{ours, pg}
	var runs []exp8Run // every VACUUM measured, in the order run
	measure := func(s *srvSystem, d time.Duration) error {
		row, err := r.onlineRun(ctx, s, d, exp8Rows(runs, s.name))
		if err != nil {
			return fmt.Errorf("%s, %s: %w", s.name, delayName(d), err)
		}
		r.logf("  %s %s: VACUUM %.2f s (%s), pgbench p99 %.2f ms alone, %.2f ms during (%.2fx; %d and %d transactions), server's p99 %.2f ms alone, %.2f ms at the end; %d cost units",
			s.name, delayName(d), row.vacuum.Seconds(), sleptText(row.slept), ms(row.alone), ms(row.during), ratio(row.during, row.alone),
			row.aloneN, row.duringN, ms(row.serverAlone), ms(row.serverEnd), row.cost)
		if s.name == sysOurs {
			r.logf("    Go runtime alone %s", row.rtAlone)
			r.logf("    Go runtime during %s", row.rtDuring)
		}
		runs = append(runs, exp8Run{system: s.name, delay: d, row: row})
		return nil
	}
	// The first pass: each delay once on each server. The unthrottled VACUUMs run again after
	// the grid's middle and after its end, so each server's baseline is the median of three
	// spread over the pass.
	last := len(sz.OnlineDelays) - 1
	for i, d := range sz.OnlineDelays {
		for _, s := range systems {
			if err := measure(s, d); err != nil {
				return nil, err
			}
		}
		if i != last/2 && i != last {
			continue
		}
		for _, s := range systems {
			if err := measure(s, 0); err != nil {
				return nil, err
			}
		}
	}
	// The repeated rounds, only where a median can decide the verdict: one run's p99 ratio is
	// too noisy to choose a delay on.
	cands := exp8Candidates(runs, sysOurs, sz.OnlineCandidateX, sz.OnlineMaxCandidates)
	r.logf("  candidate delays (the engine server's first run at most %gx its unthrottled time, the smallest %d): %s; %d more rounds",
		sz.OnlineCandidateX, sz.OnlineMaxCandidates, delayList(cands), sz.OnlineRounds)
	for range sz.OnlineRounds {
		for _, d := range cands {
			for _, s := range systems {
				if err := measure(s, d); err != nil {
					return nil, err
				}
			}
		}
	}
	for _, s := range systems {
		u := exp8At(runs, s.name, 0)
		r.logf("  %s unthrottled: VACUUM %s s, median %.2f s", s.name, vacuumTimes(u), medianVacuum(u).vacuum.Seconds())
	}
	summary, perRun, err := exp8Tables(runs, []string{sysOurs, sysPostgres}, sz.OnlineDelays)
	if err != nil {
		return nil, err
	}
	sec := &Section{
		Title: "Online VACUUM beside pgbench: the engine server against PostgreSQL 15",
		Claim: "(the online-runs issue) at some cost delay the online VACUUM keeps pgbench's p99 at most 1.2x its p99 " +
			"alone while taking at most 3x its unthrottled time, and does both better than PostgreSQL 15 vacuumed by " +
			"the same runner with the same settings under the same load.",
		Tables: []*Table{summary, perRun},
		Setup: []string{
			sentence("the engine server in this process (SCRAM, loopback, --buffer-pool %s, --checkpoint-wal-size %s: "+
				"where PostgreSQL 15's default max_wal_size of 1GB requests a checkpoint) and PostgreSQL 15 (SCRAM, "+
				"loopback, shared_buffers %s, autovacuum off, fsync, synchronous_commit and full_page_writes on); "+
				"before each VACUUM, on each server, a fresh pgbench -i -I dtgp -s %d (the table loaded and not "+
				"vacuumed) and an UPDATE of every second account (aid %% 2 = 0), so every VACUUM has the same work",
				mib(sz.SrvPoolBytes), exp8CheckpointWAL, mib(sz.SrvPoolBytes), sz.OnlineScale),
			sentence("the load: PostgreSQL 15's pgbench select-only -M prepared -l, %d clients on %d threads, for a "+
				"%s warm-up, %s alone, the VACUUM and at least %s after it (its -T from the first unthrottled VACUUM's "+
				"time and the most cost units of the server's runs before it; a VACUUM that outlasts it is run again with a longer load, load_runs counts the "+
				"tries); VACUUM of %s through package online (the runner pod's online path: session settings, "+
				"VACUUM (VERBOSE), progress polled every second; the run prepared, its table picked, before the "+
				"load starts) at cost limit %d and each cost delay: %s (experiment 1's are %s)",
				sz.SrvClients, sz.SrvThreads, sz.OnlineWarmup, sz.OnlineAlone, sz.OnlineTail, exp8Table, sz.CostLimit,
				delayList(sz.OnlineDelays), delayList(sz.Delays)),
			"each server's unthrottled VACUUM runs three times, beside a load of its own each: first, after the " +
				"middle delay of the grid and after the last; the median of the three times is the unthrottled time " +
				"every multiple is taken against",
			sentence("the repeated rounds: after that first pass, the delays at which the engine server's first "+
				"VACUUM took at most %gx its unthrottled time (the only ones whose median could come within the goal's "+
				"%.0fx), the smallest %d of them, run %d more times on each server, in rounds over those delays, at each "+
				"the engine server then PostgreSQL 15; every other delay keeps its one run (its runs column says 1), and "+
				"the verdict reads that run as its median; the order column of exp8_online_runs is each run's place in "+
				"the experiment",
				sz.OnlineCandidateX, onlineTimeGoal, sz.OnlineMaxCandidates, sz.OnlineRounds),
			"exp8_online_runs has every run; exp8_online per server and delay the number of runs and the median " +
				"of each figure over them, taken column by column (a row's medians may come from different runs), " +
				"with the least and greatest multiple and p99 ratio of the runs; the verdict reads the medians",
			"p99_alone_ms: p99 of the pgbench transactions that ended in the stretch alone before the VACUUM and " +
				"from 0.5 s after its end to the end of the load; p99_during_ms: of those that ended while it ran; " +
				"p99_ratio is during over alone (each run's own); vacuum_x_unthrottled is the VACUUM's time over the " +
				"median of the same server's three unthrottled VACUUMs",
			"hits, misses and dirtied: the VACUUM's buffer usage from its VERBOSE report (the engine server's and " +
				"PostgreSQL's own counts); cost_units = hits + 2 misses + 20 dirtied, the page costs both throttles " +
				"charge, so a VACUUM's time at a cost delay is about cost_units / limit x delay plus its work",
			"server_p99_alone_ms and server_p99_end_ms (the engine server only): the p99 of its " +
				"vacuumops_statement_latency view (the `all` row, its 10 s window), read just before the VACUUM " +
				"and just after it",
			"the first pass's order: at each delay the engine server, then PostgreSQL 15",
		},
		Caveats: []string{
			"One machine for both servers and pgbench: the client's CPU is part of every figure, and other work " +
				"on the machine moves the p99s between runs; the two servers' runs at one delay are seconds apart.",
			"server_p99_end_ms covers the VACUUM's last 10 s: for a VACUUM shorter than that, also the stretch " +
				"alone before it, which dilutes it; server_p99_alone_ms covers the warm-up too.",
			"A short VACUUM (unthrottled) holds few transactions (transactions_during), and its p99 is noisier.",
			"The repeated rounds come after the whole first pass: their multiples are taken against unthrottled " +
				"VACUUMs run minutes earlier, on a machine whose load may have changed since.",
			"A median of three runs is steadier than one run, not exact: a delay whose median p99 ratio is near " +
				"1.2x can fall either side of it in another run (p99_ratio_min and p99_ratio_max show how far its runs spread).",
			"PostgreSQL 15 prunes pages as pgbench reads them (heap_page_prune_opt), so part of its vacuum's work " +
				"is done by the foreground before the VACUUM (its VERBOSE report removes 0 tuples: all were pruned to " +
				"dead line pointers already); the engine server does not, and its first pass leaves such pages " +
				"unchanged, so that work costs it nothing before the second pass.",
			"A page costs a VACUUM 20 units only when it was clean: how many pages the UPDATE left dirty, and " +
				"how many a checkpoint or the pool's evictions cleaned before the VACUUM reached them, moves " +
				"cost_units, and so the throttled times, on both servers.",
		},
	}
	if slices.ContainsFunc(sz.OnlineDelays, func(d time.Duration) bool { return d > 0 && d < time.Millisecond }) {
		sec.Setup = append(sec.Setup, "a cost delay below a millisecond is sent to both servers as it is (e.g. 250us); the two throttles "+
			"spend it differently: PostgreSQL 15 sleeps delay x balance / limit (at most 4x the delay) after each "+
			"limit's worth of units, with pg_usleep (select), which takes longer than asked; the engine server "+
			"paces limit / delay units per second on a clock of its own and sleeps only once it is a millisecond "+
			"(the least Go's timer sleeps here: the probe's sleep_50us_ms) or more ahead, carrying smaller debts, so its delay sets "+
			"its rate but not the length of its sleeps")
	}
	if len(extra) > 0 {
		sec.Setup = append(sec.Setup, sentence("the engine server's serve also had %q (%s)", strings.Join(extra, " "), Exp8ServeArgsEnv))
	}
	sec.Rules = onlineRules(tablesOf(sec.Tables))
	return sec, nil
}

// medianVacuum is the run whose VACUUM time is the median of runs (the lower middle one of
// an even count).
func medianVacuum(runs []onlineRow) onlineRow {
	sorted := slices.Clone(runs)
	slices.SortFunc(sorted, func(a, b onlineRow) int { return cmp.Compare(a.vacuum, b.vacuum) })
	return sorted[(len(sorted)-1)/2]
}

// exp8Run is one VACUUM of experiment 8: the server, the cost delay, what it measured.
type exp8Run struct {
	system string
	delay  time.Duration
	row    onlineRow
}

// exp8Rows are system's runs in the order run (the first is its first unthrottled VACUUM).
func exp8Rows(runs []exp8Run, system string) []onlineRow {
	var out []onlineRow
	for _, x := range runs {
		if x.system == system {
			out = append(out, x.row)
		}
	}
	return out
}

// exp8At are system's runs at delay d, in the order run.
func exp8At(runs []exp8Run, system string, d time.Duration) []onlineRow {
	var out []onlineRow
	for _, x := range runs {
		if x.system == system && x.delay == d {
			out = append(out, x.row)
		}
	}
	return out
}

// exp8Candidates are the throttled delays, smallest first and at most most of them, whose
// first run on system took at most bound times the median of its unthrottled runs: the only
// delays whose median multiple could come within the goal's bound, and so be chosen.
func exp8Candidates(runs []exp8Run, system string, bound float64, most int) []time.Duration {
	u := exp8At(runs, system, 0)
	if len(u) == 0 {
		return nil
	}
	base := medianVacuum(u).vacuum
	var seen, out []time.Duration
	for _, x := range runs {
		if x.system != system || x.delay == 0 || slices.Contains(seen, x.delay) {
			continue
		}
		seen = append(seen, x.delay)
		if ratio(x.row.vacuum, base) <= bound {
			out = append(out, x.delay)
		}
	}
	slices.Sort(out)
	return out[:min(len(out), most)]
}

// exp8Figure is a figure of one run that exp8_online gives as the median of a delay's runs;
// base is the median time of the same server's unthrottled runs.
type exp8Figure struct {
	column string
	of     func(r onlineRow, base time.Duration) float64
}

var exp8Figures = []exp8Figure{
	{"vacuum_s", func(r onlineRow, _ time.Duration) float64 { return r.vacuum.Seconds() }},
	{"vacuum_x_unthrottled", func(r onlineRow, base time.Duration) float64 { return ratio(r.vacuum, base) }},
	{"p99_alone_ms", func(r onlineRow, _ time.Duration) float64 { return ms(r.alone) }},
	{"p99_during_ms", func(r onlineRow, _ time.Duration) float64 { return ms(r.during) }},
	{"p99_ratio", func(r onlineRow, _ time.Duration) float64 { return ratio(r.during, r.alone) }},
	{"server_p99_alone_ms", func(r onlineRow, _ time.Duration) float64 { return ms(r.serverAlone) }},
	{"server_p99_end_ms", func(r onlineRow, _ time.Duration) float64 { return ms(r.serverEnd) }},
	{"cost_units", func(r onlineRow, _ time.Duration) float64 { return float64(r.cost) }},
}

// exp8FigureIndex is the place of column in exp8Figures.
func exp8FigureIndex(column string) int {
	return slices.IndexFunc(exp8Figures, func(f exp8Figure) bool { return f.column == column })
}

// exp8Tables are experiment 8's two tables: exp8_online, per server and delay the run count
// and the median of each figure over the delay's runs (column by column, so one row's medians
// may come from different runs), with the spread of the two the verdict reads; and
// exp8_online_runs, every run, numbered per delay and by its place in the experiment's order.
func exp8Tables(runs []exp8Run, systems []string, delays []time.Duration) (summary, perRun *Table, err error) {
	head := []string{"system", "delay", "cost_delay_ms", "runs"}
	for _, f := range exp8Figures {
		head = append(head, f.column)
	}
	summary = NewTable("exp8_online", 2, append(head, "vacuum_x_min", "vacuum_x_max", "p99_ratio_min", "p99_ratio_max")...)
	perRun = NewTable("exp8_online_runs", 2, "system", "delay", "run", "order", "cost_delay_ms", "vacuum_s",
		"vacuum_x_unthrottled", "p99_alone_ms", "p99_during_ms", "p99_ratio", "server_p99_alone_ms", "server_p99_end_ms",
		"transactions_alone", "transactions_during", "failed", "load_runs", "hits", "misses", "dirtied", "cost_units")
	for _, sys := range systems {
		u := exp8At(runs, sys, 0)
		if len(u) == 0 {
			return nil, nil, fmt.Errorf("experiment 8: no unthrottled run of %s", sys)
		}
		base := medianVacuum(u).vacuum
		for _, d := range delays {
			vals := make([][]float64, len(exp8Figures))
			n := 0
			for i, x := range runs {
				if x.system != sys || x.delay != d {
					continue
				}
				n++
				for j, f := range exp8Figures {
					vals[j] = append(vals[j], f.of(x.row, base))
				}
				row := x.row
				if err := perRun.Add([]string{sys, delayName(d)}, float64(n), float64(i+1), ms(d), row.vacuum.Seconds(),
					ratio(row.vacuum, base), ms(row.alone), ms(row.during), ratio(row.during, row.alone),
					ms(row.serverAlone), ms(row.serverEnd), float64(row.aloneN), float64(row.duringN), float64(row.failed),
					float64(row.attempts), float64(row.hits), float64(row.misses), float64(row.dirtied), float64(row.cost)); err != nil {
					return nil, nil, err
				}
			}
			if n == 0 {
				return nil, nil, fmt.Errorf("experiment 8: no run of %s at %s", sys, delayName(d))
			}
			nums := []float64{ms(d), float64(n)}
			for _, v := range vals {
				nums = append(nums, medianF(v))
			}
			xs, ps := vals[exp8FigureIndex("vacuum_x_unthrottled")], vals[exp8FigureIndex("p99_ratio")]
			nums = append(nums, slices.Min(xs), slices.Max(xs), slices.Min(ps), slices.Max(ps))
			if err := summary.Add([]string{sys, delayName(d)}, nums...); err != nil {
				return nil, nil, err
			}
		}
	}
	return summary, perRun, nil
}

// vacuumTimes lists the runs' VACUUM times in seconds, comma-separated.
func vacuumTimes(runs []onlineRow) string {
	parts := make([]string, len(runs))
	for i, r := range runs {
		parts[i] = strconv.FormatFloat(r.vacuum.Seconds(), 'f', 2, 64)
	}
	return joinComma(parts)
}

// ratio is a over b, 0 when b is 0.
func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// onlineRow is one online VACUUM beside the foreground.
type onlineRow struct {
	vacuum, alone, during  time.Duration
	serverAlone, serverEnd time.Duration
	aloneN, duringN        int
	failed                 int64
	cost                   int64 // the VACUUM's cost units at the page costs 1/2/20
	hits, misses, dirtied  int64 // the VACUUM's buffer usage, as its VERBOSE report gives it
	notices                []string
	attempts               int
	slept                  *float64 // the throttle's time slept in seconds (its VERBOSE report); nil on PostgreSQL
	// The Go runtime's counters over the stretch alone and over the VACUUM (exp8_runtime.go):
	// the engine server's when it is the server measured, which runs in this process.
	rtAlone, rtDuring runtimeDelta
}

// sleptText says how long the VACUUM's throttle slept, where the server reports it.
func sleptText(s *float64) string {
	if s == nil {
		return "time slept not reported"
	}
	return fmt.Sprintf("slept %.2f s", *s)
}

// exp8Limits is the runner's throttle at cost delay d (0: unthrottled) and the bench's limit.
func (r *runner) exp8Limits(d time.Duration) runnerwire.Limits {
	l := runnerwire.DefaultLimits()
	l.CostDelay, l.CostLimit = d, r.sz.CostLimit
	return l
}

// exp8Guess is how long the VACUUM at delay d should take, from the same server's earlier
// runs (done[0] unthrottled): its time plus the sleeps the most cost units of any of them
// need at d.
func (r *runner) exp8Guess(d time.Duration, done []onlineRow) time.Duration {
	if len(done) == 0 {
		return r.sz.OnlineGuess
	}
	// The most cost units an earlier run was charged, not the unthrottled run's: a throttled
	// VACUUM finds more of its pages cleaned before it reaches them, and is charged more (at
	// 20 ms 246,821 units against 142,890 unthrottled), so a guess from the unthrottled run's
	// units made the slowest delays outlast their first load.
	u := done[0]
	cost := u.cost
	for _, x := range done {
		cost = max(cost, x.cost)
	}
	sleeps := (cost + int64(r.sz.CostLimit) - 1) / int64(r.sz.CostLimit)
	return u.vacuum + time.Duration(sleeps)*d
}

// onlineRun measures the VACUUM at delay d on s beside a load long enough for it: a VACUUM
// that outlasts its load is measured again beside a load twice as long.
func (r *runner) onlineRun(ctx context.Context, s *srvSystem, d time.Duration, done []onlineRow) (onlineRow, error) {
	guess := r.exp8Guess(d, done)
	for attempt := 1; ; attempt++ {
		// The load: warm-up, the stretch alone, the VACUUM with a margin, the tail after it.
		secs := int(math.Ceil((r.sz.OnlineWarmup + r.sz.OnlineAlone + guess*3/2 + r.sz.OnlineTail).Seconds()))
		row, fits, err := r.onlineBeside(ctx, s, d, secs)
		if err != nil || fits {
			row.attempts = attempt
			return row, err
		}
		if attempt == 3 {
			return row, fmt.Errorf("the VACUUM (%.2f s) outlasted a %d s load three times", row.vacuum.Seconds(), secs)
		}
		r.warn("experiment 8: %s's VACUUM at %s (%.2f s) outlasted its %d s load; measured again", s.name, delayName(d), row.vacuum.Seconds(), secs)
		guess = max(2*guess, row.vacuum*2)
	}
}

// reload makes pgbench's tables afresh (loaded, not vacuumed) and leaves a dead version of
// every second account: each VACUUM has the same work.
func (r *runner) reload(ctx context.Context, s *srvSystem) error {
	if _, err := r.pgbench(ctx, s, false, "-i", "-I", "dtgp", "-s", strconv.Itoa(r.sz.OnlineScale)); err != nil {
		return err
	}
	c, err := pgx.Connect(ctx, s.url())
	if err != nil {
		return err
	}
	defer func() { _ = c.Close(context.Background()) }()
	if _, err := c.Exec(ctx, "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid % 2 = 0"); err != nil {
		return fmt.Errorf("%s: bloating UPDATE: %w", s.name, err)
	}
	return nil
}

// onlineBeside reloads the table, starts a load of secs seconds, and after the warm-up and
// the stretch alone vacuums the table through package online at cost delay d; fits says
// whether the load lasted for the tail after the VACUUM.
func (r *runner) onlineBeside(ctx context.Context, s *srvSystem, d time.Duration, secs int) (onlineRow, bool, error) {
	var row onlineRow
	if err := r.reload(ctx, s); err != nil {
		return row, false, err
	}
	pw := filepath.Join(r.work, "exp8-password-"+s.name)
	if err := os.WriteFile(pw, []byte(s.password), 0o600); err != nil {
		return row, false, err
	}
	target := online.Target{Address: s.addr, Database: "postgres", User: s.user, PasswordFile: pw,
		SSLMode: online.SSLDisable, NoEnvironment: true}
	// The run is prepared before the load starts: on the engine server its table pick reads
	// pg_stat_user_tables, a scan of the table (seconds at this scale), which would otherwise
	// fall in the stretch alone.
	lim := r.exp8Limits(d)
	vr, err := online.New(ctx, target, online.Options{Tables: []string{exp8Table}, Throttle: lim, Parallelism: 1})
	if err != nil {
		return row, false, err
	}
	defer func() { _ = vr.Close() }()
	type result struct {
		run pgbenchRun
		end time.Time
		err error
	}
	fg := make(chan result, 1)
	go func() {
		run, err := r.pgbench(ctx, s, true, "-b", "select-only", "-M", "prepared",
			"-c", strconv.Itoa(r.sz.SrvClients), "-j", strconv.Itoa(r.sz.SrvThreads), "-T", strconv.Itoa(secs))
		fg <- result{run, time.Now(), err}
	}()
	if err := waitPgbench(ctx, s, r.sz.SrvClients); err != nil {
		return row, false, errors.Join(err, (<-fg).err)
	}
	// The warm-up after pgbench's sessions are in (prepares, cold caches) is left out of the
	// stretch alone.
	time.Sleep(r.sz.OnlineWarmup)
	tag := fmt.Sprintf("%s-%s-%d", s.name, strings.ReplaceAll(delayName(d), " ", ""), time.Now().UnixMilli())
	if err := exp8Profiles(tag + "-0alone"); err != nil {
		return row, false, errors.Join(err, (<-fg).err)
	}
	rtAlone := readRuntime()
	time.Sleep(r.sz.OnlineAlone)
	if row.serverAlone, err = serverP99(ctx, s); err != nil {
		return row, false, errors.Join(err, (<-fg).err)
	}
	if err := exp8Profiles(tag + "-1start"); err != nil {
		return row, false, errors.Join(err, (<-fg).err)
	}
	rtStart := readRuntime()
	start := time.Now()
	rep, verr := vr.Vacuum(ctx)
	end := time.Now()
	rtEnd := readRuntime()
	if err := exp8Profiles(tag + "-2end"); err != nil {
		return row, false, errors.Join(err, (<-fg).err)
	}
	row.rtAlone, row.rtDuring = rtStart.since(rtAlone), rtEnd.since(rtStart)
	serverEnd, serr := serverP99(ctx, s)
	load := <-fg
	if err := errors.Join(verr, serr, load.err); err != nil {
		return row, false, fmt.Errorf("%s: online VACUUM: %w", s.name, err)
	}
	t := rep.Totals
	row.cost = t.BufferHits*int64(lim.PageHitCost) + t.BufferMisses*int64(lim.PageMissCost) + t.BuffersDirtied*int64(lim.PageDirtyCost)
	row.hits, row.misses, row.dirtied = t.BufferHits, t.BufferMisses, t.BuffersDirtied
	row.slept = t.SleptSeconds
	for _, tr := range rep.Tables {
		row.notices = append(row.notices, tr.Notices...)
	}
	row.vacuum, row.serverEnd, row.failed = end.Sub(start), serverEnd, load.run.fails
	after := end.Add(500 * time.Millisecond)
	row.alone, row.aloneN = load.run.p99In([2]time.Time{start.Add(-r.sz.OnlineAlone), start}, [2]time.Time{after, load.end})
	row.during, row.duringN = load.run.between(start, end)
	return row, load.end.Sub(end) >= r.sz.OnlineTail, nil
}

// serverP99 is the p99 of the engine server's latency view (its row of all foreground
// statements); 0 on PostgreSQL, which has no such view. The session reading it is named as
// the runner's, so the view does not count it as foreground.
func serverP99(ctx context.Context, s *srvSystem) (time.Duration, error) {
	if s.name != sysOurs {
		return 0, nil
	}
	c, err := pgx.Connect(ctx, s.url()+"&application_name=vacuum-runner-bench")
	if err != nil {
		return 0, err
	}
	defer func() { _ = c.Close(context.Background()) }()
	var us int64
	err = c.QueryRow(ctx, "SELECT p99_us FROM vacuumops_statement_latency WHERE kind = 'all'").Scan(&us)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("%s: vacuumops_statement_latency: %w", s.name, err)
	}
	return time.Duration(us) * time.Microsecond, nil
}

// waitPgbench waits until pgbench's n sessions are in.
func waitPgbench(ctx context.Context, s *srvSystem, n int) error {
	c, err := pgx.Connect(ctx, s.url())
	if err != nil {
		return err
	}
	defer func() { _ = c.Close(context.Background()) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var have int64
		if err := c.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgbench'").Scan(&have); err != nil {
			return fmt.Errorf("%s: pg_stat_activity: %w", s.name, err)
		}
		if have >= int64(n) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %d of pgbench's %d sessions connected within 30 s", s.name, have, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The online-runs issue's goal: at some cost delay pgbench's p99 at most 1.2x its p99
// alone, while the VACUUM takes at most 3x its unthrottled time.
const (
	onlineP99Goal  = 1.2
	onlineTimeGoal = 3.0
)

// onlineChosen is the smallest cost delay at which system's medians meet the goal, its row, or "".
func onlineChosen(c *cells, system string) (string, []string) {
	for _, m := range c.rows("exp8_online", system) {
		if c.num("exp8_online", m, "p99_ratio") <= onlineP99Goal && c.num("exp8_online", m, "vacuum_x_unthrottled") <= onlineTimeGoal {
			return m[1], m
		}
	}
	return "", nil
}

// onlineAt is system's row at delay name, or nil.
func onlineAt(c *cells, system, name string) []string {
	for _, m := range c.rows("exp8_online", system) {
		if m[1] == name {
			return m
		}
	}
	return nil
}

func onlineRules(ts tables) []Rule {
	c := &cells{ts: ts}
	const t = "exp8_online"
	chosen, ours := onlineChosen(c, sysOurs)
	var theirs []string
	var runs float64
	if chosen != "" {
		theirs = onlineAt(c, sysPostgres, chosen)
		runs = c.num(t, ours, "runs")
	}
	if c.err != nil {
		return nil
	}
	better := theirs != nil &&
		c.num(t, ours, "p99_ratio") < c.num(t, theirs, "p99_ratio") &&
		c.num(t, ours, "vacuum_x_unthrottled") < c.num(t, theirs, "vacuum_x_unthrottled")
	return []Rule{
		{
			Statement: sentence("The chosen delay is the smallest cost delay at which the engine server's median pgbench p99 "+
				"ratio (during over alone) is at most %.1fx while its median VACUUM time is at most %.0fx its unthrottled time",
				onlineP99Goal, onlineTimeGoal),
			Holds: chosen != "", Then: sentence("Chosen: %s (medians of %.0f runs).", chosen, runs),
			Else: "No cost delay measured meets it.",
		},
		{
			Statement: "At the chosen delay the engine server beats PostgreSQL 15 when both its median p99 ratio and its " +
				"median multiple of the unthrottled time are below PostgreSQL 15's at the same delay",
			Holds: better,
			Then:  sentence("Both better than PostgreSQL 15 at %s.", chosen),
			Else:  "Not both better than PostgreSQL 15 at the chosen delay (or no delay chosen).",
		},
	}
}

func onlineHeadline(ts tables) (string, error) {
	c := &cells{ts: ts}
	const t = "exp8_online"
	var parts []string
	for _, m := range c.rows(t, sysOurs) {
		if c.err != nil {
			break
		}
		q := onlineAt(c, sysPostgres, m[1])
		if q == nil {
			return "", fmt.Errorf("table %s has no %s row at %s", t, sysPostgres, m[1])
		}
		parts = append(parts, sentence("%s: p99 %.2fx for %.1fx the unthrottled time (PostgreSQL 15 %.2fx for %.1fx)%s",
			m[1], c.num(t, m, "p99_ratio"), c.num(t, m, "vacuum_x_unthrottled"),
			c.num(t, q, "p99_ratio"), c.num(t, q, "vacuum_x_unthrottled"), runsText(c.num(t, m, "runs"), c.num(t, q, "runs"))))
	}
	chosen, _ := onlineChosen(c, sysOurs)
	if c.err != nil {
		return "", c.err
	}
	// The row's label is "delay 750µs": the headline names the delay once.
	chosen = strings.TrimPrefix(chosen, "delay ")
	if chosen == "" {
		chosen = "none"
	}
	return "online VACUUM beside pgbench, engine server against PostgreSQL 15, medians per delay: " + joinComma(parts) +
		sentence("; chosen delay %s.", chosen), nil
}

// runsText says over how many runs a headline's pair of medians was taken: nothing for one
// run each.
func runsText(ours, theirs float64) string {
	switch {
	case ours == theirs && ours == 1:
		return ""
	case ours == theirs:
		return sentence(" over %.0f runs each", ours)
	default:
		return sentence(" over %.0f and %.0f runs", ours, theirs)
	}
}

// delayList names the delays, "unthrottled" for 0, comma-separated.
func delayList(ds []time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = d.String()
		if d == 0 {
			parts[i] = "unthrottled"
		}
	}
	return joinComma(parts)
}
