package online

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// cancelWait bounds how long a cancelled run waits for its VACUUMs to leave
// pg_stat_activity.
const cancelWait = 15 * time.Second

// Run is one online vacuum: a control session (detection, table picking, progress polling,
// cancellation) and, while Vacuum runs, Parallelism worker sessions.
type Run struct {
	target Target
	cfg    *pgx.ConnConfig
	ctl    *pgx.Conn
	// thr is the session UpdateThrottle sends vacuum_set_throttle on (the engine server),
	// opened at the first change and kept, so a change costs statements, not a new SCRAM
	// session each time; tmu serialises its use.
	tmu    sync.Mutex
	thr    *pgx.Conn
	server Server
	opts   Options
	tables []Table
	block  int64 // the server's block size

	mu       sync.Mutex
	throttle runnerwire.Limits
	adaptive runnerwire.AdaptiveTargets // the run's adaptive throttle (UpdateAdaptive changes it)
	start    time.Time
	finish   time.Time
	states   []*tableState
	started  int // index in states of the table started last, -1 before any
	updates  int64
	// the engine server's foreground: read at each poll, and once before the first VACUUM
	foreground, baseline *runnerwire.Foreground
	// the standbys' largest lag, now and at any poll (replication.go); nil until one is seen
	replication *runnerwire.Replication
	// between is the adaptive throttle between tables on PostgreSQL (betweentables.go);
	// nil on the engine server, which adapts inside the VACUUM. The foreground sampler it
	// reads runs from the first table with a latency target until Vacuum returns.
	between      *betweenTables
	samplerOnce  sync.Once
	samplerDone  chan struct{}
	samplerGroup sync.WaitGroup
}

// tableState is one table's progress and, once done, its result.
type tableState struct {
	table   Table
	skipped bool
	pid     uint32 // the worker's backend while the table runs
	running bool
	done    bool
	phase   runnerwire.Phase
	began   time.Time
	// from the progress view
	blocksTotal, blocksScanned, blocksVacuumed, indexPasses, deadTuples int64
	adaptive                                                            *runnerwire.AdaptiveProgress // the engine server's adaptive columns, nil while NULL
	// slept is the engine server's time_slept_ms of the table's lazy VACUUM at the last
	// poll (0 on PostgreSQL, and for FULL, whose view has no such column)
	slept  time.Duration
	result runnerwire.TableResult
}

// New connects to t, detects the server, checks o against it and picks the tables. Close
// the Run when done.
func New(ctx context.Context, t Target, o Options) (*Run, error) {
	cfg, err := t.Config()
	if err != nil {
		return nil, err
	}
	if o.Parallelism == 0 {
		o.Parallelism = 1
	}
	if o.PollInterval <= 0 {
		o.PollInterval = time.Second
	}
	ctl, err := Connect(ctx, t, cfg)
	if err != nil {
		return nil, err
	}
	r := &Run{target: t, cfg: cfg, ctl: ctl, opts: o, throttle: o.Throttle, adaptive: o.Adaptive, started: -1}
	if err := r.prepare(ctx); err != nil {
		_ = ctl.Close(context.Background()) // the error that matters is prepare's
		return nil, err
	}
	return r, nil
}

func (r *Run) prepare(ctx context.Context) error {
	s, err := Detect(ctx, r.ctl)
	if err != nil {
		return err
	}
	r.server = s
	if want := r.opts.SystemIdentifier; want != "" {
		got, err := SystemIdentifier(ctx, r.ctl)
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("%s: system identifier %s, the run was started for %s: %w", r.target.Address, got, want, ErrOtherServer)
		}
	}
	if err := Check(s, r.opts); err != nil {
		return err
	}
	if err := r.ctl.QueryRow(ctx, "SELECT current_setting('block_size')::bigint").Scan(&r.block); err != nil {
		return fmt.Errorf("read block_size: %w", err)
	}
	if s.Kind == KindEngineServer {
		r.tables, err = pickEngineTables(ctx, r.ctl, r.opts.Tables)
	} else {
		r.tables, err = PickTables(ctx, r.ctl, r.opts.Tables)
	}
	if err != nil {
		return err
	}
	if s.Kind == KindPostgreSQL {
		r.between = &betweenTables{}
		r.samplerDone = make(chan struct{})
	}
	for _, t := range r.tables {
		st := &tableState{table: t, phase: runnerwire.PhaseInitializing}
		st.skipped = r.opts.MinDeadTuplePercent > 0 && t.DeadPercent() < float64(r.opts.MinDeadTuplePercent)
		r.states = append(r.states, st)
	}
	return nil
}

