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
// current metadata, so the patch holds status only. A patch that ends the run (final) also
// carries the resourceVersion this reconcile read: ending a run is decided once, on the
// latest copy, so a reconcile working from a stale cache conflicts instead of ending (and
// counting) the run a second time.
func (r *RunReconciler) patchRunStatus(ctx context.Context, orig, run *vacuumv1alpha1.VacuumRun, final bool) error {
	run.Status.ObservedGeneration = run.Generation
	if equality.Semantic.DeepEqual(orig.Status, run.Status) {
		return nil
	}
	base := orig.DeepCopy()
	base.ObjectMeta = *run.ObjectMeta.DeepCopy()
	patch := client.MergeFrom(base)
	if final {
		patch = client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
	}
	if err := r.Status().Patch(ctx, run, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("patch status of run %s/%s: %w", run.Namespace, run.Name, err)
	}
	return nil
}
