package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
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

// advance moves a live run forward: volume lock, claim check, token, quiesce, then its
// current attempt. Before the app is scaled down the run checks what would keep its pod from
// starting (the claim exists, the API server accepts the pod), and from the moment it holds
// the volume until its pod runs it is bounded by podStartTimeoutSeconds.
func (r *RunReconciler) advance(ctx context.Context, run *vacuumv1alpha1.VacuumRun) (ctrl.Result, error) {
	if img := run.Spec.Runner.Image; !r.imageAllowed(img) {
		r.finish(ctx, run, verdictFailed, vacuumv1alpha1.ReasonImageNotAllowed,
			fmt.Sprintf("runner.image %q is not one the operator allows (its --runner-image or --allowed-runner-images)", img))
		return ctrl.Result{}, nil
	}
	if pc := run.Spec.Runner.PriorityClassName; !r.priorityClassAllowed(pc) {
		r.finish(ctx, run, verdictFailed, vacuumv1alpha1.ReasonPriorityClassNotAllowed,
			fmt.Sprintf("runner.priorityClassName %q is not one the operator allows (its --allowed-priority-classes)", pc))
		return ctrl.Result{}, nil
	}
	if run.Spec.Target.Server != nil {
		return r.advanceOnline(ctx, run)
	}
	_, res, specJSON, err := resolveAndEncode(windowEdit(run), &run.Spec.VacuumSpec, string(run.UID))
	if err != nil {
		r.finish(ctx, run, verdictFailed, vacuumv1alpha1.ReasonInvalidSpec, err.Error())
		return ctrl.Result{}, nil // the status patch wakes the reconcile that releases what it holds
	}
	prep, err := r.prepareAttempt(ctx, run)
	if err != nil {
		return ctrl.Result{}, err
	}
	if prep.retry {
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	}
	lock := prep.lock
	if !lock.held {
		run.Status.MarkPending(run.Generation, vacuumv1alpha1.ReasonVolumeBusy,
			fmt.Sprintf("volume %s is in use by run %s", run.Spec.Target.PersistentVolumeClaim, lock.holder))
		return ctrl.Result{RequeueAfter: volumeBusyRetry}, nil
	}
	st := &run.Status
	if prep.claimMissing != "" {
		return r.waitToStart(ctx, run, lock.since, vacuumv1alpha1.ReasonClaimNotFound, prep.claimMissing, stopPollInterval)
	}
	if q := run.Spec.Target.Quiesce; q != nil {
		if st.Attempts == 0 && !r.quiesceRecorded(run) {
			// The app is still up: make sure the API server takes the pod before scaling it down.
			if rejected, err := r.podRejected(ctx, run, r.runnerPod(run, 1, specJSON, res)); rejected || err != nil {
				return ctrl.Result{}, err
			}
		}
		ready, msg, err := r.quiesce(ctx, run)
		if err != nil || !ready {
			if err != nil || msg == "" {
				return ctrl.Result{RequeueAfter: stopPollInterval}, err
			}
			return r.waitToStart(ctx, run, lock.since, vacuumv1alpha1.ReasonQuiescing, msg, stopPollInterval)
		}
	}
	return r.runAttempt(ctx, run, specJSON, res, lock.since)
}

// recordLagWait is how long a run whose first pod is in the cache, but whose copy records no
// token Secret and no attempt, waits for the record before it goes on without it.
const recordLagWait = 5 * time.Second

// podRecordLagging says how long to wait, when this copy of a fresh run is older than its
// first pod's record (0 when it is not). The run's token Secret and first pod are recorded by
// one status patch after the pod's creation, and the pod's creation wakes the next reconcile
// at once: from a copy the cache has not brought up to date yet, it would make a second token
// Secret, adopt the pod, conflict and delete that Secret (five requests for nothing). It waits
// instead, writing nothing (not even observedGeneration): the record's own update wakes it. A
// record that never comes (a manager that died between the pod and its record) is waited for
// until the pod is recordLagWait old; the run then adopts the pod as before. Only a live run
// on a volume without quiesce goes straight from its Secret to its pod, so only such a run
// waits.
func (r *RunReconciler) podRecordLagging(ctx context.Context, run *vacuumv1alpha1.VacuumRun) time.Duration {
	if run.Status.TokenSecret != nil || run.Status.Attempts != 0 || run.IsFinished() || run.Spec.Cancel ||
		!run.DeletionTimestamp.IsZero() || run.Spec.Target.Server != nil || run.Spec.Target.Quiesce != nil {
		return 0
	}
	pod := r.cachedOwnPod(ctx, run, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: run.Namespace, Name: podName(run, 1)}})
	if pod == nil {
		return 0
	}
	return max(pod.CreationTimestamp.Add(recordLagWait).Sub(r.Clock.Now()), 0)
}

