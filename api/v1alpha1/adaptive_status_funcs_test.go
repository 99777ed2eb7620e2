package v1alpha1

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestFormatBudgetWritesAPercentageWithOneDecimal(t *testing.T) {
	for pm, want := range map[int32]string{350: "35.0%", 1000: "100.0%", 1: "0.1%", 0: "0.0%", -5: "0.0%"} {
		if got := FormatBudget(pm); got != want {
			t.Errorf("FormatBudget(%d) = %q, want %q", pm, got, want)
		}
	}
}

func TestSetAdaptiveRoundsBoundSecondsAndKeepsWhatTheLastEventReported(t *testing.T) {
	at := metav1.NewTime(time.Unix(1000, 0))
	s := VacuumRunStatus{Adaptive: &AdaptiveStatus{Binding: BindingCeiling, ReportedBinding: BindingCeiling, ReportedTime: &at}}
	s.SetAdaptive(BindingFloor, 100, "NextTable", map[string]float64{BindingFloor: 2.6, BindingCeiling: -1, "Other": 9})
	a := s.Adaptive
	if a.Budget != "10.0%" || a.Applies != "NextTable" || a.BoundSeconds.Floor != 3 || a.BoundSeconds.Ceiling != 0 {
		t.Fatalf("status %+v bound %+v", a, a.BoundSeconds)
	}
	if a.ReportedBinding != BindingCeiling || a.ReportedTime != &at {
		t.Fatalf("the last event's binding and time are lost: %+v", a)
	}
	if s.AdaptiveBindingToReport(at.Add(9*time.Second), 10*time.Second) {
		t.Error("reported within the interval of the last event")
	}
	if !s.AdaptiveBindingToReport(at.Add(10*time.Second), 10*time.Second) {
		t.Error("a changed binding not reported once the interval passed")
	}
	s.MarkAdaptiveReported(at.Add(10 * time.Second))
	if s.AdaptiveBindingToReport(at.Add(time.Hour), 10*time.Second) {
		t.Error("the same binding reported twice")
	}
}
