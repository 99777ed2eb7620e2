package controllers

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// Run tokens guard each runner pod's PUT /throttle. A run's token is
// HMAC-SHA256(manager key, run UID): the manager can recompute it whenever it needs it, so it
// never reads a token Secret back, and it never lists or watches Secrets at all (its RBAC
// allows get only on the key's own name). The token appears in no log, event, status or arg.
const (
	// DefaultKeySecretName is the Secret, in the manager's namespace, holding its key.
	DefaultKeySecretName = "vacuum-operator-key"
	keySecretField       = "key"
	tokenSecretField     = "token"
	keyBytes             = 32
)

// The key Secret is the only Secret the manager reads, and only by name, in its own
// namespace (a namespaced Role; see config/rbac).
// +kubebuilder:rbac:groups="",namespace=vacuum-operator-system,resources=secrets,verbs=get,resourceNames=vacuum-operator-key

// EnsureManagerKey returns the manager's key, creating its Secret on first start. reader
// must be uncached (the manager's APIReader): a cached Get would start a Secret informer.
func EnsureManagerKey(ctx context.Context, reader client.Reader, writer client.Writer, namespace, name string) ([]byte, error) {
	for range 2 {
		var s corev1.Secret
		err := reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &s)
		if err == nil {
			key := s.Data[keySecretField]
			if len(key) < keyBytes {
				return nil, fmt.Errorf("secret %s/%s: field %q holds %d bytes, want at least %d", namespace, name, keySecretField, len(key), keyBytes)
			}
			return key, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("get manager key secret %s/%s: %w", namespace, name, err)
		}
		key := make([]byte, keyBytes)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("generate manager key: %w", err)
		}
		s = corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "vacuum-operator"}},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{keySecretField: key},
		}
		err = writer.Create(ctx, &s)
		if err == nil {
			return key, nil
		}
		if !apierrors.IsAlreadyExists(err) { // another manager won the race: read its key
			return nil, fmt.Errorf("create manager key secret %s/%s: %w", namespace, name, err)
		}
	}
	return nil, fmt.Errorf("manager key secret %s/%s: created and deleted concurrently", namespace, name)
}

// runnerClient is the HTTP client for the runner pod of the run with this UID: it accepts
// only the certificate the manager made for that run (remade from the key, never read back)
// and keeps the timeout of the reconciler's HTTPClient. It takes the UID, not the run, because
// it is called from the runner-call goroutines while the reconcile may decode a status
// patch into the run object.
func (r *RunReconciler) runnerClient(uid types.UID) (*http.Client, error) {
	cert, err := runnerwire.RunCertificate(runToken(r.Key, uid))
	if err != nil {
		return nil, err
	}
	timeout := httpTimeout
	if r.HTTPClient != nil && r.HTTPClient.Timeout > 0 {
		timeout = r.HTTPClient.Timeout
	}
	return runnerwire.PinnedClient(cert.DER, timeout), nil
}

// runToken is the run's control token, hex-encoded.
func runToken(key []byte, uid types.UID) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(uid))
	return hex.EncodeToString(m.Sum(nil))
}

// tokenSecretName is the Secret holding a run's token, as the manager recorded it.
func tokenSecretName(run *vacuumv1alpha1.VacuumRun) string {
	if run.Status.TokenSecret == nil {
		return ""
	}
	return run.Status.TokenSecret.Name
}

// The token Secret is made once per run and its name and UID recorded in the run's status,
// by the status patch that records the first pod mounting it, or at once when the run waits
// before its pod (a busy volume, a missing claim, an app to quiesce). The name is generated
// by the API server, so no Secret of the namespace can be taken for the run's own: the
// manager never reads Secrets, so it could not tell an existing one of a chosen name from its
// own; a pod mounts only a Secret the manager made for its run, and only the recorded Secret
// is ever deleted. The record is written with the run's resourceVersion: a reconcile working
// from a stale copy deletes the Secret it just made instead of recording a second one
// (settleUnrecordedToken). Making the Secret (createTokenSecret) and recording it are two
// steps so that the first can go to the API server beside the run's other first requests
// (prepareAttempt).

