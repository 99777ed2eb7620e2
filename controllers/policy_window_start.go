package controllers

import (
	"context"
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// startWindowedRuns is startDueRuns for a policy with spec.window: it starts the latest due
// tick in its window slot, or waits for the slot, and records when the next run will start.
func (r *PolicyReconciler) startWindowedRuns(ctx context.Context, p *vacuumv1alpha1.VacuumPolicy, active []*vacuumv1alpha1.VacuumRun, now time.Time) (ctrl.Result, error) {
	st, gen := &p.Status, p.Generation
	w, ticks, err := windowAndTicks(p, r.windowParser())
	if err != nil {
		r.invalidSchedule(p, err)
		return ctrl.Result{}, nil // a spec edit triggers the next reconcile
	}
	ws := windowStatus(p)
	ws.JitterSeconds = int64(w.jitter / time.Second)
	if cur, ok := w.containing(now); (ok && w.overlaps(cur)) || (!ok && w.overlaps(w.openings.Next(now))) {
		err := fmt.Errorf("window of %ds is still open at its next opening; windows must not overlap", p.Spec.Window.DurationSeconds)
		st.NextScheduleTime = nil
		st.SetReady(gen, false, vacuumv1alpha1.ReasonInvalidWindow, err.Error())
		return ctrl.Result{}, nil
	}
	if p.Spec.Suspend {
		st.NextScheduleTime, ws.WaitingTick = nil, nil
		st.SetReady(gen, true, vacuumv1alpha1.ReasonSuspended, "suspended: no run starts on schedule")
		return ctrl.Result{}, nil
	}
	started, wait, err := r.startInWindow(ctx, p, w, ticks, active, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	next := wait
	if next.IsZero() || started {
		next = w.slotFor(ticks.Next(now)).Start
	}
	st.NextScheduleTime = &metav1.Time{Time: next}
	st.SetReady(gen, true, vacuumv1alpha1.ReasonScheduled, fmt.Sprintf("next run at %s, inside the window", next.UTC().Format(time.RFC3339)))
	return ctrl.Result{RequeueAfter: next.Sub(now) + tickSlack}, nil
}

// windowAndTicks returns the policy's window and the schedule of its ticks: spec.schedule,
// or the window's openings when there is none.
func windowAndTicks(p *vacuumv1alpha1.VacuumPolicy, parser cron.Parser) (*window, cron.Schedule, error) {
	w, err := parseWindow(p, parser)
	if err != nil {
		return nil, nil, err
	}
	if !p.IsScheduled() {
		return w, w.openings, nil
	}
	ticks, err := parseSchedule(p)
	return w, ticks, err
}

// startInWindow starts the latest tick since the last one when its slot has begun; it
// returns whether it started one, and else when the waiting tick's slot begins (zero when no
// tick is due).
func (r *PolicyReconciler) startInWindow(ctx context.Context, p *vacuumv1alpha1.VacuumPolicy, w *window, ticks cron.Schedule,
	active []*vacuumv1alpha1.VacuumRun, now time.Time) (bool, time.Time, error) {
	ws := windowStatus(p)
	earliest := p.CreationTimestamp.Time
	if p.Status.LastScheduleTime != nil {
		earliest = p.Status.LastScheduleTime.Time
	}
	due := mostRecentTick(ticks, earliest, now)
	if due.Tick.IsZero() {
		ws.WaitingTick = nil
		return false, time.Time{}, nil
	}
	s := w.slotFor(due.Tick)
	if !now.Before(s.StopAt) {
		// That slot went by without the run (the manager was down, or a run was still
		// active): the tick waits for the window open now, or the next one.
		s = w.slotFor(now)
	}
	if now.Before(s.Start) {
		if ws.WaitingTick == nil || !ws.WaitingTick.Time.Equal(due.Tick) {
			r.Recorder.Eventf(p, nil, corev1.EventTypeNormal, vacuumv1alpha1.ReasonWaitingForWindow, "StartRun",
				"the run of %s waits for its window: it starts at %s", due.Tick.UTC().Format(time.RFC3339), s.Start.UTC().Format(time.RFC3339))
		}
		ws.WaitingTick = &metav1.Time{Time: due.Tick}
		return false, s.Start, nil
	}
	if d := p.Spec.StartingDeadlineSeconds; d != nil && now.Sub(s.Start) > time.Duration(*d)*time.Second {
		r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, vacuumv1alpha1.ReasonMissedSchedules, "StartRun",
			"missed the start of the window at %s by more than startingDeadlineSeconds (%d); waiting for the next window",
			s.Start.UTC().Format(time.RFC3339), *d)
		return false, time.Time{}, nil
	}
	if ok, err := r.mayStart(ctx, p, active, "the run of "+due.Tick.UTC().Format(time.RFC3339), &metav1.Time{Time: due.Tick}, ""); !ok || err != nil {
		return false, time.Time{}, err
	}
	resume := p.Spec.Mode != vacuumv1alpha1.VacuumModeFull && len(ws.SpanningTables) > 0
	err := r.createRun(ctx, p, scheduledRunName(p, due.Tick), metav1.NewTime(due.Tick), func(run *vacuumv1alpha1.VacuumRun) {
		run.Spec.Window = &vacuumv1alpha1.RunWindow{StopAt: metav1.NewTime(s.StopAt), StopGracePeriodSeconds: int64(w.grace / time.Second),
			FullPagesPerSecond: ws.LastFullPagesPerSecond}
		run.Spec.Resume = resume
	})
	if err != nil {
		return false, time.Time{}, err
	}
	p.Status.LastScheduleTime = &metav1.Time{Time: due.Tick}
	ws.WaitingTick = nil
	return true, time.Time{}, nil
}

// windowParser reads window schedules: cronParser's five fields, or with
// WindowScheduleSeconds an optional leading seconds field too.
func (r *PolicyReconciler) windowParser() cron.Parser {
	if r.WindowScheduleSeconds {
		return windowSecondsParser
	}
	return cronParser
}

// windowStatus returns the policy's status.window, made when absent.
func windowStatus(p *vacuumv1alpha1.VacuumPolicy) *vacuumv1alpha1.PolicyWindowStatus {
	if p.Status.Window == nil {
		p.Status.Window = &vacuumv1alpha1.PolicyWindowStatus{}
	}
	return p.Status.Window
}

// runNowWindow is the window a run-now run of a policy with windows is given: the one open
// now, if any (such a run otherwise runs to its end, as a run-now does without windows).
func runNowWindow(p *vacuumv1alpha1.VacuumPolicy, parser cron.Parser, now time.Time) func(*vacuumv1alpha1.VacuumRun) {
	if !p.HasWindow() {
		return nil
	}
	w, err := parseWindow(p, parser)
	if err != nil {
		return nil
	}
	open, ok := w.containing(now)
	if !ok {
		return nil
	}
	ws := p.Status.Window
	if ws == nil {
		ws = &vacuumv1alpha1.PolicyWindowStatus{}
	}
	resume := p.Spec.Mode != vacuumv1alpha1.VacuumModeFull && len(ws.SpanningTables) > 0
	return func(run *vacuumv1alpha1.VacuumRun) {
		run.Spec.Window = &vacuumv1alpha1.RunWindow{StopAt: metav1.NewTime(w.end(open)), StopGracePeriodSeconds: int64(w.grace / time.Second),
			FullPagesPerSecond: ws.LastFullPagesPerSecond}
		run.Spec.Resume = resume
	}
}

// observeWindows counts the tables of the newest ended run into status.window: a table the
// run left unfinished spans one more window, one it finished leaves the list; a succeeded
// FULL's pages per second become the estimate of the next FULLs (lastFullPagesPerSecond). Each run is
// counted once (status.window.observedRun), so repeated reconciles change nothing.
func observeWindows(p *vacuumv1alpha1.VacuumPolicy, runs []vacuumv1alpha1.VacuumRun) {
	if !p.HasWindow() && p.Status.Window == nil {
		return
	}
	var last *vacuumv1alpha1.VacuumRun
	for i := len(runs) - 1; i >= 0; i-- {
		if ph := runs[i].Status.Phase; ph == vacuumv1alpha1.RunSucceeded || ph == vacuumv1alpha1.RunInterrupted {
			last = &runs[i]
			break
		}
	}
	ws := windowStatus(p)
	if last == nil || last.Name == ws.ObservedRun {
		return
	}
	ws.ObservedRun = last.Name
	if last.Spec.Mode == vacuumv1alpha1.VacuumModeFull && last.Status.Phase == vacuumv1alpha1.RunSucceeded && last.Status.PagesPerSecond > 0 {
		ws.LastFullPagesPerSecond = last.Status.PagesPerSecond
	}
	prev := map[string]vacuumv1alpha1.SpanningTable{}
	for _, t := range ws.SpanningTables {
		prev[t.Name] = t
	}
	var spanning []vacuumv1alpha1.SpanningTable
	ws.EstimatedWindowsLeft = 0
	for _, t := range last.Status.Tables {
		if t.Complete == nil || *t.Complete || t.BlockReached == nil {
			continue
		}
		if len(spanning) == vacuumv1alpha1.MaxStatusTables {
			break
		}
		s := vacuumv1alpha1.SpanningTable{Name: t.Name, Windows: prev[t.Name].Windows + 1, BlockReached: *t.BlockReached}
		if t.DonePerMille != nil {
			s.DonePerMille = *t.DonePerMille
		}
		s.EstimatedWindowsLeft = estimateWindowsLeft(s.Windows, s.DonePerMille)
		ws.EstimatedWindowsLeft = max(ws.EstimatedWindowsLeft, s.EstimatedWindowsLeft)
		spanning = append(spanning, s)
	}
	ws.SpanningTables = spanning
}
