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
// current metadata, so the patch holds status only. A patch that ends the run, or records
// a token Secret this reconcile made (final), also carries the resourceVersion this
// reconcile read: ending a run is decided once, on the latest copy, so a reconcile working
// from a stale cache conflicts instead of ending (and counting) the run a second time, or
// recording a second Secret over the one a pod already mounts.
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

// patchStatusLocked changes the run's status at once, by a merge patch carrying the
// resourceVersion this reconcile read, for records that must be on the run before the
// manager acts on them (the replicas to restore, the token Secret): a reconcile working from
// a stale copy conflicts instead of overwriting a record it has not seen.
func (r *RunReconciler) patchStatusLocked(ctx context.Context, run *vacuumv1alpha1.VacuumRun, change func(*vacuumv1alpha1.VacuumRunStatus)) error {
	base := run.DeepCopy()
	change(&run.Status)
	if err := r.Status().Patch(ctx, run, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		*run = *base
		return fmt.Errorf("record status of run %s/%s: %w", run.Namespace, run.Name, err)
	}
	return nil
}
