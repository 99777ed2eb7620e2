package controllers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// Defaults of the run controller's timing.
const (
	DefaultProgressInterval = 5 * time.Second
	volumeBusyRetry         = 3 * time.Second
	stopPollInterval        = 2 * time.Second
	httpTimeout             = runnerCallTimeout
	conflictRetry           = 500 * time.Millisecond
)

// RunReconciler drives a VacuumRun: lock the volume, quiesce its app, run one pod per attempt,
// fold the pod's progress and summary into status, retry failed attempts, and clean up.
type RunReconciler struct {
	client.Client
	// APIReader reads without the cache: Leases and pods whose absence must be certain.
	APIReader client.Reader
	Scheme    *runtime.Scheme
	Recorder  EventRecorder
	Clock     clock.PassiveClock
	// HTTPClient's Timeout bounds each call to a runner pod (GET /progress, PUT /throttle);
	// the client of each call is made per run, pinned to the run's certificate (runnerClient).
	HTTPClient *http.Client
	// Key is the manager's key; each run's token is HMAC-SHA256(Key, run UID).
	Key []byte
	// RunnerImage is used when a run names no image.
	RunnerImage string
	// AllowedImages are the other images a run may name in spec.runner.image; a run naming
	// any other fails with reason ImageNotAllowed.
	AllowedImages []string
	// AllowedPriorityClasses are the priority classes a run may name in
	// spec.runner.priorityClassName; a run naming any other fails with reason
	// PriorityClassNotAllowed.
	AllowedPriorityClasses []string
	// ProgressInterval is how often a running pod's /progress is polled.
	ProgressInterval time.Duration
	// Workers is how many runs are reconciled at once (DefaultWorkers when 0).
	Workers int
	Metrics *Metrics

	// indexed: SetupWithManager registered indexPodRun in the cache Client reads from (a
	// reconciler on a plain API client, as the unit specs make, lists pods live alone).
	indexed bool

	// runners makes the HTTP calls to runner pods, outside any reconcile.
	runners     *runnerCalls
	runnersOnce sync.Once
	// leases are the volume Leases the runs hold, as last written (run_lock.go).
	leases heldLeases
	// noRunFieldSelector: the API server refused a VacuumRun field selector once
	// (run_quiesce.go), so quiesceHolder lists every run of the namespace.
	noRunFieldSelector atomic.Bool
}

// DefaultWorkers is how many runs, and how many policies, are reconciled at once by default.
const DefaultWorkers = 4

// EventRecorder emits events (events.k8s.io/v1); the manager's GetEventRecorder provides one.
type EventRecorder interface {
	Eventf(regarding runtime.Object, related runtime.Object, eventtype, reason, action, note string, args ...interface{})
}