// prepared is what prepareAttempt found: the volume lock, why the claim cannot be used (""
// when it can, or when it was not checked), and whether the reconcile must retry on a fresh
// copy of the run (its token record conflicted).
type prepared struct {
	lock         volumeLock
	claimMissing string
	retry        bool
}

// prepareAttempt takes or renews the volume lock, checks the claim before the first attempt,
// and makes the run's token Secret if it has none. The three requests do not depend on each
// other and none of them starts anything on the volume (only the pod does, and it comes after
// all three), so a fresh run sends them to the API server at once rather than one after the
// other: its first reconcile waits for one round trip where it waited for three. A Secret made
// while the volume is busy, the claim missing or the app still to quiesce is recorded at once,
// and serves the attempt that starts later; a Secret made by a run that goes straight on to
// its pod is recorded by the status patch that records the pod (recordedWithPod). A run that
// has been reconciled before (most likely waiting for a busy volume) checks its claim only
// once it holds the volume, so each retry of the wait costs no claim read.
func (r *RunReconciler) prepareAttempt(ctx context.Context, run *vacuumv1alpha1.VacuumRun) (prepared, error) {
	var (
		out                 prepared
		wg                  sync.WaitGroup
		secret              *corev1.Secret
		claimErr, secretErr error
	)
	checkClaim := run.Status.Attempts == 0
	early := checkClaim && run.Status.Phase == ""
	// The goroutines only read the run; nothing writes it until they are done.
	if run.Status.TokenSecret == nil {
		wg.Go(func() { secret, secretErr = r.createTokenSecret(ctx, run) })
	}
	if early {
		wg.Go(func() { out.claimMissing, claimErr = r.claimMissing(ctx, run) })
	}
	lock, lockErr := r.acquireVolumeLock(ctx, run)
	wg.Wait()
	out.lock = lock
	if err := errors.Join(lockErr, claimErr, secretErr); err != nil {
		if secret != nil { // recorded all the same, for the reconcile that retries
			_, recordErr := r.recordTokenSecret(ctx, run, secret)
			err = errors.Join(err, recordErr)
		}
		return out, err
	}
	if checkClaim && !early && lock.held {
		out.claimMissing, claimErr = r.claimMissing(ctx, run)
	}
	if secret == nil {
		return out, claimErr
	}
	if claimErr == nil && lock.held && out.claimMissing == "" && run.Spec.Target.Quiesce == nil {
		// Straight on to the pod: the Secret is recorded by the status patch that records the
		// pod (recordedWithPod), one patch where there were two.
		run.Status.TokenSecret = &vacuumv1alpha1.OwnedObject{Name: secret.Name, UID: secret.UID}
		return out, nil
	}
	var recordErr error
	out.retry, recordErr = r.recordTokenSecret(ctx, run, secret)
	return out, errors.Join(claimErr, recordErr)
}

// runAttempt starts the next attempt's pod, or follows the current one. since is when the
// run began waiting for its first pod (podStartTimeoutSeconds counts from it).
func (r *RunReconciler) runAttempt(ctx context.Context, run *vacuumv1alpha1.VacuumRun, specJSON []byte, res runnerwire.Resolved, since time.Time) (ctrl.Result, error) {
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
	// The first attempt's wait includes the quiesce (or an online run's identify).
	if st.Attempts > 1 {
		since = pod.CreationTimestamp.Time
	}
	msg, poll := fmt.Sprintf("waiting for runner pod %s to start: %s", pod.Name, podWaitingCause(pod)), r.ProgressInterval
	if hold := r.startupHold(run, pod); hold > 0 && msg != st.Message {
		msg, poll = st.Message, hold
	}
	return r.waitToStart(ctx, run, since, vacuumv1alpha1.ReasonPodPending, msg, poll)
}

