package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// AdaptiveStatus is what a run's adaptive throttle does, as the runner reports it: the
// effective rate now (the budget, a share of the static ceiling), what binds it, and the
// time the run has spent bound by each binding. Absent while no adaptive target applies.
type AdaptiveStatus struct {
	// binding is the signal that sets the budget now: ForegroundLatency, ReplicationLag,
	// Ceiling (no signal holds it back), Floor (a signal would go lower, the floor holds it)
	// or HardStop (a signal above twice its target pauses the vacuum).
	// +kubebuilder:validation:Enum=ForegroundLatency;ReplicationLag;Ceiling;Floor;HardStop
	// +optional
	Binding string `json:"binding,omitempty"`
	// budgetPerMille is the effective rate now in thousandths of the static ceiling (0 while
	// HardStop pauses the vacuum).
	// +optional
	BudgetPerMille int32 `json:"budgetPerMille,omitempty"`
	// budget is budgetPerMille for printing, as a percentage of the ceiling ("35.0%").
	// +optional
	Budget string `json:"budget,omitempty"`
	// applies says when the budget changes: Immediately (the engine server re-throttles the
	// running VACUUM every control period) or NextTable (PostgreSQL cannot re-throttle a
	// running VACUUM; the runner sets the next table's cost limit from the signals).
	// +optional
	Applies string `json:"applies,omitempty"`
	// boundSeconds is the time spent bound by each binding over the runner's attempt, in
	// whole seconds.
	// +optional
	BoundSeconds *AdaptiveBoundSeconds `json:"boundSeconds,omitempty"`
	// reportedBinding is the binding the last AdaptiveBindingChanged event named; events are
	// at most one per adaptiveEventInterval, so a binding that flips back and forth between
	// polls is reported once it holds.
	// +optional
	ReportedBinding string `json:"reportedBinding,omitempty"`
	// reportedTime is when that event was emitted.
	// +optional
	ReportedTime *metav1.Time `json:"reportedTime,omitempty"`
}

// AdaptiveBoundSeconds is the time, in whole seconds, an adaptive throttle spent bound by
// each binding.
type AdaptiveBoundSeconds struct {
	// foregroundLatency is the seconds bound by the foreground's latency target.
	// +optional
	ForegroundLatency int64 `json:"foregroundLatency,omitempty"`
	// replicationLag is the seconds bound by the replication lag target.
	// +optional
	ReplicationLag int64 `json:"replicationLag,omitempty"`
	// ceiling is the seconds at the static ceiling.
	// +optional
	Ceiling int64 `json:"ceiling,omitempty"`
	// floor is the seconds held at the floor.
	// +optional
	Floor int64 `json:"floor,omitempty"`
	// hardStop is the seconds paused by HardStop.
	// +optional
	HardStop int64 `json:"hardStop,omitempty"`
}
