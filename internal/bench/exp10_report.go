package bench

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"time"
)

// Experiment 10's tables, rules and headline: everything the report says of it is read
// from its tables, so the committed report can be checked against its CSV files.

// The summary's columns, for each target.
const (
	exp10ColAdaptive = "adaptive, engine-server"
	exp10ColOurs     = "best fixed, engine-server"
	exp10ColPG       = "best fixed, postgresql-15"
)

// exp10Units are the units of each part's figures.
var exp10Units = map[string]string{exp10Latency: "ms", exp10Lag: "MB"}

// bestFixed is the smallest fixed cost delay of system whose runs' median figure is at most
// target, with that median figure and median time; found is false when none is.
func bestFixed(runs []exp10Run, system string, target float64) (d time.Duration, figure, seconds float64, found bool) {
	var delays []time.Duration
	for _, x := range runs {
		if x.system == system && !x.adaptive && x.phase != "calibration" && !slices.Contains(delays, x.delay) {
			delays = append(delays, x.delay)
		}
	}
	slices.Sort(delays)
	for _, dd := range delays {
		if f, s, _ := medianOf(runs, system, exp10Fixed, dd); f <= target {
			return dd, f, s, true
		}
	}
	return 0, 0, 0, false
}

// cappedOf counts the runs of system and setting at delay d stopped at their part's cap.
func cappedOf(runs []exp10Run, system, setting string, d time.Duration) (n int) {
	for _, x := range runs {
		if x.system == system && x.name() == setting && x.delay == d && x.phase != "calibration" && x.capped {
			n++
		}
	}
	return n
}

// windowsOf sums the windows held and judged over the runs of system and setting at delay d.
func windowsOf(runs []exp10Run, system, setting string, d time.Duration) (held, total int) {
	for _, x := range runs {
		if x.system == system && x.name() == setting && x.delay == d && x.phase != "calibration" {
			held, total = held+x.held, total+x.total
		}
	}
	return held, total
}

