package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// Quiesce. Before the runner starts, the app holding the volume is scaled to 0 and the run
// waits until its pods are gone. The operator touches the workload only through its scale
// subresource (deployments/scale, statefulsets/scale): a grant to patch the workload itself
// could rewrite its pod template (any image, any service account of the namespace). The
// replica count to restore is written to an annotation on the VacuumRun before the workload
// is scaled down, so whoever reconciles the run next, even a new manager after a crash,
// restores it, whatever the run's outcome, once its pod stopped; the annotation goes once
// the count is restored.
//
// Two runs never quiesce one workload at once: a run waits while another run of the
// namespace holds a recorded count for the same workload. Runs on one volume are already
// serialized by the volume lock, so this only orders runs on different volumes of one app.

// workloadScale reads the scale subresource of the run's workload.
func (r *RunReconciler) workloadScale(ctx context.Context, ns string, q *vacuumv1alpha1.QuiesceTarget) (client.Object, *autoscalingv1.Scale, error) {
	newObj, ok := workloadTypes[q.Kind]
	if !ok {
		return nil, nil, fmt.Errorf("cannot quiesce kind %q", q.Kind)
	}
	obj := newObj()
	obj.SetNamespace(ns)
	obj.SetName(q.Name)
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
	obj, scale, err := r.workloadScale(ctx, run.Namespace, q)
	if apierrors.IsNotFound(err) {
		return false, fmt.Sprintf("waiting for %s %s to exist, to quiesce it", q.Kind, q.Name), nil
	}
	if err != nil {
		return false, "", fmt.Errorf("get scale of %s %s/%s: %w", q.Kind, run.Namespace, q.Name, err)
	}
	recorded, ok := run.Annotations[vacuumv1alpha1.AnnotationQuiesceReplicas]
	if !ok {
		holder, err := r.quiesceHolder(ctx, run)
		if err != nil || holder != "" {
			return false, fmt.Sprintf("%s %s is quiesced by run %s", q.Kind, q.Name, holder), err
		}
		recorded = strconv.Itoa(int(scale.Spec.Replicas))
		err = r.setRunAnnotation(ctx, run, vacuumv1alpha1.AnnotationQuiesceReplicas, &recorded)
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
			"scaled %s %s from %d to 0 replicas (restores %s)", q.Kind, q.Name, scale.Spec.Replicas, recorded)
		return false, fmt.Sprintf("scaling %s %s to 0", q.Kind, q.Name), nil
	}
	n, err := r.countSelected(ctx, run.Namespace, scale.Status.Selector)
	if err != nil || n > 0 {
		return false, fmt.Sprintf("waiting for %d pods of %s %s to stop", n, q.Kind, q.Name), err
	}
	return true, "", nil
}

// quiesceHolder names another run of the namespace that holds a recorded replica count for
// the same workload (it scaled it down and has not restored it yet), or "".
func (r *RunReconciler) quiesceHolder(ctx context.Context, run *vacuumv1alpha1.VacuumRun) (string, error) {
	var runs vacuumv1alpha1.VacuumRunList
	if err := r.APIReader.List(ctx, &runs, client.InNamespace(run.Namespace)); err != nil {
		return "", fmt.Errorf("list runs of namespace %s: %w", run.Namespace, err)
	}
	for i := range runs.Items {
		other := &runs.Items[i]
		if other.UID == run.UID || other.Spec.Target.Quiesce == nil || *other.Spec.Target.Quiesce != *run.Spec.Target.Quiesce {
			continue
		}
		if _, ok := other.Annotations[vacuumv1alpha1.AnnotationQuiesceReplicas]; ok {
			return other.Name, nil
		}
	}
	return "", nil
}

// setRunAnnotation sets (or, with nil, removes) one annotation of the run by a metadata
// merge patch carrying the run's resourceVersion: the count to restore is written only onto
// the run as this reconcile read it, and the run is updated from the answer.
func (r *RunReconciler) setRunAnnotation(ctx context.Context, run *vacuumv1alpha1.VacuumRun, name string, value *string) error {
	var v any
	if value != nil {
		v = *value
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": run.ResourceVersion, "annotations": map[string]any{name: v},
	}})
	if err != nil {
		return fmt.Errorf("annotate run %s/%s: %w", run.Namespace, run.Name, err)
	}
	if err := r.Patch(ctx, run, client.RawPatch(types.MergePatchType, body)); err != nil {
		return fmt.Errorf("annotate run %s/%s with %s: %w", run.Namespace, run.Name, name, err)
	}
	return nil
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

// restoreQuiesced gives the run's app back the replicas recorded on the run, then drops the
// record. A workload that no longer exists has nothing to restore.
func (r *RunReconciler) restoreQuiesced(ctx context.Context, run *vacuumv1alpha1.VacuumRun) error {
	recorded, ok := run.Annotations[vacuumv1alpha1.AnnotationQuiesceReplicas]
	if !ok {
		return nil
	}
	q := run.Spec.Target.Quiesce
	obj, scale, err := r.workloadScale(ctx, run.Namespace, q)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("get scale of %s %s/%s: %w", q.Kind, run.Namespace, q.Name, err)
	default:
		n, perr := strconv.ParseInt(recorded, 10, 32)
		if perr != nil || n < 0 {
			return fmt.Errorf("run %s/%s: annotation %s=%q is not a replica count", run.Namespace, run.Name,
				vacuumv1alpha1.AnnotationQuiesceReplicas, recorded)
		}
		if scale.Spec.Replicas != int32(n) {
			if err := r.setReplicas(ctx, obj, scale, int32(n)); err != nil {
				return err
			}
			r.Recorder.Eventf(run, obj, corev1.EventTypeNormal, vacuumv1alpha1.ReasonQuiesceRestored, "Restore",
				"restored %s %s to %d replicas", q.Kind, q.Name, n)
		}
	}
	return r.setRunAnnotation(ctx, run, vacuumv1alpha1.AnnotationQuiesceReplicas, nil)
}
