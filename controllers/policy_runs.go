package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// listRuns returns the policy's runs, oldest first. In a manager it looks them up in the
// cache by the policy's UID (indexRunPolicy), so its cost is the policy's own runs, not the
// namespace's.
func (r *PolicyReconciler) listRuns(ctx context.Context, p *vacuumv1alpha1.VacuumPolicy) ([]vacuumv1alpha1.VacuumRun, error) {
	var list vacuumv1alpha1.VacuumRunList
	opts := []client.ListOption{client.InNamespace(p.Namespace), client.MatchingLabels{vacuumv1alpha1.LabelPolicy: p.Name}}
	if r.indexed {
		opts = append(opts, client.MatchingFields{indexRunPolicy: string(p.UID)})
	}
	if err := r.List(ctx, &list, opts...); err != nil {
		return nil, fmt.Errorf("list runs of policy %s/%s: %w", p.Namespace, p.Name, err)
	}
	// Only the runs the policy controls: a run that merely carries its label (made by hand)
	// is neither counted, nor re-throttled, nor pruned.
	runs := list.Items[:0]
	for i := range list.Items {
		if metav1.IsControlledBy(&list.Items[i], p) {
			runs = append(runs, list.Items[i])
		}
	}
	sort.SliceStable(runs, func(i, j int) bool {
		a, b := runs[i].CreationTimestamp, runs[j].CreationTimestamp
		return a.Before(&b) || a.Equal(&b) && runs[i].Name < runs[j].Name
	})
	return runs, nil
}

// summaryPhase is the phase a policy's status gives its run: Pending before the run's first
// reconcile has written any phase, since a run that has not started is waiting to start.
// The policy writes that summary when it creates the run, so the run's first status patch
// (phase "" to Pending) changes nothing of its policy's.
func summaryPhase(run *vacuumv1alpha1.VacuumRun) vacuumv1alpha1.RunPhase {
	if run.Status.Phase == "" {
		return vacuumv1alpha1.RunPending
	}
	return run.Status.Phase
}

// failedReason is the reason of a run's Failed condition when it is True.
func failedReason(run *vacuumv1alpha1.VacuumRun) string {
	if c := meta.FindStatusCondition(run.Status.Conditions, vacuumv1alpha1.ConditionFailed); c != nil && c.Status == metav1.ConditionTrue {
		return c.Reason
	}
	return ""
}

// observeRuns sums the runs up in status (active, last run, last success, corruption) and
// returns the active ones.
func (r *PolicyReconciler) observeRuns(p *vacuumv1alpha1.VacuumPolicy, runs []vacuumv1alpha1.VacuumRun) []*vacuumv1alpha1.VacuumRun {
	var active []*vacuumv1alpha1.VacuumRun
	st := &p.Status
	st.Active = nil
	var corrupt string
	var lastEnded *vacuumv1alpha1.VacuumRun
	for i := range runs {
		run := &runs[i]
		if !run.IsFinished() {
			active = append(active, run)
			st.Active = append(st.Active, run.Name)
		} else if lastEnded == nil || !run.Status.CompletionTime.Before(lastEnded.Status.CompletionTime) {
			lastEnded = run // the latest to end, not the latest created
		}
		if run.Status.Phase == vacuumv1alpha1.RunSucceeded && run.Status.CompletionTime != nil &&
			(st.LastSuccessfulTime == nil || st.LastSuccessfulTime.Before(run.Status.CompletionTime)) {
			st.LastSuccessfulTime = run.Status.CompletionTime.DeepCopy()
		}
		if failedReason(run) == vacuumv1alpha1.ReasonCorruptionFound {
			corrupt = run.Name // the newest wins
		}
	}
	if n := len(runs); n > 0 {
		last := &runs[n-1]
		st.LastRun = &vacuumv1alpha1.RunSummary{
			Name: last.Name, Phase: summaryPhase(last), CompletionTime: last.Status.CompletionTime,
		}
		// A run in flight is summed up by name and phase only: its live rate and message
		// change every progress interval, and copying them would rewrite the policy's
		// status (and wake everyone watching policies) as often.
		if last.IsFinished() {
			st.LastRun.PagesPerSecond, st.LastRun.Message = last.Status.PagesPerSecond, last.Status.Message
			if last.Status.Totals != nil {
				st.LastRun.TuplesRemoved = last.Status.Totals.TuplesRemoved
			}
		}
	}
	st.SetLastRunSucceeded(p.Generation, lastEnded)
	r.observeCorruption(p, corrupt)
	return active
}

