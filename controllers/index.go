package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// Field indexes of the manager's cache. Without them a policy's reconcile lists its runs by
// label over every run of the namespace, and a run's lists its pods over every runner pod of
// the namespace: each reconcile's cost grows with the fleet, the fleet's with its square.
// With them each lists only its own objects, looked up by the UID of their controller.
const (
	// indexRunPolicy keys a VacuumRun by the UID of the VacuumPolicy that controls it.
	indexRunPolicy = "vacuum.vacuumops.io/policy-uid"
	// indexPodRun keys a runner pod by the UID of the VacuumRun that controls it.
	indexPodRun = "vacuum.vacuumops.io/run-uid"
)

// controllerUID indexes an object by the UID of its controller (none without one). A UID
// names one object, so a lookup by the policy's (or run's) UID finds only what it controls.
func controllerUID(obj client.Object) []string {
	if ref := metav1.GetControllerOf(obj); ref != nil {
		return []string{string(ref.UID)}
	}
	return nil
}

// indexRuns registers indexRunPolicy with the manager's cache.
func indexRuns(ctx context.Context, fi client.FieldIndexer) error {
	if err := fi.IndexField(ctx, &vacuumv1alpha1.VacuumRun{}, indexRunPolicy, controllerUID); err != nil {
		return fmt.Errorf("index runs by policy: %w", err)
	}
	return nil
}

// indexPods registers indexPodRun with the manager's cache.
func indexPods(ctx context.Context, fi client.FieldIndexer) error {
	if err := fi.IndexField(ctx, &corev1.Pod{}, indexPodRun, controllerUID); err != nil {
		return fmt.Errorf("index pods by run: %w", err)
	}
	return nil
}
