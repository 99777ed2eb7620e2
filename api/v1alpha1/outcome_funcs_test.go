package v1alpha1

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestEveryEndLeavesExactlyOneTerminalConditionTrueAndProgressingFalse(t *testing.T) {
	now := metav1.NewTime(time.Unix(1_800_000_000, 0))
	cases := []struct {
		name string
		end  func(*VacuumRunStatus)
		want string
	}{
		{"succeeded", func(s *VacuumRunStatus) { s.MarkSucceeded(3, now, "done") }, ConditionComplete},
		{"failed", func(s *VacuumRunStatus) { s.MarkFailed(3, now, ReasonBadInput, "bad") }, ConditionFailed},
		{"cancelled", func(s *VacuumRunStatus) { s.MarkCancelled(3, now, "stop") }, ConditionCancelled},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var s VacuumRunStatus
			s.MarkPending(3, ReasonVolumeBusy, "waiting")
			if s.Outcome() != nil {
				t.Fatalf("a pending run has an outcome: %+v", s.Outcome())
			}
			tc.end(&s)
			for _, typ := range TerminalConditions {
				c := meta.FindStatusCondition(s.Conditions, typ)
				if c == nil {
					t.Fatalf("condition %s missing after the end; conditions %+v", typ, s.Conditions)
				}
				want := metav1.ConditionFalse
				if typ == tc.want {
					want = metav1.ConditionTrue
				}
				if c.Status != want || c.ObservedGeneration != 3 {
					t.Errorf("%s = %s (generation %d), want %s (generation 3)", typ, c.Status, c.ObservedGeneration, want)
				}
			}
			if !meta.IsStatusConditionFalse(s.Conditions, ConditionProgressing) {
				t.Errorf("Progressing is not False after the end: %+v", meta.FindStatusCondition(s.Conditions, ConditionProgressing))
			}
			if got := s.Outcome(); got == nil || got.Type != tc.want {
				t.Errorf("Outcome() = %+v, want %s", got, tc.want)
			}
		})
	}
}

func TestLastRunSucceededFollowsTheLatestEndedRunAndKeepsItsWordWhenHistoryIsPruned(t *testing.T) {
	var s VacuumPolicyStatus
	s.SetLastRunSucceeded(1, nil)
	if c := meta.FindStatusCondition(s.Conditions, ConditionLastRunSucceeded); c == nil || c.Status != metav1.ConditionUnknown || c.Reason != ReasonNoRunEnded {
		t.Fatalf("before any run ended: %+v", c)
	}
	now := metav1.NewTime(time.Unix(1_800_000_000, 0))
	failed := &VacuumRun{ObjectMeta: metav1.ObjectMeta{Name: "p-1"}}
	failed.Status.MarkFailed(1, now, ReasonDeadlineExceeded, "activeDeadlineSeconds passed")
	s.SetLastRunSucceeded(1, failed)
	c := meta.FindStatusCondition(s.Conditions, ConditionLastRunSucceeded)
	if c.Status != metav1.ConditionFalse || c.Reason != ReasonDeadlineExceeded || c.Message != "run p-1 Failed: activeDeadlineSeconds passed" {
		t.Fatalf("after a failed run: %+v", c)
	}
	s.SetLastRunSucceeded(1, nil) // the failed run was pruned
	if c := meta.FindStatusCondition(s.Conditions, ConditionLastRunSucceeded); c.Reason != ReasonDeadlineExceeded {
		t.Fatalf("pruning the run changed the condition: %+v", c)
	}
	ok := &VacuumRun{ObjectMeta: metav1.ObjectMeta{Name: "p-2"}}
	ok.Status.MarkSucceeded(1, now, "vacuum complete")
	s.SetLastRunSucceeded(2, ok)
	if c := meta.FindStatusCondition(s.Conditions, ConditionLastRunSucceeded); c.Status != metav1.ConditionTrue || c.Reason != ReasonSucceeded || c.ObservedGeneration != 2 {
		t.Fatalf("after a succeeded run: %+v", c)
	}
}
