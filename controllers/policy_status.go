package controllers

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// patchPolicyStatus is the one place a policy's status is written: it stamps
// observedGeneration and merge-patches the status subresource when anything changed.
func (r *PolicyReconciler) patchPolicyStatus(ctx context.Context, orig, p *vacuumv1alpha1.VacuumPolicy) error {
	p.Status.ObservedGeneration = p.Generation
	if equality.Semantic.DeepEqual(orig.Status, p.Status) {
		return nil
	}
	base := orig.DeepCopy()
	base.ObjectMeta = *p.ObjectMeta.DeepCopy()
	if err := r.Status().Patch(ctx, p, client.MergeFrom(base)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("patch status of policy %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}
