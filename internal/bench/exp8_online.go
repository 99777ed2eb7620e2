package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
	"github.com/vacuumops/vacuum-operator/internal/online"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// Experiment 8: an online VACUUM of the engine server beside its foreground, through the
// runner's online face (package online, what a runner pod runs for a server target), against
// the same VACUUM done the old way, offline with the application quiesced (the server stopped
// for the whole run, the data directory vacuumed by the engine, the server started again). At
// each cost delay of experiment 1 (two of them in the quick sizes): online, what the
// foreground's p99 rises to; quiesced, how long the application cannot be reached at all.

const (
	exp8Table    = "pgbench_accounts"
	exp8Online   = "online"
	exp8Quiesced = "quiesced"
)

func runOnline(ctx context.Context, r *runner) (*Section, error) {
	sz := r.sz
	srv, err := r.startOurs(ctx, "exp8-engine-server")
	if err != nil {
		return nil, err
	}
	defer func() { srv.stop() }()
	if _, err := r.pgbench(ctx, srv, false, "-i", "-s", strconv.Itoa(sz.SrvScale)); err != nil {
		return nil, err
	}
	clients, threads := strconv.Itoa(sz.SrvClients), strconv.Itoa(sz.SrvThreads)
	tb := NewTable("exp8_online", 2, "mode", "delay", "cost_delay_ms", "vacuum_s", "unavailable_s", "fg_p99_before_ms",
		"fg_p99_during_ms", "p99_vs_before", "server_p99_during_ms", "fg_samples_during", "fg_failed")
	for _, d := range sz.OnlineDelays {
		row, err := r.onlineBeside(ctx, srv, d, clients, threads)
		if err != nil {
			return nil, fmt.Errorf("online, %s: %w", delayName(d), err)
		}
		q := 0.0
		if row.before > 0 {
			q = float64(row.during) / float64(row.before)
		}
		r.logf("  online %s: VACUUM %.2f s, foreground p99 %.2f ms before, %.2f ms during (%.2fx, %d samples), server's p99 %.2f ms",
			delayName(d), row.vacuum.Seconds(), ms(row.before), ms(row.during), q, row.samples, ms(row.server))
		if err := tb.Add([]string{exp8Online, delayName(d)}, ms(d), row.vacuum.Seconds(), 0, ms(row.before), ms(row.during), q,
			ms(row.server), float64(row.samples), float64(row.failed)); err != nil {
			return nil, err
		}
	}
	for _, d := range sz.OnlineDelays {
		var vac, down time.Duration
		srv, vac, down, err = r.quiescedVacuum(ctx, srv, d)
		if err != nil {
			return nil, fmt.Errorf("quiesced, %s: %w", delayName(d), err)
		}
		r.logf("  quiesced %s: VACUUM %.2f s, the server unreachable for %.2f s", delayName(d), vac.Seconds(), down.Seconds())
		if err := tb.Add([]string{exp8Quiesced, delayName(d)}, ms(d), vac.Seconds(), down.Seconds(), 0, 0, 0, 0, 0, 0); err != nil {
			return nil, err
		}
	}
	sec := &Section{
		Title: "Online VACUUM beside the foreground against the offline, quiesced VACUUM",
		Claim: "(the online-runs issue) an online VACUUM keeps the application serving at a bounded p99 increase, " +
			"where the quiesced VACUUM makes it unavailable for the whole run plus a restart.",
		Tables: []*Table{tb},
		Setup: []string{
			sentence("engine-server in this process (SCRAM, loopback, --buffer-pool %s), pgbench -i -s %d; before each "+
				"VACUUM an UPDATE of every second account (aid %% 2 = 0)", mib(sz.SrvPoolBytes), sz.SrvScale),
			sentence("online: PostgreSQL 15's pgbench select-only -M prepared, %d clients on %d threads, for %s plus "+
				"the stretch before the VACUUM; after a 1 s warm-up and %s of foreground alone (its p99 is the "+
				"baseline), VACUUM of %s through package online (the runner pod's online path: session settings, "+
				"VACUUM (VERBOSE), progress and the server's latency view polled every second) at cost limit %d and "+
				"each cost delay; p99 of the transactions that ended in that stretch and while it ran, from pgbench -l",
				sz.SrvClients, sz.SrvThreads, sz.SrvVacuumWindow, exp8Before(sz.SrvVacuumWindow), exp8Table, sz.CostLimit),
			"quiesced: the server stopped (the application quiesced), the data directory opened by the engine and " +
				"the table vacuumed at the same throttle, the server started again; unavailable_s is from the stop " +
				"to the first accepted session",
		},
		Caveats: []string{
			"One machine for the server and pgbench: the client's CPU is part of every figure.",
			"server_p99_during_ms is the highest p99 of the server's own latency view (a 10 s window) at the " +
				"runner's polls during the VACUUM: the window also holds up to 10 s from before it.",
			"A short VACUUM (unthrottled) holds few foreground samples (fg_samples_during), and its p99 is noisier.",
			"A real quiesce also waits for the pods to stop and start (scale to 0 and back); here the stop and " +
				"start are the server's own, so unavailable_s is a lower bound.",
		},
	}
	sec.Rules = onlineRules(tablesOf(sec.Tables))
	return sec, nil
}

