package localnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// claimPath resolves a PVC to the host directory of its PersistentVolume. No PV controller
// runs beside envtest, so a claim pre-bound by spec.volumeName to a PV whose claimRef names
// it is marked Bound here (claim and volume) if the API server left it Pending. An unbound
// claim of no storage class or of StorageClass (a StatefulSet's, from its
// volumeClaimTemplates) is provisioned first, as a WaitForFirstConsumer provisioner would.
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
		if c := pvc.Spec.StorageClassName; c != nil && *c != StorageClass {
			return "", &waitError{"ContainerCreating", fmt.Sprintf("persistentvolumeclaim %s/%s is not bound to a volume (its storageClassName %q is not the local node's %q, and no PV controller runs here: set spec.volumeName)", ns, name, *c, StorageClass)}
		}
		if err := n.provision(ctx, &pvc); err != nil {
			return "", err
		}
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

// StorageClass is the storage class the local node provisions (as does a claim with no
// storageClassName): a hostPath PersistentVolume under Config.VolumeDir.
const StorageClass = "vacuum-localnode"

// provisionedBy is the annotation a provisioner puts on the volumes it made.
const provisionedBy = "pv.kubernetes.io/provisioned-by"

// provision makes a hostPath PersistentVolume pvc-<claim uid> in a new directory of
// Config.VolumeDir for an unbound claim, with the claim's size, access modes and class and a
// claimRef naming it, then pre-binds the claim to it (spec.volumeName); claimPath then marks
// both Bound. The volume is kept when the claim is deleted (Retain: nothing here deletes it).
func (n *Node) provision(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error {
	name := "pvc-" + string(pvc.UID)
	dir := filepath.Join(n.cfg.VolumeDir, name)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("create the volume directory of claim %s/%s: %w", pvc.Namespace, pvc.Name, err)
	}
	size, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok {
		return &podError{"FailedMount", fmt.Sprintf("persistentvolumeclaim %s/%s requests no storage size", pvc.Namespace, pvc.Name)}
	}
	class := ""
	if pvc.Spec.StorageClassName != nil {
		class = *pvc.Spec.StorageClassName
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{provisionedBy: StorageClass}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   pvc.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              class,
			VolumeMode:                    pvc.Spec.VolumeMode,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}},
			ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID},
		},
	}
	if err := n.client.Create(ctx, pv); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create persistentvolume %s for claim %s/%s: %w", name, pvc.Namespace, pvc.Name, err)
	}
	pvc.Spec.VolumeName = name
	if err := n.client.Update(ctx, pvc); err != nil {
		if apierrors.IsConflict(err) {
			return &waitError{"ContainerCreating", fmt.Sprintf("persistentvolumeclaim %s/%s changed while being bound; retrying", pvc.Namespace, pvc.Name)}
		}
		return fmt.Errorf("bind persistentvolumeclaim %s/%s to %s: %w", pvc.Namespace, pvc.Name, name, err)
	}
	n.cfg.Log.Info("provisioned volume", "claim", pvc.Namespace+"/"+pvc.Name, "volume", name, "dir", dir)
	return nil
}
