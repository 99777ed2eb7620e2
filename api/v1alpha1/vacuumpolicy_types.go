package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConcurrencyPolicy says what happens when a run is due while another is still active.
// +kubebuilder:validation:Enum=Forbid;Replace
type ConcurrencyPolicy string

const (
	// ForbidConcurrent skips the new run while one is active.
	ForbidConcurrent ConcurrencyPolicy = "Forbid"
	// ReplaceConcurrent cancels the active run and starts the new one.
	ReplaceConcurrent ConcurrencyPolicy = "Replace"
)

// VacuumPolicySpec is what to clean, how gently, how wide and when.
// +kubebuilder:validation:XValidation:rule="has(self.target.server) || !has(self.throttle.adaptive)",message="spec.throttle.adaptive needs target.server: an offline run has no foreground or standby to adapt to"
// +kubebuilder:validation:XValidation:rule="has(self.target.server) || !has(self.tableOverrides) || self.tableOverrides.all(o, !has(o.throttle.adaptive))",message="spec.tableOverrides[].throttle.adaptive needs target.server: an offline run has no foreground or standby to adapt to"
// +kubebuilder:validation:XValidation:rule="!has(self.target.server) || !has(self.bufferPoolSize)",message="spec.bufferPoolSize cannot be used with target.server: it is the runner's own buffer pool, and an online run uses the server's"
type VacuumPolicySpec struct {
	VacuumSpec `json:",inline"`

	// schedule is a cron expression (5 fields, or a macro such as @daily); absent = run
	// once, as the run <policy>-once. The controller checks it: a bad schedule sets
	// Ready=False with reason InvalidSchedule.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	Schedule string `json:"schedule,omitempty"` //nolint:kubeapilinter // optionalfields: empty means run once, as absent does

	// timeZone is the IANA time zone the schedule is read in. The binaries carry their own
	// time-zone database; an unknown zone sets Ready=False with reason InvalidTimeZone.
	// +kubebuilder:default=UTC
	// +kubebuilder:validation:MaxLength=64
	// +optional
	TimeZone string `json:"timeZone,omitempty"` //nolint:kubeapilinter // optionalfields: empty is defaulted to UTC, as absent is

	// startingDeadlineSeconds is how late a missed tick may still start a run; absent = no
	// deadline. It bounds creation only, not how long a run may take.
	// +kubebuilder:validation:Minimum=0
	// +optional
	StartingDeadlineSeconds *int64 `json:"startingDeadlineSeconds,omitempty"`

	// suspend stops new runs; active runs go on.
	// +kubebuilder:default=false
	// +optional
	Suspend bool `json:"suspend,omitempty"` //nolint:kubeapilinter // optionalfields: false is the default, so absent and false are the same

	// concurrencyPolicy is Forbid (skip a tick while a run is active) or Replace (cancel it).
	// +kubebuilder:default=Forbid
	// +optional
	ConcurrencyPolicy ConcurrencyPolicy `json:"concurrencyPolicy,omitempty"`

	// successfulRunsHistoryLimit is how many succeeded runs are kept, 0 to 100; absent = 3,
	// and 0 keeps none.
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	SuccessfulRunsHistoryLimit *int32 `json:"successfulRunsHistoryLimit,omitempty"`

	// failedRunsHistoryLimit is how many failed or cancelled runs are kept, 0 to 100;
	// absent = 3, and 0 keeps none.
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	FailedRunsHistoryLimit *int32 `json:"failedRunsHistoryLimit,omitempty"`

	// window limits runs to a recurring maintenance window: without spec.schedule each
	// opening starts a run; with it, a tick outside a window waits for the next opening. A run
	// still going at the window's end is stopped and ends Interrupted; the next window's run
	// resumes each table where it stopped.
	// +optional
	Window *Window `json:"window,omitempty"` //nolint:kubeapilinter // optionalfields: nil means no window, which the controller tests; {} is refused by its required fields
}

