package online

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// ErrUnsupportedServer is a server this package cannot vacuum yet (the engine server, until
// its SQL surface exists).
var ErrUnsupportedServer = errors.New("unsupported server")

// ErrNoSpace is a VACUUM FULL that ran out of disk space on the server (SQLSTATE 53100).
var ErrNoSpace = errors.New("no space left on the server")

// Options says what to vacuum and how. Pointer fields are the ones the caller may leave
// unwritten: those are not sent to the server, which then uses its own setting.
type Options struct {
	// Full runs VACUUM (FULL) instead of a lazy VACUUM.
	Full bool
	// Tables are the tables to vacuum, in this order (names as to_regclass reads them);
	// empty means every table of pg_stat_user_tables, biggest first.
	Tables []string
	// Throttle is the run's cost throttle, sent as session settings before each table.
	// Its byte-rate limits must be 0 on PostgreSQL.
	Throttle runnerwire.Limits
	// TableThrottles override Throttle for single tables (by name or schema.name).
	TableThrottles map[string]runnerwire.Limits
	// Adaptive is the run's adaptive throttle, sent as the vacuum_adaptive_* settings before
	// each table (the engine server only); TableAdaptive overrides it for single tables.
	Adaptive      runnerwire.AdaptiveTargets
	TableAdaptive map[string]runnerwire.AdaptiveTargets
	// Parallelism is the number of sessions vacuuming at once (vacuumdb --jobs), at least 1.
	Parallelism int
	// IndexWorkers becomes PARALLEL n (lazy only).
	IndexWorkers *int
	// MaintenanceWorkMem (bytes) becomes maintenance_work_mem.
	MaintenanceWorkMem *int64
	// RingSize (bytes) becomes BUFFER_USAGE_LIMIT (PostgreSQL 16 and later).
	RingSize *int64
	// Truncate becomes TRUNCATE true|false (lazy).
	Truncate *bool
	// MinDeadTuplePercent skips tables whose dead share (n_dead_tup of n_live_tup +
	// n_dead_tup) is below it; 0 skips none.
	MinDeadTuplePercent int
	// OnProgress, when set, is called with every progress poll (once a second).
	OnProgress func(runnerwire.Progress)
	// PollInterval is how often progress is polled (default one second).
	PollInterval time.Duration
	// Resume adds RESUME to each lazy VACUUM on the engine server (continue from the saved
	// position); PostgreSQL cannot resume, its tables start at block 0.
	Resume bool
	// SystemIdentifier, when set, is the server the run was started for: a server whose
	// pg_control_system() says otherwise is refused with ErrOtherServer before any table
	// is touched.
	SystemIdentifier string
}

// Check returns the fields of o that server cannot honour, one *FieldError each (joined),
// or nil. It is called before any table is touched.
func Check(server Server, o Options) error {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	byteRates(server, o.Throttle, "throttle", add)
	names := make([]string, 0, len(o.TableThrottles))
	for n := range o.TableThrottles {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		byteRates(server, o.TableThrottles[n], fmt.Sprintf("tableOverrides[%s].throttle", n), add)
	}
	checkAdaptive(server, o.Adaptive, o.Throttle, "throttle.adaptive", add)
	names = names[:0]
	for n := range o.TableAdaptive {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		l := o.Throttle
		if tl, ok := o.TableThrottles[n]; ok {
			l = tl
		}
		checkAdaptive(server, o.TableAdaptive[n], l, fmt.Sprintf("tableOverrides[%s].throttle.adaptive", n), add)
	}
	if o.RingSize != nil && server.Kind == KindPostgreSQL && server.Major < 16 {
		add("ringSize", "becomes BUFFER_USAGE_LIMIT, which needs PostgreSQL 16 or later; the server is %s", server)
	}
	if o.IndexWorkers != nil && o.Full {
		add("indexWorkers", "becomes PARALLEL, which %s's VACUUM FULL does not take", server)
	}
	if o.Parallelism < 1 {
		add("parallelism", "must be at least 1, got %d", o.Parallelism)
	}
	return errors.Join(errs...)
}

