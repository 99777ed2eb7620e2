package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Maintenance windows, the user's pause, and a vacuum that spans several windows. A policy
// with spec.window starts its runs only inside a window; at the window's end the runner
// stops every table at a delay point and the run ends Interrupted (reason WindowClosed),
// recording where each table stopped, and the next window's run resumes from there.

// RunInterrupted is the phase of a run stopped by its window's end (reason WindowClosed) or
// refused because a VACUUM FULL would not fit in what is left of it (reason WindowTooShort).
// Where each table stopped is in status.tables; the policy's next window resumes it.
const RunInterrupted RunPhase = "Interrupted"

// Conditions and reasons of windows and pauses.
const (
	// ConditionInterrupted on a run: its window closed before it was done (WindowClosed), or
	// a VACUUM FULL did not fit in it (WindowTooShort).
	ConditionInterrupted = "Interrupted"
	// ConditionPaused on a run: the runner is paused at a delay point (spec.paused).
	ConditionPaused = "Paused"

	// ReasonWindowClosed: the run's window ended; the runner stopped at a delay point, or was
	// stopped after the window's stopGracePeriodSeconds.
	ReasonWindowClosed = "WindowClosed"
	// ReasonWindowTooShort: a VACUUM FULL whose estimate (the table's pages divided by the
	// pages per second its throttle allows, or its last FULL's measured rate) exceeds what is
	// left of the window was not started.
	ReasonWindowTooShort = "WindowTooShort"
	// ReasonWaitingForWindow: a tick fell outside the policy's window and waits for the next
	// opening.
	ReasonWaitingForWindow = "WaitingForWindow"
	// ReasonPaused: spec.paused is true and the runner took the pause.
	ReasonPaused = "Paused"
	// ReasonUnpaused: spec.paused is false (again) and the runner is working.
	ReasonUnpaused = "Unpaused"
	// ReasonPauseFailed: the runner pod could not be sent spec.paused; it is tried again.
	ReasonPauseFailed = "PauseNotApplied"
	// ReasonInvalidWindow: spec.window cannot be used (its schedule does not parse).
	ReasonInvalidWindow = "InvalidWindow"
)

// DefaultStopGracePeriodSeconds is window.stopGracePeriodSeconds when a spec leaves it out.
const DefaultStopGracePeriodSeconds = 60

// Window is a recurring maintenance window in the policy's time zone. Windows follow the
// wall clock: a window opening at 01:00 for 14400 seconds closes at 05:00 local time, also on
// the days the clocks change (then it is an hour shorter or longer).
// +kubebuilder:validation:XValidation:rule="!self.schedule.startsWith('TZ=') && !self.schedule.startsWith('CRON_TZ=')",message="spec.window.schedule takes its time zone from spec.timeZone, not from a TZ= prefix"
type Window struct {
	// schedule is the cron expression (5 fields, or a macro such as @daily) of the window's
	// openings, read in spec.timeZone. Without spec.schedule each opening starts a run.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +required
	Schedule string `json:"schedule,omitempty"`

	// durationSeconds is how long each window stays open, 1 second to 31 days, on the wall
	// clock of spec.timeZone.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=2678400
	// +required
	DurationSeconds int64 `json:"durationSeconds,omitempty"`

	// stopGracePeriodSeconds is how long after the window's end the runner may take to stop
	// at a delay point and report where it stopped; past it the runner pod is stopped (the
	// run still ends Interrupted, with the positions of its last report). Default 60.
	// +kubebuilder:default=60
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	// +optional
	StopGracePeriodSeconds *int64 `json:"stopGracePeriodSeconds,omitempty"`

	// jitter spreads the start inside the window: each policy starts at an offset of its own,
	// under half the window, derived from a hash of its namespace and name (so the same on
	// every manager and restart) and shown in status.window.jitterSeconds. A fleet of policies
	// on one storage system then does not start at once.
	// +optional
	Jitter bool `json:"jitter,omitempty"` //nolint:kubeapilinter // optionalfields: false is the default, so absent and false are the same
}