// Server is the server New detected.
func (r *Run) Server() Server { return r.server }

// Tables are the tables picked, in the order they are vacuumed (skipped ones included).
func (r *Run) Tables() []Table { return append([]Table(nil), r.tables...) }

// Close closes the control session (and the throttle session, if opened).
func (r *Run) Close() error {
	r.tmu.Lock()
	if r.thr != nil {
		_ = r.thr.Close(context.Background()) // it only sent settings
		r.thr = nil
	}
	r.tmu.Unlock()
	return r.ctl.Close(context.Background())
}

// ThrottleApplies says when UpdateThrottle takes effect on this server: at once on the
// engine server (vacuum_set_throttle), from the next table on PostgreSQL.
func (r *Run) ThrottleApplies() string {
	if r.server.Kind == KindEngineServer {
		return runnerwire.ThrottleAppliesImmediately
	}
	return runnerwire.ThrottleAppliesNextTable
}

// UpdateThrottle sets the throttle of the tables not yet started; on the engine server it
// also changes the running VACUUMs' throttle at their next delay point, through
// vacuum_set_throttle (PostgreSQL cannot re-throttle a running manual VACUUM). Tables with
// an override keep theirs.
func (r *Run) UpdateThrottle(l runnerwire.Limits) error {
	if err := CheckThrottle(r.server, l); err != nil {
		return err
	}
	r.mu.Lock()
	r.throttle = l
	r.updates++
	type backend struct {
		pid   uint32
		table string
	}
	var running []backend
	for _, st := range r.states {
		if st.running && r.opts.limitsFor(st.table, l) == l {
			running = append(running, backend{st.pid, st.table.Qualified()})
		}
	}
	r.mu.Unlock()
	if r.server.Kind != KindEngineServer || len(running) == 0 {
		return nil
	}
	names, values := throttleSettings(r.server, l)
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	r.tmu.Lock()
	defer r.tmu.Unlock()
	if r.thr == nil {
		// A session of its own: the control session belongs to the progress poller.
		conn, err := Connect(ctx, r.target, r.cfg.Copy())
		if err != nil {
			return err
		}
		r.thr = conn
	}
	for _, b := range running {
		for i, n := range names {
			if _, err := r.thr.Exec(ctx, "SELECT vacuum_set_throttle($1, $2, $3)", int32(b.pid), n, values[i]); err != nil {
				_ = r.thr.Close(context.Background()) // the next change starts a fresh session
				r.thr = nil
				return fmt.Errorf("vacuum_set_throttle(%d, %s, %v) for %s: %w", b.pid, n, values[i], b.table, err)
			}
		}
	}
	return nil
}

// UpdateAdaptive sets the run's adaptive throttle for the tables not yet started, and on
// the engine server changes it live on the running VACUUMs (vacuum_set_throttle) of the
// tables whose override sets no adaptive targets of their own.
func (r *Run) UpdateAdaptive(a runnerwire.AdaptiveTargets) error {
	r.mu.Lock()
	cur := r.throttle
	r.mu.Unlock()
	var errs []error
	checkAdaptive(r.server, a, cur, "throttle.adaptive", func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	})
	if err := errors.Join(errs...); err != nil {
		return err
	}
	r.mu.Lock()
	r.adaptive = a
	var pids []uint32
	for _, st := range r.states {
		if st.running && r.opts.adaptiveFor(st.table, a) == a {
			pids = append(pids, st.pid)
		}
	}
	r.mu.Unlock()
	if r.server.Kind != KindEngineServer || len(pids) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	conn, err := Connect(ctx, r.target, r.cfg.Copy())
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.Background()) }() // only sent settings
	names, values := adaptiveSettings(a)
	for _, pid := range pids {
		for i, n := range names {
			if _, err := conn.Exec(ctx, "SELECT vacuum_set_throttle($1, $2, $3)", int32(pid), n, values[i]); err != nil {
				return fmt.Errorf("vacuum_set_throttle(%d, %s, %v): %w", pid, n, values[i], err)
			}
		}
	}
	return nil
}

