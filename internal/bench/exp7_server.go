package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vacuumops/vacuum-operator/internal/pgtest"
	"github.com/vacuumops/vacuum-operator/internal/server/command"
)

// Experiment 7: the engine server against PostgreSQL 15 under pgbench, side by side in one
// run: same pgbench binary, scale, clients, threads and duration, the two systems
// interleaved (their order alternates by round), reported as ratios.

// The two systems of experiment 7.
const (
	sysOurs     = "engine-server"
	sysPostgres = "postgresql-15"
)

// srvSystem is one server pgbench drives.
type srvSystem struct {
	name, addr, user, password string
	dataDir                    string // the engine server's (experiment 8 vacuums it offline)
	stop                       func()
	// exited, when set, is closed once the server's process has exited; logPath holds its
	// output (experiment 5's processes).
	exited  <-chan struct{}
	logPath string
	// cpu is the CPU time the server has used so far (for experiment 7's CPU per
	// transaction); it is sampled with no client session open.
	cpu func() (time.Duration, error)
	// metrics, when set, is the engine server's /metrics URL: experiment 10's latency half
	// reads the server's own view of the load's latency there (serverview.go).
	metrics string
}

func (s *srvSystem) url() string {
	return fmt.Sprintf("postgres://%s:%s@%s/postgres?sslmode=disable", s.user, s.password, s.addr)
}

