package sql

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum/throttle"
	"github.com/vacuumops/vacuum-operator/internal/server/pgerr"
)

// planAnalyze plans ANALYZE [VERBOSE] [table, ...]: the tables must exist; the planner
// keeps no statistics, so there is nothing to gather (docs/sql.md).
func (s *Session) planAnalyze(vs *pg.VacuumStmt) (*plan, error) {
	for _, r := range vs.Rels {
		vr := r.GetVacuumRelation()
		if vr == nil || vr.Relation == nil {
			return nil, pgerr.Unsupported("this ANALYZE target")
		}
		if _, err := s.tableRef(vr.Relation); err != nil {
			return nil, err
		}
	}
	return &plan{noTx: true, run: func(*execCtx) (*Result, error) { return &Result{Tag: "ANALYZE"}, nil }}, nil
}

// planVacuum plans VACUUM [FULL] [(options)] [table, ...]: the engine's lazy vacuum or
// VACUUM FULL inside this process, sharing the buffer pool with the foreground, throttled
// by the session's vacuum_cost_* and byte-rate settings. VERBOSE sends the report as INFO.
func (s *Session) planVacuum(vs *pg.VacuumStmt) (*plan, error) {
	if !vs.IsVacuumcmd {
		return s.planAnalyze(vs)
	}
	verbose := false
	opts := vacuum.Options{}
	for _, o := range vs.Options {
		d := o.GetDefElem()
		if d == nil {
			return nil, pgerr.Unsupported("this VACUUM option")
		}
		on := d.Arg == nil || defBool(d.Arg)
		switch d.Defname {
		case "verbose":
			verbose = on
		case "full":
			opts.Full = on
		case "truncate":
			opts.DisableTruncate = !on
		case "skip_locked":
			opts.NoWait = on
		case "resume":
			// The engine's own: continue each table's lazy vacuum from its saved position.
			opts.Resume = on
		case "parallel":
			n, err := defInt(d.Arg)
			if err != nil || n < 0 || n > 1024 {
				return nil, pgerr.New(pgerr.InvalidParameterValue, "parallel workers for vacuum must be between 0 and 1024")
			}
			opts.IndexWorkers = n
		case "buffer_usage_limit":
			v, err := memoryBytes(defString(d.Arg), 1024)
			if err != nil {
				return nil, err
			}
			opts.RingSize = v
		case "index_cleanup":
			if v := strings.ToLower(defString(d.Arg)); v != "" && v != "on" && v != "auto" && v != "true" {
				return nil, pgerr.Unsupported("INDEX_CLEANUP " + v + " (indexes are always cleaned)")
			}
		case "analyze":
			// The engine's planner uses no statistics: the ANALYZE part has nothing to do.
		default:
			return nil, pgerr.Unsupported("the VACUUM option " + strings.ToUpper(d.Defname))
		}
	}
	var tables []string
	for _, r := range vs.Rels {
		vr := r.GetVacuumRelation()
		if vr == nil || vr.Relation == nil {
			return nil, pgerr.Unsupported("this VACUUM target")
		}
		if len(vr.VaCols) > 0 {
			return nil, pgerr.Unsupported("VACUUM of a column list (that is ANALYZE's)")
		}
		ti, err := s.tableRef(vr.Relation)
		if err != nil {
			return nil, err
		}
		tables = append(tables, ti.Name)
	}
	return &plan{noTx: true, run: func(x *execCtx) (*Result, error) {
		if s.state != txIdle || s.tx != nil {
			return nil, pgerr.New(pgerr.ActiveTransaction, "VACUUM cannot run inside a transaction block")
		}
		if err := s.vacuumSettings(&opts); err != nil {
			return nil, err
		}
		targets, err := s.adaptiveSettingsOf()
		if err != nil {
			return nil, err
		}
		if targets.on() && !hasCeiling(*opts.Throttle) {
			return nil, errNoCeiling()
		}
		names := tables
		if len(names) == 0 {
			all, err := s.db.Tables()
			if err != nil {
				return nil, engineError(err)
			}
			for _, t := range all {
				names = append(names, t.Name)
			}
		}
		opts.ThrottleOptions.WALGate = s.vacuums.walGate(s.db)
		opts.ThreadPriority = s.vacuums.threadPriority()
		run, err := vacuum.NewBatch(opts)
		if err != nil {
			return nil, vacuumError(x, "", err)
		}
		if err := run.SetWALLagBound(walHoldAt(targets.lagBytes)); err != nil { // walgate.go
			return nil, vacuumError(x, "", err)
		}
		rv := &runningVacuum{pid: s.pid, run: run, full: opts.Full, mwm: opts.MaintenanceWorkMem}
		rv.adapt = newAdaptiveRun(run, targets, *opts.Throttle, s.latency, s.vacuums.replicationLag)
		if logf := s.vacuums.adaptiveLogger(); logf != nil {
			pid := s.pid
			rv.adapt.logf = func(format string, args ...any) {
				logf("adaptive throttle of VACUUM (pid %d): "+format, append([]any{pid}, args...)...)
			}
		}
		steerCtx, stopSteering := context.WithCancel(x.ctx)
		rv.adapt.start(steerCtx)
		defer func() { stopSteering(); rv.adapt.stop() }()
		s.vacuums.add(rv)
		defer s.vacuums.remove(s.pid)
		defer func() { _, err := run.LoweredThreads(); s.vacuums.noteLowering(err) }()
		res := &Result{Tag: "VACUUM"}
		for _, name := range names {
			rep, err := s.vacuumTable(x, rv, name)
			if errors.Is(err, vacuum.ErrVacuumInProgress) || opts.NoWait && errors.Is(err, engine.ErrTableInUse) {
				res.Notices = append(res.Notices, warning("55P03", fmt.Sprintf("skipping vacuum of \"%s\" --- lock not available", name)))
				continue
			}
			if err != nil {
				return nil, vacuumError(x, name, err)
			}
			if verbose {
				var b strings.Builder
				if err := rep.Format(&b); err != nil {
					return nil, engineError(err)
				}
				n := notice("00000", "%s", strings.TrimRight(b.String(), "\n"))
				n.Severity = "INFO"
				res.Notices = append(res.Notices, n)
			}
		}
		return res, nil
	}}, nil
}

