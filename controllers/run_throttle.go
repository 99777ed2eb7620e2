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

// sendThrottle sends a run's throttle to its running pod (PUT /throttle with the run's
// token). It runs outside any reconcile (see runnerCalls); a run's spec changes trigger a
// reconcile at once, which starts it, so a `kubectl patch` reaches the pod within a second or
// two; a failed push is retried soon.
func (r *RunReconciler) sendThrottle(ctx context.Context, hc *http.Client, token, podIP string, t *vacuumv1alpha1.Throttle) error {
	return putRunner(ctx, hc, token, podIP, "/throttle", "throttle", wireThrottle(t))
}

// putRunner sends body as JSON to a running pod's control endpoint path (PUT with the run's
// bearer token), naming what it sent in its error.
func putRunner(ctx context.Context, hc *http.Client, token, podIP, path, what string, body any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, runnerwire.URL(podIP, path), bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := hc.Do(req)
	if err == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			err = fmt.Errorf("HTTP %d", resp.StatusCode)
		}
	}
	if err != nil {
		return fmt.Errorf("put %s to %s: %w", what, podIP, err)
	}
	return nil
}

// pushThrottle makes a changed spec.throttle reach the running pod and records it as applied
// once the pod took it; it says whether a push failed, so the run is polled again soon.
func (r *RunReconciler) pushThrottle(run *vacuumv1alpha1.VacuumRun, pod *corev1.Pod) bool {
	if run.Status.AppliedThrottle != nil && equality.Semantic.DeepEqual(run.Spec.Throttle, *run.Status.AppliedThrottle) {
		return false
	}
	uid := run.UID // the closure runs on a runner-call goroutine: never read run there
	token := runToken(r.Key, uid)
	send := func(ctx context.Context, ip string, t *vacuumv1alpha1.Throttle) error {
		hc, err := r.runnerClient(uid) // pinned to the run's own certificate
		if err != nil {
			return err
		}
		return r.sendThrottle(ctx, hc, token, ip, t)
	}
	outcome, err := r.runners.push(run, pod.Name, pod.Status.PodIP, &run.Spec.Throttle, send)
	switch outcome {
	case pushFailed:
		r.Recorder.Eventf(run, nil, corev1.EventTypeWarning, vacuumv1alpha1.ReasonThrottleFailed, "SetThrottle",
			"could not send the new throttle to pod %s: %v", run.Status.PodName, err)
		return true
	case pushApplied:
		run.Status.AppliedThrottle = run.Spec.Throttle.DeepCopy()
		r.Recorder.Eventf(run, nil, corev1.EventTypeNormal, vacuumv1alpha1.ReasonThrottleApplied, "SetThrottle",
			"runner pod %s now throttled at %s", run.Status.PodName, describeThrottle(&run.Spec.Throttle))
	}
	return false
}
