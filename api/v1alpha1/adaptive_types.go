package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AdaptiveThrottle makes the vacuum's rate follow the foreground's latency and the
// standbys' replication lag: the static throttle around it stays the ceiling, and the
// budget moves between floorPerMille of it and all of it (or pauses, HardStop, while a
// signal is above twice its target). It needs a server target (an online run) and a
// ceiling (costDelay above 0 or a byte rate).
// +kubebuilder:validation:XValidation:rule="has(self.foregroundLatency) || has(self.replicationLag)",message="throttle.adaptive must set foregroundLatency, replicationLag or both"
type AdaptiveThrottle struct {
	// foregroundLatency is the target for a percentile of the foreground's statement
	// latency, as the server measures it.
	// +optional
	ForegroundLatency *ForegroundLatencyTarget `json:"foregroundLatency,omitempty"`
	// replicationLag is the target for the lag of the standby furthest behind.
	// +optional
	ReplicationLag *ReplicationLagTarget `json:"replicationLag,omitempty"`
	// floorPerMille is the smallest budget outside HardStop, in thousandths of the static
	// ceiling, 1 to 1000.
	// +kubebuilder:default=100
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +optional
	FloorPerMille *int32 `json:"floorPerMille,omitempty"` //nolint:kubeapilinter // optionalfields: a pointer so absent (the default) stays apart from a value, as the wire's field is (a Go conversion)
}

// AdaptiveTargets are the targets alone: what a table override may change of the run's
// adaptive throttle (its floor is the run's).
// +kubebuilder:validation:XValidation:rule="has(self.foregroundLatency) || has(self.replicationLag)",message="tableOverrides throttle.adaptive must set foregroundLatency, replicationLag or both"
type AdaptiveTargets struct {
	// foregroundLatency replaces the run's foreground latency target for this table.
	// +optional
	ForegroundLatency *ForegroundLatencyTarget `json:"foregroundLatency,omitempty"`
	// replicationLag replaces the run's replication lag target for this table.
	// +optional
	ReplicationLag *ReplicationLagTarget `json:"replicationLag,omitempty"`
}

// ForegroundLatencyTarget keeps a percentile of the foreground's latency at or under a
// target.
type ForegroundLatencyTarget struct {
	// percentilePerMille is which percentile, in thousandths, 500 to 999: 990 is p99.
	// +kubebuilder:default=990
	// +kubebuilder:validation:Minimum=500
	// +kubebuilder:validation:Maximum=999
	// +optional
	PercentilePerMille *int32 `json:"percentilePerMille,omitempty"` //nolint:kubeapilinter // optionalfields: a pointer so absent (the default) stays apart from a value, as the wire's field is (a Go conversion)
	// target is the latency not to exceed, above 0 and at most 1h.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s') && duration(self) <= duration('1h')",message="throttle.adaptive.foregroundLatency.target must be a duration above 0 and at most 1h"
	// +required
	Target metav1.Duration `json:"target"` //nolint:kubeapilinter // nodurations: latency targets are sub-second (5ms), as the server's vacuum_adaptive_latency_target is
}

// ReplicationLagTarget keeps the standby furthest behind within a lag in bytes, in
// seconds, or both.
// +kubebuilder:validation:XValidation:rule="has(self.maxBytes) || has(self.maxDelaySeconds)",message="throttle.adaptive.replicationLag must set maxBytes, maxDelaySeconds or both"
type ReplicationLagTarget struct {
	// maxBytes is the most WAL a standby may have left to replay, a whole number of bytes
	// above 0 (a quantity of at most 32 characters).
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self)) && quantity(string(self)).isInteger() && quantity(string(self)).compareTo(quantity('0')) > 0",message="throttle.adaptive.replicationLag.maxBytes must be a whole number of bytes above 0"
	// +optional
	MaxBytes *resource.Quantity `json:"maxBytes,omitempty"`
	// maxDelaySeconds is the longest a standby's replay may lag, 1 to 86400.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	// +optional
	MaxDelaySeconds *int32 `json:"maxDelaySeconds,omitempty"` //nolint:kubeapilinter // optionalfields: a pointer so absent (the default) stays apart from a value, as the wire's field is (a Go conversion)
}