// ensureTokenSecret makes and records the run's token Secret unless it has one; it says
// whether the caller must stop and retry on a fresh copy (recordTokenSecret).
func (r *RunReconciler) ensureTokenSecret(ctx context.Context, run *vacuumv1alpha1.VacuumRun) (bool, error) {
	if run.Status.TokenSecret != nil {
		return false, nil
	}
	s, err := r.createTokenSecret(ctx, run)
	if err != nil {
		return false, err
	}
	return r.recordTokenSecret(ctx, run, s)
}

// createTokenSecret makes the Secret holding the run's token, unrecorded.
func (r *RunReconciler) createTokenSecret(ctx context.Context, run *vacuumv1alpha1.VacuumRun) (*corev1.Secret, error) {
	token := runToken(r.Key, run.UID)
	cert, err := runnerwire.RunCertificate(token) // the control port's, made from the token
	if err != nil {
		return nil, err
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: run.Namespace, GenerateName: run.Name + "-token-",
			Labels: map[string]string{vacuumv1alpha1.LabelRun: run.Name}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{tokenSecretField: []byte(token),
			runnerwire.TLSCertKey: cert.CertPEM, runnerwire.TLSKeyKey: cert.KeyPEM},
	}
	if err := controllerutil.SetControllerReference(run, s, r.Scheme); err != nil {
		return nil, err
	}
	if err := r.Create(ctx, s); err != nil {
		return nil, fmt.Errorf("create token secret for run %s/%s: %w", run.Namespace, run.Name, err)
	}
	return s, nil
}

// recordTokenSecret records the Secret createTokenSecret made in the run's status, or deletes
// it when the record fails; it says whether the caller must stop and retry on a fresh copy
// (the record conflicted). Once recorded, the reconcile goes on to the pod.
func (r *RunReconciler) recordTokenSecret(ctx context.Context, run *vacuumv1alpha1.VacuumRun, s *corev1.Secret) (bool, error) {
	err := r.patchStatusLocked(ctx, run, func(st *vacuumv1alpha1.VacuumRunStatus) {
		st.TokenSecret = &vacuumv1alpha1.OwnedObject{Name: s.Name, UID: s.UID}
	})
	if err != nil {
		pre := metav1.Preconditions{UID: &s.UID}
		if derr := r.Delete(ctx, s, &client.DeleteOptions{Preconditions: &pre}); client.IgnoreNotFound(derr) != nil {
			err = errors.Join(err, fmt.Errorf("delete unrecorded token secret %s/%s: %w", s.Namespace, s.Name, derr))
		}
		if apierrors.IsConflict(err) {
			return true, nil // the next reconcile reads the run afresh
		}
		return false, err
	}
	return false, nil
}

// deleteTokenSecret removes the run's token Secret (there is no garbage collector in envtest,
// so owner references alone do not clean it up): only the one recorded in the run's status,
// and only while it has the recorded UID.
func deleteTokenSecret(ctx context.Context, c client.Writer, run *vacuumv1alpha1.VacuumRun) error {
	ref := run.Status.TokenSecret
	if ref == nil {
		return nil
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: run.Namespace, Name: ref.Name}}
	pre := metav1.Preconditions{UID: &ref.UID}
	err := c.Delete(ctx, s, &client.DeleteOptions{Preconditions: &pre})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) { // Conflict: another object now has that name
		return fmt.Errorf("delete token secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	return nil
}

// recordsNewToken says whether the run's status, as this reconcile leaves it, records a token
// Secret its copy as read did not: one prepareAttempt made for a run that went straight on to
// its pod, to be recorded with the pod by the reconcile's status patch.
func recordsNewToken(orig, run *vacuumv1alpha1.VacuumRun) bool {
	return orig.Status.TokenSecret == nil && run.Status.TokenSecret != nil
}

// The token's record with the pod's. A run that goes straight from its Secret to its pod
// records both in the one status patch that ends its first reconcile, carrying the
// resourceVersion read, rather than the Secret first and the pod second: one status patch
// and one round trip fewer between a tick and its pod. The pod then exists a moment before
// its Secret is recorded; what that changes is settled here. The Secret is still one the
// manager made for this run (its name generated by the API server, its UID known from the
// creation), only a recorded Secret is ever deleted, and the token it holds is the run's
// HMAC, the same in any Secret made for the run.

// settleUnrecordedToken handles a failed status patch that was to record the token Secret
// this reconcile made. When no pod mounts the Secret (the reconcile adopted a pod an earlier
// reconcile made, or made none), it is deleted, as recordTokenSecret deletes a Secret whose
// record failed, and the patch's error returned. When the pod this reconcile made mounts it,
// the record must land: it is written again on a fresh copy of the run (recordWithPod).
func (r *RunReconciler) settleUnrecordedToken(ctx context.Context, run *vacuumv1alpha1.VacuumRun, perr error) error {
	s := run.Status.TokenSecret
	mounted, err := r.podMountsSecret(ctx, run, s.Name)
	if err != nil {
		return errors.Join(perr, err)
	}
	if !mounted {
		obj := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: run.Namespace, Name: s.Name}}
		pre := metav1.Preconditions{UID: &s.UID}
		if derr := r.Delete(ctx, obj, &client.DeleteOptions{Preconditions: &pre}); client.IgnoreNotFound(derr) != nil {
			perr = errors.Join(perr, fmt.Errorf("delete unrecorded token secret %s/%s: %w", obj.Namespace, obj.Name, derr))
		}
		return perr
	}
	if !apierrors.IsConflict(perr) {
		return perr // the API server failed: the next reconcile finds the pod and records it
	}
	return r.recordWithPod(ctx, run)
}