// throttleSettings are the session settings of a throttle on server, with their values:
// the cost settings on both, the byte rates (in bytes per second) on the engine server.
func throttleSettings(server Server, l runnerwire.Limits) ([]string, []string) {
	names := []string{"vacuum_cost_delay", "vacuum_cost_limit", "vacuum_cost_page_hit",
		"vacuum_cost_page_miss", "vacuum_cost_page_dirty"}
	values := []string{
		strconv.FormatInt(l.CostDelay.Microseconds(), 10) + "us",
		strconv.Itoa(l.CostLimit), strconv.Itoa(l.PageHitCost),
		strconv.Itoa(l.PageMissCost), strconv.Itoa(l.PageDirtyCost),
	}
	if server.Kind == KindEngineServer {
		names = append(names, "vacuum_max_read_rate", "vacuum_max_write_rate", "vacuum_max_wal_rate")
		values = append(values, strconv.FormatInt(l.MaxReadBytesPerSecond, 10),
			strconv.FormatInt(l.MaxWriteBytesPerSecond, 10), strconv.FormatInt(l.MaxWALBytesPerSecond, 10))
	}
	return names, values
}

// Vacuum vacuums the picked tables on Parallelism sessions and returns the report of what
// was done (tables finished, and an unfinished one marked by its error). Cancelling ctx
// cancels the running VACUUMs on the server and waits until they are gone.
func (r *Run) Vacuum(ctx context.Context) (runnerwire.Report, error) {
	// The baseline: what the foreground felt over the window just before any VACUUM.
	base := r.readForeground(ctx)
	r.mu.Lock()
	r.start = time.Now()
	r.baseline, r.foreground = base, base
	r.mu.Unlock()
	if r.between != nil {
		defer func() { close(r.samplerDone); r.samplerGroup.Wait() }()
		if r.opts.anyLatencyTarget() {
			r.startSampler(ctx)
		}
	}
	queue := make(chan *tableState, len(r.states))
	for _, st := range r.states {
		if st.skipped {
			st.done = true
			st.phase = runnerwire.PhaseDone
			st.result = skippedResult(st.table, r.opts.Full)
			continue
		}
		queue <- st
	}
	close(queue)

	// Workers run their statements on a context that is never cancelled: cancelling a
	// pgx query closes the socket, which leaves the VACUUM running on the server. The
	// control session cancels them with pg_cancel_backend instead.
	work := context.WithoutCancel(ctx)
	stop := make(chan struct{}) // closed on the first worker error: take no new table
	var stopOnce sync.Once
	errs := make(chan error, r.opts.Parallelism)
	var wg sync.WaitGroup
	for range min(r.opts.Parallelism, max(len(queue), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.worker(ctx, work, queue, stop); err != nil {
				stopOnce.Do(func() { close(stop) })
				errs <- err
			}
		}()
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()

	cancelErr := r.watch(ctx, finished)
	// errs stays open: when cancelling failed a worker may still be in its VACUUM, and
	// its send must not panic (the channel holds one error per worker).
	var werr error
	for drained := false; !drained; {
		select {
		case e := <-errs:
			if werr == nil || (isCancel(werr) && !isCancel(e)) {
				werr = e
			}
		default:
			drained = true
		}
	}
	r.mu.Lock()
	r.finish = time.Now()
	r.mu.Unlock()
	rep := r.Report()
	switch {
	case ctx.Err() != nil:
		err := fmt.Errorf("vacuum of %s cancelled: %w", r.server, ctx.Err())
		if c := context.Cause(ctx); c != nil && c != ctx.Err() {
			err = fmt.Errorf("vacuum of %s cancelled (%w): %w", r.server, c, ctx.Err())
		}
		return rep, errors.Join(err, cancelErr)
	case werr != nil:
		return rep, werr
	}
	return rep, nil
}

// watch polls progress until the workers finish; when ctx is cancelled first it cancels
// their backends and waits for them to leave pg_stat_activity.
func (r *Run) watch(ctx context.Context, finished <-chan struct{}) error {
	tick := time.NewTicker(r.opts.PollInterval)
	defer tick.Stop()
	for {
		select {
		case <-finished:
			r.poll(context.Background())
			return nil
		case <-ctx.Done():
			return r.cancelBackends(finished)
		case <-tick.C:
			// Not on ctx: pgx closes a session whose query's context is cancelled
			// mid-query, and cancelBackends needs the control session alive. A SIGTERM
			// landing inside a poll left the server-side VACUUM running.
			pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelWait)
			r.poll(pctx)
			cancel()
		}
	}
}