// startOurs serves the data directory of the work directory's name (initialised when new)
// with the engine server, in this process.
func (r *runner) startOurs(ctx context.Context, name string, extra ...string) (*srvSystem, error) {
	dir := filepath.Join(r.work, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	const pw = "bench-secret"
	users := filepath.Join(dir, "users")
	if err := os.WriteFile(users, []byte("bench:"+pw+"\n"), 0o600); err != nil {
		return nil, err
	}
	// A free port, and not one extra names (experiment 10's --metrics-listen address, free
	// again a moment after it was picked, can be handed out twice).
	var addr string
	for addr == "" || slices.Contains(extra, addr) {
		var err error
		if addr, err = freeLoopbackAddr(); err != nil {
			return nil, err
		}
	}
	// The server's log (its checkpoints among it) is kept in the work directory as
	// server.log, where --work keeps it for a look after the run.
	logFile, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	var log bytes.Buffer
	out := io.MultiWriter(&log, stampWriter{logFile})
	done := make(chan int, 1)
	go func() {
		done <- command.Main(sctx, append([]string{"serve", "--init", "--data", filepath.Join(dir, "data"), "--listen", addr,
			"--auth", "scram", "--users-file", users, "--buffer-pool", strconv.FormatInt(r.sz.SrvPoolBytes, 10),
			"--max-connections", "64"}, extra...), out, out)
	}()
	s := &srvSystem{name: sysOurs, addr: addr, user: "bench", password: pw, dataDir: filepath.Join(dir, "data"),
		stop: func() { cancel(); <-done; _ = logFile.Close() },
		// The server runs in this process, which does nothing else while pgbench runs.
		cpu: func() (time.Duration, error) { return cpuTime(), nil }}
	if err := waitSQL(ctx, s, done); err != nil {
		s.stop()
		return nil, fmt.Errorf("engine-server: %w\n%s", err, log.String())
	}
	return s, nil
}

// startDurablePostgres starts PostgreSQL 15 with its durable defaults back (pgtest turns fsync,
// synchronous_commit and full_page_writes off for tests), the engine server's buffer pool and
// its connection limit, so the two servers compare on the same terms. extra settings come
// last, so they override these (experiment 10's latency half gives both servers its own pool).
func (r *runner) startDurablePostgres(ctx context.Context, extra ...string) (*pgtest.Server, error) {
	settings := append([]string{"fsync=on", "synchronous_commit=on", "full_page_writes=on",
		fmt.Sprintf("shared_buffers=%dkB", r.sz.SrvPoolBytes>>10), "max_connections=64"}, extra...)
	if r.pgTmpl != nil {
		return r.pgTmpl.Start(ctx, settings...)
	}
	return pgtest.Start(ctx, settings...)
}

// startPostgres starts PostgreSQL 15 as startDurablePostgres does (with extra settings), for
// experiments 7, 8 and 10.
func (r *runner) startPostgres(ctx context.Context, extra ...string) (*srvSystem, error) {
	pg, err := r.startDurablePostgres(ctx, extra...)
	if err != nil {
		return nil, err
	}
	return &srvSystem{name: sysPostgres, addr: pg.Addr(), user: pgtest.Superuser, password: pgtest.Password, stop: pg.Stop,
		cpu: postgresCPU(ctx, pg.Pid())}, nil
}

func waitSQL(ctx context.Context, s *srvSystem, exited <-chan int) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := pgx.Connect(ctx, s.url())
		if err == nil {
			return c.Close(ctx)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no session within 60 s: %w", err)
		}
		select {
		case code := <-exited:
			return fmt.Errorf("exited %d before accepting sessions", code)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// pgbenchRun is one pgbench run's figures; latencies are per transaction (from -l), with
// the time each ended.
type pgbenchRun struct {
	tps                 float64
	transactions, fails int64
	cpu                 time.Duration // the server's CPU time over the run (when measured)
	lat                 []time.Duration
	ends                []time.Time
}

var (
	benchTPSRE       = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)
	benchProcessedRE = regexp.MustCompile(`number of transactions actually processed: (\d+)`)
	benchFailedRE    = regexp.MustCompile(`number of failed transactions: (\d+)`)
)

// pgbench runs PostgreSQL 15's pgbench against s; with logs it reads every transaction's
// latency from -l files.
func (r *runner) pgbench(ctx context.Context, s *srvSystem, logs bool, args ...string) (pgbenchRun, error) {
	return r.pgbenchCPU(ctx, s, logs, false, args...)
}

// pgbenchCPU is pgbench that, with cpu, also measures the server's CPU time from just
// before pgbench starts to just after it ends (before its logs are read); s must then have
// no other session open.
func (r *runner) pgbenchCPU(ctx context.Context, s *srvSystem, logs, cpu bool, args ...string) (pgbenchRun, error) {
	var run pgbenchRun
	var cpu0 time.Duration
	if cpu {
		var err error
		if cpu0, err = s.cpu(); err != nil {
			return run, fmt.Errorf("%s's CPU time: %w", s.name, err)
		}
	}
	host, port, _ := net.SplitHostPort(s.addr)
	dir, err := os.MkdirTemp(r.work, "pgbench-")
	if err != nil {
		return run, err
	}
	defer os.RemoveAll(dir)
	all := append([]string{"-h", host, "-p", port, "-U", s.user}, args...)
	if logs {
		all = append(all, "-l")
	}
	cmd := exec.CommandContext(ctx, filepath.Join(pgtest.BinDir, "pgbench"), append(all, "postgres")...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "PGSSLMODE=disable", "PGCONNECT_TIMEOUT=10", "PGPASSWORD=" + s.password}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return run, fmt.Errorf("pgbench %v against %s: %w\n%s", args, s.name, err, out)
	}
	if cpu {
		cpu1, err := s.cpu()
		if err != nil {
			return run, fmt.Errorf("%s's CPU time: %w", s.name, err)
		}
		run.cpu = cpu1 - cpu0
	}
	if m := benchTPSRE.FindSubmatch(out); m != nil {
		run.tps, _ = strconv.ParseFloat(string(m[1]), 64)
	}
	if m := benchProcessedRE.FindSubmatch(out); m != nil {
		run.transactions, _ = strconv.ParseInt(string(m[1]), 10, 64)
	}
	if m := benchFailedRE.FindSubmatch(out); m != nil {
		run.fails, _ = strconv.ParseInt(string(m[1]), 10, 64)
	}
	if !logs {
		return run, nil
	}
	files, _ := filepath.Glob(filepath.Join(dir, "pgbench_log.*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return run, err
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			// client transaction latency_us script epoch_s epoch_us
			fs := strings.Fields(line)
			if len(fs) < 6 {
				continue
			}
			us, err1 := strconv.ParseInt(fs[2], 10, 64)
			sec, err2 := strconv.ParseInt(fs[4], 10, 64)
			usec, err3 := strconv.ParseInt(fs[5], 10, 64)
			if err := errors.Join(err1, err2, err3); err != nil {
				return run, fmt.Errorf("pgbench log %s line %q: %w", filepath.Base(f), line, err)
			}
			run.lat = append(run.lat, time.Duration(us)*time.Microsecond)
			run.ends = append(run.ends, time.Unix(sec, usec*1000))
		}
	}
	if len(run.lat) == 0 {
		return run, fmt.Errorf("pgbench %v against %s wrote no per-transaction log", args, s.name)
	}
	return run, nil
}

