package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StopGracePeriod is the window's stopGracePeriodSeconds (its default when absent).
func (w *Window) StopGracePeriod() time.Duration {
	if w.StopGracePeriodSeconds == nil {
		return DefaultStopGracePeriodSeconds * time.Second
	}
	return time.Duration(max(*w.StopGracePeriodSeconds, 0)) * time.Second
}

// HasWindow says whether the policy runs only inside maintenance windows.
func (p *VacuumPolicy) HasWindow() bool { return p.Spec.Window != nil }

// StopDeadline is when the run's pod is stopped if the runner has not stopped by itself:
// the window's end plus its grace period.
func (w *RunWindow) StopDeadline() time.Time {
	return w.StopAt.Add(time.Duration(max(w.StopGracePeriodSeconds, 0)) * time.Second)
}

// MarkInterrupted ends the run at now because its window closed (ReasonWindowClosed) or a
// VACUUM FULL did not fit in it (ReasonWindowTooShort): Interrupted=True, Complete=False.
func (s *VacuumRunStatus) MarkInterrupted(gen int64, now metav1.Time, reason, msg string) {
	s.end(gen, RunInterrupted, now, reason, msg)
	s.setOutcome(gen, ConditionInterrupted, reason, msg)
}

// EndPause closes the current pause of a run that ended at now: its time is added to
// PausedSeconds, and a Paused condition that is True turns False.
func (s *VacuumRunStatus) EndPause(gen int64, now metav1.Time) {
	if s.Pause == nil || s.Pause.Since == nil {
		return
	}
	s.Pause.settle(now.Time)
	s.Pause.Since = nil
	setCondition(&s.Conditions, gen, ConditionPaused, metav1.ConditionFalse, ReasonUnpaused, "the run ended")
}

// MarkPaused records that the runner took the pause at now.
func (s *VacuumRunStatus) MarkPaused(gen int64, now metav1.Time) {
	if s.Pause == nil {
		s.Pause = &PauseStatus{}
	}
	if s.Pause.Since == nil {
		s.Pause.Since = &now
	}
	setCondition(&s.Conditions, gen, ConditionPaused, metav1.ConditionTrue, ReasonPaused,
		"paused at a delay point by spec.paused since "+s.Pause.Since.UTC().Format(time.RFC3339))
}

// MarkUnpaused records that the runner went on at now; the pause's time is added to
// PausedSeconds.
func (s *VacuumRunStatus) MarkUnpaused(gen int64, now metav1.Time) {
	if s.Pause == nil {
		return // never paused: no condition either
	}
	s.Pause.settle(now.Time)
	s.Pause.Since = nil
	setCondition(&s.Conditions, gen, ConditionPaused, metav1.ConditionFalse, ReasonUnpaused, "working (spec.paused is false)")
}

// PausedFor is the time the run has spent paused up to now, the current pause included.
func (p *PauseStatus) PausedFor(now time.Time) time.Duration {
	if p == nil {
		return 0
	}
	d := time.Duration(p.PausedSeconds) * time.Second
	if p.Since != nil {
		d += now.Sub(p.Since.Time)
	}
	return d
}

// settle adds the current pause up to now to PausedSeconds and restarts it at now.
func (p *PauseStatus) settle(now time.Time) {
	if p == nil || p.Since == nil {
		return
	}
	p.PausedSeconds = int64(p.PausedFor(now) / time.Second)
	p.Since = &metav1.Time{Time: now}
}

// IsPaused says whether the Paused condition is True.
func (s *VacuumRunStatus) IsPaused() bool {
	for _, c := range s.Conditions {
		if c.Type == ConditionPaused {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}
