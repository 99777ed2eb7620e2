package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// The volume lock. Two runs never use one PVC at once, across all policies and managers: a
// run first creates the Lease named after its PVC (coordination.k8s.io; creation is atomic,
// so AlreadyExists means another run holds it), renews it while it works and deletes it at
// the end, once its pod has stopped. A lease is taken over only when its holder run no
// longer exists or has ended, never on a timeout: a manager that was down for a while must
// not let a second runner onto a volume whose first runner still works.
const (
	leaseDurationSeconds = 60
	leaseRenewEvery      = 20 * time.Second
)

// leaseName is the Lease guarding a PVC, within the 253 characters of a name.
func leaseName(pvc string) string {
	name := "vacuum-pvc-" + pvc
	if len(name) <= 253 {
		return name
	}
	sum := sha256.Sum256([]byte(pvc))
	return name[:253-17] + "-" + hex.EncodeToString(sum[:8])
}

// heldLeases remembers, per run UID, the Lease as this manager last wrote or read it while
// the run held it. A run holds its lock over many reconciles (each progress poll, each pod
// event), and nobody else writes a Lease whose holder is a run still going (a takeover needs
// the holder ended or gone), so between renewals a reconcile trusts the copy instead of
// reading the Lease again: one uncached request fewer on every reconcile of an active run.
// The renewal (an update with the remembered resourceVersion) checks the copy every
// leaseRenewEvery; a conflict or a missing Lease drops it, and the next reconcile reads.
// A manager that restarts starts empty and reads.
//
// It also remembers the runs that released their Lease: an ended run is reconciled again
// (its status patch, its pod's deletion, its own deletion) and each of those reconciles
// releases its lock once more, which without a copy meant a read of a Lease long deleted.
// A run's entry goes when its finalizer does.
type heldLeases struct {
	mu       sync.Mutex
	m        map[types.UID]*coordinationv1.Lease
	released map[types.UID]bool
}

// markReleased records that the run no longer holds its Lease.
func (h *heldLeases) markReleased(uid types.UID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.m, uid)
	if h.released == nil {
		h.released = map[types.UID]bool{}
	}
	h.released[uid] = true
}

func (h *heldLeases) isReleased(uid types.UID) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.released[uid]
}

// drop forgets the run altogether (its finalizer is gone: no reconcile of it acts again).
func (h *heldLeases) drop(uid types.UID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.m, uid)
	delete(h.released, uid)
}

func (h *heldLeases) get(uid types.UID) *coordinationv1.Lease {
	h.mu.Lock()
	defer h.mu.Unlock()
	if l := h.m[uid]; l != nil {
		return l.DeepCopy()
	}
	return nil
}

func (h *heldLeases) put(uid types.UID, l *coordinationv1.Lease) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[types.UID]*coordinationv1.Lease{}
	}
	h.m[uid] = l.DeepCopy()
}

func (h *heldLeases) forget(uid types.UID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.m, uid)
}

// volumeLock is the outcome of acquireVolumeLock: held since when, or held by whom.
type volumeLock struct {
	held   bool
	holder string    // the other run holding it, when not held
	since  time.Time // when this run took it, when held
}

// acquireVolumeLock takes or renews the run's PVC lock, and says since when the run holds
// it: podStartTimeoutSeconds counts from then.
func (r *RunReconciler) acquireVolumeLock(ctx context.Context, run *vacuumv1alpha1.VacuumRun) (volumeLock, error) {
	now := metav1.NewMicroTime(r.Clock.Now())
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: run.Namespace, Name: lockName(run),
			Labels: map[string]string{vacuumv1alpha1.LabelRun: run.Name}},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To(string(run.UID)), LeaseDurationSeconds: ptr.To(int32(leaseDurationSeconds)),
			AcquireTime: &now, RenewTime: &now,
		},
	}
	taken := volumeLock{held: true, since: now.Time}
	if held := r.leases.get(run.UID); held != nil && held.Name == lease.Name {
		if held.Spec.AcquireTime != nil {
			taken.since = held.Spec.AcquireTime.Time
		}
		if held.Spec.RenewTime != nil && now.Sub(held.Spec.RenewTime.Time) < leaseRenewEvery {
			return taken, nil
		}
		held.Spec.RenewTime = &now
		err := r.Update(ctx, held) // the remembered resourceVersion: a compare-and-swap
		if err == nil {
			r.leases.put(run.UID, held)
			return taken, nil
		}
		r.leases.forget(run.UID)
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return volumeLock{}, fmt.Errorf("renew lease %s/%s: %w", held.Namespace, held.Name, err)
		}
		// Changed or gone since this manager wrote it: read it, as without a copy.
	}
	// A fresh run (no phase yet: no reconcile of it has got this far) creates the Lease
	// without reading it first: almost always nobody holds it, and the read would be one more
	// uncached request between every tick and its pod. Any other run without a copy (a
	// manager restarted, a volume busy, a copy dropped) reads first, since it most likely
	// finds a Lease, its own or another run's, and a Create would only add an AlreadyExists.
	var cur coordinationv1.Lease
	var err error = apierrors.NewNotFound(coordinationv1.Resource("leases"), lease.Name)
	if run.Status.Phase != "" {
		err = r.APIReader.Get(ctx, client.ObjectKeyFromObject(lease), &cur)
	}
	if apierrors.IsNotFound(err) {
		err = r.Create(ctx, lease)
		if err == nil {
			r.leases.put(run.UID, lease)
			return taken, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return volumeLock{}, fmt.Errorf("create lease %s/%s: %w", lease.Namespace, lease.Name, err)
		}
		err = r.APIReader.Get(ctx, client.ObjectKeyFromObject(lease), &cur) // another run took it meanwhile
	}
	if err != nil {
		return volumeLock{}, client.IgnoreNotFound(err) // deleted meanwhile: try again next time
	}
	if holder := ptr.Deref(cur.Spec.HolderIdentity, ""); holder == string(run.UID) {
		if cur.Spec.AcquireTime != nil {
			taken.since = cur.Spec.AcquireTime.Time
		}
		if err := r.renewLease(ctx, &cur, now); err != nil {
			return volumeLock{}, err
		}
		r.leases.put(run.UID, &cur)
		return taken, nil
	}
	holderName := cur.Labels[vacuumv1alpha1.LabelRun]
	stale, err := r.holderGone(ctx, run.Namespace, holderName, ptr.Deref(cur.Spec.HolderIdentity, ""))
	if err != nil || !stale {
		return volumeLock{holder: holderName}, err
	}
	cur.Labels = lease.Labels
	cur.Spec = lease.Spec
	if err := r.Update(ctx, &cur); err != nil { // resourceVersion makes this a compare-and-swap
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return volumeLock{holder: holderName}, nil
		}
		return volumeLock{holder: holderName}, fmt.Errorf("take over stale lease %s/%s: %w", cur.Namespace, cur.Name, err)
	}
	r.leases.put(run.UID, &cur)
	return taken, nil
}

