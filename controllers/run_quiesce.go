package controllers

import (
	"context"
	"fmt"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// Quiesce. Before the runner starts, the app holding the volume is scaled to 0 and the run
// waits until its pods are gone. The operator touches the workload only through its scale
// subresource (deployments/scale, statefulsets/scale): a grant to patch the workload itself
// could rewrite its pod template (any image, any service account of the namespace). The
// workload and its replica count are recorded in the run's status (status.quiesced) before
// the workload is scaled down, so whoever reconciles the run next, even a new manager after
// a crash, restores it, whatever the run's outcome, once its pod stopped; the record goes
// once the count is restored. The status is the manager's alone (the users of a namespace
// may edit a run's spec and metadata, not its status subresource), so no user can choose
// the count a restore writes, and a restore gives back the recorded workload, never the one
// the spec names now, and never more replicas than were recorded.
//
// Two runs never quiesce one workload at once: a run waits while another run of the
// namespace holds a recorded count for the same workload. Runs on one volume are already
// serialized by the volume lock, so this only orders runs on different volumes of one app.

// workloadScale reads the scale subresource of the run's workload.
func (r *RunReconciler) workloadScale(ctx context.Context, ns, kind, name string) (client.Object, *autoscalingv1.Scale, error) {
	newObj, ok := workloadTypes[kind]
	if !ok {
		return nil, nil, fmt.Errorf("cannot quiesce kind %q", kind)
	}
	obj := newObj()
	obj.SetNamespace(ns)
	obj.SetName(name)
	var scale autoscalingv1.Scale
	if err := r.SubResource("scale").Get(ctx, obj, &scale); err != nil {
		return obj, nil, err
	}
	return obj, &scale, nil
}

// setReplicas writes the workload's desired replicas through its scale subresource, guarded
// by the resourceVersion read, so a concurrent change is never overwritten.
func (r *RunReconciler) setReplicas(ctx context.Context, obj client.Object, scale *autoscalingv1.Scale, replicas int32) error {
	s := scale.DeepCopy()
	s.Spec.Replicas = replicas
	if err := r.SubResource("scale").Update(ctx, obj, client.WithSubResourceBody(s)); err != nil {
		return fmt.Errorf("scale %s/%s to %d: %w", obj.GetNamespace(), obj.GetName(), replicas, err)
	}
	return nil
}

// quiesce scales the run's app to 0 and says whether its pods are all gone; msg says what
// it waits for.
func (r *RunReconciler) quiesce(ctx context.Context, run *vacuumv1alpha1.VacuumRun) (bool, string, error) {
	q := run.Spec.Target.Quiesce
	obj, scale, err := r.workloadScale(ctx, run.Namespace, q.Kind, q.Name)
	if apierrors.IsNotFound(err) {
		return false, fmt.Sprintf("waiting for %s %s to exist, to quiesce it", q.Kind, q.Name), nil
	}
	if err != nil {
		return false, "", fmt.Errorf("get scale of %s %s/%s: %w", q.Kind, run.Namespace, q.Name, err)
	}
	if !r.quiesceRecorded(run) {
		holder, err := r.quiesceHolder(ctx, run)
		if err != nil || holder != "" {
			return false, fmt.Sprintf("%s %s is quiesced by run %s", q.Kind, q.Name, holder), err
		}
		err = r.patchStatusLocked(ctx, run, func(st *vacuumv1alpha1.VacuumRunStatus) {
			st.Quiesced = &vacuumv1alpha1.QuiescedApp{Kind: q.Kind, Name: q.Name, Replicas: scale.Spec.Replicas}
		})
		if apierrors.IsConflict(err) {
			// This reconcile read an old copy of the run, which may lack a count recorded
			// already: recording the current (maybe 0) replicas over it would lose it.
			return false, fmt.Sprintf("recording the replicas of %s %s", q.Kind, q.Name), nil
		}
		if err != nil {
			return false, "", err
		}
	}
	if scale.Spec.Replicas != 0 {
		if err := r.setReplicas(ctx, obj, scale, 0); err != nil {
			if apierrors.IsConflict(err) {
				return false, fmt.Sprintf("scaling %s %s to 0", q.Kind, q.Name), nil
			}
			return false, "", err
		}
		r.Recorder.Eventf(run, obj, corev1.EventTypeNormal, vacuumv1alpha1.ReasonQuiescing, "Quiesce",
			"scaled %s %s from %d to 0 replicas (restores %d)", q.Kind, q.Name, scale.Spec.Replicas, run.Status.Quiesced.Replicas)
		return false, fmt.Sprintf("scaling %s %s to 0", q.Kind, q.Name), nil
	}
	n, err := r.countSelected(ctx, run.Namespace, scale.Status.Selector)
	if err != nil || n > 0 {
		return false, fmt.Sprintf("waiting for %d pods of %s %s to stop", n, q.Kind, q.Name), err
	}
	return true, "", nil
}

// quiesceRecorded says whether the run has recorded its app's replicas, i.e. may have scaled
// it down.
func (r *RunReconciler) quiesceRecorded(run *vacuumv1alpha1.VacuumRun) bool {
	return run.Status.Quiesced != nil
}

// quiesceHolderField is the VacuumRun CRD's selectable field status.quiesced.name.
const quiesceHolderField = "status.quiesced.name"

// quiesceHolder names another run of the namespace that holds a recorded replica count for
// the same workload (it scaled it down and has not restored it yet), or "".
//
// The read is uncached, since a count recorded a moment ago must not be missed, and it asks
// the API server only for the runs whose status.quiesced names the workload (the CRD's
// selectable field): a run waiting on a holder checks again every stopPollInterval, and
// listing every run of the namespace each time made each check cost the namespace's whole
// history, runs times checks for a namespace of quiescing runs. The field is the manager's
// own (status), so no user edit can hide a holder from it. An API server that does not
// know the field (Kubernetes 1.30 without the CustomResourceFieldSelectors gate) refuses the
// selector; the reconciler then lists every run of the namespace, as before, from then on.
func (r *RunReconciler) quiesceHolder(ctx context.Context, run *vacuumv1alpha1.VacuumRun) (string, error) {
	q := run.Spec.Target.Quiesce
	var runs vacuumv1alpha1.VacuumRunList
	var err error
	selected := !r.noRunFieldSelector.Load()
	if selected {
		err = r.APIReader.List(ctx, &runs, client.InNamespace(run.Namespace), client.MatchingFields{quiesceHolderField: q.Name})
		if apierrors.IsBadRequest(err) {
			log.FromContext(ctx).Info("the API server refuses VacuumRun field selectors: listing every run of the namespace instead", "error", err.Error())
			r.noRunFieldSelector.Store(true)
			selected = false
		}
	}
	if !selected {
		err = r.APIReader.List(ctx, &runs, client.InNamespace(run.Namespace))
	}
	if err != nil {
		return "", fmt.Errorf("list runs of namespace %s: %w", run.Namespace, err)
	}
	for i := range runs.Items {
		other := runs.Items[i].Status.Quiesced
		if runs.Items[i].UID != run.UID && other != nil && other.Kind == q.Kind && other.Name == q.Name {
			return runs.Items[i].Name, nil
		}
	}
	return "", nil
}

// countSelected counts the pods matching a scale's status.selector (a label selector in
// its string form).
func (r *RunReconciler) countSelected(ctx context.Context, ns, selector string) (int, error) {
	if selector == "" {
		return 0, nil
	}
	s, err := labels.Parse(selector)
	if err != nil {
		return 0, fmt.Errorf("workload selector %q: %w", selector, err)
	}
	var pods corev1.PodList
	if err := r.APIReader.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: s}); err != nil {
		return 0, fmt.Errorf("list workload pods: %w", err)
	}
	return len(pods.Items), nil
}

// restoreQuiesced gives the workload the run recorded the replicas it recorded, then drops
// the record. It only ever raises the count up to the record: a workload someone scaled up
// meanwhile keeps its count. A workload that no longer exists has nothing to restore.
func (r *RunReconciler) restoreQuiesced(ctx context.Context, run *vacuumv1alpha1.VacuumRun) error {
	rec := run.Status.Quiesced
	if rec == nil {
		return nil
	}
	obj, scale, err := r.workloadScale(ctx, run.Namespace, rec.Kind, rec.Name)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("get scale of %s %s/%s: %w", rec.Kind, run.Namespace, rec.Name, err)
	case scale.Spec.Replicas < rec.Replicas:
		if err := r.setReplicas(ctx, obj, scale, rec.Replicas); err != nil {
			return err
		}
		r.Recorder.Eventf(run, obj, corev1.EventTypeNormal, vacuumv1alpha1.ReasonQuiesceRestored, "Restore",
			"restored %s %s to %d replicas", rec.Kind, rec.Name, rec.Replicas)
	}
	return r.patchStatusLocked(ctx, run, func(st *vacuumv1alpha1.VacuumRunStatus) { st.Quiesced = nil })
}