func exp10Section(r *runner, parts ...*exp10Part) (*Section, error) {
	sz := r.sz
	targets := NewTable("exp10_targets", 2, "target", "unit", "alone", "beside_unthrottled", "target_value",
		"server_alone", "server_beside_unthrottled", "law_target", "alone_windows", "alone_windows_held")
	runs := NewTable("exp10_runs", 4, "target", "system", "setting", "phase", "round", "cost_delay_ms", "vacuum_s",
		"figure", "judged_s", "observations", "windows", "windows_held", "bound_by_target_s", "bound_floor_or_hardstop_s",
		"load_failed_in_block", "capped", "server_figure")
	sum := NewTable("exp10_summary", 2, "target", "column", "found", "cost_delay_ms", "vacuum_s", "figure",
		"target_value", "holds", "windows", "windows_held", "window_share", "runs", "capped_runs")
	for _, p := range parts {
		law := p.lawGoal
		if law <= 0 {
			law = p.goal
		}
		if err := targets.Add([]string{p.name, exp10Units[p.name]}, p.alone, p.unthrottled, p.goal,
			serverFigure(p.serverAlone), serverFigure(p.serverUnthrottled), law, float64(p.aloneWindows), float64(p.aloneHeld)); err != nil {
			return nil, err
		}
		for _, x := range p.runs {
			if err := runs.Add([]string{p.name, x.system, x.name(), x.phase}, float64(x.round), ms(x.delay), x.seconds,
				x.figure, x.spanEnd.Sub(x.start).Seconds(), float64(x.n), float64(x.total), float64(x.held), x.bound, x.floor,
				float64(x.failed), b2f(x.capped), serverFigure(x.server)); err != nil {
				return nil, err
			}
		}
		add := func(col, system, setting string, d time.Duration, found bool) error {
			f, s, n := medianOf(p.runs, system, setting, d)
			held, total := windowsOf(p.runs, system, setting, d)
			holds, share := 0.0, 0.0
			if found && f <= p.goal {
				holds = 1
			}
			if total > 0 {
				share = float64(held) / float64(total)
			}
			fd := 0.0
			if found {
				fd = 1
			}
			return sum.Add([]string{p.name, col}, fd, ms(d), s, f, p.goal, holds, float64(total), float64(held), share, float64(n),
				float64(cappedOf(p.runs, system, setting, d)))
		}
		if err := add(exp10ColAdaptive, sysOurs, exp10Adaptive, p.ceiling, true); err != nil {
			return nil, err
		}
		for _, c := range []struct{ col, system string }{{exp10ColOurs, sysOurs}, {exp10ColPG, sysPostgres}} {
			d, _, _, found := bestFixed(p.runs, c.system, p.goal)
			if err := add(c.col, c.system, exp10Fixed, d, found); err != nil {
				return nil, err
			}
		}
	}
	grid := make([]string, len(sz.AdaptDelays))
	for i, d := range sz.AdaptDelays {
		grid[i] = d.String()
	}
	sec := &Section{
		Title: "Adaptive throttling against the best fixed cost delay",
		Claim: "(the adaptive-throttling issue's figure of merit) with the same load at a fixed rate and the same target, " +
			"a VACUUM with adaptive throttling finishes sooner than at the fastest fixed cost delay whose figure also stays " +
			sentence("within the target, for a foreground p99 target and for a replication-lag target during VACUUM FULL; at least %.0f %% ", 100*exp10Goal) +
			"of its 1-second windows hold the target; PostgreSQL 15 at its best fixed setting is the third column.",
		Tables: []*Table{sum, targets, runs},
		Setup: []string{
			sentence("foreground p99 target: the engine server in this process (--buffer-pool %s, --checkpoint-wal-size %s: where "+
				"PostgreSQL's default max_wal_size requests a checkpoint; --log-adaptive, its log kept in the work directory as "+
				"exp10-engine-server/server.log) and PostgreSQL 15 (shared_buffers %s, "+
				"durable settings), each with pgbench -i -I dtgp -s %d; the load PostgreSQL 15's pgbench select-only -M prepared "+
				"-R %d -c %d -j %d, run in %s chunks for as long as each block of VACUUMs lasts; before each VACUUM an UPDATE of every "+
				"%dth account, a scan that sets the new versions' hint bits, a CHECKPOINT and %s to settle, then VACUUM pgbench_accounts through package online (the runner pod's path)",
				mib(sz.AdaptPoolBytes), exp8CheckpointWAL, mib(sz.AdaptPoolBytes), sz.AdaptScale, sz.AdaptRate, sz.AdaptClients, sz.AdaptThreads,
				sz.AdaptChunk, sz.AdaptDeadEvery, sz.AdaptSettle),
			sentence("replication-lag target: experiment 5's pair (an engine-server primary with --synchronous-standby and its "+
				"standby, two processes; PostgreSQL 15 with a pg_basebackup standby in synchronous_standby_names); the load "+
				"pgbench tpcb-like -R %d -c %d on pgbench -i -s %d tables, in %s chunks; before each FULL an UPDATE of every "+
				"second row of %s (%d rows of %d bytes, a table the load does not touch), a scan that sets its hint bits and a "+
				"CHECKPOINT (so that no FULL logs a full-page image of every old page for them), the standby caught up and %s to "+
				"settle, then VACUUM (FULL) %s through package online; lag = pg_current_wal_lsn() - replay_lsn every %s",
				sz.FullLoadRate, sz.FullLoadClients, sz.FullLoadScale, sz.AdaptChunk, exp10Full, sz.AdaptFullRows, sz.FullPayload,
				sz.AdaptSettle, exp10Full, sz.LagSample),
			sentence("the targets, from the start's measurements on the engine server: the geometric mean of the load's figure "+
				"alone and its median beside %d unthrottled VACUUMs (latency: the median of pgbench's p99 over %d stretches of %s "+
				"alone, one before each of those VACUUMs; lag: the largest "+
				"lag sampled alone, at least one 8 KiB WAL page, and each unthrottled FULL's peak lag); exp10_targets",
				sz.AdaptRuns, sz.AdaptRuns, sz.AdaptAlone),
			"the foreground p99 target's adaptive runs are given it in the engine server's own terms (law_target): the server's " +
				"p99 of the load's statements over the same stretches (server_alone, server_beside_unthrottled: the difference of two " +
				"scrapes of its /metrics native histogram, buckets about 9 % wide), and the judged target moved to the same place, " +
				"linearly, between them; every run is still judged on pgbench's p99 against target_value; server_figure is the " +
				"server's own p99 over each of its runs (0 in these three columns: none, as for PostgreSQL 15 and the lag target)",
			"alone_windows and alone_windows_held: the 1-second windows of the foreground p99 target's stretches of the load " +
				"alone and those whose p99 was at most the target, judged as the runs' windows are: the share no setting of the " +
				"VACUUM can raise (0: not measured, the lag target)",
			sentence("a run's figure: pgbench's p99 of the transactions that ended while the VACUUM ran (from each "+
				"transaction's scheduled start, -R), or the peak lag from the FULL's start until the standby had replayed "+
				"all it wrote (at most %.0fx its time: judged_s); a setting holds the target when its runs' median figure "+
				"is at most the target", sz.DrainFactor),
			sentence("fixed settings: cost limit %d at experiment 1's delays (%s), %d interleaved rounds (in each round the adaptive "+
				"runs and the delays in increasing order on the engine server, then PostgreSQL 15; for the foreground p99 "+
				"target each round ends at the first delay that held it in that round; from the second round on, a delay "+
				"slower than one that has held the target in every round so far is passed over: neither can be the fastest "+
				"that holds, so the slower delays' runs are fewer or none), then %d bisection steps between the "+
				"two delays that bracket the target (%d runs of each midpoint, the systems alternating run by run, to %s; "+
				"never below the adaptive runs' ceiling: for the foreground p99 target, when the grid's fastest delay holds, "+
				"between the ceiling %s and it)",
				sz.CostLimit, joinComma(grid), sz.AdaptRuns, sz.AdaptBisect, sz.AdaptRuns, bisectResolution, sz.AdaptCeiling),
			sentence("the cap, for both targets: a fixed-delay VACUUM or FULL (either system) still running %.1fx the longest adaptive run "+
				"of its target before it, or %s if that is longer, but at most %s, is cancelled and counted as taking that long (capped, capped_runs: slower than the cap, its time a lower "+
				"bound; its figure and windows are of the span it ran); the table is then vacuumed (or rewritten) unthrottled, unmeasured, so "+
				"the next run starts from the same state", sz.AdaptCap, sz.AdaptCapMin, sz.AdaptCapMax),
			sentence("adaptive: vacuum_adaptive_latency_target (p99, vacuum_adaptive_latency_percentile_per_mille 990) with "+
				"the static ceiling cost delay %s, below the grid (so that, when the grid's fastest delay holds the target, the law, "+
				"not the ceiling, has to find the rate), and vacuum_adaptive_floor_per_mille %d; or vacuum_adaptive_max_lag_bytes with "+
				"the grid's fastest delay %s as the ceiling and vacuum_adaptive_floor_per_mille %d; each floor is the grid's "+
				"slowest delay; sent by package online as session settings",
				sz.AdaptCeiling, exp10Floor(sz.AdaptCeiling, sz.AdaptDelays), sz.AdaptDelays[0], exp10Floor(sz.AdaptDelays[0], sz.AdaptDelays)),
			sentence("windows: the VACUUM's span (latency) or FULL-and-replay span (lag) cut into 1 s windows from its start " +
				"(a rest under 0.5 s joins the last); a window held when its p99 (latency) or its largest lag sample " +
				"(lag) was at most the target; a window without any transaction did not hold"),
			"PostgreSQL 15's replication-lag column: its VACUUM FULL unthrottled and at the grid's slowest delay " +
				"(PostgreSQL cannot re-throttle a running VACUUM, and whether its cost delay slows a FULL at all is what " +
				"the pair of settings shows)",
		},
		Caveats: []string{
			"One 2-core machine for the servers, the standby and pgbench: other work moves the figures between runs, " +
				"which the interleaved rounds spread over every setting alike.",
			"The adaptive throttle steers on the server's own latency view (a statement's time from the kernel's receipt " +
				"of its message to the end of its execution), while the figure judged is pgbench's latency (the client's, " +
				"from the scheduled start, with the client's own waits for a CPU and the reply's way back): law_target " +
				"translates the target with the start's figures, which holds only as far as the two grow together.",
			"A short VACUUM holds few windows (windows) and few transactions (observations): its figure is noisier.",
			"load_failed_in_block counts the load's failed transactions over the whole block of VACUUMs the run was in.",
		},
	}
	if extra := os.Getenv(Exp10ServeArgsEnv); extra != "" {
		sec.Setup = append(sec.Setup, sentence("the engine server's serve in the foreground p99 half also had %q (%s)", extra, Exp10ServeArgsEnv))
	}
	sec.Rules = adaptiveRules(tablesOf(sec.Tables))
	return sec, nil
}

