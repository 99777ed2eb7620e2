package controllers

import (
	"context"
	"fmt"
	"time"

	"github.com/robfig/cron/v3"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// startDueRuns starts what is due: a run-now request, the policy's one run when it has no
// schedule, or the most recent missed tick; then records when the next tick is.
func (r *PolicyReconciler) startDueRuns(ctx context.Context, p *vacuumv1alpha1.VacuumPolicy, active []*vacuumv1alpha1.VacuumRun) (ctrl.Result, error) {
	st, gen, now := &p.Status, p.Generation, r.Clock.Now()
	var sched cron.Schedule
	if p.IsScheduled() {
		s, err := parseSchedule(p)
		if err != nil {
			r.invalidSchedule(p, err)
			return ctrl.Result{}, nil // a spec edit triggers the next reconcile
		}
		sched = s
	}
	if p.HaltedByCorruption() {
		st.NextScheduleTime = nil
		st.SetReady(gen, false, vacuumv1alpha1.ReasonCorruptionFound, "runs are halted: "+st.CorruptionRun+" found corruption")
		return ctrl.Result{}, nil
	}
	if err := r.startRunNow(ctx, p, active, now); err != nil {
		return ctrl.Result{}, err
	}
	if p.HasWindow() {
		return r.startWindowedRuns(ctx, p, active, now)
	}
	switch {
	case p.Spec.Suspend:
		st.NextScheduleTime = nil
		st.SetReady(gen, true, vacuumv1alpha1.ReasonSuspended, "suspended: no run starts on schedule")
		return ctrl.Result{}, nil
	case sched == nil:
		st.NextScheduleTime = nil
		st.SetReady(gen, true, vacuumv1alpha1.ReasonScheduled, "no schedule: the policy runs once, as "+p.OnceRunName())
		if st.LastScheduleTime != nil {
			return ctrl.Result{}, nil // the one run was made: never again
		}
		if ok, err := r.mayStart(ctx, p, active, "the run-once", &p.CreationTimestamp, ""); !ok || err != nil {
			return ctrl.Result{}, err
		}
		if err := r.createRun(ctx, p, p.OnceRunName(), metav1.NewTime(now)); err != nil {
			return ctrl.Result{}, err
		}
		st.LastScheduleTime = &metav1.Time{Time: now}
		return ctrl.Result{}, nil
	}
	if err := r.startMissedTick(ctx, p, sched, active, now); err != nil {
		return ctrl.Result{}, err
	}
	next := nextTick(sched, scheduleEarliest(p), now)
	st.NextScheduleTime = &metav1.Time{Time: next}
	st.SetReady(gen, true, vacuumv1alpha1.ReasonScheduled, fmt.Sprintf("next run at %s", next.UTC().Format(time.RFC3339)))
	return ctrl.Result{RequeueAfter: next.Sub(now) + tickSlack}, nil
}

// startMissedTick starts the most recent tick since the last one, if it is within the
// starting deadline and concurrencyPolicy allows it.
func (r *PolicyReconciler) startMissedTick(ctx context.Context, p *vacuumv1alpha1.VacuumPolicy, sched cron.Schedule, active []*vacuumv1alpha1.VacuumRun, now time.Time) error {
	due := mostRecentTick(sched, scheduleEarliest(p), now)
	if due.Tick.IsZero() {
		return nil
	}
	if d := p.Spec.StartingDeadlineSeconds; d != nil && now.Sub(due.Tick) > time.Duration(*d)*time.Second {
		r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, vacuumv1alpha1.ReasonMissedSchedules, "StartRun",
			"missed the run of %s by more than startingDeadlineSeconds (%d); waiting for the next tick",
			due.Tick.UTC().Format(time.RFC3339), *d)
		return nil
	}
	if due.Missed > 1 {
		more := fmt.Sprintf("%d", due.Missed-1)
		if due.Missed > maxCountedTicks {
			more = fmt.Sprintf("more than %d", maxCountedTicks)
		}
		r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, vacuumv1alpha1.ReasonMissedSchedules, "StartRun",
			"%s earlier ticks were missed; starting only the most recent one (%s)", more, due.Tick.UTC().Format(time.RFC3339))
	}
	if ok, err := r.mayStart(ctx, p, active, "the run of "+due.Tick.UTC().Format(time.RFC3339), &metav1.Time{Time: due.Tick}, ""); !ok || err != nil {
		return err
	}
	if err := r.createRun(ctx, p, scheduledRunName(p, due.Tick), metav1.NewTime(due.Tick)); err != nil {
		return err
	}
	p.Status.LastScheduleTime = &metav1.Time{Time: due.Tick}
	return nil
}

