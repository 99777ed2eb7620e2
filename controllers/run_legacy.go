package controllers

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// Runs started by the manager version before the pinned runner endpoint (an upgrade in the
// middle of a run). That manager kept the replicas to restore in the run's annotation
// legacyQuiesceAnnotation, made a token Secret with no certificate and a runner pod that
// serves plain HTTP, and recorded nothing in status.tokenSecret. Such a run is recognised
// by what only the manager can write: a run whose status counts a pod, or says it is
// quiescing, with no token Secret recorded. This manager records a Secret before it
// quiesces or makes a pod, so none of its own runs ever looks like that, and no user can
// make a new run look like that (the status is the manager's alone).
//
// On such a run the manager, once:
//   - moves the annotation's count into status.quiesced (the one time an annotation's count
//     is taken, and only for a run the earlier manager quiesced: the earlier manager would
//     have restored that very count), then removes the annotation, so the app is restored
//     when the run ends, as for any run;
//   - stops a runner pod still running and fails the run with reason ManagerUpgraded: the
//     manager cannot read that runner's progress or change its throttle without the pinned
//     certificate, and will not send its token in clear. An attempt that has already ended
//     is judged as usual, and a retry gets a token Secret with a certificate and a new pod.
//
// The earlier manager's Secret <run>-token is left to the garbage collector (it is
// controlled by the run): this manager deletes only a Secret it recorded.

// legacyQuiesceAnnotation is where the earlier manager kept a quiesced app's replicas.
const legacyQuiesceAnnotation = "vacuum.vacuumops.io/quiesce-replicas"

// isLegacyRun says whether the run was started by the earlier manager version.
func isLegacyRun(run *vacuumv1alpha1.VacuumRun) bool {
	if run.Status.TokenSecret != nil {
		return false
	}
	if run.Status.Attempts > 0 {
		return true
	}
	c := meta.FindStatusCondition(run.Status.Conditions, vacuumv1alpha1.ConditionProgressing)
	return c != nil && c.Reason == vacuumv1alpha1.ReasonQuiescing
}

// adoptLegacyRun moves a legacy run's quiesce record into its status. It says whether the
// reconcile should stop there (the run's metadata or status changed).
func (r *RunReconciler) adoptLegacyRun(ctx context.Context, run *vacuumv1alpha1.VacuumRun) (bool, error) {
	v, ok := run.Annotations[legacyQuiesceAnnotation]
	if !ok {
		return false, nil
	}
	if run.Status.Quiesced == nil {
		q := run.Spec.Target.Quiesce
		n, err := strconv.ParseInt(v, 10, 32)
		if q == nil || err != nil || n < 0 {
			r.Recorder.Eventf(run, nil, corev1.EventTypeWarning, vacuumv1alpha1.ReasonManagerUpgraded, "Adopt",
				"the replica count %q left by the earlier manager version is not usable; nothing will be restored", v)
		} else {
			rec := &vacuumv1alpha1.QuiescedApp{Kind: q.Kind, Name: q.Name, Replicas: int32(n)}
			if err := r.patchStatusLocked(ctx, run, func(st *vacuumv1alpha1.VacuumRunStatus) { st.Quiesced = rec }); err != nil {
				return true, client.IgnoreNotFound(err)
			}
			r.Recorder.Eventf(run, nil, corev1.EventTypeNormal, vacuumv1alpha1.ReasonManagerUpgraded, "Adopt",
				"recorded %s %s's %d replicas, left by the earlier manager version, for its restore", q.Kind, q.Name, n)
		}
	}
	// The record is in status now: drop the annotation, so nothing ever reads it again.
	patch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(
		`{"metadata":{"resourceVersion":%q,"annotations":{%q:null}}}`, run.ResourceVersion, legacyQuiesceAnnotation)))
	if err := r.Patch(ctx, run, patch); err != nil {
		return true, client.IgnoreNotFound(err)
	}
	return true, nil
}

// stopLegacyAttempt stops a legacy run's attempt whose runner pod still runs, and fails the
// run with reason ManagerUpgraded once the pod is gone. It says whether it acted (false: the
// attempt ended by itself, and is judged as usual). A pod being deleted, or gone, counts as
// one this step stops: the runner's exit on SIGTERM is not the attempt's outcome.
func (r *RunReconciler) stopLegacyAttempt(ctx context.Context, run *vacuumv1alpha1.VacuumRun) (bool, ctrl.Result, error) {
	st := &run.Status
	if st.Attempts == 0 || st.FailedAttempts >= st.Attempts {
		return false, ctrl.Result{}, nil
	}
	pod, err := r.currentPod(ctx, run)
	if err != nil {
		return true, ctrl.Result{}, err
	}
	if pod != nil && pod.DeletionTimestamp.IsZero() {
		if _, ended := containerEnd(pod); ended || pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
			return false, ctrl.Result{}, nil
		}
	}
	res, err := r.stopAndFail(ctx, run, vacuumv1alpha1.ReasonManagerUpgraded, fmt.Sprintf(
		"runner pod %s was started by an earlier manager version: its runner serves no pinned HTTPS endpoint, so its progress "+
			"cannot be read nor its throttle changed; it is stopped, and the next run starts afresh", podName(run, st.Attempts)))
	return true, res, err
}