// onlineRow is one online VACUUM beside the foreground.
type onlineRow struct {
	vacuum, before, during, server time.Duration
	samples                        int
	failed                         int64
}

// exp8Limits is the runner's throttle at cost delay d (0: unthrottled) and the bench's limit.
func (r *runner) exp8Limits(d time.Duration) runnerwire.Limits {
	l := runnerwire.DefaultLimits()
	l.CostDelay, l.CostLimit = d, r.sz.CostLimit
	return l
}

// bloat leaves a dead version of every second account.
func bloat(ctx context.Context, s *srvSystem) error {
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

func (r *runner) onlineBeside(ctx context.Context, s *srvSystem, d time.Duration, clients, threads string) (onlineRow, error) {
	var row onlineRow
	if err := bloat(ctx, s); err != nil {
		return row, err
	}
	pw := filepath.Join(r.work, "exp8-password")
	if err := os.WriteFile(pw, []byte(s.password), 0o600); err != nil {
		return row, err
	}
	target := online.Target{Address: s.addr, Database: "postgres", User: s.user, PasswordFile: pw,
		SSLMode: online.SSLDisable, NoEnvironment: true}
	fg := make(chan error, 1)
	var run pgbenchRun
	// The p99 before the VACUUM is taken over a steady stretch: the first second after
	// pgbench's sessions are in (prepares, cold caches) is left out of it.
	warm, steady := time.Second, exp8Before(r.sz.SrvVacuumWindow)
	window := strconv.Itoa(int((r.sz.SrvVacuumWindow + warm + steady + time.Second - 1) / time.Second))
	go func() {
		var err error
		run, err = r.pgbench(ctx, s, true, "-b", "select-only", "-M", "prepared", "-c", clients, "-j", threads, "-T", window)
		fg <- err
	}()
	if err := waitPgbench(ctx, s, r.sz.SrvClients); err != nil {
		return row, err
	}
	time.Sleep(warm + steady)
	var server time.Duration
	vr, err := online.New(ctx, target, online.Options{Tables: []string{exp8Table}, Throttle: r.exp8Limits(d),
		OnProgress: func(p runnerwire.Progress) {
			if f := p.Foreground; f != nil {
				server = max(server, time.Duration(f.P99Microseconds)*time.Microsecond)
			}
		}})
	if err != nil {
		return row, errors.Join(err, <-fg)
	}
	start := time.Now()
	_, verr := vr.Vacuum(ctx)
	end := time.Now()
	_ = vr.Close()
	if err := <-fg; err != nil {
		return row, err
	}
	if verr != nil {
		return row, fmt.Errorf("%s: online VACUUM: %w", s.name, verr)
	}
	if end.After(start.Add(r.sz.SrvVacuumWindow - time.Second)) {
		r.warn("experiment 8: the online VACUUM at %s outlasted the %s foreground run; its p99 covers the overlap only", delayName(d), r.sz.SrvVacuumWindow)
	}
	row.vacuum, row.server, row.failed = end.Sub(start), server, run.fails
	row.before, _ = run.between(start.Add(-steady), start)
	row.during, row.samples = run.between(start, end)
	return row, nil
}

// exp8Before is the stretch of foreground before the VACUUM whose p99 is its
// baseline: a sixth of the window the VACUUM runs in, at least one second.
func exp8Before(window time.Duration) time.Duration {
	return max(window/6, time.Second).Truncate(time.Second)
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

// quiescedVacuum bloats the table, stops the server, vacuums its data directory at cost delay
// d with the engine, and starts the server again; it returns the new server, the VACUUM's
// time and the time from the stop to the first session accepted again.
func (r *runner) quiescedVacuum(ctx context.Context, s *srvSystem, d time.Duration) (*srvSystem, time.Duration, time.Duration, error) {
	if err := bloat(ctx, s); err != nil {
		return s, 0, 0, err
	}
	stopped := time.Now()
	s.stop()
	s.stop = func() {}
	db, err := engine.Open(s.dataDir, engine.Options{BufferPoolBytes: r.sz.SrvPoolBytes, Logf: r.warn})
	if err != nil {
		return s, 0, 0, fmt.Errorf("open %s offline: %w", s.dataDir, err)
	}
	vo := vacuum.DefaultOptions()
	vo.Throttle = costSettings(r.sz.CostLimit, d)
	began := time.Now()
	_, verr := db.Vacuum(ctx, exp8Table, vo)
	vac := time.Since(began)
	if err := db.Close(); err != nil && verr == nil {
		verr = err
	}
	if verr != nil {
		return s, 0, 0, fmt.Errorf("offline VACUUM of %s: %w", exp8Table, verr)
	}
	again, err := r.startOurs(ctx, "exp8-engine-server")
	if err != nil {
		return s, 0, 0, err
	}
	return again, vac, time.Since(stopped), nil
}

// The online-runs issue's goal: at some cost delay the foreground's p99 at most 1.2x its
// p99 before the VACUUM, while the VACUUM takes at most 3x its unthrottled time.
const (
	onlineP99Goal  = 1.2
	onlineTimeGoal = 3.0
)

func onlineRules(ts tables) []Rule {
	c := &cells{ts: ts}
	const t = "exp8_online"
	rows := c.rows(t, exp8Online)
	if c.err != nil || len(rows) == 0 {
		return nil
	}
	unthrottled := c.num(t, rows[0], "vacuum_s") // OnlineDelays starts with 0
	chosen := ""
	for _, m := range rows {
		if c.num(t, m, "p99_vs_before") <= onlineP99Goal && c.num(t, m, "vacuum_s") <= onlineTimeGoal*unthrottled {
			chosen = m[1]
			break
		}
	}
	return []Rule{{
		Statement: sentence("The goal is met when at some cost delay the foreground's p99 is at most %.1fx its p99 before "+
			"the VACUUM while the VACUUM takes at most %.0fx its unthrottled time", onlineP99Goal, onlineTimeGoal),
		Holds: chosen != "", Then: sentence("Met at %s.", chosen), Else: "Not met at any cost delay measured.",
	}}
}

func onlineHeadline(ts tables) (string, error) {
	c := &cells{ts: ts}
	const t = "exp8_online"
	var parts []string
	for _, m := range c.rows(t, exp8Online) {
		if c.err != nil {
			break
		}
		name := m[1]
		var q []string
		for _, qm := range c.rows(t, exp8Quiesced) {
			if qm[1] == name {
				q = qm
			}
		}
		parts = append(parts, sentence("%s: online p99 %.2fx for %.2f s, quiesced unavailable %.2f s",
			name, c.num(t, m, "p99_vs_before"), c.num(t, m, "vacuum_s"), c.num(t, q, "unavailable_s")))
	}
	if c.err != nil {
		return "", c.err
	}
	return "online VACUUM against quiesced: " + joinComma(parts) + ".", nil
}