// vacuumTable vacuums one table in the statement's run (registered for the progress views
// from before its vacuum lock is taken, so a waiting VACUUM shows as initializing).
func (s *Session) vacuumTable(x *execCtx, rv *runningVacuum, name string) (*vacuum.Report, error) {
	ti, err := s.db.Table(name)
	if err != nil {
		return nil, err
	}
	rv.setTable(name, ti.OID)
	rep, err := s.db.VacuumBatch(x.ctx, rv.run, []string{name})
	if err != nil {
		return nil, err
	}
	for i := len(rep.Tables) - 1; i >= 0; i-- {
		if rep.Tables[i].Table == name {
			s.vacuums.finished(ti.OID, time.Now())
			return rep.Tables[i], nil
		}
	}
	return nil, fmt.Errorf("vacuum of %q gave no report", name)
}

func vacuumError(x *execCtx, table string, err error) error {
	switch {
	case x.ctx.Err() != nil:
		return x.ctx.Err()
	case errors.Is(err, vacuum.ErrNoSpace):
		return pgerr.Wrap(err, "53100", "could not extend relation \"%s\": %v", table, err)
	case errors.Is(err, vacuum.ErrInvalidOptions), errors.Is(err, throttle.ErrInvalidSettings):
		return pgerr.Wrap(err, pgerr.InvalidParameterValue, "%v", err)
	case errors.Is(err, engine.ErrNoSuchTable):
		return pgerr.Wrap(err, pgerr.UndefinedTable, "relation \"%s\" does not exist", table)
	}
	return engineError(err)
}