// CheckThrottle returns the fields of a throttle change that server cannot honour.
func CheckThrottle(server Server, l runnerwire.Limits) error {
	var errs []error
	byteRates(server, l, "throttle", func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	})
	return errors.Join(errs...)
}

// byteRates refuses the byte-rate limits that PostgreSQL has no setting for.
func byteRates(server Server, l runnerwire.Limits, prefix string, add func(string, string, ...any)) {
	if server.Kind != KindPostgreSQL {
		return
	}
	for _, r := range []struct {
		field string
		v     int64
	}{
		{"maxReadBytesPerSecond", l.MaxReadBytesPerSecond},
		{"maxWriteBytesPerSecond", l.MaxWriteBytesPerSecond},
		{"maxWALBytesPerSecond", l.MaxWALBytesPerSecond},
	} {
		if r.v != 0 {
			add(prefix+"."+r.field, "byte-rate limits are honoured by the engine server only; %s has no such setting (use the cost throttle)", server)
		}
	}
}

// adaptiveFor returns the adaptive throttle of table (name or schema.name) given the run's.
func (o Options) adaptiveFor(t Table, run runnerwire.AdaptiveTargets) runnerwire.AdaptiveTargets {
	if a, ok := o.TableAdaptive[t.Qualified()]; ok {
		return a
	}
	if a, ok := o.TableAdaptive[t.Name]; ok {
		return a
	}
	return run
}

// limitsFor returns the throttle of table (name or schema.name) given the run's.
func (o Options) limitsFor(t Table, run runnerwire.Limits) runnerwire.Limits {
	if l, ok := o.TableThrottles[t.Qualified()]; ok {
		return l
	}
	if l, ok := o.TableThrottles[t.Name]; ok {
		return l
	}
	return run
}

// checkAdaptive refuses an adaptive throttle with no static ceiling to scale (the engine
// server would refuse the VACUUM with 22023; on PostgreSQL, which adapts between tables by
// the cost limit, the cost throttle must be on).
func checkAdaptive(server Server, a runnerwire.AdaptiveTargets, l runnerwire.Limits, field string, add func(string, string, ...any)) {
	if a.Off() {
		return
	}
	if server.Kind == KindPostgreSQL && l.CostDelay <= 0 {
		// PostgreSQL adapts between tables by the cost limit: it needs the cost throttle on.
		add(field, "needs a static ceiling to scale: costDelay above 0 (%s adapts the cost limit between tables)", server)
		return
	}
	if l.CostDelay <= 0 && l.MaxReadBytesPerSecond <= 0 && l.MaxWriteBytesPerSecond <= 0 && l.MaxWALBytesPerSecond <= 0 {
		add(field, "needs a static ceiling to scale: costDelay above 0 or a max*BytesPerSecond")
	}
}

// adaptiveSettings are the engine server's vacuum_adaptive_* settings for a, with their
// values (0 turns a target off, so a session reused for the next table keeps nothing).
func adaptiveSettings(a runnerwire.AdaptiveTargets) ([]string, []string) {
	perMille, floor := a.PercentilePerMille, a.FloorPerMille
	if perMille == 0 {
		perMille = runnerwire.DefaultAdaptivePercentilePerMille
	}
	if floor == 0 {
		floor = runnerwire.DefaultAdaptiveFloorPerMille
	}
	return []string{"vacuum_adaptive_latency_target", "vacuum_adaptive_latency_percentile_per_mille",
			"vacuum_adaptive_max_lag_bytes", "vacuum_adaptive_max_lag_seconds", "vacuum_adaptive_floor_per_mille"},
		[]string{strconv.FormatInt(a.LatencyTarget.Microseconds(), 10) + "us", strconv.Itoa(perMille),
			strconv.FormatInt(a.MaxLagBytes, 10), strconv.FormatInt(a.MaxLagDelay.Milliseconds(), 10) + "ms", strconv.Itoa(floor)}
}