// podMountsSecret says whether the run's current pod, read without the cache, mounts the
// Secret of that name as its token.
func (r *RunReconciler) podMountsSecret(ctx context.Context, run *vacuumv1alpha1.VacuumRun, secret string) (bool, error) {
	if run.Status.PodName == "" {
		return false, nil
	}
	var pod corev1.Pod
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: run.Namespace, Name: run.Status.PodName}, &pod)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("get runner pod %s/%s: %w", run.Namespace, run.Status.PodName, err)
	}
	if !metav1.IsControlledBy(&pod, run) {
		return false, nil
	}
	for _, v := range pod.Spec.Volumes {
		if v.Name == "token" && v.Secret != nil && v.Secret.SecretName == secret {
			return true, nil
		}
	}
	return false, nil
}

// recordWithPod writes the attempt this reconcile started (its pod, and the token Secret the
// pod mounts) on a fresh copy of the run, whose patch conflicted: something else changed the
// run meanwhile (its spec, its metadata). Only this manager writes a run's status, and the pod
// was made by this reconcile, so the fresh copy records no attempt of that number; a token
// Secret it records instead (made by an earlier reconcile whose copy this one did not see) is
// mounted by no pod, and is deleted once the new record has landed.
func (r *RunReconciler) recordWithPod(ctx context.Context, run *vacuumv1alpha1.VacuumRun) error {
	made := run.Status.DeepCopy()
	var err error
	for range 3 {
		var fresh vacuumv1alpha1.VacuumRun
		if err = r.APIReader.Get(ctx, client.ObjectKeyFromObject(run), &fresh); err != nil {
			return fmt.Errorf("read run %s/%s to record its pod: %w", run.Namespace, run.Name, client.IgnoreNotFound(err))
		}
		if fresh.Status.Attempts >= made.Attempts {
			return fmt.Errorf("run %s/%s records attempt %d already; pod %s and token secret %s are left as they are",
				run.Namespace, run.Name, fresh.Status.Attempts, made.PodName, made.TokenSecret.Name)
		}
		stale := fresh.Status.TokenSecret
		err = r.patchStatusLocked(ctx, &fresh, func(st *vacuumv1alpha1.VacuumRunStatus) {
			st.TokenSecret = made.TokenSecret.DeepCopy()
			st.Attempts, st.PodName, st.AppliedThrottle = made.Attempts, made.PodName, made.AppliedThrottle.DeepCopy()
			if !fresh.IsFinished() {
				st.MarkPending(fresh.Generation, vacuumv1alpha1.ReasonPodPending, made.Message)
			}
			st.ObservedGeneration = fresh.Generation
		})
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return err
		}
		*run = fresh
		if stale != nil && stale.UID != made.TokenSecret.UID {
			return deleteTokenSecret(ctx, r, &vacuumv1alpha1.VacuumRun{
				ObjectMeta: run.ObjectMeta, Status: vacuumv1alpha1.VacuumRunStatus{TokenSecret: stale}})
		}
		return nil
	}
	return err
}
