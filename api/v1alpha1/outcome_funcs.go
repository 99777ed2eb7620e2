/*
Copyright 2026 The vacuum-operator Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Conditions of a run's outcome and of a policy's last outcome, beside wellknown.go's.
const (
	// ConditionCancelled on a run: it was stopped by spec.cancel, its deletion or a
	// replacing run.
	ConditionCancelled = "Cancelled"
	// ConditionLastRunSucceeded on a policy: whether its latest ended run succeeded (True),
	// or how it ended otherwise (False, with that run's reason); Unknown until one ends.
	ConditionLastRunSucceeded = "LastRunSucceeded"
	// ReasonNoRunEnded is LastRunSucceeded's reason before any run of the policy ended.
	ReasonNoRunEnded = "NoRunEnded"
	// ReasonTTLExpired: an ended run was deleted once its ttlSecondsAfterFinished passed.
	ReasonTTLExpired = "TTLExpired"
)

// TerminalConditions are a run's outcome conditions: when the run ends, exactly one of
// them is True and the others False, so `kubectl wait --for=condition=X` waits for outcome X
// (and Progressing=False for any end).
var TerminalConditions = []string{ConditionComplete, ConditionFailed, ConditionCancelled}

// setOutcome makes typ the one True terminal condition and every other one False.
func (s *VacuumRunStatus) setOutcome(gen int64, typ, reason, msg string) {
	for _, t := range TerminalConditions {
		status := metav1.ConditionFalse
		if t == typ {
			status = metav1.ConditionTrue
		}
		setCondition(&s.Conditions, gen, t, status, reason, msg)
	}
}

// Outcome is the run's True terminal condition, or nil while it has not ended.
func (s *VacuumRunStatus) Outcome() *metav1.Condition {
	for _, t := range TerminalConditions {
		if c := meta.FindStatusCondition(s.Conditions, t); c != nil && c.Status == metav1.ConditionTrue {
			return c
		}
	}
	return nil
}

// SetLastRunSucceeded records the outcome of the policy's latest ended run, or Unknown when
// none has ended and the condition is not there yet (a pruned history keeps what it said).
func (s *VacuumPolicyStatus) SetLastRunSucceeded(gen int64, lastEnded *VacuumRun) {
	if lastEnded == nil {
		if meta.FindStatusCondition(s.Conditions, ConditionLastRunSucceeded) == nil {
			setCondition(&s.Conditions, gen, ConditionLastRunSucceeded, metav1.ConditionUnknown, ReasonNoRunEnded, "no run has ended yet")
		}
		return
	}
	status, reason := metav1.ConditionFalse, string(lastEnded.Status.Phase)
	if c := lastEnded.Status.Outcome(); c != nil {
		reason = c.Reason
	}
	if lastEnded.Status.Phase == RunSucceeded {
		status = metav1.ConditionTrue
	}
	msg := "run " + lastEnded.Name + " " + string(lastEnded.Status.Phase)
	if lastEnded.Status.Message != "" {
		msg += ": " + lastEnded.Status.Message
	}
	setCondition(&s.Conditions, gen, ConditionLastRunSucceeded, status, reason, msg)
}
