package v1alpha1

import (
	"fmt"
	"math"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Adaptive bindings, as status.adaptive.binding names them.
const (
	BindingForegroundLatency = "ForegroundLatency"
	BindingReplicationLag    = "ReplicationLag"
	BindingCeiling           = "Ceiling"
	BindingFloor             = "Floor"
	BindingHardStop          = "HardStop"
)

// AdaptiveBindings are the bindings in the order of AdaptiveBoundSeconds' fields.
var AdaptiveBindings = []string{BindingForegroundLatency, BindingReplicationLag, BindingCeiling, BindingFloor, BindingHardStop}

// FormatBudget writes a budget given per mille of the ceiling as a percentage with one
// decimal: 350 -> "35.0%", 1000 -> "100.0%".
func FormatBudget(perMille int32) string {
	perMille = max(perMille, 0)
	return fmt.Sprintf("%d.%d%%", perMille/10, perMille%10)
}

// Of returns the seconds bound by binding (0 for a name that is not a binding).
func (b *AdaptiveBoundSeconds) Of(binding string) int64 {
	if b == nil {
		return 0
	}
	switch binding {
	case BindingForegroundLatency:
		return b.ForegroundLatency
	case BindingReplicationLag:
		return b.ReplicationLag
	case BindingCeiling:
		return b.Ceiling
	case BindingFloor:
		return b.Floor
	case BindingHardStop:
		return b.HardStop
	}
	return 0
}

// SetAdaptive writes the adaptive throttle's binding, budget, when it applies and the
// seconds bound by each binding (by name, as the runner reports them), keeping what the
// last binding event reported.
func (s *VacuumRunStatus) SetAdaptive(binding string, budgetPerMille int32, applies string, bound map[string]float64) {
	a := &AdaptiveStatus{Binding: binding, BudgetPerMille: max(budgetPerMille, 0), Budget: FormatBudget(budgetPerMille), Applies: applies}
	secs := func(name string) int64 {
		v := bound[name]
		if math.IsNaN(v) || v < 0 {
			return 0
		}
		return int64(math.Round(min(v, math.MaxInt32)))
	}
	a.BoundSeconds = &AdaptiveBoundSeconds{
		ForegroundLatency: secs(BindingForegroundLatency), ReplicationLag: secs(BindingReplicationLag),
		Ceiling: secs(BindingCeiling), Floor: secs(BindingFloor), HardStop: secs(BindingHardStop),
	}
	if old := s.Adaptive; old != nil {
		a.ReportedBinding, a.ReportedTime = old.ReportedBinding, old.ReportedTime
	}
	s.Adaptive = a
}

// AdaptiveBindingToReport returns whether the binding now differs from the one the last
// binding event named and that event is at least interval old (or there was none): the
// caller then emits one and calls MarkAdaptiveReported.
func (s *VacuumRunStatus) AdaptiveBindingToReport(now time.Time, interval time.Duration) bool {
	a := s.Adaptive
	if a == nil || a.Binding == "" || a.Binding == a.ReportedBinding {
		return false
	}
	return a.ReportedTime == nil || now.Sub(a.ReportedTime.Time) >= interval
}

// MarkAdaptiveReported records that an event named the binding now, at now.
func (s *VacuumRunStatus) MarkAdaptiveReported(now time.Time) {
	if s.Adaptive != nil {
		s.Adaptive.ReportedBinding = s.Adaptive.Binding
		s.Adaptive.ReportedTime = &metav1.Time{Time: now}
	}
}
