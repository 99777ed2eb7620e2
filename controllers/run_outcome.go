package controllers

import (
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// verdict is what an ended attempt means for its run.
type verdict int

const (
	// verdictSucceeded ends the run Succeeded.
	verdictSucceeded verdict = iota
	// verdictFailed ends the run Failed with no retry.
	verdictFailed
	// verdictRetry counts one failed attempt against backoffLimit.
	verdictRetry
	// verdictCancelled ends the run Cancelled.
	verdictCancelled
	// verdictInterrupted ends the run Interrupted (its window closed, run_window.go).
	verdictInterrupted
)

// attemptEnd is how a runner container ended.
type attemptEnd struct {
	ExitCode int32
	Reason   string // the kubelet's: Completed, Error, OOMKilled...
	Signal   int32
	Summary  *runnerwire.Summary // nil when the termination message held none
	Message  string              // the summary's message, or the raw termination message
	// StartedAt is when the container started (zero when the kubelet did not say): the
	// run's start when no reconcile saw the pod running.
	StartedAt metav1.Time
}

// containerEnd returns how the pod's runner container ended, if it has.
func containerEnd(pod *corev1.Pod) (attemptEnd, bool) {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name != runnerContainer || cs.State.Terminated == nil {
			continue
		}
		t := cs.State.Terminated
		end := attemptEnd{ExitCode: t.ExitCode, Reason: t.Reason, Signal: t.Signal, StartedAt: t.StartedAt}
		var sum runnerwire.Summary
		if err := json.Unmarshal([]byte(t.Message), &sum); err == nil && sum.Phase != "" {
			end.Summary, end.Message = &sum, sum.Message
		} else {
			end.Message = strings.TrimSpace(t.Message)
		}
		if end.Message == "" && pod.Status.Reason != "" {
			// Killed with no word from the runner: say why the kubelet ended the pod
			// ("Evicted: Usage of EmptyDir volume "tmp" exceeds the limit "64Mi".").
			end.Message = strings.TrimSpace(pod.Status.Reason + ": " + pod.Status.Message)
		}
		return end, true
	}
	return attemptEnd{}, false
}

// judge is the outcome table of the runner's exit codes. cancelling is true when the run
// was cancelled or is being deleted.
//
//	0            Succeeded
//	2, 6         Failed, no retry (bad input, no space for VACUUM FULL)
//	4            Failed, no retry, reason CorruptionFound (the policy halts its schedule)
//	5            Cancelled when cancelling, else one failed attempt
//	1, 3, other  one failed attempt (internal error, volume busy, signal, OOM)
func judge(end attemptEnd, cancelling bool) (verdict, string, string) {
	msg := end.Message
	switch {
	case end.Reason == "OOMKilled":
		return verdictRetry, vacuumv1alpha1.ReasonAttemptFailed, withDefault(msg, "runner killed: out of memory")
	case end.Signal != 0 || end.ExitCode > 128:
		return verdictRetry, vacuumv1alpha1.ReasonAttemptFailed,
			withDefault(msg, fmt.Sprintf("runner killed by a signal (exit code %d)", end.ExitCode))
	}
	switch end.ExitCode {
	case runnerwire.ExitOK:
		return verdictSucceeded, vacuumv1alpha1.ReasonSucceeded, withDefault(msg, "vacuum complete")
	case runnerwire.ExitBadInput:
		return verdictFailed, vacuumv1alpha1.ReasonBadInput, withDefault(msg, "runner refused its input (exit code 2)")
	case runnerwire.ExitNoSpace:
		return verdictFailed, vacuumv1alpha1.ReasonNoSpace, withDefault(msg, "not enough free space for VACUUM FULL (exit code 6)")
	case runnerwire.ExitCorruption:
		return verdictFailed, vacuumv1alpha1.ReasonCorruptionFound, withDefault(msg, "corruption found (exit code 4)")
	case runnerwire.ExitCancelled:
		if cancelling {
			return verdictCancelled, vacuumv1alpha1.ReasonCancelled, withDefault(msg, "cancelled")
		}
		return verdictRetry, vacuumv1alpha1.ReasonAttemptFailed, withDefault(msg, "runner stopped by SIGTERM (exit code 5)")
	case runnerwire.ExitBusy:
		return verdictRetry, vacuumv1alpha1.ReasonAttemptFailed, withDefault(msg, "data directory busy (exit code 3)")
	}
	return verdictRetry, vacuumv1alpha1.ReasonAttemptFailed, withDefault(msg, fmt.Sprintf("runner failed (exit code %d)", end.ExitCode))
}

func withDefault(msg, def string) string {
	if msg == "" {
		return def
	}
	return msg
}
