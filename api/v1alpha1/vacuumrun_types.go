package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RunPhase is where a run is in its life.
// +kubebuilder:validation:Enum=Pending;Running;Succeeded;Failed;Cancelled
type RunPhase string

const (
	// RunPending waits for the volume's lock, the quiesced app or its pod.
	RunPending RunPhase = "Pending"
	// RunRunning has a runner pod at work.
	RunRunning RunPhase = "Running"
	// RunSucceeded ended with every table vacuumed.
	RunSucceeded RunPhase = "Succeeded"
	// RunFailed ended in failure (see the message and the Failed condition).
	RunFailed RunPhase = "Failed"
	// RunCancelled was stopped by spec.cancel, its deletion or a replacing run.
	RunCancelled RunPhase = "Cancelled"
)

// VacuumRunSpec is the resolved spec of one execution.
type VacuumRunSpec struct {
	VacuumSpec `json:",inline"`

	// PolicyName is the policy that created the run; empty for a run made by hand.
	// +kubebuilder:validation:MaxLength=40
	// +optional
	PolicyName string `json:"policyName,omitempty"`

	// Cancel stops the run: its pod is stopped and the run ends Cancelled.
	// +kubebuilder:default=false
	// +optional
	Cancel bool `json:"cancel"`
}

// MaxStatusTables is the most tables status.tables holds; the marker on Tables states the
// same number, which TestStatusTablesCapIsTheCRDsMaxItems checks.
const MaxStatusTables = 1024

// RunTotals are the run's figures so far (from /progress), final once it ended (from the
// termination message).
type RunTotals struct {
	// PagesScanned is the number of heap pages scanned. It was named blocksScanned before;
	// the runner's /progress still calls it heapBlocksScanned.
	PagesScanned int64 `json:"pagesScanned"`
	// PagesRemoved is the number of heap pages given back (truncation or rewrite).
	PagesRemoved int64 `json:"pagesRemoved"`
	// TuplesRemoved is the number of dead tuples removed.
	TuplesRemoved int64 `json:"tuplesRemoved"`
	// BytesRead from the tables and indexes.
	BytesRead int64 `json:"bytesRead"`
	// BytesWritten to the tables and indexes.
	BytesWritten int64 `json:"bytesWritten"`
	// WALBytes written.
	WALBytes int64 `json:"walBytes"`
	// IndexPasses is the number of index vacuum passes.
	IndexPasses int64 `json:"indexPasses"`
	// TimeSlept is the time spent sleeping for the throttle, as a duration string.
	TimeSlept metav1.Duration `json:"timeSlept"`
}

// TableStatus is one table done or in flight.
type TableStatus struct {
	// Name of the table.
	Name string `json:"name"`
	// Phase of its vacuum, as the runner names it ("scanning heap", "done", ...).
	Phase string `json:"phase,omitempty"`
	// Percent done, 0 to 100.
	Percent int32 `json:"percent"`
	// Skipped is true when the table was below minDeadTuplePercent.
	// +optional
	Skipped bool `json:"skipped,omitempty"`
	// TuplesRemoved from the table.
	TuplesRemoved int64 `json:"tuplesRemoved"`
	// PagesScanned of the table's heap (final results only).
	// +optional
	PagesScanned int64 `json:"pagesScanned,omitempty"`
	// PagesRemoved from the table's heap (final results only).
	// +optional
	PagesRemoved int64 `json:"pagesRemoved,omitempty"`
}

