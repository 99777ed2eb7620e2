package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/bulkdata"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum/throttle"
	"github.com/vacuumops/vacuum-operator/internal/pgtest"
)

// Experiment 11: how fast the lazy vacuum is, against PostgreSQL 15 on the same rows and against
// the machine. bulkdata's table in both hint-bit states (hinted: every inserter's hint set, the
// state PostgreSQL's SQL twin is in; unhinted: no hint bits at all), each vacuumed cold and
// unthrottled with buffered I/O and with O_DIRECT, interleaved round by round with PostgreSQL's
// cold VACUUM of its twin (hack/pgcompare's comparison). After each of our vacuums the
// machine-limit probe (MachineLimit) does only that vacuum's unavoidable I/O: read the table's
// files once, cold; write and fsync the WAL volume the vacuum wrote; write and fsync the pages it
// wrote. The vacuum's time is then a multiple of the machine's.

const (
	limPG       = "postgresql-15 buffered"
	limBuffered = "buffered"
	limDirect   = "O_DIRECT"
	// limGoalPG is the goal: at most a third of PostgreSQL 15's time (buffered).
	limGoalPG = 1.0 / 3
	// limGoalDirect is its goal with O_DIRECT: at most 1.5x the O_DIRECT limit.
	limGoalDirect = 1.5
)

var limStates = []bulkdata.State{bulkdata.Hinted, bulkdata.Unhinted}

// limConfig is the label of one of our configurations.
func limConfig(st bulkdata.State, mode string) string { return fmt.Sprintf("ours %s %s", st, mode) }

func runLimit(ctx context.Context, r *runner) (*Section, error) {
	sz := r.sz
	build := engine.Options{BufferPoolBytes: 128 << 20, CheckpointWALBytes: 1 << 30, Logf: r.warn}
	srcs := map[bulkdata.State]string{}
	for _, st := range limStates {
		start := time.Now()
		src, err := bulkdata.CachedState(ctx, filepath.Join(r.work, "exp11-tables"), sz.LimRows, st, build)
		if err != nil {
			return nil, err
		}
		srcs[st] = src
		r.logf("  %s table of %d rows built in %s", st, sz.LimRows, time.Since(start).Round(time.Millisecond))
	}
	var caveats []string
	twin, why, err := r.limitTwin(ctx)
	if err != nil {
		return nil, err
	}
	if twin != nil {
		defer twin.Close()
	} else {
		caveats = append(caveats, "PostgreSQL 15 was not run: "+why+".")
	}
	runs := NewTable("exp11_runs", 1, "config", "run", "vacuum_s", "cpu_s", "limit_s", "limit_read_s", "limit_wal_s",
		"limit_pages_s", "vs_limit", "read_mib", "wal_mib", "written_mib", "fpis_per_heap_page", "cold", "direct_used")
	for i := range sz.LimRuns {
		for _, st := range limStates {
			for _, mode := range []string{limBuffered, limDirect} {
				if err := r.limitOnce(ctx, runs, srcs[st], limConfig(st, mode), mode == limDirect, i); err != nil {
					return nil, fmt.Errorf("%s, run %d: %w", limConfig(st, mode), i+1, err)
				}
			}
		}
		if twin == nil {
			continue
		}
		secs, _, err := twin.VacuumCold(ctx, i)
		if err != nil {
			return nil, fmt.Errorf("PostgreSQL, run %d: %w", i+1, err)
		}
		r.logf("  %s run %d: %.3f s", limPG, i+1, secs)
		if err := runs.Add([]string{limPG}, float64(i+1), secs, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0); err != nil {
			return nil, err
		}
	}
	sum, err := limitSummary(runs)
	if err != nil {
		return nil, err
	}
	sec := &Section{
		Title:  limitText.title,
		Claim:  limitText.claim,
		Tables: []*Table{sum, runs},
		Setup:  limitSetup(sz, twin),
		Caveats: append(caveats,
			"The probe's steps run one after the other, one request at a time; a machine can overlap reads with "+
				"writes, so a vacuum that overlapped them could beat this limit (vs_limit below 1).",
			"The buffered vacuum reads each heap page twice (the second time usually from the page cache); the "+
				"probe reads it once: the second read is work the vacuum could avoid.",
			"PostgreSQL 15 has no O_DIRECT path, so the O_DIRECT rows have nothing to compare with there.",
			"At this size a run takes about a second (buffered); hack/pgcompare runs the comparison at 2M rows."),
	}
	ts := tablesOf(sec.Tables)
	sec.Rules = limitRules(ts)
	sec.Verdict = limitVerdict(ts)
	return sec, nil
}

