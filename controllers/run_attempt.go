package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// Attempts. status.attempts counts the pods made; attempt N's pod is <run>-N. The pod is
// created before status.attempts is raised, so a manager that dies in between finds the pod
// by name on restart (AlreadyExists = adopt) and never makes a second one. An attempt has
// failed and been counted when status.failedAttempts == status.attempts.

// advance moves a live run forward: volume lock, quiesce, token, then its current attempt.
func (r *RunReconciler) advance(ctx context.Context, run *vacuumv1alpha1.VacuumRun) (ctrl.Result, error) {
	_, res, specJSON, err := resolvedSpec(&run.Spec.VacuumSpec, string(run.UID))
	if err != nil {
		r.finish(ctx, run, verdictFailed, vacuumv1alpha1.ReasonInvalidSpec, err.Error())
		return ctrl.Result{}, nil // the status patch wakes the reconcile that releases what it holds
	}
	held, holder, err := r.acquireVolumeLock(ctx, run)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !held {
		run.Status.MarkPending(run.Generation, vacuumv1alpha1.ReasonVolumeBusy,
			fmt.Sprintf("volume %s is in use by run %s", run.Spec.Target.PersistentVolumeClaim, holder))
		return ctrl.Result{RequeueAfter: volumeBusyRetry}, nil
	}
	if q := run.Spec.Target.Quiesce; q != nil {
		ready, msg, err := r.quiesce(ctx, run)
		if err != nil || !ready {
			if msg != "" {
				run.Status.MarkPending(run.Generation, vacuumv1alpha1.ReasonQuiescing, msg)
			}
			return ctrl.Result{RequeueAfter: stopPollInterval}, err
		}
	}
	if err := r.ensureTokenSecret(ctx, run); err != nil {
		return ctrl.Result{}, err
	}
	st := &run.Status
	if st.Attempts == 0 || st.FailedAttempts >= st.Attempts {
		pod := r.runnerPod(run, st.Attempts+1, specJSON, res)
		return r.startAttempt(ctx, run, pod)
	}
	pod, err := r.currentPod(ctx, run)
	if err != nil {
		return ctrl.Result{}, err
	}
	if pod == nil {
		return r.attemptFailed(ctx, run, vacuumv1alpha1.ReasonAttemptFailed,
			fmt.Sprintf("runner pod %s disappeared", podName(run, st.Attempts)))
	}
	if end, ok := containerEnd(pod); ok {
		return r.attemptEnded(ctx, run, end)
	}
	switch pod.Status.Phase {
	case corev1.PodFailed, corev1.PodSucceeded: // ended without a container status (evicted...)
		return r.attemptFailed(ctx, run, vacuumv1alpha1.ReasonAttemptFailed,
			withDefault(pod.Status.Message, fmt.Sprintf("runner pod %s ended %s", pod.Name, pod.Status.Phase)))
	case corev1.PodRunning:
		if pod.Status.PodIP != "" {
			return r.observeRunning(ctx, run, pod)
		}
	}
	run.Status.MarkPending(run.Generation, vacuumv1alpha1.ReasonPodPending, fmt.Sprintf("waiting for runner pod %s to start", pod.Name))
	return ctrl.Result{RequeueAfter: r.ProgressInterval}, nil
}

