package v1alpha1

// Annotations and labels the operator reads or writes. They are part of the API: users and
// scripts rely on them.
const (
	// AnnotationRunNow on a VacuumPolicy starts a run now whatever the schedule; each new
	// value starts one more run (kubectl annotate vp NAME vacuum.vacuumops.io/run-now=$(date +%s)).
	AnnotationRunNow = "vacuum.vacuumops.io/run-now"
	// AnnotationCorruptionAcknowledged on a VacuumPolicy, set to the name of the run that
	// found corruption, lets the schedule resume.
	AnnotationCorruptionAcknowledged = "vacuum.vacuumops.io/corruption-acknowledged"
	// AnnotationScheduledTime on a VacuumRun is the tick (RFC 3339) it was created for.
	AnnotationScheduledTime = "vacuum.vacuumops.io/scheduled-time"
	// AnnotationPolicyThrottle on a VacuumRun made by a policy is a hash of the policy's
	// spec.throttle last carried onto the run. The policy re-throttles its active runs only
	// when its own throttle no longer matches that hash, so a hand edit of a run's throttle
	// (kubectl patch vacuumrun) stays until the policy's throttle itself changes.
	AnnotationPolicyThrottle = "vacuum.vacuumops.io/policy-throttle"
	// AnnotationRunSpec on a runner pod is the runner's RunSpec (JSON), which the pod reads
	// as a file through a downward-API volume: as an argument the kubelet would expand
	// $(VAR) and $$ inside it (a table named price$$ would reach the runner as price$).
	AnnotationRunSpec = "vacuum.vacuumops.io/run-spec"

	// LabelPolicy on a VacuumRun names its policy.
	LabelPolicy = "vacuum.vacuumops.io/policy"
	// LabelRun on a runner pod, token Secret or Lease names its run. It only selects: the
	// manager acts on a pod or Secret only when the run also controls it (owner UID).
	LabelRun = "vacuum.vacuumops.io/run"

	// FinalizerRun keeps a VacuumRun until its pod is stopped, its lock released and its
	// quiesced app restored.
	FinalizerRun = "vacuum.vacuumops.io/run"
)

// Condition types.
const (
	// ConditionReady on a policy: its schedule is valid and it may start runs.
	ConditionReady = "Ready"
	// ConditionDegraded on a policy: runs are halted (corruption found) or failing.
	ConditionDegraded = "Degraded"
	// ConditionProgressing on a run: it has not ended yet.
	ConditionProgressing = "Progressing"
	// ConditionComplete on a run: it ended successfully.
	ConditionComplete = "Complete"
	// ConditionFailed on a run: it ended in failure.
	ConditionFailed = "Failed"
)

// Condition and event reasons (CamelCase nouns).
const (
	ReasonScheduled            = "Scheduled"
	ReasonSuspended            = "Suspended"
	ReasonInvalidSchedule      = "InvalidSchedule"
	ReasonInvalidTimeZone      = "InvalidTimeZone"
	ReasonMissedSchedules      = "MissedSchedules"
	ReasonCorruptionFound      = "CorruptionFound"
	ReasonCorruptionAcked      = "CorruptionAcknowledged"
	ReasonHealthy              = "Healthy"
	ReasonRunCreated           = "RunCreated"
	ReasonRunReplaced          = "RunReplaced"
	ReasonRunSkipped           = "RunSkipped"
	ReasonRunDeleted           = "RunDeleted"
	ReasonVolumeBusy           = "VolumeBusy"
	ReasonQuiescing            = "Quiescing"
	ReasonQuiesceRestored      = "QuiesceRestored"
	ReasonPodCreated           = "PodCreated"
	ReasonPodPending           = "PodPending"
	ReasonRunning              = "Running"
	ReasonThrottleApplied      = "ThrottleApplied"
	ReasonThrottleFailed       = "ThrottleNotApplied"
	ReasonSucceeded            = "Succeeded"
	ReasonAttemptFailed        = "AttemptFailed"
	ReasonBackoffLimitExceeded = "BackoffLimitExceeded"
	ReasonDeadlineExceeded     = "DeadlineExceeded"
	ReasonBadInput             = "BadInput"
	ReasonNoSpace              = "NoSpace"
	ReasonCancelled            = "Cancelled"
	ReasonInvalidSpec          = "InvalidSpec"
	// ReasonClaimNotFound: the run waits for its PersistentVolumeClaim (its app is not
	// scaled down meanwhile).
	ReasonClaimNotFound = "ClaimNotFound"
	// ReasonPodNotStarted: the runner pod did not start within podStartTimeoutSeconds.
	ReasonPodNotStarted = "PodNotStarted"
	// ReasonPodRejected: the API server refused the runner pod (invalid or forbidden).
	ReasonPodRejected = "PodRejected"
	// ReasonForeignObject: an object the operator would adopt by name (a pod, a run) is not
	// controlled by the run or policy; it is left alone.
	ReasonForeignObject = "ForeignObject"
	// ReasonImageNotAllowed: the run names a runner image the operator does not allow.
	ReasonImageNotAllowed = "ImageNotAllowed"
	// ReasonPriorityClassNotAllowed: the run names a runner priority class the operator
	// does not allow.
	ReasonPriorityClassNotAllowed = "PriorityClassNotAllowed"
	// ReasonManagerUpgraded: the run was started by the manager version before this one;
	// a runner pod of that version, which serves no pinned HTTPS endpoint, is stopped.
	ReasonManagerUpgraded = "ManagerUpgraded"
	// ReasonEndpointNotReady: an online run waits for its Service to exist and to have a
	// ready endpoint on the port it names.
	ReasonEndpointNotReady = "EndpointNotReady"
	// ReasonIdentifying: an online run's runner identifies the server (its system
	// identifier) before the run takes the server's lock.
	ReasonIdentifying = "Identifying"
	// ReasonServerBusy: another online run holds the server's lock (the Lease of its
	// system identifier).
	ReasonServerBusy = "ServerBusy"
	// ReasonAdaptiveBindingChanged: the signal that binds a run's adaptive throttle changed
	// (an event, at most one per ten seconds of a run).
	ReasonAdaptiveBindingChanged = "AdaptiveBindingChanged"
)

// DefaultPodStartTimeoutSeconds is podStartTimeoutSeconds when a spec leaves it out.
const DefaultPodStartTimeoutSeconds = 600