// limitTwin builds PostgreSQL's twin of the table, or says why it cannot (not root).
func (r *runner) limitTwin(ctx context.Context) (*bulkdata.Twin, string, error) {
	if os.Geteuid() != 0 {
		return nil, "the run is not root (PostgreSQL runs as nobody and the page cache is dropped)", nil
	}
	if err := pgtest.EnsureInstalled(ctx); err != nil {
		return nil, "", err
	}
	tw, err := bulkdata.StartTwin(ctx, r.sz.LimRows, bulkdata.TwinOptions{Bin: pgtest.BinDir, User: "nobody", Port: 5432,
		Checksums: true, Logf: func(f string, a ...any) { r.logf("  "+f, a...) }})
	return tw, "", err
}

// limitOnce is one cold vacuum of a copy of src and the machine-limit probe of its I/O.
func (r *runner) limitOnce(ctx context.Context, runs *Table, src, config string, direct bool, i int) error {
	r.mu.Lock()
	r.seq++
	dir := filepath.Join(r.work, fmt.Sprintf("run-%03d", r.seq))
	r.mu.Unlock()
	defer os.RemoveAll(dir)
	vopts := vacuum.DefaultOptions()
	vopts.Throttle = &throttle.Settings{}
	vopts.IndexWorkers = 2 // as PostgreSQL 15 vacuums the two indexes (leader + 1 worker)
	v, err := bulkdata.VacuumCold(ctx, src, dir, engine.Options{BufferPoolBytes: 128 << 20, Direct: direct, Logf: r.warn}, vopts)
	if err != nil {
		return err
	}
	u := v.Report.Usage
	lim, err := MachineLimit(ctx, r.work, LimitWork{Dir: filepath.Join(src, "base"), WALBytes: u.WALBytes,
		PageWrites: u.WriteBytes / 8192, Direct: direct})
	if err != nil {
		return err
	}
	q := v.Seconds / lim.Total.Seconds()
	r.logf("  %s run %d: %.3f s (cpu %.3f s), limit %.3f s (read %.3f, WAL %.3f, pages %.3f): %.2fx", config, i+1,
		v.Seconds, v.CPUSeconds, lim.Total.Seconds(), lim.Read.Seconds(), lim.WAL.Seconds(), lim.Pgs.Seconds(), q)
	return runs.Add([]string{config}, float64(i+1), v.Seconds, v.CPUSeconds, lim.Total.Seconds(), lim.Read.Seconds(),
		lim.WAL.Seconds(), lim.Pgs.Seconds(), q, pagesMiB(lim.ReadBytes/8192), float64(u.WALBytes)/(1<<20),
		float64(u.WriteBytes)/(1<<20), float64(u.WALFPIs)/float64(max(v.Report.PagesTotal, 1)),
		b2f(v.Cold && lim.Cold), b2f(v.Direct && lim.Direct))
}

