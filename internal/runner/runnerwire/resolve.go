package runnerwire

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Defaults and ranges of a RunSpec. The CRD's markers state the same numbers; the operator's
// tests check that the two agree.
const (
	DefaultDataDir = "/data"

	DefaultCostDelay     = 2 * time.Millisecond
	MaxCostDelay         = 100 * time.Millisecond
	DefaultCostLimit     = 200
	MinCostLimit         = 1
	MaxCostLimit         = 10000
	DefaultPageHitCost   = 1
	DefaultPageMissCost  = 2
	DefaultPageDirtyCost = 20
	MaxPageCost          = 10000

	DefaultRingSize       = 2 << 20
	MinRingSize           = 128 << 10
	MaxRingSize           = 16 << 30
	DefaultBufferPoolSize = 128 << 20
	MinBufferPoolSize     = 1 << 20
	MaxBufferPoolSize     = 1 << 40

	DefaultParallelism = 1
	MinParallelism     = 1
	MaxParallelism     = 64
	MaxIndexWorkers    = 64

	DefaultMaintenanceWorkMem = 64 << 20
	MinMaintenanceWorkMem     = 1 << 20
	MaxMaintenanceWorkMem     = 1 << 40

	MaxDeadTuplePercent = 100
	MaxTableNameLength  = 63

	// MemoryOverhead is what the runner needs beyond its buffer pool and work memory.
	MemoryOverhead = 64 << 20
)

// Limits is a Throttle with every field resolved. Byte rates of 0 mean no limit. Its fields,
// their order and their types are those of the engine's throttle.Settings, so the runner
// converts one into the other with a Go conversion and the compiler keeps the two in step;
// TestThrottleLayersDeclareTheSameFields in package runner holds every layer to one list.
type Limits struct {
	CostDelay              time.Duration
	CostLimit              int
	PageHitCost            int
	PageMissCost           int
	PageDirtyCost          int
	MaxReadBytesPerSecond  int64
	MaxWriteBytesPerSecond int64
	MaxWALBytesPerSecond   int64
}

// DefaultLimits returns PostgreSQL 14+'s cost defaults and no byte-rate limits.
func DefaultLimits() Limits {
	return Limits{
		CostDelay:     DefaultCostDelay,
		CostLimit:     DefaultCostLimit,
		PageHitCost:   DefaultPageHitCost,
		PageMissCost:  DefaultPageMissCost,
		PageDirtyCost: DefaultPageDirtyCost,
	}
}

// Resolved is a RunSpec with defaults applied and every value checked.
type Resolved struct {
	DataDir             string
	Mode                Mode
	Tables              []string
	Throttle            Limits
	RingSize            int64
	BufferPoolSize      int64
	Parallelism         int
	IndexWorkers        int
	MaintenanceWorkMem  int64
	Truncate            bool
	MinDeadTuplePercent int
	// TableThrottles holds the limits of each table that has an override.
	TableThrottles map[string]Limits
	// Adaptive is the run's adaptive throttle (Off when none); TableAdaptive holds each
	// table whose override sets adaptive targets.
	Adaptive      AdaptiveTargets
	TableAdaptive map[string]AdaptiveTargets
	// RunID and AllowCrashRecovery are the RunSpec's, unchanged.
	RunID              string
	AllowCrashRecovery bool
	// StopAt is when the run stops (zero = no window); Resume and FullPagesPerSecond are
	// the RunSpec's.
	StopAt             time.Time
	Resume             bool
	FullPagesPerSecond int64
}

// LimitsFor returns the limits that apply to table: its override, or the run's.
func (r Resolved) LimitsFor(table string) Limits {
	if l, ok := r.TableThrottles[table]; ok {
		return l
	}
	return r.Throttle
}

// FieldError says which input field is wrong and why. Resolve joins them with errors.Join;
// use errors.As to find them.
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

// fieldErrors collects FieldErrors.
type fieldErrors []error