// cancelBackends cancels every running VACUUM of this run, waits for the workers to
// return, then checks pg_stat_activity until none of their VACUUMs is left.
func (r *Run) cancelBackends(finished <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(context.Background(), cancelWait)
	defer cancel()
	if r.ctl.IsClosed() {
		// A poll that timed out closed it: cancelling needs a session.
		ctl, err := Connect(ctx, r.target, r.cfg)
		if err != nil {
			return fmt.Errorf("reconnect to cancel the running VACUUMs: %w", err)
		}
		r.ctl = ctl
	}
	var pids []uint32
	deadline := time.After(cancelWait)
	for {
		for _, pid := range r.runningPIDs() {
			if !contains(pids, pid) {
				pids = append(pids, pid)
			}
			var ok bool
			if err := r.ctl.QueryRow(ctx, "SELECT pg_cancel_backend($1)", int32(pid)).Scan(&ok); err != nil {
				return fmt.Errorf("cancel backend %d: %w", pid, err)
			}
		}
		select {
		case <-finished:
			return r.waitGone(ctx, pids)
		case <-deadline:
			return fmt.Errorf("backends %v still running their VACUUM %v after pg_cancel_backend", pids, cancelWait)
		case <-time.After(100 * time.Millisecond):
			// a worker between tables may start one more before seeing the cancel
		}
	}
}

