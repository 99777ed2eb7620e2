package runnerwire

import (
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Adaptive is the adaptive throttle of a Throttle: targets for the foreground's latency and
// the standbys' lag, and the floor of the budget (per mille of the static ceiling). In a
// TableOverride only the targets are read: they replace the run's, the floor is the run's.
// The engine server runs it (the vacuum_adaptive_* settings); PostgreSQL cannot.
type Adaptive struct {
	// ForegroundLatency is the target for a percentile of the foreground's latency.
	ForegroundLatency *ForegroundLatency `json:"foregroundLatency,omitempty"`
	// ReplicationLag is the target for the standby furthest behind.
	ReplicationLag *ReplicationLag `json:"replicationLag,omitempty"`
	// FloorPerMille is the smallest budget outside HardStop, 1 to 1000 (100 when absent).
	FloorPerMille *int32 `json:"floorPerMille,omitempty"`
}

// ForegroundLatency keeps a percentile of the foreground's latency under Target.
type ForegroundLatency struct {
	// PercentilePerMille is which percentile, 500 to 999 (990, p99, when absent).
	PercentilePerMille *int32 `json:"percentilePerMille,omitempty"`
	// Target is the latency not to exceed, above 0 and at most 1h.
	Target metav1.Duration `json:"target"`
}

// ReplicationLag keeps the standby furthest behind within MaxBytes of WAL, MaxDelaySeconds
// of replay, or both.
type ReplicationLag struct {
	// MaxBytes is the most WAL left to replay, above 0.
	MaxBytes *resource.Quantity `json:"maxBytes,omitempty"`
	// MaxDelaySeconds is the longest replay delay, 1 to 86400.
	MaxDelaySeconds *int32 `json:"maxDelaySeconds,omitempty"`
}

// The adaptive throttle's defaults and bounds (the API's).
const (
	DefaultAdaptivePercentilePerMille = 990
	DefaultAdaptiveFloorPerMille      = 100
	MaxAdaptiveLatencyTarget          = time.Hour
	MaxAdaptiveLagSeconds             = 86400
)

// AdaptiveTargets is an Adaptive resolved: zero targets are off; Off reports none is set.
type AdaptiveTargets struct {
	LatencyTarget      time.Duration
	PercentilePerMille int
	MaxLagBytes        int64
	MaxLagDelay        time.Duration
	FloorPerMille      int
}

// Off reports whether no target is set (the static throttle alone applies).
func (a AdaptiveTargets) Off() bool {
	return a.LatencyTarget <= 0 && a.MaxLagBytes <= 0 && a.MaxLagDelay <= 0
}

// DefaultAdaptive is no target, with the default percentile and floor.
func DefaultAdaptive() AdaptiveTargets {
	return AdaptiveTargets{PercentilePerMille: DefaultAdaptivePercentilePerMille, FloorPerMille: DefaultAdaptiveFloorPerMille}
}

// resolve returns base with a's targets (and, unless override, its floor) replacing
// base's, checking each range under prefix. A target a leaves out is kept from base.
func (a *Adaptive) resolve(errs *fieldErrors, prefix string, base AdaptiveTargets, override bool) AdaptiveTargets {
	if a == nil {
		return base
	}
	out := base
	if f := a.ForegroundLatency; f != nil {
		out.LatencyTarget = f.Target.Duration
		if out.LatencyTarget <= 0 || out.LatencyTarget > MaxAdaptiveLatencyTarget {
			errs.add(prefix+".foregroundLatency.target", "must be above 0 and at most 1h, got %s", out.LatencyTarget)
		}
		out.PercentilePerMille = int(intIn(errs, prefix+".foregroundLatency.percentilePerMille", f.PercentilePerMille,
			DefaultAdaptivePercentilePerMille, 500, 999))
	}
	if l := a.ReplicationLag; l != nil {
		if l.MaxBytes == nil && l.MaxDelaySeconds == nil {
			errs.add(prefix+".replicationLag", "must set maxBytes, maxDelaySeconds or both")
		}
		if l.MaxBytes != nil {
			out.MaxLagBytes = l.MaxBytes.Value()
			if l.MaxBytes.Sign() <= 0 {
				errs.add(prefix+".replicationLag.maxBytes", "must be above 0, got %s", l.MaxBytes)
			}
		}
		if l.MaxDelaySeconds != nil {
			out.MaxLagDelay = time.Duration(intIn(errs, prefix+".replicationLag.maxDelaySeconds", l.MaxDelaySeconds, 0, 1, MaxAdaptiveLagSeconds)) * time.Second
		}
	}
	if a.ForegroundLatency == nil && a.ReplicationLag == nil {
		errs.add(prefix, "must set foregroundLatency, replicationLag or both")
	}
	if a.FloorPerMille != nil {
		if override {
			errs.add(prefix+".floorPerMille", "a table override carries only the targets; the floor is the run's")
		} else {
			out.FloorPerMille = int(intIn(errs, prefix+".floorPerMille", a.FloorPerMille, DefaultAdaptiveFloorPerMille, 1, 1000))
		}
	}
	return out
}

// AdaptiveProgress is what the engine server reports of a run's adaptive throttle: the
// binding signal and budget now (of the running table bound tightest), and the time spent
// bound by each binding over the run, in seconds. Absent while no target is set.
type AdaptiveProgress struct {
	// Binding is ForegroundLatency, ReplicationLag, Ceiling, Floor or HardStop.
	Binding string `json:"binding"`
	// BudgetPerMille is the rate now in thousandths of the static ceiling.
	BudgetPerMille int32 `json:"budgetPerMille"`
	// BoundSeconds is the time bound by each binding, by its name.
	BoundSeconds map[string]float64 `json:"boundSeconds"`
}

// AdaptiveBindings are the bindings, in the order the server's progress columns give them.
var AdaptiveBindings = []string{"ForegroundLatency", "ReplicationLag", "Ceiling", "Floor", "HardStop"}
