package controllers

import (
	"context"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// Pause. spec.paused is sent to the running pod as PUT /pause {"paused": true|false}, beside
// PUT /throttle and authenticated the same way; the runner stops at its next delay point
// (the throttle's pause primitive) and goes on when told. Once the pod has taken the value,
// status.pause and the Paused condition say so. A fresh pod starts working, so only a pause
// needs sending to it. Time paused is wall-clock time: it counts against
// activeDeadlineSeconds and against the window, which a pause does not hold open.

// pauseState is what is known of the pause sent to one pod (runnerState.pause).
type pauseState struct {
	pushing  bool
	pushed   time.Time // when the last push ended
	sent     *bool     // the value of the last push that ended (nil: none yet)
	err      error     // its outcome
	reported bool      // whether a reconcile has reported that failure
}

// pauseBody is the body of PUT /pause.
type pauseBody struct {
	Paused bool `json:"paused"`
}

// sendPause sends paused to the run's pod (PUT /pause with the run's token).
func sendPause(ctx context.Context, hc *http.Client, token, podIP string, paused bool) error {
	return putRunner(ctx, hc, token, podIP, "/pause", fmt.Sprintf("pause=%t", paused), pauseBody{Paused: paused})
}

// pushPause makes the running pod take spec.paused and records it in status once taken; it
// says whether a push failed, so the run is polled again soon.
func (r *RunReconciler) pushPause(run *vacuumv1alpha1.VacuumRun, pod *corev1.Pod) bool {
	uid := run.UID // the closure runs on a runner-call goroutine: never read run there
	token := runToken(r.Key, uid)
	send := func(ctx context.Context, ip string, paused bool) error {
		hc, err := r.runnerClient(uid) // pinned to the run's own certificate
		if err != nil {
			return err
		}
		return sendPause(ctx, hc, token, ip, paused)
	}
	outcome, err := r.runners.pushPause(run, pod.Name, pod.Status.PodIP, run.Spec.Paused, send)
	now := metav1.NewTime(r.Clock.Now())
	switch outcome {
	case pushFailed:
		r.Recorder.Eventf(run, nil, corev1.EventTypeWarning, vacuumv1alpha1.ReasonPauseFailed, "SetPaused",
			"could not send paused=%t to pod %s: %v", run.Spec.Paused, pod.Name, err)
		return true
	case pushApplied:
		was := run.Status.IsPaused()
		if run.Spec.Paused {
			run.Status.MarkPaused(run.Generation, now)
		} else {
			run.Status.MarkUnpaused(run.Generation, now)
		}
		if was != run.Spec.Paused {
			reason, what := vacuumv1alpha1.ReasonPaused, "paused at its next delay point"
			if !run.Spec.Paused {
				reason, what = vacuumv1alpha1.ReasonUnpaused, "working again"
			}
			r.Recorder.Eventf(run, nil, corev1.EventTypeNormal, reason, "SetPaused", "runner pod %s %s", pod.Name, what)
		}
	}
	return false
}

// pushPause is push (run_runner.go) for PUT /pause: applied once the pod took want (a fresh
// pod is taken to be working), failed once per failure, and a new push when none is in
// flight and the last one sent another value or failed throttleRetry ago.
func (c *runnerCalls) pushPause(run *vacuumv1alpha1.VacuumRun, pod, ip string, want bool,
	send func(ctx context.Context, ip string, paused bool) error) (pushOutcome, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := &c.state(run, pod).pause
	if s.pushing {
		return pushPending, nil
	}
	if s.sent == nil && !want {
		return pushApplied, nil
	}
	if s.sent != nil && *s.sent == want {
		switch {
		case s.err == nil:
			return pushApplied, nil
		case !s.reported:
			s.reported = true
			return pushFailed, s.err
		case time.Since(s.pushed) < throttleRetry:
			return pushPending, nil
		}
	}
	s.pushing = true
	c.start(run, func(ctx context.Context) {
		err := send(ctx, ip, want)
		c.mu.Lock()
		s.pushing, s.pushed, s.sent, s.err, s.reported = false, time.Now(), &want, err, false
		c.mu.Unlock()
	})
	return pushPending, nil
}
