package controllers

import (
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// Which updates wake a policy. A policy's status is written by its own reconcile only, and a
// run's status changes on every step of its life (its token, its pod, each progress poll),
// while the policy reads of its runs only their phase, their metadata and spec, and the
// figures of an ended run. At 1,000 policies every update woke the policy: four to eight
// reconciles per run, each behind the others in the work queue, and a tick behind them all.
// Creations and deletions always wake it.

// policyChanged passes an update of a policy unless only its status (and resourceVersion,
// managedFields) changed: that is the policy's own status patch, which needs no reconcile.
var policyChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	oldP, ok1 := e.ObjectOld.(*vacuumv1alpha1.VacuumPolicy)
	newP, ok2 := e.ObjectNew.(*vacuumv1alpha1.VacuumPolicy)
	if !ok1 || !ok2 {
		return true
	}
	return !equality.Semantic.DeepEqual(oldP.Spec, newP.Spec) || !sameMeta(&oldP.ObjectMeta, &newP.ObjectMeta, false)
}}

// runChangedForPolicy passes an update of a run when it changes what its policy reads of it:
// its phase as the policy sums it up (no phase yet and Pending are the same there: a
// policy's new run is summed up Pending from its creation), anything of an ended run, its spec, or its metadata other than finalizers (the
// run controller's own; a deletion still shows in deletionTimestamp).
var runChangedForPolicy = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	oldR, ok1 := e.ObjectOld.(*vacuumv1alpha1.VacuumRun)
	newR, ok2 := e.ObjectNew.(*vacuumv1alpha1.VacuumRun)
	if !ok1 || !ok2 {
		return true
	}
	return summaryPhase(oldR) != summaryPhase(newR) || newR.IsFinished() ||
		!equality.Semantic.DeepEqual(oldR.Spec, newR.Spec) || !sameMeta(&oldR.ObjectMeta, &newR.ObjectMeta, true)
}}

// runWakesItself passes an update of a run when its reconcile has something to act on: its
// spec or metadata (a cancel, a throttle, a deletion, its finalizer), its phase or its
// failed attempts (the run's own status patch that ends it, or counts a failed attempt,
// wakes the reconcile that releases what it holds, or makes the next pod), or anything of
// an ended run. The run's other status patches (its token's record, its pod's, each
// progress poll's) are written by the reconcile that already scheduled its next look
// (RequeueAfter), and woke a reconcile that had nothing to do: three or more a run, each
// in the queue before the next tick's run and, right after the pod's record, often a
// cache miss read from the API server.
var runWakesItself = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	oldR, ok1 := e.ObjectOld.(*vacuumv1alpha1.VacuumRun)
	newR, ok2 := e.ObjectNew.(*vacuumv1alpha1.VacuumRun)
	if !ok1 || !ok2 {
		return true
	}
	return oldR.Status.Phase != newR.Status.Phase || oldR.Status.FailedAttempts != newR.Status.FailedAttempts ||
		newR.IsFinished() || oldR.Generation != newR.Generation ||
		!equality.Semantic.DeepEqual(oldR.Spec, newR.Spec) || !sameMeta(&oldR.ObjectMeta, &newR.ObjectMeta, false)
}}

// sameMeta says whether two copies of an object's metadata are equal but for what every
// write changes (resourceVersion, managedFields) and, with ignoreFinalizers, the finalizers.
func sameMeta(a, b *metav1.ObjectMeta, ignoreFinalizers bool) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	for _, m := range []*metav1.ObjectMeta{a, b} {
		m.ResourceVersion, m.ManagedFields = "", nil
		if ignoreFinalizers {
			m.Finalizers = nil
		}
	}
	return equality.Semantic.DeepEqual(a, b)
}
