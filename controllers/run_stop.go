package controllers

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// Ending a run. A run reaches a final phase only once none of its pods runs any more, and it
// releases its volume lock and restores its quiesced app only after that, so the next run
// on the volume never overlaps with a runner still stopping.

// finish records the run's final phase, with an event; Reconcile counts it in the metrics
// once the status patch that ends it has gone through. The status patch also wakes the next
// reconcile, which releases what the run holds, so callers return without a requeue.
func (r *RunReconciler) finish(ctx context.Context, run *vacuumv1alpha1.VacuumRun, v verdict, reason, msg string) {
	now := metav1.NewTime(r.Clock.Now())
	eventType := corev1.EventTypeNormal
	switch v {
	case verdictSucceeded:
		run.Status.MarkSucceeded(run.Generation, now, msg)
	case verdictCancelled:
		run.Status.MarkCancelled(run.Generation, now, msg)
	case verdictInterrupted:
		run.Status.MarkInterrupted(run.Generation, now, reason, msg)
	default:
		run.Status.MarkFailed(run.Generation, now, reason, msg)
		eventType = corev1.EventTypeWarning
	}
	run.Status.EndPause(run.Generation, now)
	r.Recorder.Eventf(run, nil, eventType, reason, "EndRun", "run %s: %s", run.Status.Phase, msg)
}

// cancel stops the run's pod (the runner gets SIGTERM and exits 5 with a summary) and ends
// the run Cancelled once it has stopped, or with the pod's own outcome if it ended first.
func (r *RunReconciler) cancel(ctx context.Context, run *vacuumv1alpha1.VacuumRun) (ctrl.Result, error) {
	v, reason, msg := verdictCancelled, vacuumv1alpha1.ReasonCancelled, "cancelled"
	if run.Status.Attempts > 0 {
		pod, err := r.currentPod(ctx, run)
		if err != nil {
			return ctrl.Result{}, err
		}
		if end, ok := containerEnd(podOrEmpty(pod)); ok {
			code := end.ExitCode
			run.Status.ExitCode = &code
			foldEnd(run, end)
			if v, reason, msg = judge(end, true); v == verdictRetry {
				v, reason = verdictCancelled, vacuumv1alpha1.ReasonCancelled
			}
		}
	}
	stopped, err := r.stopPods(ctx, run)
	if err != nil || !stopped {
		run.Status.Message = "cancelling: waiting for the runner pod to stop"
		return ctrl.Result{RequeueAfter: stopPollInterval}, err
	}
	r.finish(ctx, run, v, reason, msg)
	return ctrl.Result{}, nil
}

// stopAndFail stops the run's pod and then fails the run.
func (r *RunReconciler) stopAndFail(ctx context.Context, run *vacuumv1alpha1.VacuumRun, reason, msg string) (ctrl.Result, error) {
	stopped, err := r.stopPods(ctx, run)
	if err != nil || !stopped {
		run.Status.Message = "stopping the runner pod: " + msg
		return ctrl.Result{RequeueAfter: stopPollInterval}, err
	}
	r.finish(ctx, run, verdictFailed, reason, msg)
	return ctrl.Result{}, nil
}

// releaseAfterEnd lets go of what an ended run holds: its quiesced app and its volume lock.
func (r *RunReconciler) releaseAfterEnd(ctx context.Context, run *vacuumv1alpha1.VacuumRun) (ctrl.Result, error) {
	if stopped, err := r.stopPods(ctx, run); err != nil || !stopped {
		return ctrl.Result{RequeueAfter: stopPollInterval}, err
	}
	r.runners.forget(run.UID)
	if err := r.restoreQuiesced(ctx, run); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, r.releaseVolumeLock(ctx, run)
}

// finalize cleans up a deleted run: stop its pod, restore its app, release its lock, and
// delete its pods and token Secret (owner references alone are not enough where no garbage
// collector runs), then let it go.
func (r *RunReconciler) finalize(ctx context.Context, run *vacuumv1alpha1.VacuumRun) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(run, vacuumv1alpha1.FinalizerRun) {
		return ctrl.Result{}, nil
	}
	res, err := r.releaseAfterEnd(ctx, run)
	if err != nil || res.RequeueAfter > 0 {
		return res, err
	}
	if err := r.deletePods(ctx, run); err != nil {
		return ctrl.Result{}, err
	}
	if err := deleteTokenSecret(ctx, r, run); err != nil {
		return ctrl.Result{}, err
	}
	base := run.DeepCopy()
	controllerutil.RemoveFinalizer(run, vacuumv1alpha1.FinalizerRun)
	err = r.Patch(ctx, run, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	if client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("remove finalizer of run %s/%s: %w", run.Namespace, run.Name, err)
	}
	r.leases.drop(run.UID)
	return ctrl.Result{}, nil
}

