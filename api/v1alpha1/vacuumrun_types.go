package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// RunPhase is where a run is in its life.
// +kubebuilder:validation:Enum=Pending;Running;Succeeded;Failed;Cancelled;Interrupted
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

// VacuumRunSpec is the resolved spec of one execution. A run's spec is what its pods run, so
// it cannot change once made, except throttle (pushed to the running pod), cancel (false
// to true only) and ttlSecondsAfterFinished; each immutable field has a rule of its own here, on the spec rather than on
// the field, so that removing a field is refused as well as changing it, and the target's
// form (which of its fields are set) never changes. kube-apiserver evaluates these rules on
// every write of the run, each status write included, and each lookup of a spec field costs
// it a copy of the spec's whole schema (BenchmarkRunStatusWriteCEL): so each rule is written
// as a conditional, which looks a field up two times when it is absent and four when it is
// set, not three and five. (The shorter self.?f == oldSelf.?f is refused by the API server's
// cost estimate.)
// +kubebuilder:validation:XValidation:rule="has(self.target.persistentVolumeClaim) ? (has(oldSelf.target.persistentVolumeClaim) && self.target.persistentVolumeClaim == oldSelf.target.persistentVolumeClaim) : !has(oldSelf.target.persistentVolumeClaim)",message="spec.target.persistentVolumeClaim is immutable"
// +kubebuilder:validation:XValidation:rule="has(self.target.subPath) ? (has(oldSelf.target.subPath) && self.target.subPath == oldSelf.target.subPath) : !has(oldSelf.target.subPath)",message="spec.target.subPath is immutable"
// +kubebuilder:validation:XValidation:rule="has(self.target.tables) ? (has(oldSelf.target.tables) && self.target.tables == oldSelf.target.tables) : !has(oldSelf.target.tables)",message="spec.target.tables is immutable"
// +kubebuilder:validation:XValidation:rule="has(self.target.server) ? (has(oldSelf.target.server) && self.target.server == oldSelf.target.server) : !has(oldSelf.target.server)",message="spec.target.server is immutable"
// +kubebuilder:validation:XValidation:rule="has(self.target.server) || !has(self.throttle.adaptive)",message="spec.throttle.adaptive needs target.server: an offline run has no foreground or standby to adapt to"
// +kubebuilder:validation:XValidation:rule="has(self.target.server) || !has(self.tableOverrides) || self.tableOverrides.all(o, !has(o.throttle.adaptive))",message="spec.tableOverrides[].throttle.adaptive needs target.server: an offline run has no foreground or standby to adapt to"
// +kubebuilder:validation:XValidation:rule="!has(self.target.server) || !has(self.bufferPoolSize)",message="spec.bufferPoolSize cannot be used with target.server: it is the runner's own buffer pool, and an online run uses the server's"
// +kubebuilder:validation:XValidation:rule="has(self.target.quiesce) ? (has(oldSelf.target.quiesce) && self.target.quiesce == oldSelf.target.quiesce) : !has(oldSelf.target.quiesce)",message="spec.target.quiesce is immutable"
// +kubebuilder:validation:XValidation:rule="has(self.mode) ? (has(oldSelf.mode) && self.mode == oldSelf.mode) : !has(oldSelf.mode)",message="spec.mode is immutable"
// +kubebuilder:validation:XValidation:rule="has(self.ringSize) ? (has(oldSelf.ringSize) && self.ringSize == oldSelf.ringSize) : !has(oldSelf.ringSize)",message="spec.ringSize is immutable"
// +kubebuilder:validation:XValidation:rule="has(self.bufferPoolSize) ? (has(oldSelf.bufferPoolSize) && self.bufferPoolSize == oldSelf.bufferPoolSize) : !has(oldSelf.bufferPoolSize)",message="spec.bufferPoolSize is immutable"
// +kubebuilder:validation:XValidation:rule="has(self.parallelism) ? (has(oldSelf.parallelism) && self.parallelism == oldSelf.parallelism) : !has(oldSelf.parallelism)",message="spec.parallelism is immutable"
// +kubebuilder:validation:XValidation:rule="has(self.indexWorkers) ? (has(oldSelf.indexWorkers) && self.indexWorkers == oldSelf.indexWorkers) : !has(oldSelf.indexWorkers)",message="spec.indexWorkers is immutable"
// +kubebuilder:validation:XValidation:rule="has(self.maintenanceWorkMem) ? (has(oldSelf.maintenanceWorkMem) && self.maintenanceWorkMem == oldSelf.maintenanceWorkMem) : !has(oldSelf.maintenanceWorkMem)",message="spec.maintenanceWorkMem is immutable"
// +kubebuilder:validation:XValidation:rule="has(self.truncate) ? (has(oldSelf.truncate) && self.truncate == oldSelf.truncate) : !has(oldSelf.truncate)",message="spec.truncate is immutable"
// +kubebuilder:validation:XValidation:rule="has(self.minDeadTuplePercent) ? (has(oldSelf.minDeadTuplePercent) && self.minDeadTuplePercent == oldSelf.minDeadTuplePercent) : !has(oldSelf.minDeadTuplePercent)",message="spec.minDeadTuplePercent is immutable"
// +kubebuilder:validation:XValidation:rule="has(self.tableOverrides) ? (has(oldSelf.tableOverrides) && self.tableOverrides == oldSelf.tableOverrides) : !has(oldSelf.tableOverrides)",message="spec.tableOverrides is immutable"
// +kubebuilder:validation:XValidation:rule="has(self.runner) ? (has(oldSelf.runner) && self.runner == oldSelf.runner) : !has(oldSelf.runner)",message="spec.runner is immutable"
// +kubebuilder:validation:XValidation:rule="has(self.activeDeadlineSeconds) ? (has(oldSelf.activeDeadlineSeconds) && self.activeDeadlineSeconds == oldSelf.activeDeadlineSeconds) : !has(oldSelf.activeDeadlineSeconds)",message="spec.activeDeadlineSeconds is immutable"
// +kubebuilder:validation:XValidation:rule="has(self.backoffLimit) ? (has(oldSelf.backoffLimit) && self.backoffLimit == oldSelf.backoffLimit) : !has(oldSelf.backoffLimit)",message="spec.backoffLimit is immutable"
// +kubebuilder:validation:XValidation:rule="has(self.podStartTimeoutSeconds) ? (has(oldSelf.podStartTimeoutSeconds) && self.podStartTimeoutSeconds == oldSelf.podStartTimeoutSeconds) : !has(oldSelf.podStartTimeoutSeconds)",message="spec.podStartTimeoutSeconds is immutable"
// +kubebuilder:validation:XValidation:rule="has(self.allowCrashRecovery) ? (has(oldSelf.allowCrashRecovery) && self.allowCrashRecovery == oldSelf.allowCrashRecovery) : !has(oldSelf.allowCrashRecovery)",message="spec.allowCrashRecovery is immutable"
// +kubebuilder:validation:XValidation:rule="has(self.policyName) ? (has(oldSelf.policyName) && self.policyName == oldSelf.policyName) : !has(oldSelf.policyName)",message="spec.policyName is immutable"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.cancel) || !oldSelf.cancel || (has(self.cancel) && self.cancel)",message="spec.cancel can only change from false to true"
// +kubebuilder:validation:XValidation:rule="has(self.window) ? (has(oldSelf.window) && self.window == oldSelf.window) : !has(oldSelf.window)",message="spec.window is immutable"
// +kubebuilder:validation:XValidation:rule="has(self.resume) ? (has(oldSelf.resume) && self.resume == oldSelf.resume) : !has(oldSelf.resume)",message="spec.resume is immutable"
type VacuumRunSpec struct {
	VacuumSpec `json:",inline"`

	// policyName is the policy that created the run; empty for a run made by hand.
	// +kubebuilder:validation:MaxLength=40
	// +optional
	PolicyName string `json:"policyName,omitempty"` //nolint:kubeapilinter // optionalfields: empty means a run made by hand, as absent does

	// cancel stops the run: its pod is stopped and the run ends Cancelled.
	// +kubebuilder:default=false
	// +optional
	Cancel bool `json:"cancel,omitempty"` //nolint:kubeapilinter // optionalfields: false is the default, so absent and false are the same

	// paused pauses the runner at its next delay point while true, and lets it go on when
	// set back to false; status.pause and the Paused condition show it. Time paused counts
	// against activeDeadlineSeconds and against the window (both are wall-clock), and a
	// pause does not hold a window open.
	// +optional
	Paused bool `json:"paused,omitempty"` //nolint:kubeapilinter // optionalfields: false is the default, so absent and false are the same

	// window is the maintenance window the run was made for (set by its policy): at
	// window.stopAt the runner stops at a delay point and the run ends Interrupted.
	// +optional
	Window *RunWindow `json:"window,omitempty"`

	// resume continues each table's lazy vacuum from the position the last interrupted run
	// left in the data directory (or the server), from block 0 where there is none. A
	// policy sets it on the run after one that ended Interrupted. PostgreSQL targets cannot
	// resume and start at block 0.
	// +optional
	Resume bool `json:"resume,omitempty"` //nolint:kubeapilinter // optionalfields: false is the default, so absent and false are the same

	// ttlSecondsAfterFinished deletes the run this many seconds after it ended, whatever
	// its outcome (0 = at once); absent = kept until deleted (a policy's runs are pruned by
	// its history limits instead). It may be changed at any time.
	// +kubebuilder:validation:Minimum=0
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
}

