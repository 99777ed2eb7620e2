package controllers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// pushThrottle sends a changed spec.throttle to the running pod (PUT /throttle with the run's
// token) and records it as applied. A run's spec changes trigger a reconcile at once, so a
// `kubectl patch` reaches the pod within a second or two; a failed push is retried soon.
func (r *RunReconciler) pushThrottle(ctx context.Context, run *vacuumv1alpha1.VacuumRun, podIP string) error {
	if run.Status.AppliedThrottle != nil && equality.Semantic.DeepEqual(run.Spec.Throttle, *run.Status.AppliedThrottle) {
		return nil
	}
	body, err := json.Marshal(wireThrottle(&run.Spec.Throttle))
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, runnerwire.URL(podIP, "/throttle"), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+runToken(r.Key, run.UID))
	resp, err := r.HTTPClient.Do(req)
	if err == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			err = fmt.Errorf("HTTP %d", resp.StatusCode)
		}
	}
	if err != nil {
		r.Recorder.Eventf(run, nil, corev1.EventTypeWarning, vacuumv1alpha1.ReasonThrottleFailed, "SetThrottle",
			"could not send the new throttle to pod %s: %v", run.Status.PodName, err)
		return fmt.Errorf("put throttle to %s: %w", podIP, err)
	}
	run.Status.AppliedThrottle = run.Spec.Throttle.DeepCopy()
	r.Recorder.Eventf(run, nil, corev1.EventTypeNormal, vacuumv1alpha1.ReasonThrottleApplied, "SetThrottle",
		"runner pod %s now throttled at %s", run.Status.PodName, describeThrottle(&run.Spec.Throttle))
	return nil
}