// limitSummary is one row per configuration: medians over the runs, the
// vacuum as a multiple of the limit and of PostgreSQL's time (ratio of the
// medians, and the lowest and highest of the run-by-run ratios).
func limitSummary(runs *Table) (*Table, error) {
	sum := NewTable("exp11_summary", 1, "config", "runs", "vacuum_s", "limit_s", "vs_limit", "vs_postgresql",
		"vs_postgresql_min", "vs_postgresql_max")
	c := &cells{ts: tablesOf([]*Table{runs})}
	col := func(config, name string) []float64 {
		var out []float64
		for _, row := range runs.Rows {
			if row[0] == config {
				out = append(out, c.num(runs.Name, row, name))
			}
		}
		return out
	}
	pg := col(limPG, "vacuum_s")
	configs := []string{}
	for _, st := range limStates {
		configs = append(configs, limConfig(st, limBuffered), limConfig(st, limDirect))
	}
	for _, config := range append(configs, limPG) {
		secs, lims := col(config, "vacuum_s"), col(config, "limit_s")
		vsLimit, vsPG, lo, hi := 0.0, 0.0, 0.0, 0.0
		if config != limPG && medianF(lims) > 0 {
			vsLimit = medianF(secs) / medianF(lims)
		}
		if config != limPG && len(pg) == len(secs) && len(pg) > 0 {
			vsPG = medianF(secs) / medianF(pg)
			var rs []float64
			for i := range secs {
				rs = append(rs, secs[i]/pg[i])
			}
			lo, hi = slices.Min(rs), slices.Max(rs)
		}
		if err := sum.Add([]string{config}, float64(len(secs)), medianF(secs), medianF(lims), vsLimit, vsPG, lo, hi); err != nil {
			return nil, err
		}
	}
	return sum, c.err
}