// between is the p99 and the count of the transactions that ended in [from, to].
func (p pgbenchRun) between(from, to time.Time) (p99 time.Duration, n int) {
	return p.p99In([2]time.Time{from, to})
}

// p99In is the p99 and the count of the transactions that ended in any of the spans
// [from, to].
func (p pgbenchRun) p99In(spans ...[2]time.Time) (p99 time.Duration, n int) {
	var in []time.Duration
	for i, e := range p.ends {
		for _, sp := range spans {
			if !e.Before(sp[0]) && !e.After(sp[1]) {
				in = append(in, p.lat[i])
				break
			}
		}
	}
	if len(in) == 0 {
		return 0, 0
	}
	slices.Sort(in)
	return percentile(in, 0.99), len(in)
}

func (p pgbenchRun) percentiles() (p50, p99 time.Duration) {
	s := slices.Clone(p.lat)
	slices.Sort(s)
	return percentile(s, 0.5), percentile(s, 0.99)
}

func runServer(ctx context.Context, r *runner) (*Section, error) {
	sz := r.sz
	// At PostgreSQL's checkpoint distance (exp8CheckpointWAL), as in experiment 8, so the two
	// servers this experiment compares checkpoint after the same WAL: at the engine's own
	// 64 MiB ours checkpointed eight times as often as PostgreSQL at its max_wal_size.
	ours, err := r.startOurs(ctx, "exp7-engine-server", "--checkpoint-wal-size", exp8CheckpointWAL)
	if err != nil {
		return nil, err
	}
	defer ours.stop()
	pg, err := r.startPostgres(ctx)
	if err != nil {
		return nil, err
	}
	defer pg.stop()
	scale := strconv.Itoa(sz.SrvScale)
	for _, s := range []*srvSystem{ours, pg} {
		if _, err := r.pgbench(ctx, s, false, "-i", "-s", scale); err != nil {
			return nil, err
		}
	}
	clients, threads := strconv.Itoa(sz.SrvClients), strconv.Itoa(sz.SrvThreads)
	secs := strconv.Itoa(int(sz.SrvDuration / time.Second))
	runs := NewTable("exp7_pgbench", 2, "workload", "system", "round", "tps", "p50_ms", "p99_ms", "transactions", "failed",
		"cpu_us_per_txn")
	rounds := NewTable("exp7_rounds", 2, "workload", "round", "tps_ratio", "p99_ratio", "cpu_ratio")
	// Per workload, measure and system, every round's figures; per workload and measure,
	// every round's ratio (the two systems ran next to each other, so a round's ratio
	// cancels most of the machine's drift between rounds).
	type fig struct{ tps, p99, cpu float64 }
	figs := map[string]map[string][]fig{}
	order := func(round int) []*srvSystem {
		if round%2 == 0 {
			return []*srvSystem{ours, pg}
		}
		return []*srvSystem{pg, ours}
	}
	workloads := []string{"select-only", "tpcb-like"}
	for round := range sz.SrvRounds {
		for _, w := range workloads {
			if figs[w] == nil {
				figs[w] = map[string][]fig{}
			}
			for _, s := range order(round) {
				run, err := r.pgbenchCPU(ctx, s, true, true, "-b", w, "-M", "prepared", "-c", clients, "-j", threads, "-T", secs)
				if err != nil {
					return nil, err
				}
				if run.transactions == 0 {
					return nil, fmt.Errorf("pgbench %s against %s: no transaction in round %d", w, s.name, round+1)
				}
				p50, p99 := run.percentiles()
				cpuPer := float64(run.cpu.Microseconds()) / float64(run.transactions)
				r.logf("  %s %s round %d: %.0f tps, p99 %.2f ms, %.0f CPU µs/txn", w, s.name, round+1, run.tps, ms(p99), cpuPer)
				if err := runs.Add([]string{w + " -M prepared", s.name}, float64(round+1), run.tps, ms(p50), ms(p99),
					float64(run.transactions), float64(run.fails), cpuPer); err != nil {
					return nil, err
				}
				figs[w][s.name] = append(figs[w][s.name], fig{tps: run.tps, p99: ms(p99), cpu: cpuPer})
			}
			o, p := figs[w][sysOurs][round], figs[w][sysPostgres][round]
			if err := rounds.Add([]string{w + " -M prepared", strconv.Itoa(round + 1)}, quot(o.tps, p.tps), quot(o.p99, p.p99),
				quot(o.cpu, p.cpu)); err != nil {
				return nil, err
			}
		}
	}

	// Foreground p99 during VACUUM of pgbench_accounts after a bloating UPDATE of half its
	// rows, unthrottled and at cost delay SrvVacuumDelay (limit 200).
	vacs := NewTable("exp7_vacuum", 2, "vacuum", "system", "cost_delay_ms", "vacuum_s", "fg_p99_before_ms",
		"fg_p99_during_ms", "fg_samples_during")
	vacP99 := map[string]map[string][]float64{}
	for i, delay := range []time.Duration{0, sz.SrvVacuumDelay} {
		label := "unthrottled"
		if delay > 0 {
			label = fmt.Sprintf("cost delay %s", delay)
		}
		for _, s := range order(i) {
			row, err := r.vacuumBeside(ctx, s, delay, clients, threads)
			if err != nil {
				return nil, err
			}
			r.logf("  VACUUM %s %s: %.2f s, foreground p99 %.2f ms before, %.2f ms during (%d samples)",
				label, s.name, row.vacuum.Seconds(), ms(row.before), ms(row.during), row.samples)
			if err := vacs.Add([]string{label, s.name}, ms(delay), row.vacuum.Seconds(), ms(row.before), ms(row.during),
				float64(row.samples)); err != nil {
				return nil, err
			}
			if vacP99[label] == nil {
				vacP99[label] = map[string][]float64{}
			}
			vacP99[label][s.name] = append(vacP99[label][s.name], ms(row.during))
		}
	}

	ratios := NewTable("exp7_ratios", 1, "measure", "engine_server", "postgresql_15", "ratio")
	// Each system's median over the rounds, and the median of the rounds' ratios.
	pick := func(fs []fig, f func(fig) float64) []float64 {
		v := make([]float64, len(fs))
		for i, x := range fs {
			v[i] = f(x)
		}
		return v
	}
	for _, w := range workloads {
		for _, m := range []struct {
			name string
			f    func(fig) float64
		}{
			{"tps", func(x fig) float64 { return x.tps }},
			{"p99_ms", func(x fig) float64 { return x.p99 }},
			{"cpu_us_per_txn", func(x fig) float64 { return x.cpu }},
		} {
			o, p := pick(figs[w][sysOurs], m.f), pick(figs[w][sysPostgres], m.f)
			q := make([]float64, len(o))
			for i := range o {
				q[i] = quot(o[i], p[i])
			}
			if err := ratios.Add([]string{w + " " + m.name}, medianF(o), medianF(p), medianF(q)); err != nil {
				return nil, err
			}
		}
	}
	mean := func(v []float64) float64 {
		var s float64
		for _, x := range v {
			s += x
		}
		return s / float64(len(v))
	}
	ratio := func(name string, a, b float64) error {
		return ratios.Add([]string{name}, a, b, quot(a, b))
	}
	for _, label := range []string{"unthrottled", fmt.Sprintf("cost delay %s", sz.SrvVacuumDelay)} {
		if err := ratio("p99_ms during VACUUM "+label, mean(vacP99[label][sysOurs]), mean(vacP99[label][sysPostgres])); err != nil {
			return nil, err
		}
	}
	sec := &Section{
		Title: "The engine server against PostgreSQL 15 under pgbench",
		Claim: "(the engine-server issue's goals) pgbench select-only -M prepared at least PostgreSQL's TPS, " +
			"tpcb-like at least 0.8 of it; the foreground p99 during VACUUM, ours against PostgreSQL's.",
		Tables: []*Table{ratios, rounds, runs, vacs},
		Setup: []string{
			sentence("PostgreSQL 15's pgbench (Debian), scale %d, %d clients on %d threads, %s per run, -M prepared, "+
				"%d rounds, the two systems interleaved (order alternating by round); p50/p99 from pgbench -l; "+
				"exp7_ratios holds each system's median over the rounds and the median of the rounds' ratios (exp7_rounds)",
				sz.SrvScale, sz.SrvClients, sz.SrvThreads, sz.SrvDuration, sz.SrvRounds),
			sentence("engine-server in this process (SCRAM, loopback, --buffer-pool %s, --checkpoint-wal-size %s: where "+
				"PostgreSQL 15's default max_wal_size of 1GB requests a checkpoint); PostgreSQL 15 (Debian) as "+
				"user nobody with shared_buffers %s, fsync, synchronous_commit and full_page_writes on, autovacuum off",
				mib(sz.SrvPoolBytes), exp8CheckpointWAL, mib(sz.SrvPoolBytes)),
			"VACUUM rows: UPDATE of every second account (aid % 2 = 0), then pgbench select-only in the foreground " +
				sentence("and, after %s, VACUUM pgbench_accounts from another session, unthrottled and at vacuum_cost_delay "+
					"%s with limit 200; p99 of the foreground transactions that ended while it ran", sz.SrvVacuumAlone, sz.SrvVacuumDelay),
		},
		Caveats: []string{
			"One machine for the servers and pgbench: the client's CPU is part of every figure, the same for both.",
			"The two VACUUMs last different times (exp7_vacuum's vacuum_s), so each p99 during VACUUM covers its own " +
				"window; a short window holds few samples (fg_samples_during), and its p99 is noisier.",
			"CPU per transaction is the server's user and system time over the run (from /proc: this process for the " +
				"engine server, the postmaster and every backend and background process for PostgreSQL) over pgbench's " +
				"transactions; pgbench's own CPU is in neither.",
			"Both commit durably (PostgreSQL with fsync and synchronous_commit on; the engine flushes its WAL at " +
				"every commit).",
		},
	}
	sec.Rules = serverRules(tablesOf(sec.Tables))
	return sec, nil
}