// adaptiveRow reads one summary row: its found flag, time, figure, target and window share.
type adaptiveRow struct {
	found                         bool
	delay, secs, fig, goal, share float64
	windows                       float64
	capped                        float64 // runs stopped at the cap (0 in reports from before the cap)
}

func readAdaptiveRow(c *cells, part, col string) adaptiveRow {
	const t = "exp10_summary"
	var m []string
	for _, row := range c.rows(t, part) {
		if len(row) > 1 && row[1] == col {
			m = row
		}
	}
	if m == nil {
		c.fail("table %s has no row %s / %s", t, part, col)
		return adaptiveRow{}
	}
	return adaptiveRow{found: c.num(t, m, "found") == 1, delay: c.num(t, m, "cost_delay_ms"), secs: c.num(t, m, "vacuum_s"),
		fig: c.num(t, m, "figure"), goal: c.num(t, m, "target_value"), share: c.num(t, m, "window_share"),
		windows: c.num(t, m, "windows"), capped: optionalNum(c, t, m, "capped_runs")}
}

// optionalNum is column col of row r of table name, or 0 when the table has no such column
// (a report written before the column existed).
func optionalNum(c *cells, name string, r []string, col string) float64 {
	if t, ok := c.ts[name]; ok && !slices.Contains(t.Header, col) {
		return 0
	}
	return c.num(name, r, col)
}