// observeCorruption halts the policy when a run found corruption the user has not
// acknowledged, and lets it go once they annotate it with that run's name.
func (r *PolicyReconciler) observeCorruption(p *vacuumv1alpha1.VacuumPolicy, corruptRun string) {
	ack := p.Annotations[vacuumv1alpha1.AnnotationCorruptionAcknowledged]
	st := &p.Status
	if corruptRun != "" && corruptRun != ack && corruptRun != st.CorruptionRun {
		st.CorruptionRun = corruptRun
		r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, vacuumv1alpha1.ReasonCorruptionFound, "HaltSchedule",
			"run %s found corruption; no run starts until the policy is annotated %s=%s",
			corruptRun, vacuumv1alpha1.AnnotationCorruptionAcknowledged, corruptRun)
	}
	if st.CorruptionRun != "" && st.CorruptionRun == ack {
		r.Recorder.Eventf(p, nil, corev1.EventTypeNormal, vacuumv1alpha1.ReasonCorruptionAcked, "ResumeSchedule",
			"corruption found by run %s acknowledged; runs resume", ack)
		st.CorruptionRun = ""
	}
	if p.HaltedByCorruption() {
		st.SetDegraded(p.Generation, true, vacuumv1alpha1.ReasonCorruptionFound, fmt.Sprintf(
			"run %s found corruption; annotate %s=%s to resume", st.CorruptionRun, vacuumv1alpha1.AnnotationCorruptionAcknowledged, st.CorruptionRun))
	} else {
		st.SetDegraded(p.Generation, false, vacuumv1alpha1.ReasonHealthy, "no run is halted")
	}
}

// pruneHistory deletes the oldest ended runs beyond the history limits; their pods and token
// Secrets go with them (deleteRun), since no garbage collector runs in envtest or on the
// local dev cluster.
func (r *PolicyReconciler) pruneHistory(ctx context.Context, p *vacuumv1alpha1.VacuumPolicy, runs []vacuumv1alpha1.VacuumRun) error {
	var succeeded, failed []*vacuumv1alpha1.VacuumRun
	for i := range runs {
		switch {
		case runs[i].Name == p.Status.CorruptionRun || !runs[i].DeletionTimestamp.IsZero():
		case runs[i].Status.Phase == vacuumv1alpha1.RunSucceeded || runs[i].Status.Phase == vacuumv1alpha1.RunInterrupted:
			succeeded = append(succeeded, &runs[i]) // an interrupted run's work is kept: it counts with them
		case runs[i].IsFinished():
			failed = append(failed, &runs[i])
		}
	}
	var doomed []*vacuumv1alpha1.VacuumRun
	if extra := len(succeeded) - int(p.SuccessfulHistoryLimit()); extra > 0 {
		doomed = append(doomed, succeeded[:extra]...)
	}
	if extra := len(failed) - int(p.FailedHistoryLimit()); extra > 0 {
		doomed = append(doomed, failed[:extra]...)
	}
	for _, run := range doomed {
		if err := r.deleteRun(ctx, run); err != nil {
			return err
		}
		r.Recorder.Eventf(p, run, corev1.EventTypeNormal, vacuumv1alpha1.ReasonRunDeleted, "PruneHistory",
			"deleted run %s (%s) beyond the history limit", run.Name, run.Status.Phase)
	}
	return nil
}

