package controllers

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// A run's window. The runner is given the window's end (RunSpec stopAt): at that time it
// stops every table at a delay point, exits 0 and reports, per table, whether it is complete
// and the block it reached (summary stopReason WindowClosed). The run then ends Interrupted
// with those positions. A runner that has not stopped stopGracePeriodSeconds after the end
// has its pod stopped (SIGTERM: it still writes its summary), and the run ends Interrupted
// all the same; a run whose pod had not started by the end, or whose attempt failed after
// it, ends Interrupted without another attempt. A VACUUM FULL the runner refuses to start
// because it would not fit in what is left (stopReason WindowTooShort) ends the run
// Interrupted with that reason.

// windowEdit sets the run's window end (RunSpec stopAt) and resume on its RunSpec; nil for a
// run with neither, whose RunSpec stays as it was.
func windowEdit(run *vacuumv1alpha1.VacuumRun) func(*runnerwire.RunSpec) {
	if run.Spec.Window == nil && !run.Spec.Resume {
		return nil
	}
	return func(rs *runnerwire.RunSpec) { applyWindow(run, rs) }
}

// applyWindow is windowEdit's edit.
func applyWindow(run *vacuumv1alpha1.VacuumRun, rs *runnerwire.RunSpec) {
	rs.Resume = run.Spec.Resume
	if w := run.Spec.Window; w != nil {
		at := metav1.NewTime(w.StopAt.UTC().Truncate(time.Second))
		rs.StopAt = &at
		rs.FullPagesPerSecond = w.FullPagesPerSecond
	}
}

// windowVerdict turns a runner's exit 0 with a stop reason into the run's Interrupted end.
func windowVerdict(end attemptEnd, v verdict, reason, msg string) (verdict, string, string) {
	if v != verdictSucceeded {
		return v, reason, msg
	}
	if end.Summary == nil {
		return v, reason, msg
	}
	switch end.Summary.StopReason {
	case runnerwire.StopReasonWindowClosed:
		return verdictInterrupted, vacuumv1alpha1.ReasonWindowClosed, withDefault(end.Message, "the window closed; the next window resumes where each table stopped")
	case runnerwire.StopReasonWindowTooShort:
		return verdictInterrupted, vacuumv1alpha1.ReasonWindowTooShort, withDefault(end.Message, "VACUUM FULL was not started: its estimate exceeds what is left of the window")
	}
	return v, reason, msg
}

// honourWindow ends a run whose window has closed, as the comment at the top of this file
// says; it reports whether it acted (else the run goes on as usual).
func (r *RunReconciler) honourWindow(ctx context.Context, run *vacuumv1alpha1.VacuumRun) (bool, ctrl.Result, error) {
	w := run.Spec.Window
	now := r.Clock.Now()
	if w == nil || now.Before(w.StopAt.Time) {
		return false, ctrl.Result{}, nil
	}
	st := &run.Status
	closed := fmt.Sprintf("the window closed at %s", w.StopAt.UTC().Format(time.RFC3339))
	if st.Attempts == 0 || st.FailedAttempts >= st.Attempts {
		res, err := r.interruptAfterStop(ctx, run, closed+" before an attempt was running")
		return true, res, err
	}
	pod, err := r.currentPod(ctx, run)
	if err != nil {
		return true, ctrl.Result{}, err
	}
	if end, ok := containerEnd(podOrEmpty(pod)); ok {
		code := end.ExitCode
		st.ExitCode = &code
		foldEnd(run, end)
		v, reason, msg := judge(end, false)
		v, reason, msg = windowVerdict(end, v, reason, msg)
		if v == verdictRetry { // no new attempt once the window is closed
			v, reason, msg = verdictInterrupted, vacuumv1alpha1.ReasonWindowClosed, closed+"; the last attempt ended: "+msg
		}
		r.finish(ctx, run, v, reason, msg)
		return true, ctrl.Result{}, nil
	}
	running := pod != nil && pod.Status.PodIP != "" && pod.DeletionTimestamp.IsZero()
	if running && now.Before(w.StopDeadline()) {
		return false, ctrl.Result{}, nil // the runner stops by itself; observeRunning polls until the deadline
	}
	var msg string
	switch {
	case !now.Before(w.StopDeadline()):
		msg = closed + fmt.Sprintf("; the runner did not stop within stopGracePeriodSeconds (%d), its pod was stopped", w.StopGracePeriodSeconds)
	case pod == nil:
		msg = closed + "; its runner pod is gone"
	default:
		msg = closed + " before the runner pod was running"
	}
	res, err := r.interruptAfterStop(ctx, run, msg)
	return true, res, err
}

// interruptAfterStop stops the run's pods and, once none runs, ends it Interrupted with
// reason WindowClosed.
func (r *RunReconciler) interruptAfterStop(ctx context.Context, run *vacuumv1alpha1.VacuumRun, msg string) (ctrl.Result, error) {
	stopped, err := r.stopPods(ctx, run)
	if err != nil || !stopped {
		run.Status.Message = "stopping the runner pod: " + msg
		return ctrl.Result{RequeueAfter: stopPollInterval}, err
	}
	r.finish(ctx, run, verdictInterrupted, vacuumv1alpha1.ReasonWindowClosed, msg)
	return ctrl.Result{}, nil
}

// untilWindowStop is how long until the run's window needs a look: its end, then the end of
// the grace (0 without a window, -1 once both passed).
func (r *RunReconciler) untilWindowStop(run *vacuumv1alpha1.VacuumRun) time.Duration {
	w := run.Spec.Window
	if w == nil {
		return 0
	}
	now := r.Clock.Now()
	for _, t := range []time.Time{w.StopAt.Time, w.StopDeadline()} {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return -1
}

// foldEnd folds an ended attempt's summary into status, with each table's position when
// the run has a window or resumes, or the runner stopped it early.
func foldEnd(run *vacuumv1alpha1.VacuumRun, end attemptEnd) {
	if run.Status.StartTime == nil && !end.StartedAt.IsZero() {
		// A pod that ran and ended between two reconciles was never seen running.
		run.Status.StartTime = end.StartedAt.DeepCopy()
	}
	if end.Summary == nil {
		return
	}
	foldSummary(&run.Status, end.Summary)
	if run.Spec.Window != nil || run.Spec.Resume || end.Summary.StopReason != "" {
		foldPositions(&run.Status, end.Summary)
	}
}

// foldPositions writes where each table stands (complete, block reached, share done) into
// status.tables.
func foldPositions(s *vacuumv1alpha1.VacuumRunStatus, sum *runnerwire.Summary) {
	index := map[string]int{}
	for i, ts := range s.Tables {
		index[ts.Name] = i
	}
	var incomplete bool
	var doneSum, counted int64
	for _, t := range sum.Tables {
		i, ok := index[t.Table]
		if !ok {
			continue
		}
		ts := &s.Tables[i]
		complete, reached, from := t.Complete, t.BlockReached, t.ResumedFromBlock
		ts.Complete, ts.BlockReached, ts.ResumedFromBlock = &complete, &reached, &from
		done := int32(1000)
		if !complete {
			incomplete = true
			done = 0
			if t.PagesTotal > 0 {
				done = int32(min(max(reached, 0)*1000/t.PagesTotal, 999))
			}
			ts.Phase = "stopped"
			ts.Percent = done / 10
		}
		ts.DonePerMille = &done
		doneSum += int64(done)
		counted++
	}
	if incomplete && counted > 0 {
		s.SetPercent(int32(doneSum / counted / 10))
		s.VacuumPhase = "stopped"
	}
}