// exp10PartsIn is the halves of experiment 10 that ts has rows of (Exp10PartsEnv may have
// left one out), in the report's order.
func exp10PartsIn(ts tables) []string {
	var out []string
	t, ok := ts["exp10_targets"]
	for _, part := range []string{exp10Latency, exp10Lag} {
		if !ok {
			out = append(out, part) // the cells report the missing table
			continue
		}
		for _, r := range t.Rows {
			if r[0] == part {
				out = append(out, part)
				break
			}
		}
	}
	return out
}

func adaptiveRules(ts tables) []Rule {
	c := &cells{ts: ts}
	var out []Rule
	for _, part := range exp10PartsIn(ts) {
		a, f := readAdaptiveRow(c, part, exp10ColAdaptive), readAdaptiveRow(c, part, exp10ColOurs)
		tg := c.row("exp10_targets", part)
		alone, un := c.num("exp10_targets", tg, "alone"), c.num("exp10_targets", tg, "beside_unthrottled")
		if c.err != nil {
			return nil
		}
		bracketed := bracketsTarget(alone, un)
		out = append(out, Rule{
			Statement: sentence("%s target: the start's measurements bracket a target when the load's figure beside the "+
				"unthrottled VACUUM is at least %gx its figure alone (the target, their geometric mean, is then at least "+
				"%.2fx the figure alone: a narrower bracket puts it within the load's own run-to-run noise, and the "+
				"figure is not the VACUUM's)", part, exp10MinBracket, math.Sqrt(exp10MinBracket)),
			Holds: bracketed,
			Then:  sentence("They do: %.3f alone, %.3f beside the unthrottled VACUUM (%.2fx).", alone, un, ratioOf(un, alone)),
			Else: sentence("They do not (%.3f alone, %.3f beside the unthrottled VACUUM, %.2fx): the unthrottled VACUUM "+
				"barely raised the figure on this run, so the target and what follows from it say nothing of throttling.",
				alone, un, ratioOf(un, alone)),
		})
		met, why := goalVerdict(a.secs, a.fig, f.secs, f.found, a.goal)
		if f.found && f.capped > 0 {
			why += sentence(" (the best fixed delay's time is a lower bound: %.0f of its runs stopped at the cap)", f.capped)
		}
		heldThen := sentence("Met: %.1f %% of %.0f windows.", 100*a.share, a.windows)
		heldElse := sentence("NOT met: %.1f %% of %.0f windows.", 100*a.share, a.windows)
		goalThen, goalElse := "Met: "+why+".", "NOT met: "+why+"."
		if !bracketed {
			// No target worth the name: the figures are printed, no verdict is drawn from them.
			goalElse = sentence("Not judged, no bracket (%s).", why)
			heldElse = sentence("Not judged, no bracket (%.1f %% of %.0f windows).", 100*a.share, a.windows)
		}
		b := boundSharesOf(c, part)
		out = append(out, Rule{
			Statement: sentence("%s target: the law, not the ceiling, set the adaptive runs' rate: the ceiling bound them for "+
				"under %.0f %% of their time (vacuum_s less bound_by_target_s and bound_floor_or_hardstop_s); otherwise a goal "+
				"met says little of what the law does", part, 100*exp10MaxCeilingShare),
			Holds: b.ceiling < exp10MaxCeilingShare,
			Then:  sentence("It did: %s.", b),
			Else:  sentence("It did not: %s.", b),
		})
		out = append(out,
			Rule{
				Statement: sentence("%s target: the goal is met when the adaptive runs' median figure is within the target and "+
					"their median time is below the best fixed cost delay's on the engine server", part),
				Holds: bracketed && met, Then: goalThen, Else: goalElse,
			},
			Rule{
				Statement: sentence("%s target: the adaptive runs held the target in at least %.0f %% of their 1-second windows", part, 100*exp10Goal),
				Holds:     bracketed && a.windows > 0 && a.share >= exp10Goal,
				Then:      heldThen,
				Else:      heldElse,
			})
		if held, windows := aloneWindowsOf(c, tg); windows > 0 {
			out = append(out, Rule{
				Statement: sentence("%s target: the load alone held the target in at least %.0f %% of its 1-second windows "+
					"(the start's stretches with no VACUUM); below that share no setting of the VACUUM can meet the windows "+
					"goal on this machine and load", part, 100*exp10Goal),
				Holds: held/windows >= exp10Goal,
				Then:  sentence("It did: %.0f of %.0f windows (%.0f %%).", held, windows, 100*held/windows),
				Else:  sentence("It did not: %.0f of %.0f windows (%.0f %%).", held, windows, 100*held/windows),
			})
		}
	}
	return out
}