// vacuumSettings fills the throttle and memory of opts from the session's settings, as
// PostgreSQL's manual VACUUM reads them (vacuum_cost_delay 0 = not throttled).
func (s *Session) vacuumSettings(opts *vacuum.Options) error {
	get := func(name string) string { v, _ := s.settings.get(name); return v }
	delay, err := durationSetting("vacuum_cost_delay", get("vacuum_cost_delay"))
	if err != nil {
		return err
	}
	ints := map[string]*int{}
	th := throttle.Settings{CostDelay: delay}
	ints["vacuum_cost_limit"] = &th.CostLimit
	ints["vacuum_cost_page_hit"] = &th.PageHitCost
	ints["vacuum_cost_page_miss"] = &th.PageMissCost
	ints["vacuum_cost_page_dirty"] = &th.PageDirtyCost
	for name, dst := range ints {
		v, err := strconv.Atoi(get(name))
		if err != nil || v < 0 {
			return pgerr.New(pgerr.InvalidParameterValue, "invalid value for parameter \"%s\": \"%s\"", name, get(name))
		}
		*dst = v
	}
	rates := map[string]*int64{"vacuum_max_read_rate": &th.MaxReadBytesPerSecond,
		"vacuum_max_write_rate": &th.MaxWriteBytesPerSecond, "vacuum_max_wal_rate": &th.MaxWALBytesPerSecond}
	for name, dst := range rates {
		v, err := memoryBytes(get(name), 1)
		if err != nil {
			return err
		}
		*dst = v
	}
	opts.Throttle = &th
	mwm, err := memoryBytes(get("maintenance_work_mem"), 1024)
	if err != nil {
		return err
	}
	opts.MaintenanceWorkMem = mwm
	if opts.RingSize == 0 {
		ring, err := memoryBytes(get("vacuum_buffer_usage_limit"), 1024)
		if err != nil {
			return err
		}
		opts.RingSize = ring
	}
	if opts.RingSize != 0 && opts.RingSize < 128<<10 {
		return pgerr.New(pgerr.InvalidParameterValue, "BUFFER_USAGE_LIMIT option must be 0 or between 128 kB and 16777216 kB")
	}
	return nil
}

// memoryBytes parses a PostgreSQL memory value ("64MB", "256kB", "1GB", or a number in the
// setting's base unit, which is unit bytes).
func memoryBytes(v string, unit int64) (int64, error) {
	s := strings.TrimSpace(v)
	mult := unit
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"TB", 1 << 40}, {"GB", 1 << 30}, {"MB", 1 << 20}, {"kB", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.m
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, pgerr.New(pgerr.InvalidParameterValue, "invalid memory value: \"%s\" (valid units are \"B\", \"kB\", \"MB\", \"GB\" and \"TB\")", v)
	}
	return n * mult, nil
}

// durationSetting parses a PostgreSQL time value in milliseconds ("2", "2ms", "1s").
func durationSetting(name, v string) (time.Duration, error) {
	s := strings.TrimSpace(v)
	if n, err := strconv.ParseFloat(s, 64); err == nil && n >= 0 {
		return time.Duration(n * float64(time.Millisecond)), nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return d, nil
	}
	return 0, pgerr.New(pgerr.InvalidParameterValue, "invalid value for parameter \"%s\": \"%s\"", name, v)
}

func defInt(n *pg.Node) (int, error) {
	if n == nil {
		return 0, errors.New("missing value")
	}
	switch v := n.Node.(type) {
	case *pg.Node_Integer:
		return int(v.Integer.Ival), nil
	case *pg.Node_String_:
		return strconv.Atoi(v.String_.Sval)
	}
	return 0, errors.New("not an integer")
}

func defString(n *pg.Node) string {
	if n == nil {
		return ""
	}
	switch v := n.Node.(type) {
	case *pg.Node_String_:
		return v.String_.Sval
	case *pg.Node_Integer:
		return strconv.Itoa(int(v.Integer.Ival))
	case *pg.Node_Boolean:
		return strconv.FormatBool(v.Boolean.Boolval)
	}
	return ""
}
