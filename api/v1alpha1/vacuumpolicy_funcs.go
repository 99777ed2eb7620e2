package v1alpha1

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultRunsHistoryLimit is how many succeeded, and how many failed, runs a policy keeps
// when its history limits are absent.
const DefaultRunsHistoryLimit int32 = 3

// SuccessfulHistoryLimit is how many succeeded runs the policy keeps (the default when
// absent; the API server fills it in, so only an object built in Go lacks it).
func (p *VacuumPolicy) SuccessfulHistoryLimit() int32 {
	return historyLimit(p.Spec.SuccessfulRunsHistoryLimit)
}

// FailedHistoryLimit is how many failed or cancelled runs the policy keeps.
func (p *VacuumPolicy) FailedHistoryLimit() int32 {
	return historyLimit(p.Spec.FailedRunsHistoryLimit)
}

func historyLimit(v *int32) int32 {
	if v == nil {
		return DefaultRunsHistoryLimit
	}
	return max(*v, 0)
}

// Location returns the policy's time zone (UTC when empty).
func (p *VacuumPolicy) Location() (*time.Location, error) {
	if p.Spec.TimeZone == "" {
		return time.UTC, nil
	}
	return time.LoadLocation(p.Spec.TimeZone)
}

// IsScheduled says whether the policy runs on a schedule (else it runs once).
func (p *VacuumPolicy) IsScheduled() bool { return p.Spec.Schedule != "" }

// OnceRunName is the name of the single run of a policy without a schedule.
func (p *VacuumPolicy) OnceRunName() string { return p.Name + "-once" }

// HaltedByCorruption says whether runs are halted: a run found corruption and the user has
// not acknowledged it by annotating the policy with that run's name.
func (p *VacuumPolicy) HaltedByCorruption() bool {
	return p.Status.CorruptionRun != "" &&
		p.Annotations[AnnotationCorruptionAcknowledged] != p.Status.CorruptionRun
}

// RunNowRequested returns the run-now annotation's value when it asks for a run not
// started yet.
func (p *VacuumPolicy) RunNowRequested() (string, bool) {
	v, ok := p.Annotations[AnnotationRunNow]
	return v, ok && v != "" && v != p.Status.RunNowHandled
}

// SetReady records whether the policy can start runs.
func (s *VacuumPolicyStatus) SetReady(gen int64, ready bool, reason, msg string) {
	status := metav1.ConditionTrue
	if !ready {
		status = metav1.ConditionFalse
	}
	setCondition(&s.Conditions, gen, ConditionReady, status, reason, msg)
}

// SetDegraded records whether the policy's runs are halted or failing.
func (s *VacuumPolicyStatus) SetDegraded(gen int64, degraded bool, reason, msg string) {
	status := metav1.ConditionFalse
	if degraded {
		status = metav1.ConditionTrue
	}
	setCondition(&s.Conditions, gen, ConditionDegraded, status, reason, msg)
}

// IsReady says whether the Ready condition is True.
func (s *VacuumPolicyStatus) IsReady() bool {
	return meta.IsStatusConditionTrue(s.Conditions, ConditionReady)
}