// deleteRun deletes an ended run of the policy with the pods and token Secret it controls;
// every delete carries the UID listed, so an object that took a name meanwhile is left. A run
// carrying the run controller's finalizer (every run a policy makes is born with it) is
// deleted alone: the finalizer's cleanup (RunReconciler.finalize) deletes its pods and Secret,
// so deleting them here as well was two requests a pruned run that found nothing the second
// time, and two more round trips in the policy's reconcile. A run without it (its finalizer
// removed by hand) has its pods and Secret deleted here first.
func (r *PolicyReconciler) deleteRun(ctx context.Context, run *vacuumv1alpha1.VacuumRun) error {
	if !controllerutil.ContainsFinalizer(run, vacuumv1alpha1.FinalizerRun) {
		pods, err := ownedPods(ctx, r, run)
		if err != nil {
			return err
		}
		for i := range pods {
			if err := deleteOwnedPod(ctx, r, &pods[i]); err != nil {
				return fmt.Errorf("delete pod %s/%s: %w", run.Namespace, pods[i].Name, err)
			}
		}
		if err := deleteTokenSecret(ctx, r, run); err != nil {
			return err
		}
	}
	pre := metav1.Preconditions{UID: &run.UID}
	if err := r.Delete(ctx, run, &client.DeleteOptions{Preconditions: &pre}); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete run %s/%s: %w", run.Namespace, run.Name, err)
	}
	return nil
}

// propagateThrottle carries an edit of the policy's spec.throttle onto its active runs; the
// run controller then pushes it to each pod. It acts only when the policy's throttle changed
// since it was last carried onto the run (the run's policy-throttle annotation holds its
// hash), never because the run's throttle differs: a hand edit of a run's throttle
// (kubectl patch vacuumrun) must stay. The patch carries the run's resourceVersion: when the
// run changed meanwhile it conflicts, and retry says to decide afresh on a fresh copy soon
// (a change of the run's status alone does not wake its policy: runChangedForPolicy).
func (r *PolicyReconciler) propagateThrottle(ctx context.Context, p *vacuumv1alpha1.VacuumPolicy, active []*vacuumv1alpha1.VacuumRun) (retry bool, err error) {
	want, err := throttleHash(&p.Spec.Throttle)
	if err != nil {
		return false, err
	}
	for _, run := range active {
		got, recorded := run.Annotations[vacuumv1alpha1.AnnotationPolicyThrottle]
		if got == want || run.Spec.Cancel || !run.DeletionTimestamp.IsZero() {
			continue
		}
		patch := map[string]any{"metadata": map[string]any{
			"resourceVersion": run.ResourceVersion,
			"annotations":     map[string]any{vacuumv1alpha1.AnnotationPolicyThrottle: want},
		}}
		// A run made before the annotation existed has no record: its throttle was kept equal
		// to the policy's, or was edited by hand since. Either way it is adopted as it is.
		if recorded {
			patch["spec"] = map[string]any{"throttle": throttlePatch(&run.Spec.Throttle, &p.Spec.Throttle)}
		}
		body, err := json.Marshal(patch)
		if err != nil {
			return retry, fmt.Errorf("re-throttle run %s/%s: %w", run.Namespace, run.Name, err)
		}
		err = r.Patch(ctx, run, client.RawPatch(types.MergePatchType, body))
		if apierrors.IsConflict(err) {
			retry = true
			continue
		}
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return retry, fmt.Errorf("re-throttle run %s/%s: %w", run.Namespace, run.Name, err)
		}
		if recorded {
			r.Recorder.Eventf(p, run, corev1.EventTypeNormal, vacuumv1alpha1.ReasonThrottleApplied, "SetThrottle",
				"carried the policy's new throttle onto run %s", run.Name)
		}
	}
	return retry, nil
}

