package controllers

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// runSpecFor turns a run's spec into the runner's wire RunSpec, for a volume mounted (with its
// sub-path) at runnerwire.DefaultDataDir. Every field is carried over as the API server stored it,
// defaults included, so the pod's args say exactly what the run says.
func runSpecFor(s *vacuumv1alpha1.VacuumSpec) runnerwire.RunSpec {
	if s.Target.Server != nil {
		return onlineRunSpecFor(s)
	}
	out := runnerwire.RunSpec{
		DataDir:             runnerwire.DefaultDataDir,
		Mode:                runnerwire.Mode(s.Mode),
		Tables:              append([]string(nil), s.Target.Tables...),
		Throttle:            wireThrottle(&s.Throttle),
		RingSize:            s.RingSize,
		BufferPoolSize:      s.BufferPoolSize,
		Parallelism:         ptr.To(s.Parallelism),
		IndexWorkers:        ptr.To(s.IndexWorkers),
		MaintenanceWorkMem:  s.MaintenanceWorkMem,
		Truncate:            s.Truncate,
		MinDeadTuplePercent: ptr.To(s.MinDeadTuplePercent),
		AllowCrashRecovery:  s.AllowCrashRecovery,
	}
	// A volume target's defaults for the fields the CRD no longer defaults (their default
	// depends on the target's form).
	if out.RingSize == nil {
		out.RingSize = resource.NewQuantity(runnerwire.DefaultRingSize, resource.BinarySI)
	}
	if out.BufferPoolSize == nil {
		out.BufferPoolSize = resource.NewQuantity(runnerwire.DefaultBufferPoolSize, resource.BinarySI)
	}
	if out.Truncate == nil {
		out.Truncate = ptr.To(true)
	}
	finishRunSpec(&out, s)
	return out
}

// onlineRunSpecFor is runSpecFor for a server target, without its address (the caller
// resolves it): only what the user wrote, or what the CRD always fills, reaches the server;
// the server's own settings stand for the rest. A ringSize, truncate or maintenanceWorkMem
// left out is not sent, and indexWorkers is not sent to a Full run, which ignores it.
func onlineRunSpecFor(s *vacuumv1alpha1.VacuumSpec) runnerwire.RunSpec {
	out := runnerwire.RunSpec{
		Server:              &runnerwire.ServerTarget{},
		Mode:                runnerwire.Mode(s.Mode),
		Tables:              append([]string(nil), s.Target.Tables...),
		Throttle:            wireThrottle(&s.Throttle),
		RingSize:            s.RingSize,
		Parallelism:         ptr.To(s.Parallelism),
		MaintenanceWorkMem:  s.MaintenanceWorkMem,
		Truncate:            s.Truncate,
		MinDeadTuplePercent: ptr.To(s.MinDeadTuplePercent),
	}
	if s.Mode != vacuumv1alpha1.VacuumModeFull {
		out.IndexWorkers = ptr.To(s.IndexWorkers)
	}
	finishRunSpec(&out, s)
	return out
}

// finishRunSpec carries what both target forms share.
func finishRunSpec(out *runnerwire.RunSpec, s *vacuumv1alpha1.VacuumSpec) {
	if out.Parallelism != nil && *out.Parallelism == 0 {
		out.Parallelism = nil // a Go client that left it out: the default applies
	}
	for _, o := range s.TableOverrides {
		out.TableOverrides = append(out.TableOverrides, runnerwire.TableOverride{
			Table: o.Table, Throttle: overrideWire(&o.Throttle),
		})
	}
}

// wireThrottle is the body of PUT /throttle for a run's throttle: its limits and its
// adaptive throttle.
func wireThrottle(t *vacuumv1alpha1.Throttle) *runnerwire.Throttle {
	c := t.DeepCopy()
	w := wireLimits(vacuumv1alpha1.ThrottleOverride{CostDelay: c.CostDelay, CostLimit: c.CostLimit,
		PageHitCost: c.PageHitCost, PageMissCost: c.PageMissCost, PageDirtyCost: c.PageDirtyCost,
		MaxReadBytesPerSecond: c.MaxReadBytesPerSecond, MaxWriteBytesPerSecond: c.MaxWriteBytesPerSecond,
		MaxWALBytesPerSecond: c.MaxWALBytesPerSecond})
	if a := c.Adaptive; a != nil {
		w.Adaptive = &runnerwire.Adaptive{FloorPerMille: a.FloorPerMille}
		w.Adaptive.ForegroundLatency, w.Adaptive.ReplicationLag = wireTargets(a.ForegroundLatency, a.ReplicationLag)
	}
	return &w
}