// MaxStatusTables is the most tables status.tables holds; the marker on Tables states the
// same number, which TestStatusTablesCapIsTheCRDsMaxItems checks.
const MaxStatusTables = 1024

// RunTotals are the run's figures so far (from /progress), final once it ended (from the
// termination message).
type RunTotals struct {
	// pagesScanned is the number of heap pages scanned. It was named blocksScanned before;
	// the runner's /progress still calls it heapBlocksScanned.
	// +required
	PagesScanned int64 `json:"pagesScanned"`
	// pagesRemoved is the number of heap pages given back (truncation or rewrite).
	// +required
	PagesRemoved int64 `json:"pagesRemoved"`
	// tuplesRemoved is the number of dead tuples removed.
	// +required
	TuplesRemoved int64 `json:"tuplesRemoved"`
	// bytesRead from the tables and indexes.
	// +required
	BytesRead int64 `json:"bytesRead"`
	// bytesWritten to the tables and indexes.
	// +required
	BytesWritten int64 `json:"bytesWritten"`
	// walBytes written.
	// +required
	WALBytes int64 `json:"walBytes"`
	// indexPasses is the number of index vacuum passes.
	// +required
	IndexPasses int64 `json:"indexPasses"`
	// timeSlept is the time spent sleeping for the throttle, as a duration string: the
	// engine's own count, also for an online run of the engine server. Unset for an online
	// run of PostgreSQL, which counts no time its VACUUM sleeps for vacuum_cost_delay.
	// +optional
	TimeSlept *metav1.Duration `json:"timeSlept,omitempty"` //nolint:kubeapilinter // nodurations: a sub-second duration string ("350ms"), as throttle.costDelay
}

