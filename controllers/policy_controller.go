package controllers

import (
	"cmp"
	"context"
	"errors"
	"time"

	"github.com/robfig/cron/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// PolicyReconciler turns VacuumPolicies into VacuumRuns on their schedule, keeps their
// history within limits, and carries throttle edits to the runs in flight.
type PolicyReconciler struct {
	client.Client
	Scheme   *runtime.Scheme
	Recorder EventRecorder
	// Clock is injectable so schedule tests control time.
	Clock clock.PassiveClock
	// Workers is how many policies are reconciled at once (DefaultWorkers when 0).
	Workers int
	// Metrics gets the policy's gauges, rebuilt from its status on every reconcile (nil: none).
	Metrics *Metrics
	// WindowScheduleSeconds lets spec.window.schedule have a leading seconds field, so an
	// end-to-end test can open windows seconds apart (the manager's test flag
	// --window-schedule-seconds); five-field schedules read the same either way.
	WindowScheduleSeconds bool

	// indexed: SetupWithManager registered indexRunPolicy in the cache Client reads from (a
	// reconciler on a plain API client, as the unit specs make, lists by label alone).
	indexed bool
}

// +kubebuilder:rbac:groups=vacuum.vacuumops.io,resources=vacuumpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=vacuum.vacuumops.io,resources=vacuumpolicies/status,verbs=get;patch
// +kubebuilder:rbac:groups=vacuum.vacuumops.io,resources=vacuumruns,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=delete

// Reconcile moves one policy forward: get it, look at its runs, prune history, carry throttle
// edits, start what is due; status is written once at the end, by patchPolicyStatus.
func (r *PolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var policy vacuumv1alpha1.VacuumPolicy
	if err := r.Get(ctx, req.NamespacedName, &policy); err != nil {
		if apierrors.IsNotFound(err) {
			r.Metrics.forgetPolicy(req.Namespace, req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	defer func() { r.Metrics.observePolicy(&policy, r.scheduleInterval(&policy)) }()
	if !policy.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	orig := policy.DeepCopy()
	runs, err := r.listRuns(ctx, &policy)
	if err != nil {
		return ctrl.Result{}, err
	}
	active := r.observeRuns(&policy, runs)
	observeWindows(&policy, runs)
	retry, terr := r.propagateThrottle(ctx, &policy, active)
	errs := []error{r.pruneHistory(ctx, &policy, runs), terr}
	res, err := r.startDueRuns(ctx, &policy, active)
	errs = append(errs, err, r.patchPolicyStatus(ctx, orig, &policy))
	if retry && (res.RequeueAfter == 0 || res.RequeueAfter > conflictRetry) {
		res.RequeueAfter = conflictRetry // a run changed under the throttle patch
	}
	return res, errors.Join(errs...)
}

// SetupWithManager registers the controller: policies, and the runs they own.
func (r *PolicyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = realClock
	}
	if err := indexRuns(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	r.indexed = true
	return ctrl.NewControllerManagedBy(mgr).
		For(&vacuumv1alpha1.VacuumPolicy{}, builder.WithPredicates(policyChanged)).
		Owns(&vacuumv1alpha1.VacuumRun{}, builder.WithPredicates(runChangedForPolicy)).
		WithOptions(controller.Options{MaxConcurrentReconciles: cmp.Or(r.Workers, DefaultWorkers)}).
		Named("vacuumpolicy").
		Complete(r)
}

// scheduleInterval is the time from the policy's latest schedule tick (or window opening,
// without a schedule) to its next one (0 with neither, or with one that does not parse).
func (r *PolicyReconciler) scheduleInterval(p *vacuumv1alpha1.VacuumPolicy) time.Duration {
	if p.Spec.Schedule == "" && !p.HasWindow() {
		return 0
	}
	var sched cron.Schedule
	var err error
	if p.Spec.Schedule == "" {
		_, sched, err = windowAndTicks(p, r.windowParser()) // each window opening is a tick
	} else {
		sched, err = parseSchedule(p)
	}
	if err != nil {
		return 0
	}
	last := latestTickBefore(sched, r.Clock.Now())
	return sched.Next(last).Sub(last)
}