// waitGone waits until no backend of pids runs a VACUUM.
func (r *Run) waitGone(ctx context.Context, pids []uint32) error {
	if len(pids) == 0 {
		return nil
	}
	ids := make([]int32, len(pids))
	for i, p := range pids {
		ids[i] = int32(p)
	}
	for {
		var n int
		err := r.ctl.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE pid = ANY($1) AND state = 'active' AND query ILIKE 'vacuum%'`, ids).Scan(&n)
		if err != nil {
			return fmt.Errorf("check that the cancelled VACUUMs are gone: %w", err)
		}
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d cancelled VACUUMs still in pg_stat_activity after %v", n, cancelWait)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (r *Run) runningPIDs() []uint32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []uint32
	for _, st := range r.states {
		if st.running {
			out = append(out, st.pid)
		}
	}
	return out
}

// worker vacuums tables from queue on its own session until the queue is empty, ctx is
// cancelled or stop is closed.
func (r *Run) worker(ctx, work context.Context, queue <-chan *tableState, stop <-chan struct{}) error {
	var (
		nmu     sync.Mutex
		notices []string
	)
	cfg := r.cfg.Copy()
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		s := n.Severity + ":  " + n.Message
		if n.Detail != "" {
			s += "\nDETAIL:  " + n.Detail
		}
		nmu.Lock()
		notices = append(notices, s)
		nmu.Unlock()
	}
	conn, err := Connect(ctx, r.target, cfg)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.Background()) }() // the session's work is done
	pid := conn.PgConn().PID()
	for st := range queue {
		select {
		case <-stop:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		r.mu.Lock()
		limits := r.opts.limitsFor(st.table, r.throttle)
		adaptive := r.opts.adaptiveFor(st.table, r.adaptive)
		r.mu.Unlock()
		if r.between != nil && !adaptive.Off() {
			if adaptive.LatencyTarget > 0 {
				r.startSampler(ctx)
			}
			if limits, err = r.adaptBetweenTables(ctx, st, limits, adaptive, stop); err != nil {
				return fmt.Errorf("adapt the throttle of %s: %w", st.table.Qualified(), err)
			}
		}
		if err := r.setup(work, conn, limits, adaptive); err != nil {
			return fmt.Errorf("set up the session for %s: %w", st.table.Qualified(), err)
		}
		nmu.Lock()
		notices = nil
		nmu.Unlock()
		r.begin(st, pid)
		began := time.Now()
		_, err := conn.Exec(work, r.statement(st.table))
		elapsed := time.Since(began)
		var after int64
		if err == nil {
			err = conn.QueryRow(work, "SELECT pg_relation_size($1::oid)", st.table.OID).Scan(&after)
		}
		nmu.Lock()
		got := append([]string(nil), notices...)
		nmu.Unlock()
		r.end(st, limits, got, elapsed, after, err)
		if err != nil {
			return r.vacuumError(ctx, st.table, err)
		}
	}
	return nil
}

// setup sends the table's throttle as session settings (and maintenance_work_mem if the
// caller wrote it), in one statement.
func (r *Run) setup(ctx context.Context, conn *pgx.Conn, l runnerwire.Limits, a runnerwire.AdaptiveTargets) error {
	names, vals := throttleSettings(r.server, l)
	if r.server.Kind == KindEngineServer {
		an, av := adaptiveSettings(a)
		names, vals = append(names, an...), append(vals, av...)
	}
	values := make([]any, len(vals))
	for i, v := range vals {
		values[i] = v
	}
	if m := r.opts.MaintenanceWorkMem; m != nil {
		names = append(names, "maintenance_work_mem")
		values = append(values, strconv.FormatInt(*m/1024, 10)+"kB")
	}
	var sql strings.Builder
	sql.WriteString("SELECT ")
	for i, n := range names {
		if i > 0 {
			sql.WriteString(", ")
		}
		fmt.Fprintf(&sql, "set_config('%s', $%d, false)", n, i+1)
	}
	_, err := conn.Exec(ctx, sql.String(), values...)
	return err
}

// statement is the VACUUM of t with the run's options.
func (r *Run) statement(t Table) string {
	opts := []string{"VERBOSE"}
	if r.opts.Full {
		opts = append(opts, "FULL")
	}
	if n := r.opts.IndexWorkers; n != nil {
		opts = append(opts, "PARALLEL "+strconv.Itoa(*n))
	}
	if tr := r.opts.Truncate; tr != nil && !r.opts.Full {
		opts = append(opts, "TRUNCATE "+strconv.FormatBool(*tr))
	}
	if rs := r.opts.RingSize; rs != nil {
		opts = append(opts, "BUFFER_USAGE_LIMIT '"+strconv.FormatInt(*rs/1024, 10)+"kB'")
	}
	if r.opts.Resume && !r.opts.Full && r.server.Kind == KindEngineServer {
		opts = append(opts, "RESUME")
	}
	return "VACUUM (" + strings.Join(opts, ", ") + ") " + t.Ident()
}

// vacuumError classifies a failed VACUUM of t.
func (r *Run) vacuumError(ctx context.Context, t Table, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "57014" && ctx.Err() != nil: // query_canceled, by us
			return fmt.Errorf("vacuum %s: %w", t.Qualified(), context.Canceled)
		case pgErr.Code == "53100": // disk_full
			return fmt.Errorf("vacuum %s on %s: %s: %w", t.Qualified(), r.server, oneLine(err), ErrNoSpace)
		}
	}
	return fmt.Errorf("vacuum %s on %s: %w", t.Qualified(), r.server, err)
}

func isCancel(err error) bool { return errors.Is(err, context.Canceled) }

func contains(s []uint32, v uint32) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