// TableStatus is one table done or in flight.
type TableStatus struct {
	// name of the table.
	// +required
	Name string `json:"name"`
	// phase of its vacuum, as the runner names it ("scanning heap", "done", ...).
	// +optional
	Phase string `json:"phase,omitempty"` //nolint:kubeapilinter // nophase: the runner's own name for the step, not a state machine
	// percent done, 0 to 100.
	// +required
	Percent int32 `json:"percent"`
	// skipped is true when the table was below minDeadTuplePercent.
	// +optional
	Skipped bool `json:"skipped,omitempty"`
	// tuplesRemoved from the table.
	// +required
	TuplesRemoved int64 `json:"tuplesRemoved"`
	// pagesScanned of the table's heap (final results only).
	// +optional
	PagesScanned int64 `json:"pagesScanned,omitempty"`
	// pagesRemoved from the table's heap (final results only).
	// +optional
	PagesRemoved int64 `json:"pagesRemoved,omitempty"`
	// complete is false when the run stopped (its window closed) before the table's vacuum
	// was done; absent when the runner did not say.
	// +optional
	Complete *bool `json:"complete,omitempty"`
	// blockReached is the heap block the table's vacuum reached; the next window's run
	// resumes from it.
	// +optional
	BlockReached *int64 `json:"blockReached,omitempty"`
	// resumedFromBlock is the block this run's vacuum of the table started from (0: the
	// beginning).
	// +optional
	ResumedFromBlock *int64 `json:"resumedFromBlock,omitempty"`
	// donePerMille is the share of the table's heap done, counted across windows (block
	// reached over the table's pages), per mille.
	// +optional
	DonePerMille *int32 `json:"donePerMille,omitempty"`
}