// vacuumRow is one VACUUM beside the foreground.
type vacuumRow struct {
	vacuum, before, during time.Duration
	samples                int
}

func (r *runner) vacuumBeside(ctx context.Context, s *srvSystem, delay time.Duration, clients, threads string) (vacuumRow, error) {
	var row vacuumRow
	c, err := pgx.Connect(ctx, s.url())
	if err != nil {
		return row, err
	}
	defer func() { _ = c.Close(context.Background()) }()
	if _, err := c.Exec(ctx, "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid % 2 = 0"); err != nil {
		return row, fmt.Errorf("%s: bloating UPDATE: %w", s.name, err)
	}
	if _, err := c.Exec(ctx, fmt.Sprintf("SET vacuum_cost_delay = %d", delay.Milliseconds())); err != nil {
		return row, err
	}
	if _, err := c.Exec(ctx, "SET vacuum_cost_limit = 200"); err != nil {
		return row, err
	}
	fg := make(chan error, 1)
	var run pgbenchRun
	window := strconv.Itoa(int(r.sz.SrvVacuumWindow / time.Second))
	go func() {
		var err error
		run, err = r.pgbench(ctx, s, true, "-b", "select-only", "-M", "prepared", "-c", clients, "-j", threads, "-T", window)
		fg <- err
	}()
	// The foreground is measured from when all its sessions are in, then SrvVacuumAlone alone.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int64
		if err := c.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgbench'").Scan(&n); err != nil {
			return row, fmt.Errorf("%s: pg_stat_activity: %w", s.name, err)
		}
		if n >= int64(r.sz.SrvClients) {
			break
		}
		if time.Now().After(deadline) {
			return row, fmt.Errorf("%s: %d of pgbench's %d sessions connected within 30 s", s.name, n, r.sz.SrvClients)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(r.sz.SrvVacuumAlone)
	start := time.Now()
	_, verr := c.Exec(ctx, "VACUUM pgbench_accounts")
	end := time.Now()
	if err := <-fg; err != nil {
		return row, err
	}
	if verr != nil {
		return row, fmt.Errorf("%s: VACUUM: %w", s.name, verr)
	}
	if end.After(start.Add(r.sz.SrvVacuumWindow - r.sz.SrvVacuumAlone)) {
		r.warn("experiment 7: %s's VACUUM outlasted the %s foreground run; its p99 covers the overlap only", s.name, r.sz.SrvVacuumWindow)
	}
	row.vacuum = end.Sub(start)
	row.before, _ = run.between(start.Add(-time.Hour), start)
	row.during, row.samples = run.between(start, end)
	return row, nil
}

