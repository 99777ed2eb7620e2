package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// Quiesce. Before the runner starts, the app holding the volume is scaled to 0 and the run
// waits until its pods are gone. The replica count to restore is written to an annotation on
// the workload in the same patch that scales it down, so whoever reconciles the run next, even
// a new manager after a crash, restores it: whatever the run's outcome, once its pod stopped.

// workloadView is what quiesce needs of a Deployment or a StatefulSet.
type workloadView struct {
	obj      client.Object
	replicas int32
	selector *metav1.LabelSelector
}

func (r *RunReconciler) getWorkload(ctx context.Context, ns string, q *vacuumv1alpha1.QuiesceTarget) (*workloadView, error) {
	newObj, ok := workloadTypes[q.Kind]
	if !ok {
		return nil, fmt.Errorf("cannot quiesce kind %q", q.Kind)
	}
	obj := newObj()
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: ns, Name: q.Name}, obj); err != nil {
		return nil, err
	}
	v := &workloadView{obj: obj, replicas: 1}
	switch o := obj.(type) {
	case *appsv1.Deployment:
		v.selector = o.Spec.Selector
		if o.Spec.Replicas != nil {
			v.replicas = *o.Spec.Replicas
		}
	case *appsv1.StatefulSet:
		v.selector = o.Spec.Selector
		if o.Spec.Replicas != nil {
			v.replicas = *o.Spec.Replicas
		}
	}
	return v, nil
}

// quiesce scales the run's app to 0 and says whether its pods are all gone; msg says what
// it waits for.
func (r *RunReconciler) quiesce(ctx context.Context, run *vacuumv1alpha1.VacuumRun) (bool, string, error) {
	q := run.Spec.Target.Quiesce
	w, err := r.getWorkload(ctx, run.Namespace, q)
	if apierrors.IsNotFound(err) {
		return false, fmt.Sprintf("waiting for %s %s to exist, to quiesce it", q.Kind, q.Name), nil
	}
	if err != nil {
		return false, "", fmt.Errorf("get %s %s/%s: %w", q.Kind, run.Namespace, q.Name, err)
	}
	ann := w.obj.GetAnnotations()
	by := ann[vacuumv1alpha1.AnnotationQuiescedBy]
	if by != run.Name {
		if by != "" {
			if gone, err := r.quiescerGone(ctx, run.Namespace, by); err != nil || !gone {
				return false, fmt.Sprintf("%s %s is quiesced by run %s", q.Kind, q.Name, by), err
			}
		}
		restore := strconv.Itoa(int(w.replicas))
		if prev, ok := ann[vacuumv1alpha1.AnnotationRestoreReplicas]; ok {
			restore = prev // adopted from an ended run: keep the count it recorded
		}
		if err := r.patchWorkload(ctx, w.obj, map[string]any{
			vacuumv1alpha1.AnnotationRestoreReplicas: restore, vacuumv1alpha1.AnnotationQuiescedBy: run.Name,
		}, 0); err != nil {
			return false, "", err
		}
		r.Recorder.Eventf(run, w.obj, corev1.EventTypeNormal, vacuumv1alpha1.ReasonQuiescing, "Quiesce",
			"scaled %s %s from %s to 0 replicas", q.Kind, q.Name, restore)
		return false, fmt.Sprintf("scaling %s %s to 0", q.Kind, q.Name), nil
	}
	n, err := r.countSelected(ctx, run.Namespace, w.selector)
	if err != nil || n > 0 {
		return false, fmt.Sprintf("waiting for %d pods of %s %s to stop", n, q.Kind, q.Name), err
	}
	return true, "", nil
}

// quiescerGone says whether the run named in a workload's quiesced-by annotation has ended.
func (r *RunReconciler) quiescerGone(ctx context.Context, ns, name string) (bool, error) {
	var other vacuumv1alpha1.VacuumRun
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &other)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return err == nil && other.IsFinished(), err
}

func (r *RunReconciler) countSelected(ctx context.Context, ns string, sel *metav1.LabelSelector) (int, error) {
	if sel == nil {
		return 0, nil
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return 0, fmt.Errorf("workload selector: %w", err)
	}
	var pods corev1.PodList
	if err := r.APIReader.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: s}); err != nil {
		return 0, fmt.Errorf("list workload pods: %w", err)
	}
	return len(pods.Items), nil
}

// restoreQuiesced gives the run's app back its replicas, if this run quiesced it.
func (r *RunReconciler) restoreQuiesced(ctx context.Context, run *vacuumv1alpha1.VacuumRun) error {
	q := run.Spec.Target.Quiesce
	w, err := r.getWorkload(ctx, run.Namespace, q)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get %s %s/%s: %w", q.Kind, run.Namespace, q.Name, err)
	}
	ann := w.obj.GetAnnotations()
	if ann[vacuumv1alpha1.AnnotationQuiescedBy] != run.Name {
		return nil
	}
	n, err := strconv.Atoi(ann[vacuumv1alpha1.AnnotationRestoreReplicas])
	if err != nil || n < 0 {
		n = 1
	}
	if err := r.patchWorkload(ctx, w.obj, map[string]any{
		vacuumv1alpha1.AnnotationRestoreReplicas: nil, vacuumv1alpha1.AnnotationQuiescedBy: nil,
	}, int32(n)); err != nil {
		return err
	}
	r.Recorder.Eventf(run, w.obj, corev1.EventTypeNormal, vacuumv1alpha1.ReasonQuiesceRestored, "Restore",
		"restored %s %s to %d replicas", q.Kind, q.Name, n)
	return nil
}

// patchWorkload sets annotations (nil removes) and replicas in one merge patch, guarded by
// the resourceVersion read, so a concurrent change is never overwritten.
func (r *RunReconciler) patchWorkload(ctx context.Context, obj client.Object, ann map[string]any, replicas int32) error {
	body, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": ann, "resourceVersion": obj.GetResourceVersion()},
		"spec":     map[string]any{"replicas": replicas},
	})
	if err != nil {
		return err
	}
	if err := r.Patch(ctx, obj, client.RawPatch(types.MergePatchType, body)); err != nil {
		return fmt.Errorf("scale %s/%s to %d: %w", obj.GetNamespace(), obj.GetName(), replicas, err)
	}
	return nil
}
