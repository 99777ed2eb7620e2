package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// IsFinal says whether a run in this phase has ended for good.
func (p RunPhase) IsFinal() bool {
	return p == RunSucceeded || p == RunFailed || p == RunCancelled || p == RunInterrupted
}

// IsFinished says whether the run has ended.
func (r *VacuumRun) IsFinished() bool { return r.Status.Phase.IsFinal() }

// setCondition records a condition for the given spec generation.
func setCondition(conds *[]metav1.Condition, gen int64, typ string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(conds, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen,
	})
}

// MarkPending says the run waits (for the volume's lock, the quiesced app or its pod).
func (s *VacuumRunStatus) MarkPending(gen int64, reason, msg string) {
	s.Phase, s.Message = RunPending, msg
	setCondition(&s.Conditions, gen, ConditionProgressing, metav1.ConditionTrue, reason, msg)
}

// MarkRunning says a runner pod is at work.
func (s *VacuumRunStatus) MarkRunning(gen int64, msg string) {
	s.Phase, s.Message = RunRunning, msg
	setCondition(&s.Conditions, gen, ConditionProgressing, metav1.ConditionTrue, ReasonRunning, msg)
}

// MarkSucceeded ends the run successfully at now.
func (s *VacuumRunStatus) MarkSucceeded(gen int64, now metav1.Time, msg string) {
	s.end(gen, RunSucceeded, now, ReasonSucceeded, msg)
	s.setOutcome(gen, ConditionComplete, ReasonSucceeded, msg)
}

// MarkFailed ends the run in failure at now, for reason.
func (s *VacuumRunStatus) MarkFailed(gen int64, now metav1.Time, reason, msg string) {
	s.end(gen, RunFailed, now, reason, msg)
	s.setOutcome(gen, ConditionFailed, reason, msg)
}

// MarkCancelled ends the run as cancelled at now.
func (s *VacuumRunStatus) MarkCancelled(gen int64, now metav1.Time, msg string) {
	s.end(gen, RunCancelled, now, ReasonCancelled, msg)
	s.setOutcome(gen, ConditionCancelled, ReasonCancelled, msg)
}

func (s *VacuumRunStatus) end(gen int64, phase RunPhase, now metav1.Time, reason, msg string) {
	s.Phase, s.Message = phase, msg
	if s.CompletionTime == nil {
		s.CompletionTime = &now
	}
	setCondition(&s.Conditions, gen, ConditionProgressing, metav1.ConditionFalse, reason, msg)
}

// SetRates records the run's current rates, as integers and as printable strings.
func (s *VacuumRunStatus) SetRates(pagesPerSecond, read, write, wal int64) {
	s.PagesPerSecond, s.ReadBytesPerSecond, s.WriteBytesPerSecond, s.WALBytesPerSecond = pagesPerSecond, read, write, wal
	s.ReadRate, s.WriteRate, s.WALRate = FormatBytesPerSecond(read), FormatBytesPerSecond(write), FormatBytesPerSecond(wal)
}

// SetPercent records the run's progress, clamped to 0..100, as an integer and a string.
func (s *VacuumRunStatus) SetPercent(p int32) {
	s.Percent = min(max(p, 0), 100)
	s.Progress = FormatPercent(s.Percent)
}