// startupHold is how long a new pod's changed waiting cause is left unwritten: until the pod
// is ProgressInterval old. A pod that starts at once goes from unscheduled to scheduled,
// to ContainerCreating, to running within a second or two, and a status patch for each step
// (each one a full validation of the run on the API server) would tell a user nothing the
// Running phase does not; a pod that does not start shows why within ProgressInterval.
// Only the message of a run already waiting for this very pod is held (0 otherwise).
func (r *RunReconciler) startupHold(run *vacuumv1alpha1.VacuumRun, pod *corev1.Pod) time.Duration {
	st := &run.Status
	c := meta.FindStatusCondition(st.Conditions, vacuumv1alpha1.ConditionProgressing)
	if st.Phase != vacuumv1alpha1.RunPending || c == nil || c.Reason != vacuumv1alpha1.ReasonPodPending ||
		!strings.HasPrefix(st.Message, fmt.Sprintf("waiting for runner pod %s to start: ", pod.Name)) {
		return 0
	}
	return min(pod.CreationTimestamp.Add(r.ProgressInterval).Sub(r.Clock.Now()), r.ProgressInterval)
}

// imageAllowed says whether a run may name this runner image: the operator's own, or one of
// the images its admin allowed. An image is code run against a volume of the namespace with
// the run's token, so a VacuumPolicy author does not get to choose it.
func (r *RunReconciler) imageAllowed(image string) bool {
	return image == "" || image == r.RunnerImage || slices.Contains(r.AllowedImages, image)
}

// priorityClassAllowed says whether a run may name this priority class: none, or one the
// operator's admin allowed. A priority can preempt other tenants' pods, so a VacuumPolicy
// author does not get to choose it.
func (r *RunReconciler) priorityClassAllowed(name string) bool {
	return name == "" || slices.Contains(r.AllowedPriorityClasses, name)
}

// waitToStart marks the run Pending with msg, or fails it with reason PodNotStarted once it
// has waited podStartTimeoutSeconds since the given time. The reconcile after a failure
// stops the pod, restores the app and releases the volume, as for any end.
func (r *RunReconciler) waitToStart(ctx context.Context, run *vacuumv1alpha1.VacuumRun, since time.Time, reason, msg string, poll time.Duration) (ctrl.Result, error) {
	timeout := podStartTimeout(run)
	left := since.Add(timeout).Sub(r.Clock.Now())
	if left <= 0 {
		r.finish(ctx, run, verdictFailed, vacuumv1alpha1.ReasonPodNotStarted,
			fmt.Sprintf("not started within podStartTimeoutSeconds (%d): %s", int64(timeout/time.Second), msg))
		return ctrl.Result{}, nil
	}
	run.Status.MarkPending(run.Generation, reason, msg)
	return ctrl.Result{RequeueAfter: min(poll, left)}, nil
}

// podStartTimeout is the run's podStartTimeoutSeconds (its CRD default for a run made by a
// Go client that left it out).
func podStartTimeout(run *vacuumv1alpha1.VacuumRun) time.Duration {
	s := ptr.Deref(run.Spec.PodStartTimeoutSeconds, 0)
	if s <= 0 {
		s = vacuumv1alpha1.DefaultPodStartTimeoutSeconds
	}
	return time.Duration(s) * time.Second
}

// podWaitingCause says why a pod has not started: its container's waiting reason and
// message (ImagePullBackOff, ErrImageNeverPull, ContainerCreating...), else why it is not
// scheduled (Unschedulable...), else its phase.
func podWaitingCause(pod *corev1.Pod) string {
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			return strings.TrimSuffix(w.Reason+": "+w.Message, ": ")
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return strings.TrimSuffix(withDefault(c.Reason, "NotScheduled")+": "+c.Message, ": ")
		}
	}
	if pod.Spec.NodeName == "" {
		return "not scheduled yet"
	}
	return fmt.Sprintf("phase %s on node %s", withDefault(string(pod.Status.Phase), "Pending"), pod.Spec.NodeName)
}