// medianF is the median of v (0 when empty).
func medianF(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func limitSetup(sz Sizes, twin *bulkdata.Twin) []string {
	out := []string{
		sentence("bulkdata's table, %d rows (100-byte payload, B-trees on id and k1, 20 %% deleted), in both hint-bit "+
			"states: hinted (bulkdata.Build: bulk load, indexes, DELETE by a scan: every inserter's hint set, no "+
			"deleter's) and unhinted (bulkdata.BuildUnhinted: row inserts with the indexes in place, deletes by TID, "+
			"no scan: no hint bits at all)", sz.LimRows),
		sentence("%d rounds; each: for each state, a cold unthrottled lazy VACUUM of a fresh copy with buffered I/O, "+
			"then with O_DIRECT (128 MiB pool, vacuum.DefaultOptions, IndexWorkers 2, OS page cache dropped before "+
			"each), then PostgreSQL 15's cold VACUUM of its twin", sz.LimRuns),
		"after each of our vacuums, the machine-limit probe in the same mode: every file of the table's base/ " +
			"directory read once in 128 KiB requests after the page cache is dropped, then the vacuum's WAL bytes " +
			"written and fsynced, then the pages it wrote (8 KiB each) written and fsynced, both over preallocated " +
			"files; limit_s is the sum; vs_limit = vacuum_s / limit_s",
		"vs_postgresql is the ratio of the medians; _min and _max bound the run-by-run ratios (ours and " +
			"PostgreSQL's of the same round)",
	}
	if twin != nil {
		out = append(out, sentence("PostgreSQL 15 as nobody, initdb --data-checksums, settings: %s; its twin is "+
			"bulkdata.SQL (INSERT, two CREATE INDEX, DELETE by the rule, CHECKPOINT, no scan: every inserter's "+
			"xmin-committed hint set, no deleter's); per round: copy of the template, start, stop, page cache "+
			"dropped, start, VACUUM (VERBOSE) timed by psql", joinComma(bulkdata.TwinSettings)))
	}
	return out
}

// limitRow is the summary row of config (nil with c's error when absent).
func limitRow(c *cells, config string) []string { return c.row("exp11_summary", config) }

func limitHeadline(ts tables) (string, error) {
	c := &cells{ts: ts}
	const t = "exp11_summary"
	v := func(config, col string) float64 { return c.num(t, limitRow(c, config), col) }
	h, u := limConfig(bulkdata.Hinted, limBuffered), limConfig(bulkdata.Unhinted, limBuffered)
	hd, ud := limConfig(bulkdata.Hinted, limDirect), limConfig(bulkdata.Unhinted, limDirect)
	pg := "PostgreSQL 15 was not run"
	if v(limPG, "runs") > 0 {
		pg = sentence("ours in %.3f (hinted) and %.3f (unhinted) of PostgreSQL 15's time, medians of %.0f interleaved "+
			"runs (%.2f s and %.2f s against %.2f s; goal at most 0.333)", v(h, "vs_postgresql"), v(u, "vs_postgresql"),
			v(limPG, "runs"), v(h, "vacuum_s"), v(u, "vacuum_s"), v(limPG, "vacuum_s"))
	}
	s := sentence("Buffered, %s. Against the machine's limit (its unavoidable I/O alone): buffered %.2fx (hinted) and "+
		"%.2fx (unhinted), O_DIRECT %.2fx and %.2fx (goal with O_DIRECT at most 1.5x).", pg,
		v(h, "vs_limit"), v(u, "vs_limit"), v(hd, "vs_limit"), v(ud, "vs_limit"))
	return s, c.err
}

func limitRules(ts tables) []Rule {
	c := &cells{ts: ts}
	const t = "exp11_summary"
	v := func(config, col string) float64 { return c.num(t, limitRow(c, config), col) }
	h, u := limConfig(bulkdata.Hinted, limBuffered), limConfig(bulkdata.Unhinted, limBuffered)
	hd, ud := limConfig(bulkdata.Hinted, limDirect), limConfig(bulkdata.Unhinted, limDirect)
	ran := v(limPG, "runs") > 0
	third := ran && v(h, "vs_postgresql") <= limGoalPG && v(u, "vs_postgresql") <= limGoalPG
	direct := v(hd, "vs_limit") <= limGoalDirect && v(ud, "vs_limit") <= limGoalDirect
	return []Rule{
		{Statement: "the goal is met when both states' medians are at most a third of PostgreSQL 15's (buffered)",
			Holds: third, Then: "met in both states.",
			Else: sentence("not met (hinted %.3f, unhinted %.3f).", v(h, "vs_postgresql"), v(u, "vs_postgresql"))},
		{Statement: "with O_DIRECT the vacuum should take at most 1.5x the O_DIRECT limit, in both states",
			Holds: direct, Then: "met in both states.",
			Else: sentence("not met (hinted %.2fx, unhinted %.2fx).", v(hd, "vs_limit"), v(ud, "vs_limit"))},
	}
}

func limitVerdict(ts tables) *Verdict {
	c := &cells{ts: ts}
	const t = "exp11_summary"
	v := func(config, col string) float64 { return c.num(t, limitRow(c, config), col) }
	h, u := limConfig(bulkdata.Hinted, limBuffered), limConfig(bulkdata.Unhinted, limBuffered)
	vd := &Verdict{Field: "ours 0.455 (hinted) and 0.65-0.70 (unhinted) of PostgreSQL 15's VACUUM time at 2M rows; goal 1/3"}
	if v(limPG, "runs") == 0 {
		vd.Run, vd.Outcome, vd.Why = "PostgreSQL 15 not run", "not measured here", "the run was not root"
		return vd
	}
	vd.Run = sentence("%.3f (hinted) and %.3f (unhinted)", v(h, "vs_postgresql"), v(u, "vs_postgresql"))
	vd.Outcome, vd.Why = "goal not met", "at least one state's median ratio is above 0.333"
	if v(h, "vs_postgresql") <= limGoalPG && v(u, "vs_postgresql") <= limGoalPG {
		vd.Outcome, vd.Why = "goal met", "both states' median ratios are at most 0.333"
	}
	return vd
}

var limitText = struct{ title, claim string }{
	title: "Vacuum speed: against PostgreSQL 15 in both hint-bit states, and against the machine's limit",
	claim: "(the vacuum-speed issue) our VACUUM took 0.455 of PostgreSQL 15's time on the hinted table and " +
		"0.65-0.70 on the unhinted one at 2M rows (hack/pgcompare); the goal is a third in both, and with O_DIRECT " +
		"at most 1.5x what the machine's unavoidable I/O takes.",
}
