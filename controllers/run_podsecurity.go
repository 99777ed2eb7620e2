package controllers

import (
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

// The operator checks every runner pod before creating it: the PodSecurity "restricted"
// profile with pod-security-admission's own policy code, and the two things that profile
// does not check, a read-only root filesystem and no service-account token.

var restrictedEvaluator = sync.OnceValues(func() (policy.Evaluator, error) {
	return policy.NewEvaluator(policy.DefaultChecks(), nil)
})

// checkRunnerPodSecurity says why a runner pod would not be secure enough, or nil.
func checkRunnerPodSecurity(pod *corev1.Pod) error {
	ev, err := restrictedEvaluator()
	if err != nil {
		return fmt.Errorf("pod security evaluator: %w", err)
	}
	lv := psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}
	agg := policy.AggregateCheckResults(ev.EvaluatePod(lv, &pod.ObjectMeta, &pod.Spec))
	var errs []error
	if !agg.Allowed {
		errs = append(errs, fmt.Errorf("violates PodSecurity restricted: %s: %s", agg.ForbiddenReason(), agg.ForbiddenDetail()))
	}
	if a := pod.Spec.AutomountServiceAccountToken; a == nil || *a {
		errs = append(errs, errors.New("mounts a service-account token"))
	}
	for _, c := range pod.Spec.Containers {
		if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			errs = append(errs, fmt.Errorf("container %s has a writable root filesystem", c.Name))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("runner pod %s: %w", pod.Name, err)
	}
	return nil
}