// RunSummary is the last run of a policy, as seen by the policy.
type RunSummary struct {
	// name of the run.
	// +required
	Name string `json:"name"`
	// phase of the run.
	// +optional
	Phase RunPhase `json:"phase,omitempty"` //nolint:kubeapilinter // nophase: the run's phase, as VacuumRun's status.phase
	// pagesPerSecond the run achieved last, once it ended.
	// +optional
	PagesPerSecond int64 `json:"pagesPerSecond,omitempty"`
	// tuplesRemoved by the run.
	// +optional
	TuplesRemoved int64 `json:"tuplesRemoved,omitempty"`
	// completionTime of the run, once it ended.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// message of the run, once it ended.
	// +optional
	Message string `json:"message,omitempty"`
}

// VacuumPolicyStatus is what the controller last saw and did.
type VacuumPolicyStatus struct {
	// conditions are Ready (the schedule is valid and runs can start), Degraded (runs are
	// halted, for example after corruption was found) and LastRunSucceeded (how the latest
	// ended run ended: True, or False with its reason).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// observedGeneration is the generation of the spec this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// active lists the runs not finished yet.
	// +listType=set
	// +optional
	Active []string `json:"active,omitempty"`
	// lastScheduleTime is the tick (or request) of the latest run started.
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`
	// lastSuccessfulTime is when the latest successful run completed.
	// +optional
	LastSuccessfulTime *metav1.Time `json:"lastSuccessfulTime,omitempty"`
	// nextScheduleTime is the next tick at which a run will start.
	// +optional
	NextScheduleTime *metav1.Time `json:"nextScheduleTime,omitempty"`
	// lastRun sums up the latest run.
	// +optional
	LastRun *RunSummary `json:"lastRun,omitempty"`
	// corruptionRun is the run that found corruption; runs are halted until the policy is
	// annotated vacuum.vacuumops.io/corruption-acknowledged=<that run's name>.
	// +optional
	CorruptionRun string `json:"corruptionRun,omitempty"`
	// runNowHandled is the last value of the vacuum.vacuumops.io/run-now annotation that
	// started a run; a new value starts another.
	// +optional
	RunNowHandled string `json:"runNowHandled,omitempty"`
	// lastSkippedTime is the latest tick (or, without a schedule, the policy's creation) that
	// had to wait for an active run under concurrencyPolicy Forbid; its RunSkipped event is
	// emitted once, when the tick first waits, not on every reconcile while it waits.
	// +optional
	LastSkippedTime *metav1.Time `json:"lastSkippedTime,omitempty"`
	// window is what the policy knows of its windows: the start offset (jitter) and the
	// tables whose vacuum spans several windows.
	// +optional
	Window *PolicyWindowStatus `json:"window,omitempty"`
}

// VacuumPolicy says what to vacuum, how gently, how wide and when; it creates VacuumRuns.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName={vp,vacpol},categories=vacuum
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule`
// +kubebuilder:printcolumn:name="Time Zone",type=string,JSONPath=`.spec.timeZone`,priority=1
// +kubebuilder:printcolumn:name="Suspend",type=boolean,JSONPath=`.spec.suspend`
// +kubebuilder:printcolumn:name="Active",type=string,JSONPath=`.status.active`
// +kubebuilder:printcolumn:name="Last Result",type=string,JSONPath=`.status.conditions[?(@.type=="LastRunSucceeded")].reason`
// +kubebuilder:printcolumn:name="Last Run",type=date,JSONPath=`.status.lastScheduleTime`
// +kubebuilder:printcolumn:name="Last Success",type=date,JSONPath=`.status.lastSuccessfulTime`,priority=1
// +kubebuilder:printcolumn:name="Next Run",type=date,JSONPath=`.status.nextScheduleTime`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 40",message="metadata.name of a VacuumPolicy must be at most 40 characters, so the names of its runs, pods and Secrets stay within 63"
type VacuumPolicy struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the object's standard metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is what the VacuumPolicy asks for.
	// +optional
	Spec VacuumPolicySpec `json:"spec,omitempty"` //nolint:kubeapilinter // optionalfields: a value, as in every Kubernetes kind; the CRD is unchanged
	// status is what the controller last saw and did.
	// +optional
	Status VacuumPolicyStatus `json:"status,omitempty"` //nolint:kubeapilinter // optionalfields: a value, as in every Kubernetes kind
}

// VacuumPolicyList is a list of VacuumPolicies.
// +kubebuilder:object:root=true
type VacuumPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VacuumPolicy `json:"items"`
}