// VacuumRunStatus is the live state of a run.
type VacuumRunStatus struct {
	// conditions are Progressing (False once ended) and the outcome: exactly one of
	// Complete, Failed, Cancelled and Interrupted is True once the run has ended, the others
	// False.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// observedGeneration is the generation of the spec this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// phase is Pending, Running, Succeeded, Failed, Cancelled or Interrupted.
	// +optional
	Phase RunPhase `json:"phase,omitempty"` //nolint:kubeapilinter // nophase: kept beside the conditions for printing and selection, as Pod's and Job's users expect
	// podName is the runner pod of the current (or last) attempt.
	// +optional
	PodName string `json:"podName,omitempty"`
	// attempts is the number of runner pods created so far.
	// +optional
	Attempts int32 `json:"attempts,omitempty"`
	// failedAttempts is the number of attempts that failed and count against backoffLimit.
	// +optional
	FailedAttempts int32 `json:"failedAttempts,omitempty"`
	// startTime is when the first runner pod started; activeDeadlineSeconds counts from it.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// completionTime is when the run ended.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// table is the table started last.
	// +optional
	Table string `json:"table,omitempty"`
	// vacuumPhase is the phase of that table ("scanning heap", "vacuuming indexes", ...).
	// +optional
	VacuumPhase string `json:"vacuumPhase,omitempty"` //nolint:kubeapilinter // nophase: the runner's own name for the step, not a state machine
	// percent is the run's progress, 0 to 100.
	// +optional
	Percent int32 `json:"percent,omitempty"`
	// progress is Percent for printing ("62%").
	// +optional
	Progress string `json:"progress,omitempty"`
	// pagesPerSecond is the heap pages processed per second over the last 5 seconds.
	// +optional
	PagesPerSecond int64 `json:"pagesPerSecond,omitempty"`
	// readBytesPerSecond over the last 5 seconds.
	// +optional
	ReadBytesPerSecond int64 `json:"readBytesPerSecond,omitempty"`
	// writeBytesPerSecond over the last 5 seconds.
	// +optional
	WriteBytesPerSecond int64 `json:"writeBytesPerSecond,omitempty"`
	// walBytesPerSecond over the last 5 seconds.
	// +optional
	WALBytesPerSecond int64 `json:"walBytesPerSecond,omitempty"`
	// readRate is ReadBytesPerSecond for printing ("45.2MiB/s").
	// +optional
	ReadRate string `json:"readRate,omitempty"`
	// writeRate is WriteBytesPerSecond for printing.
	// +optional
	WriteRate string `json:"writeRate,omitempty"`
	// walRate is WALBytesPerSecond for printing.
	// +optional
	WALRate string `json:"walRate,omitempty"`
	// totals of the run so far.
	// +optional
	Totals *RunTotals `json:"totals,omitempty"`
	// tables lists every table done or in flight, at most 1024 (MaxStatusTables).
	// +kubebuilder:validation:MaxItems=1024
	// +listType=atomic
	// +optional
	Tables []TableStatus `json:"tables,omitempty"`
	// tablesOmitted counts the tables the final summary had no room for.
	// +optional
	TablesOmitted int32 `json:"tablesOmitted,omitempty"`
	// exitCode of the last runner pod that ended.
	// +optional
	ExitCode *int32 `json:"exitCode,omitempty"`
	// message says what happened last, in one line.
	// +optional
	Message string `json:"message,omitempty"`
	// appliedThrottle is the throttle the runner pod was last given (at start or by
	// PUT /throttle); a spec.throttle that differs is pushed to the pod.
	// +optional
	AppliedThrottle *Throttle `json:"appliedThrottle,omitempty"`
	// quiesced is the app this run scaled down and the replicas it had, recorded by the
	// manager before the scale-down; the app is restored to them, never to more, once the
	// run's pod has stopped. Absent once restored.
	// +optional
	Quiesced *QuiescedApp `json:"quiesced,omitempty"`
	// tokenSecret is the Secret the manager made for this run's control token; only this
	// Secret is mounted into the run's pods and deleted with the run.
	// +optional
	TokenSecret *OwnedObject `json:"tokenSecret,omitempty"`
	// server is the server an online run resolved and identified (absent for a volume).
	// +optional
	Server *ServerStatus `json:"server,omitempty"`
	// foreground is what the server's own traffic felt over the last interval, next to a
	// baseline taken just before the vacuum started. Only the engine server reports it
	// (its vacuumops_statement_latency view); PostgreSQL has no latency histogram, so it
	// stays absent there.
	// +optional
	Foreground *ForegroundStatus `json:"foreground,omitempty"`
	// pause is the user's pause (spec.paused) as the runner took it, with the time paused.
	// +optional
	Pause *PauseStatus `json:"pause,omitempty"`
	// replication is the largest lag of the server's standbys (pg_stat_replication), now
	// and during the run; absent for a volume and while no standby was seen.
	// +optional
	Replication *ReplicationStatus `json:"replication,omitempty"`
	// adaptive is what the adaptive throttle does: the effective rate, the binding signal
	// and the time bound by each; absent while no adaptive target applies.
	// +optional
	Adaptive *AdaptiveStatus `json:"adaptive,omitempty"`
}