// startAttempt creates the pod of the next attempt, or adopts it if it exists already.
func (r *RunReconciler) startAttempt(ctx context.Context, run *vacuumv1alpha1.VacuumRun, pod *corev1.Pod) (ctrl.Result, error) {
	if err := controllerutil.SetControllerReference(run, pod, r.Scheme); err != nil {
		return ctrl.Result{}, err
	}
	if err := checkRunnerPodSecurity(pod); err != nil {
		r.finish(ctx, run, verdictFailed, vacuumv1alpha1.ReasonInvalidSpec, err.Error())
		return ctrl.Result{}, nil
	}
	err := r.Create(ctx, pod)
	switch {
	case err == nil:
		r.Recorder.Eventf(run, pod, corev1.EventTypeNormal, vacuumv1alpha1.ReasonPodCreated, "CreatePod",
			"created runner pod %s (attempt %d)", pod.Name, run.Status.Attempts+1)
	case apierrors.IsAlreadyExists(err):
		log.FromContext(ctx).Info("adopting existing runner pod", "pod", pod.Name)
	default:
		return ctrl.Result{}, fmt.Errorf("create runner pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	run.Status.Attempts++
	run.Status.PodName = pod.Name
	run.Status.AppliedThrottle = run.Spec.Throttle.DeepCopy() // the pod's args carry it
	run.Status.MarkPending(run.Generation, vacuumv1alpha1.ReasonPodPending, fmt.Sprintf("waiting for runner pod %s to start", pod.Name))
	return ctrl.Result{RequeueAfter: r.ProgressInterval}, nil
}

// currentPod returns the current attempt's pod, or nil when it is certainly gone: a cache
// miss is confirmed with an uncached read, since a pod just created may not be cached yet.
func (r *RunReconciler) currentPod(ctx context.Context, run *vacuumv1alpha1.VacuumRun) (*corev1.Pod, error) {
	var pod corev1.Pod
	k := client.ObjectKey{Namespace: run.Namespace, Name: podName(run, run.Status.Attempts)}
	err := r.Get(ctx, k, &pod)
	if apierrors.IsNotFound(err) {
		err = r.APIReader.Get(ctx, k, &pod)
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get runner pod %s: %w", k, err)
	}
	return &pod, nil
}

// observeRunning records the start, folds /progress into status and pushes a changed
// throttle to the pod.
func (r *RunReconciler) observeRunning(ctx context.Context, run *vacuumv1alpha1.VacuumRun, pod *corev1.Pod) (ctrl.Result, error) {
	now := r.Clock.Now()
	if run.Status.StartTime == nil {
		run.Status.StartTime = &metav1.Time{Time: now}
	}
	run.Status.MarkRunning(run.Generation, fmt.Sprintf("runner pod %s is vacuuming (attempt %d)", pod.Name, run.Status.Attempts))
	if hc, err := r.runnerClient(run); err != nil {
		return ctrl.Result{}, err
	} else if p, err := runnerwire.FetchProgress(ctx, hc, pod.Status.PodIP); err != nil {
		log.FromContext(ctx).V(1).Info("progress not available yet", "pod", pod.Name, "error", err.Error())
	} else {
		foldProgress(&run.Status, p)
	}
	next := r.ProgressInterval
	if err := r.pushThrottle(ctx, run, pod.Status.PodIP); err != nil {
		next = min(next, 2*time.Second)
	}
	if d := r.untilDeadline(run); d > 0 && d < next {
		next = d
	}
	return ctrl.Result{RequeueAfter: next}, nil
}

// attemptEnded acts on how the runner exited.
func (r *RunReconciler) attemptEnded(ctx context.Context, run *vacuumv1alpha1.VacuumRun, end attemptEnd) (ctrl.Result, error) {
	code := end.ExitCode
	run.Status.ExitCode = &code
	if end.Summary != nil {
		foldSummary(&run.Status, end.Summary)
	}
	v, reason, msg := judge(end, false)
	if v == verdictRetry {
		return r.attemptFailed(ctx, run, reason, msg)
	}
	r.finish(ctx, run, v, reason, msg)
	return ctrl.Result{}, nil // the status patch wakes the reconcile that releases the lock and the app
}

// attemptFailed counts a failed attempt; the run fails once more than backoffLimit have.
func (r *RunReconciler) attemptFailed(ctx context.Context, run *vacuumv1alpha1.VacuumRun, reason, msg string) (ctrl.Result, error) {
	run.Status.FailedAttempts = run.Status.Attempts
	r.Recorder.Eventf(run, nil, corev1.EventTypeWarning, reason, "RunAttempt", "attempt %d failed: %s", run.Status.Attempts, msg)
	if run.Status.FailedAttempts > run.Spec.BackoffLimit {
		r.finish(ctx, run, verdictFailed, vacuumv1alpha1.ReasonBackoffLimitExceeded,
			fmt.Sprintf("%d attempts failed (backoffLimit %d); last: %s", run.Status.FailedAttempts, run.Spec.BackoffLimit, msg))
		return ctrl.Result{}, nil
	}
	// status.failedAttempts changed: the status patch wakes the reconcile that makes the
	// next attempt's pod.
	run.Status.MarkPending(run.Generation, reason, fmt.Sprintf("attempt %d failed, retrying: %s", run.Status.Attempts, msg))
	return ctrl.Result{}, nil
}

// deadlinePassed says whether activeDeadlineSeconds, counted from the first pod start, is over.
func (r *RunReconciler) deadlinePassed(run *vacuumv1alpha1.VacuumRun) bool {
	return run.Spec.ActiveDeadlineSeconds != nil && run.Status.StartTime != nil && r.untilDeadline(run) <= 0
}

// untilDeadline is the time left before activeDeadlineSeconds (0 when there is none).
func (r *RunReconciler) untilDeadline(run *vacuumv1alpha1.VacuumRun) time.Duration {
	if run.Spec.ActiveDeadlineSeconds == nil || run.Status.StartTime == nil {
		return 0
	}
	end := run.Status.StartTime.Add(time.Duration(*run.Spec.ActiveDeadlineSeconds) * time.Second)
	if d := end.Sub(r.Clock.Now()); d > 0 {
		return d
	}
	return -1
}
