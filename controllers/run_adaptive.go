package controllers

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// adaptiveEventInterval is the shortest time between two AdaptiveBindingChanged events of
// one run: a binding that changes at every poll (the budget hovering at the ceiling) is
// reported once it has held, never once per sample.
const adaptiveEventInterval = 10 * time.Second

// observeAdaptive acts on a progress fold that changed the run's adaptive status from
// before: it counts the seconds newly bound by each binding and emits one event when the
// binding changed since the last event (at most one per adaptiveEventInterval).
func (r *RunReconciler) observeAdaptive(run *vacuumv1alpha1.VacuumRun, before *vacuumv1alpha1.AdaptiveStatus, now time.Time) {
	a := run.Status.Adaptive
	if a == nil {
		return
	}
	var old *vacuumv1alpha1.AdaptiveBoundSeconds
	if before != nil {
		old = before.BoundSeconds
	}
	r.Metrics.adaptiveBound(run, old, a.BoundSeconds)
	if !run.Status.AdaptiveBindingToReport(now, adaptiveEventInterval) {
		return
	}
	was := a.ReportedBinding
	if was == "" {
		was = "none"
	}
	r.Recorder.Eventf(run, nil, corev1.EventTypeNormal, vacuumv1alpha1.ReasonAdaptiveBindingChanged, "Throttle",
		"adaptive throttle bound by %s at %s of the ceiling (was %s; applies %s)", a.Binding, a.Budget, was, a.Applies)
	run.Status.MarkAdaptiveReported(now)
}
