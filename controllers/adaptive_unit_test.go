package controllers

import (
	"encoding/json"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// everyAPIThrottleField is an API throttle with every field set, adaptive included.
func everyAPIThrottleField() vacuumv1alpha1.Throttle {
	q := func(s string) *resource.Quantity { return new(resource.MustParse(s)) }
	return vacuumv1alpha1.Throttle{
		CostDelay: &metav1.Duration{Duration: 3 * time.Millisecond}, CostLimit: new(int32(300)),
		PageHitCost: new(int32(4)), PageMissCost: new(int32(5)), PageDirtyCost: new(int32(6)),
		MaxReadBytesPerSecond: q("1Mi"), MaxWriteBytesPerSecond: q("2Mi"), MaxWALBytesPerSecond: q("3Mi"),
		Adaptive: &vacuumv1alpha1.AdaptiveThrottle{
			ForegroundLatency: &vacuumv1alpha1.ForegroundLatencyTarget{PercentilePerMille: new(int32(950)), Target: metav1.Duration{Duration: 7 * time.Millisecond}},
			ReplicationLag:    &vacuumv1alpha1.ReplicationLagTarget{MaxBytes: q("16Mi"), MaxDelaySeconds: new(int32(5))},
			FloorPerMille:     new(int32(50)),
		},
	}
}

// sameJSON fails unless a and b marshal to the same JSON (the API and the wire spell
// every throttle field alike, so a field the converter drops shows as a difference).
func sameJSON(t *testing.T, what string, a, b any) {
	t.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if string(ja) != string(jb) {
		t.Errorf("%s:\n API  %s\n wire %s", what, ja, jb)
	}
}

// TestWireThrottleCarriesEveryField: the run's throttle and a table override's, adaptive
// targets and floor included, reach the RunSpec and PUT /throttle field for field.
func TestWireThrottleCarriesEveryField(t *testing.T) {
	api := everyAPIThrottleField()
	sameJSON(t, "the run's throttle", api, wireThrottle(&api))

	o := vacuumv1alpha1.ThrottleOverride{CostDelay: api.CostDelay, CostLimit: api.CostLimit, PageHitCost: api.PageHitCost,
		PageMissCost: api.PageMissCost, PageDirtyCost: api.PageDirtyCost, MaxReadBytesPerSecond: api.MaxReadBytesPerSecond,
		MaxWriteBytesPerSecond: api.MaxWriteBytesPerSecond, MaxWALBytesPerSecond: api.MaxWALBytesPerSecond,
		Adaptive: &vacuumv1alpha1.AdaptiveTargets{ForegroundLatency: api.Adaptive.ForegroundLatency, ReplicationLag: api.Adaptive.ReplicationLag}}
	w := overrideWire(&o)
	sameJSON(t, "a table override's throttle", o, w)
	if w.Adaptive.FloorPerMille != nil {
		t.Errorf("a table override's adaptive has floor %d on the wire, want none (the run's applies)", *w.Adaptive.FloorPerMille)
	}

	spec := vacuumv1alpha1.VacuumSpec{Throttle: api, TableOverrides: []vacuumv1alpha1.TableOverride{{Table: "events", Throttle: o}}}
	spec.Target.PersistentVolumeClaim = "d"
	rs := runSpecFor(&spec)
	sameJSON(t, "the RunSpec's throttle", api, rs.Throttle)
	sameJSON(t, "the RunSpec's override", o, rs.TableOverrides[0].Throttle)
}