// holderGone says whether the run holding a lease no longer needs it.
func (r *RunReconciler) holderGone(ctx context.Context, ns, name, uid string) (bool, error) {
	if name == "" {
		return true, nil
	}
	var holder vacuumv1alpha1.VacuumRun
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &holder)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("get lease holder run %s/%s: %w", ns, name, err)
	}
	return string(holder.UID) != uid || holder.IsFinished() && holder.DeletionTimestamp == nil, nil
}

// renewLease renews a lease the run holds when leaseRenewEvery has passed; a conflict
// leaves it as it was read, for the next reconcile to read again.
func (r *RunReconciler) renewLease(ctx context.Context, lease *coordinationv1.Lease, now metav1.MicroTime) error {
	if lease.Spec.RenewTime != nil && now.Sub(lease.Spec.RenewTime.Time) < leaseRenewEvery {
		return nil
	}
	read := lease.DeepCopy()
	lease.Spec.RenewTime = &now
	if err := r.Update(ctx, lease); err != nil {
		*lease = *read
		if !apierrors.IsConflict(err) {
			return fmt.Errorf("renew lease %s/%s: %w", lease.Namespace, lease.Name, err)
		}
	}
	return nil
}

// releaseVolumeLock deletes the run's lease if the run holds it.
func (r *RunReconciler) releaseVolumeLock(ctx context.Context, run *vacuumv1alpha1.VacuumRun) error {
	if r.leases.isReleased(run.UID) {
		return nil // released by an earlier reconcile of this manager
	}
	if err := r.deleteVolumeLock(ctx, run); err != nil {
		return err
	}
	r.leases.markReleased(run.UID)
	return nil
}

// deleteVolumeLock deletes the run's lease if the run holds it: the copy this manager last
// wrote, unread, or else the Lease as read.
func (r *RunReconciler) deleteVolumeLock(ctx context.Context, run *vacuumv1alpha1.VacuumRun) error {
	held := r.leases.get(run.UID)
	r.leases.forget(run.UID)
	var cur coordinationv1.Lease
	name := lockName(run)
	if name == "" {
		return nil // an online run that never identified its server holds no lock
	}
	k := types.NamespacedName{Namespace: run.Namespace, Name: name}
	if held != nil && held.Name == name {
		// Delete the copy this manager last wrote, unread: its UID and resourceVersion make
		// the delete fail if anyone changed the Lease since, and then it is read first.
		pre := metav1.Preconditions{UID: &held.UID, ResourceVersion: &held.ResourceVersion}
		err := r.Delete(ctx, held, &client.DeleteOptions{Preconditions: &pre})
		if err == nil || apierrors.IsNotFound(err) {
			return nil
		}
		if !apierrors.IsConflict(err) {
			return fmt.Errorf("release lease %s/%s: %w", k.Namespace, k.Name, err)
		}
	}
	if err := r.APIReader.Get(ctx, k, &cur); err != nil {
		return client.IgnoreNotFound(err)
	}
	if ptr.Deref(cur.Spec.HolderIdentity, "") != string(run.UID) {
		return nil
	}
	pre := metav1.Preconditions{UID: &cur.UID, ResourceVersion: &cur.ResourceVersion}
	if err := r.Delete(ctx, &cur, &client.DeleteOptions{Preconditions: &pre}); err != nil &&
		!apierrors.IsNotFound(err) {
		return fmt.Errorf("release lease %s/%s: %w", k.Namespace, k.Name, err)
	}
	return nil
}
