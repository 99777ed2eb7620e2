package localnode

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
)

// claimPath resolves a PVC to the host directory of its PersistentVolume. No PV controller
// runs beside envtest, so a claim pre-bound by spec.volumeName to a PV whose claimRef names
// it is marked Bound here (claim and volume) if the API server left it Pending.
func (n *Node) claimPath(ctx context.Context, ns, name string) (string, error) {
	var pvc corev1.PersistentVolumeClaim
	err := n.reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &pvc)
	if apierrors.IsNotFound(err) {
		return "", &waitError{"ContainerCreating", fmt.Sprintf("persistentvolumeclaim %s/%s not found", ns, name)}
	}
	if err != nil {
		return "", fmt.Errorf("get persistentvolumeclaim %s/%s: %w", ns, name, err)
	}
	if pvc.Spec.VolumeName == "" {
		return "", &waitError{"ContainerCreating", fmt.Sprintf("persistentvolumeclaim %s/%s is not bound to a volume (set spec.volumeName: no PV controller runs here)", ns, name)}
	}
	var pv corev1.PersistentVolume
	if err := n.reader.Get(ctx, types.NamespacedName{Name: pvc.Spec.VolumeName}, &pv); err != nil {
		if apierrors.IsNotFound(err) {
			return "", &waitError{"ContainerCreating", fmt.Sprintf("persistentvolume %s of claim %s/%s not found", pvc.Spec.VolumeName, ns, name)}
		}
		return "", fmt.Errorf("get persistentvolume %s: %w", pvc.Spec.VolumeName, err)
	}
	if ref := pv.Spec.ClaimRef; ref != nil && (ref.Namespace != ns || ref.Name != name) {
		return "", &podError{"FailedMount", fmt.Sprintf("persistentvolume %s is claimed by %s/%s, not %s/%s", pv.Name, ref.Namespace, ref.Name, ns, name)}
	}
	var path string
	switch {
	case pv.Spec.Local != nil:
		path = pv.Spec.Local.Path
	case pv.Spec.HostPath != nil:
		path = pv.Spec.HostPath.Path
	default:
		return "", &podError{"FailedMount", fmt.Sprintf("persistentvolume %s: %v", pv.Name, errNotLocal)}
	}
	if err := n.markBound(ctx, &pvc, &pv); err != nil {
		return "", err
	}
	return path, nil
}

// markBound sets phase Bound on a pre-bound claim and its volume when nothing else did.
func (n *Node) markBound(ctx context.Context, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) error {
	if pv.Status.Phase != corev1.VolumeBound {
		pv.Status.Phase = corev1.VolumeBound
		if err := n.client.Status().Update(ctx, pv); err != nil && !apierrors.IsConflict(err) {
			return fmt.Errorf("mark persistentvolume %s Bound: %w", pv.Name, err)
		}
	}
	if pvc.Status.Phase != corev1.ClaimBound {
		pvc.Status.Phase = corev1.ClaimBound
		pvc.Status.AccessModes = pv.Spec.AccessModes
		pvc.Status.Capacity = pv.Spec.Capacity
		if err := n.client.Status().Update(ctx, pvc); err != nil && !apierrors.IsConflict(err) {
			return fmt.Errorf("mark persistentvolumeclaim %s/%s Bound: %w", pvc.Namespace, pvc.Name, err)
		}
	}
	return nil
}
