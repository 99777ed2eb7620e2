package controllers

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
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

// runnerClient is the HTTP client for the run's runner pod: it accepts only the certificate
// the manager made for this run (remade from the key, never read back) and keeps the
// timeout of the reconciler's HTTPClient.
func (r *RunReconciler) runnerClient(run *vacuumv1alpha1.VacuumRun) (*http.Client, error) {
	cert, err := runnerwire.RunCertificate(runToken(r.Key, run.UID))
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

// tokenSecretName is the Secret holding a run's token.
func tokenSecretName(run *vacuumv1alpha1.VacuumRun) string { return run.Name + "-token" }

// ensureTokenSecret writes the run's token, and the control port's certificate and key made
// from it (runnerwire.RunCertificate), into a Secret the run owns. AlreadyExists means
// an earlier reconcile (or another manager) made it: its content is the same by construction.
func (r *RunReconciler) ensureTokenSecret(ctx context.Context, run *vacuumv1alpha1.VacuumRun) error {
	token := runToken(r.Key, run.UID)
	cert, err := runnerwire.RunCertificate(token)
	if err != nil {
		return err
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: run.Namespace, Name: tokenSecretName(run),
			Labels: map[string]string{vacuumv1alpha1.LabelRun: run.Name}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{tokenSecretField: []byte(token),
			runnerwire.TLSCertKey: cert.CertPEM, runnerwire.TLSKeyKey: cert.KeyPEM},
	}
	if err := controllerutil.SetControllerReference(run, s, r.Scheme); err != nil {
		return err
	}
	if err := r.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create token secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	return nil
}

// deleteTokenSecret removes the run's token Secret (there is no garbage collector in envtest
// or on the local dev cluster, so owner references alone do not clean it up).
func deleteTokenSecret(ctx context.Context, c client.Writer, run *vacuumv1alpha1.VacuumRun) error {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: run.Namespace, Name: tokenSecretName(run)}}
	if err := c.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete token secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	return nil
}