// overrideWire is a table override's throttle on the wire: its limits, and its adaptive
// targets (an override has no floor).
func overrideWire(o *vacuumv1alpha1.ThrottleOverride) runnerwire.Throttle {
	c := o.DeepCopy()
	w := wireLimits(*c)
	if a := c.Adaptive; a != nil {
		w.Adaptive = &runnerwire.Adaptive{}
		w.Adaptive.ForegroundLatency, w.Adaptive.ReplicationLag = wireTargets(a.ForegroundLatency, a.ReplicationLag)
	}
	return w
}

// wireLimits is the static limits of o on the wire (its adaptive targets left out).
// TestThrottleLayersDeclareTheSameFields in package runner fails when a limit is added to
// one layer and not the others; TestWireThrottleCarriesEveryField here, when it is not copied.
func wireLimits(o vacuumv1alpha1.ThrottleOverride) runnerwire.Throttle {
	return runnerwire.Throttle{CostDelay: o.CostDelay, CostLimit: o.CostLimit, PageHitCost: o.PageHitCost,
		PageMissCost: o.PageMissCost, PageDirtyCost: o.PageDirtyCost, MaxReadBytesPerSecond: o.MaxReadBytesPerSecond,
		MaxWriteBytesPerSecond: o.MaxWriteBytesPerSecond, MaxWALBytesPerSecond: o.MaxWALBytesPerSecond}
}

// wireTargets converts the adaptive targets: the API's and the wire's target types have
// the same fields, so these are Go conversions.
func wireTargets(f *vacuumv1alpha1.ForegroundLatencyTarget, l *vacuumv1alpha1.ReplicationLagTarget) (*runnerwire.ForegroundLatency, *runnerwire.ReplicationLag) {
	var wf *runnerwire.ForegroundLatency
	var wl *runnerwire.ReplicationLag
	if f != nil {
		wf = new(runnerwire.ForegroundLatency(*f))
	}
	if l != nil {
		wl = new(runnerwire.ReplicationLag(*l))
	}
	return wf, wl
}

// describeThrottle writes the fields set in a throttle for an event message, in declaration
// order and under their YAML names ("costDelay=2ms costLimit=200 maxWALBytesPerSecond=8Mi").
// It names no field, so a new limit shows up without an edit here.
func describeThrottle(t *vacuumv1alpha1.Throttle) string {
	var parts []string
	v := reflect.ValueOf(t).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		if f.Kind() == reflect.Pointer && f.IsNil() {
			continue
		}
		name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
		val, err := json.Marshal(f.Interface()) // as the user wrote it: "2ms", 200, "8Mi"
		if err != nil {
			continue
		}
		parts = append(parts, name+"="+strings.Trim(string(val), `"`))
	}
	return strings.Join(parts, " ")
}

// resolvedSpec checks a run's spec with the runner's own rules and returns it resolved, so
// a spec the runner would refuse (exit 2) fails the run before any pod is made. runID (the
// VacuumRun's UID) lets a later attempt of the run finish a crash recovery an earlier one
// left (exit 7 otherwise).
func resolvedSpec(s *vacuumv1alpha1.VacuumSpec, runID string) (runnerwire.RunSpec, runnerwire.Resolved, []byte, error) {
	return resolveAndEncode(nil, s, runID)
}

// resolveAndEncode is resolvedSpec with edit applied to the RunSpec first (an online run's
// address and identity).
func resolveAndEncode(edit func(*runnerwire.RunSpec), s *vacuumv1alpha1.VacuumSpec, runID string) (runnerwire.RunSpec, runnerwire.Resolved, []byte, error) {
	rs := runSpecFor(s)
	rs.RunID = runID
	if edit != nil {
		edit(&rs)
	}
	res, err := rs.Resolve()
	if err != nil {
		return rs, res, nil, fmt.Errorf("invalid run spec: %w", err)
	}
	b, err := json.Marshal(rs)
	if err != nil {
		return rs, res, nil, fmt.Errorf("encode run spec: %w", err)
	}
	return rs, res, b, nil
}
