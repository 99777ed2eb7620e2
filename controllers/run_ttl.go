package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// expireAfterTTL deletes an ended run once spec.ttlSecondsAfterFinished has passed since its
// completionTime, as the Job TTL controller does, and otherwise asks to be woken when it will
// have. The deletion goes through the run's finalizer like any other; the delete carries the
// run's UID, so a new run made under the same name meanwhile is not the one deleted.
func (r *RunReconciler) expireAfterTTL(ctx context.Context, run *vacuumv1alpha1.VacuumRun) (ctrl.Result, error) {
	ttl, ended := run.Spec.TTLSecondsAfterFinished, run.Status.CompletionTime
	if ttl == nil || ended == nil {
		return ctrl.Result{}, nil
	}
	if left := ended.Add(time.Duration(*ttl) * time.Second).Sub(r.Clock.Now()); left > 0 {
		return ctrl.Result{RequeueAfter: left}, nil
	}
	if err := r.Delete(ctx, run, client.Preconditions{UID: &run.UID}); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("delete run %s/%s after its ttlSecondsAfterFinished: %w", run.Namespace, run.Name, err)
	}
	r.Recorder.Eventf(run, nil, corev1.EventTypeNormal, vacuumv1alpha1.ReasonTTLExpired, "Delete",
		"deleted %ds after it ended (ttlSecondsAfterFinished)", *ttl)
	return ctrl.Result{}, nil
}
