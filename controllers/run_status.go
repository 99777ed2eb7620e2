package controllers

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// patchRunStatus is the one place a run's status is written: it stamps observedGeneration
// and merge-patches the status subresource when anything changed. The base takes the run's
// current metadata, so the patch holds status only (no resourceVersion, no conflict with a
// finalizer just added).
func (r *RunReconciler) patchRunStatus(ctx context.Context, orig, run *vacuumv1alpha1.VacuumRun) error {
	run.Status.ObservedGeneration = run.Generation
	if equality.Semantic.DeepEqual(orig.Status, run.Status) {
		return nil
	}
	base := orig.DeepCopy()
	base.ObjectMeta = *run.ObjectMeta.DeepCopy()
	if err := r.Status().Patch(ctx, run, client.MergeFrom(base)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("patch status of run %s/%s: %w", run.Namespace, run.Name, err)
	}
	return nil
}