// claimMissing says why the run's PersistentVolumeClaim cannot be used ("" when it exists).
// It reads without the cache, so the manager never watches claims.
func (r *RunReconciler) claimMissing(ctx context.Context, run *vacuumv1alpha1.VacuumRun) (string, error) {
	var pvc corev1.PersistentVolumeClaim
	name := run.Spec.Target.PersistentVolumeClaim
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: run.Namespace, Name: name}, &pvc)
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Sprintf("waiting for PersistentVolumeClaim %s to exist", name), nil
	case err != nil:
		return "", fmt.Errorf("get PersistentVolumeClaim %s/%s: %w", run.Namespace, name, err)
	case !pvc.DeletionTimestamp.IsZero():
		return fmt.Sprintf("PersistentVolumeClaim %s is being deleted", name), nil
	}
	return "", nil
}

// podRejected dry-runs the creation of the run's first pod and fails the run when the API
// server refuses it (invalid, or forbidden by a quota, a LimitRange or an admission policy).
func (r *RunReconciler) podRejected(ctx context.Context, run *vacuumv1alpha1.VacuumRun, pod *corev1.Pod) (bool, error) {
	if err := controllerutil.SetControllerReference(run, pod, r.Scheme); err != nil {
		return false, err
	}
	err := r.Create(ctx, pod, client.DryRunAll)
	if err == nil || apierrors.IsAlreadyExists(err) {
		return false, nil
	}
	if r.failIfRejected(ctx, run, pod, err) {
		return true, nil
	}
	return false, fmt.Errorf("dry-run create runner pod %s/%s: %w", pod.Namespace, pod.Name, err)
}