// stopPods asks every running pod of the run to stop and says whether none runs any more.
// A pod created a moment ago must not be missed: runPods says when it reads the API server.
func (r *RunReconciler) stopPods(ctx context.Context, run *vacuumv1alpha1.VacuumRun) (bool, error) {
	pods, err := r.runPods(ctx, run)
	if err != nil {
		return false, err
	}
	stopped := true
	for i := range pods {
		pod := &pods[i]
		if podEnded(pod) {
			continue
		}
		stopped = false
		if pod.DeletionTimestamp.IsZero() {
			if err := deleteOwnedPod(ctx, r, pod); err != nil {
				return false, fmt.Errorf("stop runner pod %s/%s: %w", pod.Namespace, pod.Name, err)
			}
		}
	}
	return stopped, nil
}

// deletePods deletes every pod of the run, ended or not.
func (r *RunReconciler) deletePods(ctx context.Context, run *vacuumv1alpha1.VacuumRun) error {
	pods, err := r.runPods(ctx, run)
	if err != nil {
		return err
	}
	for i := range pods {
		if err := deleteOwnedPod(ctx, r, &pods[i]); err != nil {
			return fmt.Errorf("delete runner pod %s/%s: %w", pods[i].Namespace, pods[i].Name, err)
		}
	}
	return nil
}

// runPods lists the pods the run controls. A pod that only carries the run's label is not
// one of them: it is neither waited for nor deleted (a pod with a finalizer of its own
// would otherwise keep the run from ever releasing its volume and app).
//
// An ended run's pods are read from the cache (indexPodRun): an ended run makes no pod any
// more, and the pods it made came in the order of its attempts, so a cache that holds its
// latest attempt's pod holds them all. When the cache lacks that pod, one uncached Get by
// its name says whether it is gone (deleted: the cache is complete) or not cached yet (then
// the pods are listed uncached). A run that has not ended (cancel, a deadline, a closing
// window, a deletion) lists its pods uncached: a pod made a moment ago, by a reconcile whose
// status patch did not land, is recorded nowhere yet, and must not be missed.
func (r *RunReconciler) runPods(ctx context.Context, run *vacuumv1alpha1.VacuumRun) ([]corev1.Pod, error) {
	if !r.indexed || !run.IsFinished() {
		return ownedPods(ctx, r.APIReader, run)
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(run.Namespace), client.MatchingFields{indexPodRun: string(run.UID)},
		client.MatchingLabels{vacuumv1alpha1.LabelRun: run.Name}); err != nil {
		return nil, fmt.Errorf("list cached pods of run %s/%s: %w", run.Namespace, run.Name, err)
	}
	latest := podName(run, run.Status.Attempts)
	if run.Status.Attempts == 0 || slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool { return p.Name == latest }) {
		return controlled(pods.Items, run), nil
	}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: run.Namespace, Name: latest}, &corev1.Pod{})
	switch {
	case apierrors.IsNotFound(err):
		return controlled(pods.Items, run), nil
	case err != nil:
		return nil, fmt.Errorf("get runner pod %s/%s: %w", run.Namespace, latest, err)
	}
	return ownedPods(ctx, r.APIReader, run)
}

// ownedPods lists the pods labelled with the run's name that the run controls.
func ownedPods(ctx context.Context, c client.Reader, run *vacuumv1alpha1.VacuumRun) ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(run.Namespace),
		client.MatchingLabels{vacuumv1alpha1.LabelRun: run.Name}); err != nil {
		return nil, fmt.Errorf("list pods of run %s/%s: %w", run.Namespace, run.Name, err)
	}
	return controlled(pods.Items, run), nil
}

// controlled keeps, in place, the pods the run controls.
func controlled(pods []corev1.Pod, run *vacuumv1alpha1.VacuumRun) []corev1.Pod {
	owned := pods[:0]
	for i := range pods {
		if metav1.IsControlledBy(&pods[i], run) {
			owned = append(owned, pods[i])
		}
	}
	return owned
}

// deleteOwnedPod deletes a pod of a run while it is the pod that was listed (its UID).
func deleteOwnedPod(ctx context.Context, c client.Writer, pod *corev1.Pod) error {
	pre := metav1.Preconditions{UID: &pod.UID}
	err := c.Delete(ctx, pod, &client.DeleteOptions{Preconditions: &pre})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return err
	}
	return nil
}

// podEnded says whether a pod's runner has exited for good.
func podEnded(pod *corev1.Pod) bool {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return true
	}
	_, ok := containerEnd(pod)
	return ok
}

func podOrEmpty(pod *corev1.Pod) *corev1.Pod {
	if pod == nil {
		return &corev1.Pod{}
	}
	return pod
}
