package controllers

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"k8s.io/utils/ptr"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// runSpecFor turns a run's spec into the runner's wire RunSpec, for a volume mounted (with its
// sub-path) at runnerwire.DefaultDataDir. Every field is carried over as the API server stored it,
// defaults included, so the pod's args say exactly what the run says.
func runSpecFor(s *vacuumv1alpha1.VacuumSpec) runnerwire.RunSpec {
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
	if out.Parallelism != nil && *out.Parallelism == 0 {
		out.Parallelism = nil // a Go client that left it out: the default applies
	}
	for _, o := range s.TableOverrides {
		out.TableOverrides = append(out.TableOverrides, runnerwire.TableOverride{
			Table: o.Table, Throttle: runnerwire.Throttle(*o.Throttle.DeepCopy()),
		})
	}
	return out
}

// wireThrottle is the body of PUT /throttle for a run's throttle. The API's Throttle and
// ThrottleOverride and the wire's Throttle have the same fields with the same types (only
// their markers and tags differ), so the copy is a Go conversion: a field added to one layer
// and not the others stops the build here, before the reflection test in package runner.
func wireThrottle(t *vacuumv1alpha1.Throttle) *runnerwire.Throttle {
	w := runnerwire.Throttle(*t.DeepCopy())
	return &w
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
	rs := runSpecFor(s)
	rs.RunID = runID
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