// +kubebuilder:rbac:groups=vacuum.vacuumops.io,resources=vacuumruns,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups=vacuum.vacuumops.io,resources=vacuumruns/status,verbs=get;patch
// +kubebuilder:rbac:groups=vacuum.vacuumops.io,resources=vacuumruns/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=create;delete
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update;delete
// +kubebuilder:rbac:groups=apps,resources=deployments/scale;statefulsets/scale,verbs=get;update
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile moves one run forward. Every status change goes through patchRunStatus.
func (r *RunReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	r.initRunners(nil)
	var run vacuumv1alpha1.VacuumRun
	if err := r.Get(ctx, req.NamespacedName, &run); err != nil {
		if apierrors.IsNotFound(err) {
			r.Metrics.forgetRun(req.Namespace, req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	defer r.Metrics.observeRun(&run)
	if wait := r.podRecordLagging(ctx, &run); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	orig := run.DeepCopy()
	res, err := r.reconcileRun(ctx, &run)
	if !run.DeletionTimestamp.IsZero() {
		return res, err
	}
	ended := !orig.IsFinished() && run.IsFinished()
	newToken := recordsNewToken(orig, &run)
	perr := r.patchRunStatus(ctx, orig, &run, ended || newToken)
	if perr != nil && newToken {
		perr = r.settleUnrecordedToken(ctx, &run, perr)
	}
	if ended && apierrors.IsConflict(perr) {
		// The run changed since this reconcile read it (a stale cache, a spec edit): decide
		// its end again on a fresh copy rather than end it, and count it, twice.
		return ctrl.Result{RequeueAfter: conflictRetry}, err
	}
	if perr != nil {
		return ctrl.Result{}, errors.Join(err, perr)
	}
	if ended {
		r.Metrics.runEnded(&run)
	}
	return res, err
}

// reconcileRun is the guard clauses of a run's life, each handing off to a named step.
func (r *RunReconciler) reconcileRun(ctx context.Context, run *vacuumv1alpha1.VacuumRun) (ctrl.Result, error) {
	if isLegacyRun(run) { // started by the manager version before this one (run_legacy.go)
		if changed, err := r.adoptLegacyRun(ctx, run); changed || err != nil {
			if apierrors.IsConflict(err) {
				err = nil
			}
			return ctrl.Result{RequeueAfter: conflictRetry}, err
		}
	}
	if !run.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, run)
	}
	if !controllerutil.ContainsFinalizer(run, vacuumv1alpha1.FinalizerRun) {
		if err := r.addFinalizer(ctx, run); err != nil {
			return ctrl.Result{}, err
		}
		// On with the run in this reconcile, from the patched copy: waiting for the patch's
		// own event would put a trip through the work queue between every tick and its pod.
	}
	if run.IsFinished() {
		if res, err := r.releaseAfterEnd(ctx, run); err != nil || res.RequeueAfter > 0 {
			return res, err
		}
		return r.expireAfterTTL(ctx, run)
	}
	if run.Spec.Cancel {
		return r.cancel(ctx, run)
	}
	if acted, res, err := r.honourWindow(ctx, run); acted {
		return res, err
	}
	if isLegacyRun(run) {
		if acted, res, err := r.stopLegacyAttempt(ctx, run); acted {
			return res, err
		}
	}
	if r.deadlinePassed(run) {
		return r.stopAndFail(ctx, run, vacuumv1alpha1.ReasonDeadlineExceeded, "activeDeadlineSeconds passed")
	}
	return r.advance(ctx, run)
}

// addFinalizer adds the run's finalizer by a metadata patch. A merge patch replaces the whole
// finalizers list, so it carries the resourceVersion read: a finalizer another party added
// meanwhile makes it conflict instead of being dropped.
func (r *RunReconciler) addFinalizer(ctx context.Context, run *vacuumv1alpha1.VacuumRun) error {
	base := run.DeepCopy()
	controllerutil.AddFinalizer(run, vacuumv1alpha1.FinalizerRun)
	if err := r.Patch(ctx, run, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("add finalizer to run %s/%s: %w", run.Namespace, run.Name, err)
	}
	return nil
}

// SetupWithManager registers the controller: runs, and the pods they own.
func (r *RunReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = realClock
	}
	if r.HTTPClient == nil {
		r.HTTPClient = &http.Client{Timeout: httpTimeout}
	}
	if r.ProgressInterval <= 0 {
		r.ProgressInterval = DefaultProgressInterval
	}
	if r.Workers <= 0 {
		r.Workers = DefaultWorkers
	}
	if err := indexPods(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	r.indexed = true
	answers := make(chan event.GenericEvent, 1024)
	r.initRunners(answers)
	return ctrl.NewControllerManagedBy(mgr).
		For(&vacuumv1alpha1.VacuumRun{}, builder.WithPredicates(runWakesItself)).
		Owns(&corev1.Pod{}).
		WatchesRawSource(source.Channel(answers, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Workers}).
		Named("vacuumrun").
		Complete(r)
}

// initRunners makes the runner-call state once; answers, when not nil, receives a wake-up
// for the run whenever one of its pod's calls ends.
func (r *RunReconciler) initRunners(answers chan event.GenericEvent) {
	r.runnersOnce.Do(func() {
		if r.HTTPClient == nil {
			r.HTTPClient = &http.Client{Timeout: httpTimeout}
		}
		r.runners = newRunnerCalls(answers)
	})
}

// workloadTypes are the kinds a run may quiesce.
var workloadTypes = map[string]func() client.Object{
	"Deployment":  func() client.Object { return &appsv1.Deployment{} },
	"StatefulSet": func() client.Object { return &appsv1.StatefulSet{} },
}