// throttleHash identifies a policy's throttle in a run's policy-throttle annotation.
func throttleHash(t *vacuumv1alpha1.Throttle) (string, error) {
	b, err := json.Marshal(t)
	if err != nil {
		return "", fmt.Errorf("encode throttle: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8]), nil
}

// throttlePatch is the policy's throttle as a merge patch of the run's: a merge patch
// replaces throttle's fields one by one, so a field the run has and the policy no longer has
// (a byte limit removed) is sent as null. It works on the JSON form, so it names no field.
func throttlePatch(run, policy *vacuumv1alpha1.Throttle) map[string]any {
	t, had := jsonFields(policy), jsonFields(run)
	for k := range had {
		if _, ok := t[k]; !ok {
			t[k] = nil
		}
	}
	return t
}

// jsonFields is v's JSON object as a map (empty when v does not encode to one).
func jsonFields(v any) map[string]any {
	m := map[string]any{}
	if b, err := json.Marshal(v); err == nil {
		_ = json.Unmarshal(b, &m)
	}
	return m
}

// createRun makes the policy's run of the given name; AlreadyExists means a previous
// reconcile made it, which is adopted rather than duplicated.
// edits, when given, adjust the run before it is made (its window).
func (r *PolicyReconciler) createRun(ctx context.Context, p *vacuumv1alpha1.VacuumPolicy, name string, scheduled metav1.Time, edits ...func(*vacuumv1alpha1.VacuumRun)) error {
	throttle, err := throttleHash(&p.Spec.Throttle)
	if err != nil {
		return err
	}
	run := &vacuumv1alpha1.VacuumRun{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: p.Namespace, Name: name,
			Labels: map[string]string{vacuumv1alpha1.LabelPolicy: p.Name},
			// Born with the run controller's finalizer, so its first reconcile need not
			// patch it on (one request fewer between a tick and its pod): the finalizer is on
			// before the run makes anything that needs cleanup, as when the run adds it.
			Finalizers: []string{vacuumv1alpha1.FinalizerRun},
			Annotations: map[string]string{
				vacuumv1alpha1.AnnotationScheduledTime:  scheduled.UTC().Format("2006-01-02T15:04:05Z"),
				vacuumv1alpha1.AnnotationPolicyThrottle: throttle,
			},
		},
		Spec: vacuumv1alpha1.VacuumRunSpec{VacuumSpec: *p.Spec.VacuumSpec.DeepCopy(), PolicyName: p.Name},
	}
	for _, edit := range edits {
		if edit != nil {
			edit(run)
		}
	}
	if err := controllerutil.SetControllerReference(p, run, r.Scheme); err != nil {
		return err
	}
	err = r.Create(ctx, run)
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create run %s/%s: %w", p.Namespace, name, err)
	}
	if err != nil {
		// Made by an earlier reconcile, or by someone else: only the policy's own is adopted.
		var cur vacuumv1alpha1.VacuumRun
		if err := r.Get(ctx, client.ObjectKeyFromObject(run), &cur); err != nil {
			return fmt.Errorf("get existing run %s/%s: %w", p.Namespace, name, err)
		}
		if !metav1.IsControlledBy(&cur, p) {
			r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, vacuumv1alpha1.ReasonForeignObject, "CreateRun",
				"run %s exists and is not controlled by policy %s; it is left alone and no run starts for this tick", name, p.Name)
			return nil
		}
	}
	if !slices.Contains(p.Status.Active, name) {
		p.Status.Active = append(p.Status.Active, name)
	}
	if err != nil {
		return nil // made by an earlier reconcile: adopted
	}
	// The newest run is the last one: summed up now as the reconcile its creation wakes would
	// sum it up (its name, Pending), that reconcile has nothing to write, and neither has
	// the run's own first status patch (phase Pending), which wakes no policy at all
	// (runChangedForPolicy).
	p.Status.LastRun = &vacuumv1alpha1.RunSummary{Name: name, Phase: vacuumv1alpha1.RunPending}
	r.Recorder.Eventf(p, run, corev1.EventTypeNormal, vacuumv1alpha1.ReasonRunCreated, "CreateRun", "created run %s", name)
	return nil
}

// replaceActive cancels the active runs (concurrencyPolicy Replace); they end Cancelled.
func (r *PolicyReconciler) replaceActive(ctx context.Context, p *vacuumv1alpha1.VacuumPolicy, active []*vacuumv1alpha1.VacuumRun) error {
	for _, run := range active {
		if run.Spec.Cancel {
			continue
		}
		patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"cancel":true}}`))
		if err := r.Patch(ctx, run, patch); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("cancel run %s/%s: %w", run.Namespace, run.Name, err)
		}
		r.Recorder.Eventf(p, run, corev1.EventTypeNormal, vacuumv1alpha1.ReasonRunReplaced, "ReplaceRun",
			"cancelled run %s to start a new one (concurrencyPolicy Replace)", run.Name)
	}
	return nil
}