// scheduleEarliest is where the policy's ticks are counted from: its last scheduled tick, or
// its creation.
func scheduleEarliest(p *vacuumv1alpha1.VacuumPolicy) time.Time {
	if p.Status.LastScheduleTime != nil {
		return p.Status.LastScheduleTime.Time
	}
	return p.CreationTimestamp.Time
}

// mayStart applies concurrencyPolicy: with Forbid a new run waits while one is active; with
// Replace the active ones are cancelled (they end Cancelled) and the new run starts. A waiting
// tick's RunSkipped event is emitted once per tick (status.lastSkippedTime), since the policy
// is reconciled again on each phase change of its active run and on its own wake-ups; a
// run-now request (tick nil, runNow its annotation's value) once per value
// (status.runNowSkipped).
func (r *PolicyReconciler) mayStart(ctx context.Context, p *vacuumv1alpha1.VacuumPolicy, active []*vacuumv1alpha1.VacuumRun, what string, tick *metav1.Time, runNow string) (bool, error) {
	if len(active) == 0 {
		return true, nil
	}
	if p.Spec.ConcurrencyPolicy == vacuumv1alpha1.ReplaceConcurrent {
		return true, r.replaceActive(ctx, p, active)
	}
	if tick != nil && p.Status.LastSkippedTime.Equal(tick) || tick == nil && runNow != "" && p.Status.RunNowSkipped == runNow {
		return false, nil
	}
	r.Recorder.Eventf(p, nil, corev1.EventTypeNormal, vacuumv1alpha1.ReasonRunSkipped, "StartRun",
		"%s waits: run %s is still active (concurrencyPolicy Forbid)", what, active[0].Name)
	if tick != nil {
		p.Status.LastSkippedTime = tick.DeepCopy()
	} else {
		p.Status.RunNowSkipped = runNow
	}
	return false, nil
}

// startRunNow honours a new value of the run-now annotation.
func (r *PolicyReconciler) startRunNow(ctx context.Context, p *vacuumv1alpha1.VacuumPolicy, active []*vacuumv1alpha1.VacuumRun, now time.Time) error {
	v, ok := p.RunNowRequested()
	if !ok {
		return nil
	}
	if ok, err := r.mayStart(ctx, p, active, "the run-now request", nil, v); !ok || err != nil {
		return err
	}
	if err := r.createRun(ctx, p, RunNowRunName(p.Name, v), metav1.NewTime(now), runNowWindow(p, r.windowParser(), now)); err != nil {
		return err
	}
	p.Status.RunNowHandled = v
	p.Status.LastScheduleTime = &metav1.Time{Time: now}
	return nil
}

// invalidSchedule reports a schedule or time zone the controller cannot read.
func (r *PolicyReconciler) invalidSchedule(p *vacuumv1alpha1.VacuumPolicy, err error) {
	st := &p.Status
	st.NextScheduleTime = nil
	reason := scheduleErrorReason(err)
	prev := meta.FindStatusCondition(st.Conditions, vacuumv1alpha1.ConditionReady)
	if prev == nil || prev.Reason != reason || prev.Message != err.Error() || prev.ObservedGeneration != p.Generation {
		r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, reason, "ParseSchedule", "%s", err.Error())
	}
	st.SetReady(p.Generation, false, reason, err.Error())
}