func (fe *fieldErrors) add(field, format string, args ...any) {
	*fe = append(*fe, &FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

// ParseMode returns the Mode named by s, case-insensitively; "" is Lazy.
func ParseMode(s string) (Mode, error) {
	switch strings.ToLower(s) {
	case "", "lazy":
		return ModeLazy, nil
	case "full":
		return ModeFull, nil
	}
	return "", &FieldError{Field: "mode", Message: fmt.Sprintf("must be Lazy or Full, got %q", s)}
}

// Resolve applies the defaults (Lazy, throttle 2ms/200/1/2/20 with no byte limits, ring 2Mi,
// buffer pool 128Mi, parallelism 1, index workers 0, maintenance memory 64Mi, truncate on,
// no dead-tuple threshold) and checks every range. The error joins one *FieldError per
// problem.
func (s RunSpec) Resolve() (Resolved, error) {
	var errs fieldErrors
	r := Resolved{DataDir: s.DataDir, Truncate: true, TableThrottles: map[string]Limits{}, TableAdaptive: map[string]AdaptiveTargets{},
		RunID: s.RunID, AllowCrashRecovery: s.AllowCrashRecovery, Resume: s.Resume, FullPagesPerSecond: s.FullPagesPerSecond}
	if s.StopAt != nil {
		r.StopAt = s.StopAt.Time
	}
	if s.FullPagesPerSecond < 0 {
		errs.add("fullPagesPerSecond", "must not be negative, got %d", s.FullPagesPerSecond)
	}
	switch {
	case s.Server != nil && s.DataDir != "":
		errs.add("dataDir", "a run has a data directory or a server, not both")
	case s.Server != nil && s.BufferPoolSize != nil:
		errs.add("bufferPoolSize", "is the runner's own buffer pool, which a server target does not use")
	case s.Server != nil:
		checkServer(&errs, *s.Server)
	case s.DataDir == "":
		errs.add("dataDir", "required")
	}
	mode, err := ParseMode(string(s.Mode))
	if err != nil {
		errs = append(errs, err)
	}
	r.Mode = mode
	for i, t := range s.Tables {
		checkTableName(&errs, fmt.Sprintf("tables[%d]", i), t)
	}
	r.Tables = append([]string(nil), s.Tables...)
	r.Throttle = s.Throttle.resolve(&errs, "throttle", DefaultLimits())
	r.Adaptive = DefaultAdaptive()
	if s.Throttle != nil {
		r.Adaptive = s.Throttle.Adaptive.resolve(&errs, "throttle.adaptive", r.Adaptive, false)
	}
	if s.Server == nil && !r.Adaptive.Off() {
		errs.add("throttle.adaptive", "needs a server target: an offline run has no foreground or standby to adapt to")
	}
	r.RingSize = quantityIn(&errs, "ringSize", s.RingSize, DefaultRingSize, MinRingSize, MaxRingSize, true)
	r.BufferPoolSize = quantityIn(&errs, "bufferPoolSize", s.BufferPoolSize, DefaultBufferPoolSize,
		MinBufferPoolSize, MaxBufferPoolSize, false)
	r.Parallelism = int(intIn(&errs, "parallelism", s.Parallelism, DefaultParallelism, MinParallelism, MaxParallelism))
	r.IndexWorkers = int(intIn(&errs, "indexWorkers", s.IndexWorkers, 0, 0, MaxIndexWorkers))
	r.MaintenanceWorkMem = quantityIn(&errs, "maintenanceWorkMem", s.MaintenanceWorkMem,
		DefaultMaintenanceWorkMem, MinMaintenanceWorkMem, MaxMaintenanceWorkMem, false)
	if s.Truncate != nil {
		r.Truncate = *s.Truncate
	}
	r.MinDeadTuplePercent = int(intIn(&errs, "minDeadTuplePercent", s.MinDeadTuplePercent, 0, 0, MaxDeadTuplePercent))
	for i, o := range s.TableOverrides {
		field := fmt.Sprintf("tableOverrides[%d]", i)
		checkTableName(&errs, field+".table", o.Table)
		if _, dup := r.TableThrottles[o.Table]; dup {
			errs.add(field+".table", "table %q already has an override", o.Table)
		}
		r.TableThrottles[o.Table] = o.Throttle.resolve(&errs, field+".throttle", r.Throttle)
		if o.Throttle.Adaptive != nil {
			if s.Server == nil {
				errs.add(field+".throttle.adaptive", "needs a server target: an offline run has no foreground or standby to adapt to")
			}
			r.TableAdaptive[o.Table] = o.Throttle.Adaptive.resolve(&errs, field+".throttle.adaptive", r.Adaptive, true)
		}
	}
	return r, errors.Join(errs...)
}

// Over returns base with the fields set in t replacing base's, or an error joining one
// *FieldError per out-of-range field (named under prefix, e.g. "throttle").
func (t *Throttle) Over(base Limits, prefix string) (Limits, error) {
	var errs fieldErrors
	l := t.resolve(&errs, prefix, base)
	return l, errors.Join(errs...)
}

// AdaptiveOver returns base with t's adaptive targets and floor replacing base's (base
// unchanged when t sets no adaptive), or an error joining one *FieldError per bad field.
func (t *Throttle) AdaptiveOver(base AdaptiveTargets, prefix string) (AdaptiveTargets, error) {
	if t == nil {
		return base, nil
	}
	var errs fieldErrors
	a := t.Adaptive.resolve(&errs, prefix+".adaptive", base, false)
	return a, errors.Join(errs...)
}

// AdaptiveFor returns the adaptive throttle that applies to table: its override's targets,
// or the run's.
func (r Resolved) AdaptiveFor(table string) AdaptiveTargets {
	if a, ok := r.TableAdaptive[table]; ok {
		return a
	}
	return r.Adaptive
}

func (t *Throttle) resolve(errs *fieldErrors, prefix string, base Limits) Limits {
	if t == nil {
		return base
	}
	l := base
	if t.CostDelay != nil {
		l.CostDelay = t.CostDelay.Duration
		if l.CostDelay < 0 || l.CostDelay > MaxCostDelay {
			errs.add(prefix+".costDelay", "must be between 0 and 100ms, got %s", l.CostDelay)
		}
	}
	l.CostLimit = int(intIn(errs, prefix+".costLimit", t.CostLimit, int64(base.CostLimit), MinCostLimit, MaxCostLimit))
	l.PageHitCost = int(intIn(errs, prefix+".pageHitCost", t.PageHitCost, int64(base.PageHitCost), 0, MaxPageCost))
	l.PageMissCost = int(intIn(errs, prefix+".pageMissCost", t.PageMissCost, int64(base.PageMissCost), 0, MaxPageCost))
	l.PageDirtyCost = int(intIn(errs, prefix+".pageDirtyCost", t.PageDirtyCost, int64(base.PageDirtyCost), 0, MaxPageCost))
	l.MaxReadBytesPerSecond = rate(errs, prefix+".maxReadBytesPerSecond", t.MaxReadBytesPerSecond, base.MaxReadBytesPerSecond)
	l.MaxWriteBytesPerSecond = rate(errs, prefix+".maxWriteBytesPerSecond", t.MaxWriteBytesPerSecond, base.MaxWriteBytesPerSecond)
	l.MaxWALBytesPerSecond = rate(errs, prefix+".maxWALBytesPerSecond", t.MaxWALBytesPerSecond, base.MaxWALBytesPerSecond)
	return l
}

// Throttle returns l as a Throttle with every field set.
func (l Limits) Throttle() Throttle {
	q := func(v int64) *resource.Quantity { return resource.NewQuantity(v, resource.BinarySI) }
	return Throttle{
		CostDelay:              durationPtr(l.CostDelay),
		CostLimit:              ptr.To(int32(l.CostLimit)),
		PageHitCost:            ptr.To(int32(l.PageHitCost)),
		PageMissCost:           ptr.To(int32(l.PageMissCost)),
		PageDirtyCost:          ptr.To(int32(l.PageDirtyCost)),
		MaxReadBytesPerSecond:  q(l.MaxReadBytesPerSecond),
		MaxWriteBytesPerSecond: q(l.MaxWriteBytesPerSecond),
		MaxWALBytesPerSecond:   q(l.MaxWALBytesPerSecond),
	}
}

// MemoryRequirement is the memory a runner needs for r: its buffer pool, each parallel
// worker's maintenance memory, and MemoryOverhead. The runner refuses to start under a
// smaller cgroup limit; the operator requests and limits exactly this much by default.
func MemoryRequirement(r Resolved) int64 {
	return r.BufferPoolSize + int64(r.Parallelism)*r.MaintenanceWorkMem + MemoryOverhead
}

// checkServer checks what a server target needs before connecting.
func checkServer(errs *fieldErrors, t ServerTarget) {
	if t.Address == "" {
		errs.add("server.address", "required")
	}
	if t.Database == "" {
		errs.add("server.database", "required")
	}
	switch t.SSLMode {
	case "", "disable", "require", "verify-ca", "verify-full":
	default:
		errs.add("server.sslMode", "must be disable, require, verify-ca or verify-full, got %q", t.SSLMode)
	}
}

func checkTableName(errs *fieldErrors, field, name string) {
	switch {
	case name == "":
		errs.add(field, "must not be empty")
	case len(name) > MaxTableNameLength:
		errs.add(field, "must be at most %d characters, got %d", MaxTableNameLength, len(name))
	}
}

func intIn(errs *fieldErrors, field string, v *int32, def, lo, hi int64) int64 {
	if v == nil {
		return def
	}
	if int64(*v) < lo || int64(*v) > hi {
		errs.add(field, "must be between %d and %d, got %d", lo, hi, *v)
	}
	return int64(*v)
}

// quantityIn reads a byte size that must lie in [lo, hi], or be 0 when zeroOK.
func quantityIn(errs *fieldErrors, field string, q *resource.Quantity, def, lo, hi int64, zeroOK bool) int64 {
	if q == nil {
		return def
	}
	v, ok := q.AsInt64()
	switch {
	case !ok:
		errs.add(field, "must be a whole number of bytes, got %s", q.String())
	case v == 0 && zeroOK:
	case v < lo || v > hi:
		zero := ""
		if zeroOK {
			zero = "0 or "
		}
		errs.add(field, "must be %sbetween %s and %s, got %s", zero, quantityString(lo), quantityString(hi), q.String())
	}
	return v
}

func rate(errs *fieldErrors, field string, q *resource.Quantity, def int64) int64 {
	if q == nil {
		return def
	}
	v, ok := q.AsInt64()
	if !ok || v < 0 {
		errs.add(field, "must be a whole, non-negative number of bytes per second (0 = no limit), got %s", q.String())
	}
	return v
}

func durationPtr(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

// quantityString writes a byte count the way a CRD user writes it ("128Ki", "16Gi").
func quantityString(v int64) string { return resource.NewQuantity(v, resource.BinarySI).String() }