// ServerStatus is the server an online run works on.
type ServerStatus struct {
	// address is the ready endpoint (IP:port) the run was given, from the Service's
	// EndpointSlices.
	// +optional
	Address string `json:"address,omitempty"`
	// systemIdentifier is the server's system identifier (pg_control_system()), read at
	// the run's start; the online-runs Lease is keyed by it, so two Services in front of
	// one server share the lock.
	// +optional
	SystemIdentifier string `json:"systemIdentifier,omitempty"`
	// version is the server's version() string.
	// +optional
	Version string `json:"version,omitempty"`
	// throttleApplies says when a throttle change takes effect: Immediately (the engine
	// server) or NextTable (PostgreSQL, which cannot re-throttle a running manual VACUUM).
	// +optional
	ThrottleApplies string `json:"throttleApplies,omitempty"`
}

// ForegroundStatus is the foreground's latency and rate, from the server's histograms.
// The engine server counts each foreground statement and, for a write in an implicit
// transaction (autocommit), that transaction's commit as one more: its WAL flush is what a
// write load waits on.
type ForegroundStatus struct {
	// p50 is the median latency of the foreground's statements and implicit commits over the
	// last interval, as a duration string.
	// +optional
	P50 string `json:"p50,omitempty"`
	// p99 is the 99th-percentile latency of the foreground's statements and implicit commits
	// over the last interval.
	// +optional
	P99 string `json:"p99,omitempty"`
	// statementsPerSecond is the foreground's statements and implicit commits per second over
	// the last interval.
	// +optional
	StatementsPerSecond int64 `json:"statementsPerSecond,omitempty"`
	// baselineP99 is the 99th-percentile latency over the interval just before the vacuum
	// started.
	// +optional
	BaselineP99 string `json:"baselineP99,omitempty"`
	// p99VsBaselinePerMille is P99 over BaselineP99, per mille (1300 = 1.3 times).
	// +optional
	P99VsBaselinePerMille *int64 `json:"p99VsBaselinePerMille,omitempty"`
	// p99VsBaseline is P99VsBaselinePerMille for printing ("1.3x").
	// +optional
	P99VsBaseline string `json:"p99VsBaseline,omitempty"`
}