// aloneWindowsOf is the windows held and measured of the load alone in target row tg
// (both 0 where not measured: the lag half, or a report written before the columns).
func aloneWindowsOf(c *cells, tg []string) (held, windows float64) {
	return optionalNum(c, "exp10_targets", tg, "alone_windows_held"), optionalNum(c, "exp10_targets", tg, "alone_windows")
}

// exp10MaxCeilingShare is the share of the adaptive runs' time bound by the ceiling at or
// above which their rate was the ceiling's, not the law's.
const exp10MaxCeilingShare = 0.5

// boundShares splits the adaptive runs' time (of a part, outside the calibration) by what
// bound their rate: the target, the floor or HardStop, and the ceiling (the rest).
type boundShares struct{ target, floor, ceiling float64 }

// String says the split, as "the target bound them 12 %, the floor or HardStop 80 %, the
// ceiling 8 %".
func (b boundShares) String() string {
	return sentence("the target bound them %.0f %% of their time, the floor or HardStop %.0f %%, the ceiling %.0f %%",
		100*b.target, 100*b.floor, 100*b.ceiling)
}

// boundSharesOf reads the adaptive runs' bound times of part from exp10_runs; all zero
// without such runs.
func boundSharesOf(c *cells, part string) boundShares {
	const t = "exp10_runs"
	var target, floor, total float64
	for _, r := range c.rows(t, part) {
		if c.text(t, r, "setting") == exp10Adaptive && c.text(t, r, "phase") != "calibration" {
			target += c.num(t, r, "bound_by_target_s")
			floor += c.num(t, r, "bound_floor_or_hardstop_s")
			total += c.num(t, r, "vacuum_s")
		}
	}
	if total <= 0 {
		return boundShares{}
	}
	return boundShares{target: target / total, floor: floor / total, ceiling: max(0, 1-(target+floor)/total)}
}

