package runner

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum/throttle"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// The throttle is declared once per layer: the API (Throttle, and ThrottleOverride without
// its defaults), the wire (Throttle as sent, Limits resolved) and the engine (Settings, and
// TableThrottle for one table's override). Each boundary has one converter:
//   - API -> wire: a Go conversion in controllers/runspec.go (wireThrottle, runSpecFor);
//   - wire -> wire resolved: runnerwire.Throttle.Over (ranges and defaults), and back with
//     Limits.Throttle;
//   - wire -> engine: convert.go (settingsFrom, a Go conversion; overrideFrom).
// The tests below fail when a field is added to one layer and not the others. The adaptive
// throttle (field Adaptive of the API's and the wire's Throttle) is not a limit: it steers
// the limits from the server, so the engine layers have no such field and it is left out
// here (resolved into runnerwire.AdaptiveTargets; see the adaptive tests).

// throttleLayers are every type that declares the throttle's fields.
var throttleLayers = []reflect.Type{
	reflect.TypeFor[vacuumv1alpha1.Throttle](),
	reflect.TypeFor[vacuumv1alpha1.ThrottleOverride](),
	reflect.TypeFor[runnerwire.Throttle](),
	reflect.TypeFor[runnerwire.Limits](),
	reflect.TypeFor[throttle.Settings](),
	reflect.TypeFor[vacuum.TableThrottle](),
}

func fieldNames(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		if f.Name != "Adaptive" {
			out = append(out, f.Name)
		}
	}
	return out
}

func jsonNames(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		if f.Name == "Adaptive" {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		out = append(out, name)
	}
	return out
}

func TestThrottleLayersDeclareTheSameFields(t *testing.T) {
	want := fieldNames(throttleLayers[0])
	if len(want) == 0 {
		t.Fatal("the API throttle has no fields")
	}
	for _, layer := range throttleLayers[1:] {
		if got := fieldNames(layer); !slices.Equal(got, want) {
			t.Errorf("%s declares %v; the API's Throttle declares %v: add the field to every layer and its converter",
				layer, got, want)
		}
	}
	// The API and the wire spell each field the same in YAML and JSON.
	wantJSON := jsonNames(reflect.TypeFor[runnerwire.Throttle]())
	for _, layer := range throttleLayers[:2] {
		if got := jsonNames(layer); !slices.Equal(got, wantJSON) {
			t.Errorf("%s's JSON names %v differ from the wire's %v", layer, got, wantJSON)
		}
	}
}

// everyFieldSet is a wire throttle with each field set to a value no default has.
func everyFieldSet(t *testing.T) runnerwire.Throttle {
	t.Helper()
	var w runnerwire.Throttle
	v := reflect.ValueOf(&w).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch p := f.Addr().Interface().(type) {
		case **metav1.Duration:
			*p = &metav1.Duration{Duration: time.Duration(i+7) * time.Millisecond}
		case **int32:
			x := int32(300 + i)
			*p = &x
		case **resource.Quantity:
			q := resource.MustParse("1Mi")
			q.Add(*resource.NewQuantity(int64(i), resource.BinarySI))
			*p = &q
		case **runnerwire.Adaptive:
			// Not a limit: resolved apart (Throttle.AdaptiveOver).
		default:
			t.Fatalf("runnerwire.Throttle.%s has type %s, which this test does not know: extend it",
				v.Type().Field(i).Name, f.Type())
		}
	}
	return w
}

// nonZeroFields names the fields of struct v that are zero (or nil pointers).
func zeroFields(v any) []string {
	var out []string
	rv := reflect.ValueOf(v)
	for i := range rv.NumField() {
		if rv.Field(i).IsZero() {
			out = append(out, rv.Type().Field(i).Name)
		}
	}
	return out
}

func TestEveryThrottleFieldCrossesEveryConverter(t *testing.T) {
	w := everyFieldSet(t)
	limits, err := w.Over(runnerwire.Limits{}, "throttle")
	if err != nil {
		t.Fatal(err)
	}
	if zero := zeroFields(limits); len(zero) > 0 {
		t.Errorf("Throttle.Over dropped %v", zero)
	}
	if back := limits.Throttle(); !reflect.DeepEqual(back, w) {
		t.Errorf("Limits.Throttle does not give back what Over read:\n got %+v\nwant %+v", back, w)
	}
	s := settingsFrom(limits)
	if zero := zeroFields(s); len(zero) > 0 {
		t.Errorf("settingsFrom dropped %v", zero)
	}
	o := overrideFrom(limits)
	if zero := zeroFields(o); len(zero) > 0 {
		t.Errorf("overrideFrom left %v unset", zero)
	}
	if got := o.Merge(throttle.Settings{}); got != s {
		t.Errorf("a table override merged over nothing is %+v, want the table's limits %+v", got, s)
	}
}

func TestEveryThrottleFieldHasARunnerFlag(t *testing.T) {
	for _, name := range jsonNames(reflect.TypeFor[runnerwire.Throttle]()) {
		if _, ok := flagOfField["throttle."+name]; !ok {
			t.Errorf("throttle.%s has no command-line flag in flagOfField (and addVacuumFlags)", name)
		}
	}
}

func TestEveryEnginePhaseHasAWireName(t *testing.T) {
	var got []runnerwire.Phase
	for p := vacuum.PhaseInitializing; p <= vacuum.PhaseDone; p++ {
		got = append(got, wirePhase(p.String()))
	}
	if want := runnerwire.Phases(); !slices.Equal(got, want) {
		t.Errorf("engine phases map to %q, want every wire phase once, in order: %q", got, want)
	}
	if s := (vacuum.PhaseDone + 1).String(); s != "unknown" {
		t.Errorf("the engine has a phase after PhaseDone (%q): give it a wire name in wirePhases", s)
	}
}