// RunWindow is the window a policy's run was made for, copied onto the run when the policy
// made it.
type RunWindow struct {
	// stopAt is when the window closes: the runner stops every table at a delay point at
	// this time and the run ends Interrupted with reason WindowClosed.
	// +required
	StopAt metav1.Time `json:"stopAt"` //nolint:kubeapilinter // requiredfields: only the policy writes it, always with the window's end; no run has a zero stopAt

	// stopGracePeriodSeconds is how long after stopAt the runner may take to stop before its
	// pod is stopped.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	// +optional
	StopGracePeriodSeconds int64 `json:"stopGracePeriodSeconds,omitempty"` //nolint:kubeapilinter // optionalfields: the policy always writes it; 0 means stop at stopAt, as absent does

	// fullPagesPerSecond is the heap pages per second the policy's last complete VACUUM FULL
	// achieved (status.window.lastFullPagesPerSecond), absent when there was none. A FULL's
	// estimate for WindowTooShort is its table's pages divided by it when set, else by the
	// pages per second the run's throttle allows.
	// +kubebuilder:validation:Minimum=0
	// +optional
	FullPagesPerSecond int64 `json:"fullPagesPerSecond,omitempty"` //nolint:kubeapilinter // optionalfields: 0 means no FULL was measured, as absent does
}

// PolicyWindowStatus is what the policy knows of its windows and of the vacuums that span
// several of them.
type PolicyWindowStatus struct {
	// jitterSeconds is the offset of this policy's start inside each window (window.jitter),
	// 0 without jitter.
	// +optional
	JitterSeconds int64 `json:"jitterSeconds,omitempty"`

	// waitingTick is a schedule tick that fell outside a window and waits for the next
	// opening; only the latest waiting tick runs.
	// +optional
	WaitingTick *metav1.Time `json:"waitingTick,omitempty"`

	// observedRun is the latest ended run whose tables were counted below.
	// +optional
	ObservedRun string `json:"observedRun,omitempty"`

	// lastFullPagesPerSecond is the heap pages per second the policy's latest run that
	// completed a VACUUM FULL achieved; each later run is given it (spec.window.
	// fullPagesPerSecond) for its WindowTooShort estimate.
	// +optional
	LastFullPagesPerSecond int64 `json:"lastFullPagesPerSecond,omitempty"`

	// spanningTables are the tables a window closed on before their vacuum was done, so
	// that it spans several windows, at most 1024; a table leaves the list once a run
	// completes it.
	// +kubebuilder:validation:MaxItems=1024
	// +listType=map
	// +listMapKey=name
	// +optional
	SpanningTables []SpanningTable `json:"spanningTables,omitempty"`

	// estimatedWindowsLeft is the most windows any of SpanningTables still needs, at the
	// pace of the windows it has had so far.
	// +optional
	EstimatedWindowsLeft int32 `json:"estimatedWindowsLeft,omitempty"`
}

// SpanningTable is one table whose vacuum goes on over several windows.
type SpanningTable struct {
	// name of the table.
	// +required
	Name string `json:"name"`
	// windows is how many windows have worked on the table's current vacuum so far.
	// +required
	Windows int32 `json:"windows"`
	// blockReached is the heap block the vacuum will resume from.
	// +required
	BlockReached int64 `json:"blockReached"`
	// donePerMille is the share of the table's heap done across those windows, per mille.
	// +required
	DonePerMille int32 `json:"donePerMille"`
	// estimatedWindowsLeft is how many more windows the table needs at the pace so far.
	// +required
	EstimatedWindowsLeft int32 `json:"estimatedWindowsLeft"`
}

// PauseStatus is the run's pause as the runner took it.
type PauseStatus struct {
	// since is when the runner took the current pause; absent while it works.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
	// pausedSeconds is the time the run has spent paused so far, the current pause included.
	// +optional
	PausedSeconds int64 `json:"pausedSeconds,omitempty"`
}