// failIfRejected fails the run when err says the API server will never take its pod as it
// is: retrying the same pod cannot help, and the app must not stay quiesced for it.
func (r *RunReconciler) failIfRejected(ctx context.Context, run *vacuumv1alpha1.VacuumRun, pod *corev1.Pod, err error) bool {
	if !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) {
		return false
	}
	r.finish(ctx, run, verdictFailed, vacuumv1alpha1.ReasonPodRejected,
		fmt.Sprintf("the API server refused runner pod %s: %v", pod.Name, err))
	return true
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
	var err error
	cached := r.cachedOwnPod(ctx, run, pod)
	if cached == nil {
		err = r.Create(ctx, pod)
	}
	switch {
	case cached != nil:
		// Made by the reconcile before this one, whose record of it this copy of the run does
		// not show yet (the pod's creation woke this reconcile before the run's cache caught
		// up): adopted from the cache, without a creation the API server refuses and a read.
		log.FromContext(ctx).V(1).Info("adopting cached runner pod", "pod", pod.Name)
		pod = cached
	case err == nil:
		r.Recorder.Eventf(run, pod, corev1.EventTypeNormal, vacuumv1alpha1.ReasonPodCreated, "CreatePod",
			"created runner pod %s (attempt %d)", pod.Name, run.Status.Attempts+1)
	case apierrors.IsAlreadyExists(err):
		// Made by an earlier reconcile that died before recording it, unless someone else
		// made a pod of that name: a foreign pod is never adopted, read or deleted.
		var cur corev1.Pod
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(pod), &cur); err != nil {
			return ctrl.Result{}, fmt.Errorf("get existing runner pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		if !metav1.IsControlledBy(&cur, run) {
			r.refuseForeign(run, &cur)
			r.finish(ctx, run, verdictFailed, vacuumv1alpha1.ReasonForeignObject,
				fmt.Sprintf("pod %s exists and is not controlled by this run; it is left alone", pod.Name))
			return ctrl.Result{}, nil
		}
		log.FromContext(ctx).Info("adopting existing runner pod", "pod", pod.Name)
	case r.failIfRejected(ctx, run, pod, err):
		return ctrl.Result{}, nil
	default:
		return ctrl.Result{}, fmt.Errorf("create runner pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	run.Status.Attempts++
	run.Status.PodName = pod.Name
	run.Status.AppliedThrottle = run.Spec.Throttle.DeepCopy() // the pod's args carry it
	// The message runAttempt writes on the pod's next event, so that event, when the pod has
	// not changed, rewrites nothing.
	run.Status.MarkPending(run.Generation, vacuumv1alpha1.ReasonPodPending,
		fmt.Sprintf("waiting for runner pod %s to start: %s", pod.Name, podWaitingCause(pod)))
	return ctrl.Result{RequeueAfter: r.ProgressInterval}, nil
}

// cachedOwnPod returns the client's copy of pod when it is alive and controlled by the run,
// else nil. A miss says nothing (the cache may lag): the caller creates the pod then.
func (r *RunReconciler) cachedOwnPod(ctx context.Context, run *vacuumv1alpha1.VacuumRun, pod *corev1.Pod) *corev1.Pod {
	var cur corev1.Pod
	if err := r.Get(ctx, client.ObjectKeyFromObject(pod), &cur); err != nil ||
		!metav1.IsControlledBy(&cur, run) || !cur.DeletionTimestamp.IsZero() {
		return nil
	}
	return &cur
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
	if !metav1.IsControlledBy(&pod, run) {
		// Ours was deleted and another pod took its name: it is not this run's attempt.
		r.refuseForeign(run, &pod)
		return nil, nil
	}
	return &pod, nil
}

// refuseForeign records, by an event, that an object the run would take by its name or
// label is not controlled by it and is left alone.
func (r *RunReconciler) refuseForeign(run *vacuumv1alpha1.VacuumRun, pod *corev1.Pod) {
	r.Recorder.Eventf(run, nil, corev1.EventTypeWarning, vacuumv1alpha1.ReasonForeignObject, "Adopt",
		"pod %s is not controlled by run %s (UID %s); it is left alone", pod.Name, run.Name, run.UID)
}

// observeRunning records the start, folds /progress into status and pushes a changed
// throttle to the pod. The start is recorded with the first poll's answer (or its failure),
// not before it: the poll starts when the pod is first seen running and its answer wakes
// the next reconcile within runnerCallTimeout, so the run's start and its first figures are
// one status patch instead of two.
func (r *RunReconciler) observeRunning(ctx context.Context, run *vacuumv1alpha1.VacuumRun, pod *corev1.Pod) (ctrl.Result, error) {
	now := r.Clock.Now()
	uid := run.UID // the closure runs on a runner-call goroutine: never read run there
	fetch := func(ctx context.Context, ip string) (*runnerwire.Progress, error) {
		hc, err := r.runnerClient(uid) // pinned to the run's own certificate
		if err != nil {
			return nil, err
		}
		return runnerwire.FetchProgress(ctx, hc, ip)
	}
	p, err := r.runners.progress(run, pod.Name, pod.Status.PodIP, r.ProgressInterval, fetch)
	if p == nil && err == nil && run.Status.Phase != vacuumv1alpha1.RunRunning {
		// The first poll is in flight: its answer wakes the reconcile that records the start.
		// The requeue is for a manager whose wake-up was lost.
		return ctrl.Result{RequeueAfter: runnerCallTimeout}, nil
	}
	if run.Status.StartTime == nil {
		run.Status.StartTime = &metav1.Time{Time: now}
	}
	run.Status.MarkRunning(run.Generation, fmt.Sprintf("runner pod %s is vacuuming (attempt %d)", pod.Name, run.Status.Attempts))
	if p != nil {
		before := run.Status.Adaptive.DeepCopy()
		foldProgress(&run.Status, p)
		r.observeAdaptive(run, before, now)
	} else if err != nil {
		log.FromContext(ctx).V(1).Info("progress not available yet", "pod", pod.Name, "error", err.Error())
	}
	next := r.ProgressInterval
	if r.pushThrottle(run, pod) {
		next = min(next, throttleRetry)
	}
	if r.pushPause(run, pod) {
		next = min(next, throttleRetry)
	}
	for _, d := range []time.Duration{r.untilDeadline(run), r.untilWindowStop(run)} {
		if d > 0 && d < next {
			next = d
		}
	}
	return ctrl.Result{RequeueAfter: next}, nil
}

// attemptEnded acts on how the runner exited.
func (r *RunReconciler) attemptEnded(ctx context.Context, run *vacuumv1alpha1.VacuumRun, end attemptEnd) (ctrl.Result, error) {
	code := end.ExitCode
	run.Status.ExitCode = &code
	foldEnd(run, end)
	v, reason, msg := judge(end, false)
	v, reason, msg = windowVerdict(end, v, reason, msg)
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