// QuiescedApp is a workload a run scaled to 0, and the replicas to give it back.
type QuiescedApp struct {
	// kind is Deployment or StatefulSet.
	// +required
	Kind string `json:"kind"`
	// name of the workload, in the run's namespace.
	// +required
	Name string `json:"name"`
	// replicas the workload had before the run scaled it down.
	// +required
	Replicas int32 `json:"replicas"`
}

// OwnedObject names an object the manager made for a run, by name and UID.
type OwnedObject struct {
	// name of the object, in the run's namespace.
	// +required
	Name string `json:"name"`
	// uid of the object: deletes carry it as a precondition.
	// +required
	UID types.UID `json:"uid"`
}

// VacuumRun is one execution of a vacuum against a volume, with its live status.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName={vr,vacrun},categories=vacuum
// +kubebuilder:selectablefield:JSONPath=`.status.quiesced.name`
// +kubebuilder:printcolumn:name="Policy",type=string,JSONPath=`.spec.policyName`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Table",type=string,JSONPath=`.status.table`
// +kubebuilder:printcolumn:name="Progress",type=string,JSONPath=`.status.progress`
// +kubebuilder:printcolumn:name="Pages/s",type=integer,JSONPath=`.status.pagesPerSecond`
// +kubebuilder:printcolumn:name="Read/s",type=string,JSONPath=`.status.readRate`,priority=1
// +kubebuilder:printcolumn:name="Write/s",type=string,JSONPath=`.status.writeRate`,priority=1
// +kubebuilder:printcolumn:name="WAL/s",type=string,JSONPath=`.status.walRate`
// +kubebuilder:printcolumn:name="FG-P99",type=string,JSONPath=`.status.foreground.p99`
// +kubebuilder:printcolumn:name="vs-Base",type=string,JSONPath=`.status.foreground.p99VsBaseline`,priority=1
// +kubebuilder:printcolumn:name="Lag",type=string,JSONPath=`.status.replication.lag`,priority=1
// +kubebuilder:printcolumn:name="Max-Lag",type=string,JSONPath=`.status.replication.maxLag`,priority=1
// +kubebuilder:printcolumn:name="Binding",type=string,JSONPath=`.status.adaptive.binding`,priority=1
// +kubebuilder:printcolumn:name="Budget",type=string,JSONPath=`.status.adaptive.budget`,priority=1
// +kubebuilder:printcolumn:name="Attempts",type=integer,JSONPath=`.status.attempts`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.status=="True")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 53",message="metadata.name of a VacuumRun must be at most 53 characters, so the names of its pods and Secret stay within 63"
type VacuumRun struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the object's standard metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is what the VacuumRun asks for.
	// +optional
	Spec VacuumRunSpec `json:"spec,omitempty"` //nolint:kubeapilinter // optionalfields: a value, as in every Kubernetes kind; the CRD is unchanged
	// status is what the controller last saw and did.
	// +optional
	Status VacuumRunStatus `json:"status,omitempty"` //nolint:kubeapilinter // optionalfields: a value, as in every Kubernetes kind
}

// VacuumRunList is a list of VacuumRuns.
// +kubebuilder:object:root=true
type VacuumRunList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VacuumRun `json:"items"`
}