// VacuumRunStatus is the live state of a run.
type VacuumRunStatus struct {
	// ObservedGeneration is the generation of the spec this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase is Pending, Running, Succeeded, Failed or Cancelled.
	// +optional
	Phase RunPhase `json:"phase,omitempty"`
	// Conditions: Progressing, Complete and Failed.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// PodName is the runner pod of the current (or last) attempt.
	// +optional
	PodName string `json:"podName,omitempty"`
	// Attempts is the number of runner pods created so far.
	// +optional
	Attempts int32 `json:"attempts,omitempty"`
	// FailedAttempts is the number of attempts that failed and count against backoffLimit.
	// +optional
	FailedAttempts int32 `json:"failedAttempts,omitempty"`
	// StartTime is when the first runner pod started; activeDeadlineSeconds counts from it.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// CompletionTime is when the run ended.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// Table is the table started last.
	// +optional
	Table string `json:"table,omitempty"`
	// VacuumPhase is the phase of that table ("scanning heap", "vacuuming indexes", ...).
	// +optional
	VacuumPhase string `json:"vacuumPhase,omitempty"`
	// Percent is the run's progress, 0 to 100.
	// +optional
	Percent int32 `json:"percent,omitempty"`
	// Progress is Percent for printing ("62%").
	// +optional
	Progress string `json:"progress,omitempty"`
	// PagesPerSecond is the heap pages processed per second over the last 5 seconds.
	// +optional
	PagesPerSecond int64 `json:"pagesPerSecond,omitempty"`
	// ReadBytesPerSecond over the last 5 seconds.
	// +optional
	ReadBytesPerSecond int64 `json:"readBytesPerSecond,omitempty"`
	// WriteBytesPerSecond over the last 5 seconds.
	// +optional
	WriteBytesPerSecond int64 `json:"writeBytesPerSecond,omitempty"`
	// WALBytesPerSecond over the last 5 seconds.
	// +optional
	WALBytesPerSecond int64 `json:"walBytesPerSecond,omitempty"`
	// ReadRate is ReadBytesPerSecond for printing ("45.2MiB/s").
	// +optional
	ReadRate string `json:"readRate,omitempty"`
	// WriteRate is WriteBytesPerSecond for printing.
	// +optional
	WriteRate string `json:"writeRate,omitempty"`
	// WALRate is WALBytesPerSecond for printing.
	// +optional
	WALRate string `json:"walRate,omitempty"`
	// Totals of the run so far.
	// +optional
	Totals *RunTotals `json:"totals,omitempty"`
	// Tables lists every table done or in flight, at most 1024 (MaxStatusTables).
	// +kubebuilder:validation:MaxItems=1024
	// +optional
	Tables []TableStatus `json:"tables,omitempty"`
	// TablesOmitted counts the tables the final summary had no room for.
	// +optional
	TablesOmitted int32 `json:"tablesOmitted,omitempty"`
	// ExitCode of the last runner pod that ended.
	// +optional
	ExitCode *int32 `json:"exitCode,omitempty"`
	// Message says what happened last, in one line.
	// +optional
	Message string `json:"message,omitempty"`
	// AppliedThrottle is the throttle the runner pod was last given (at start or by
	// PUT /throttle); a spec.throttle that differs is pushed to the pod.
	// +optional
	AppliedThrottle *Throttle `json:"appliedThrottle,omitempty"`
}

// VacuumRun is one execution of a vacuum against a volume, with its live status.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=vr,categories=vacuum
// +kubebuilder:printcolumn:name="Policy",type=string,JSONPath=`.spec.policyName`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Table",type=string,JSONPath=`.status.table`
// +kubebuilder:printcolumn:name="Progress",type=string,JSONPath=`.status.progress`
// +kubebuilder:printcolumn:name="Pages/s",type=integer,JSONPath=`.status.pagesPerSecond`
// +kubebuilder:printcolumn:name="Read/s",type=string,JSONPath=`.status.readRate`
// +kubebuilder:printcolumn:name="Write/s",type=string,JSONPath=`.status.writeRate`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 53",message="metadata.name of a VacuumRun must be at most 53 characters, so the names of its pods and Secret stay within 63"
type VacuumRun struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   VacuumRunSpec   `json:"spec,omitempty"`
	Status VacuumRunStatus `json:"status,omitempty"`
}

// VacuumRunList is a list of VacuumRuns.
// +kubebuilder:object:root=true
type VacuumRunList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VacuumRun `json:"items"`
}