// exp10MinBracket is the least ratio of the load's figure beside the unthrottled VACUUM to
// its figure alone at which the start's measurements bracket a target: below it the
// unthrottled VACUUM barely moves the figure (a foreground p99 that is the disk's, or a
// noisy start), and the section draws no verdict from the target.
const exp10MinBracket = 2.0

// bracketsTarget reports whether the start's figures alone and beside the unthrottled
// VACUUM are far enough apart for a target between them to say something of throttling.
func bracketsTarget(alone, unthrottled float64) bool {
	return alone > 0 && unthrottled >= exp10MinBracket*alone
}

// ratioOf is a/b, or 0 when b is not above 0.
func ratioOf(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

func adaptiveHeadline(ts tables) (string, error) {
	c := &cells{ts: ts}
	var parts []string
	for _, part := range exp10PartsIn(ts) {
		u := exp10Units[part]
		a, f, p := readAdaptiveRow(c, part, exp10ColAdaptive), readAdaptiveRow(c, part, exp10ColOurs), readAdaptiveRow(c, part, exp10ColPG)
		if c.err != nil {
			return "", c.err
		}
		fixed := func(x adaptiveRow) string {
			if !x.found {
				return "no fixed delay held it"
			}
			if x.capped > 0 {
				return sentence("%.1f ms delay slower than the cap (%.0f of its runs stopped at it; median %.2f s) (%.3f %s, %.0f %% of windows)",
					x.delay, x.capped, x.secs, x.fig, u, 100*x.share)
			}
			return sentence("%.1f ms delay %.2f s (%.3f %s, %.0f %% of windows)", x.delay, x.secs, x.fig, u, 100*x.share)
		}
		// The goal is both rules of the section: sooner than the best fixed delay within
		// the target, and the target held in exp10Goal of the adaptive runs' windows.
		tg := c.row("exp10_targets", part)
		alone, un := c.num("exp10_targets", tg, "alone"), c.num("exp10_targets", tg, "beside_unthrottled")
		if c.err != nil {
			return "", c.err
		}
		sooner, _ := goalVerdict(a.secs, a.fig, f.secs, f.found, a.goal)
		held := a.windows > 0 && a.share >= exp10Goal
		verdict := "met"
		switch {
		case !bracketsTarget(alone, un):
			verdict = sentence("not judged (beside the unthrottled VACUUM the figure was %.2fx its figure alone, under %gx: "+
				"the target says nothing of throttling)", ratioOf(un, alone), exp10MinBracket)
		case !sooner && !held:
			verdict = sentence("NOT met (neither sooner than the best fixed delay within the target nor %.0f %% of windows held)", 100*exp10Goal)
		case !sooner:
			verdict = "NOT met (not sooner than the best fixed delay within the target)"
		case !held:
			verdict = sentence("NOT met (sooner, but under %.0f %% of windows held)", 100*exp10Goal)
		}
		if held, windows := aloneWindowsOf(c, tg); windows > 0 && held/windows < exp10Goal {
			verdict += sentence(" (the load alone held the target in only %.0f %% of its %.0f windows)", 100*held/windows, windows)
		}
		switch b := boundSharesOf(c, part); {
		case b.ceiling >= exp10MaxCeilingShare:
			verdict += sentence(" (their rate was mostly the ceiling's: %s)", b)
		case b.floor > b.target:
			verdict += sentence(" (their rate was mostly the floor's or HardStop's: %s)", b)
		}
		if c.err != nil {
			return "", c.err
		}
		parts = append(parts, sentence("%s target %.3f %s: adaptive %.2f s (%.3f %s, %.0f %% of windows held), best fixed %s, "+
			"PostgreSQL 15 best fixed %s; goal %s", part, a.goal, u, a.secs, a.fig, u, 100*a.share, fixed(f), fixed(p), verdict))
	}
	return fmt.Sprintf("adaptive throttling against the best fixed cost delay: %s.", strings.Join(parts, "; ")), nil
}

// serverFigure is a figure of the server's own view for a table: 0 where there is none (a
// table's cells are non-negative numbers).
func serverFigure(v float64) float64 {
	if v <= 0 {
		return 0
	}
	return v
}