// quot is a/b, 0 when b is not positive.
func quot(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

// Goals of experiment 7 (the engine-server issue).
const (
	srvSelectGoal = 1.0
	srvTPCBGoal   = 0.8
)

func serverRules(ts tables) []Rule {
	c := &cells{ts: ts}
	const t = "exp7_ratios"
	sel := c.num(t, c.row(t, "select-only tps"), "ratio")
	tpcb := c.num(t, c.row(t, "tpcb-like tps"), "ratio")
	return []Rule{
		{Statement: sentence("select-only -M prepared meets its goal when its TPS ratio is at least %.1f", srvSelectGoal),
			Holds: sel >= srvSelectGoal, Then: sentence("Met: %.2f.", sel), Else: sentence("Not met: %.2f.", sel)},
		{Statement: sentence("tpcb-like -M prepared meets its goal when its TPS ratio is at least %.1f", srvTPCBGoal),
			Holds: tpcb >= srvTPCBGoal, Then: sentence("Met: %.2f.", tpcb), Else: sentence("Not met: %.2f.", tpcb)},
	}
}

func serverHeadline(ts tables) (string, error) {
	c := &cells{ts: ts}
	const t = "exp7_ratios"
	var parts []string
	for _, m := range c.rows(t, "") {
		if c.err != nil {
			break
		}
		name := m[0]
		ours, pg, q := c.num(t, m, "engine_server"), c.num(t, m, "postgresql_15"), c.num(t, m, "ratio")
		if strings.HasSuffix(name, " tps") || strings.HasSuffix(name, " cpu_us_per_txn") {
			parts = append(parts, sentence("%s %.0f against %.0f (ratio %.2f)", name, ours, pg, q))
		} else {
			parts = append(parts, sentence("%s %.2f against %.2f (ratio %.2f)", name, ours, pg, q))
		}
	}
	if c.err != nil {
		return "", c.err
	}
	return "engine-server against PostgreSQL 15: " + joinComma(parts) + ".", nil
}

// stampWriter writes each write (a line of the server's log) after the UTC time of
// day, to lay it beside the bench's own log.
type stampWriter struct{ w io.Writer }

func (s stampWriter) Write(p []byte) (int, error) {
	if _, err := fmt.Fprintf(s.w, "%s %s", time.Now().UTC().Format("15:04:05.000"), p); err != nil {
		return 0, err
	}
	return len(p), nil
}
