package main

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

func testRun(name, policy string, phase vacuumv1alpha1.RunPhase, created time.Time) vacuumv1alpha1.VacuumRun {
	r := vacuumv1alpha1.VacuumRun{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created)}}
	r.Spec.PolicyName = policy
	r.Status.Phase = phase
	return r
}

func TestRenderTableAlignsColumnsLikeKubectl(t *testing.T) {
	now := time.Now()
	r := testRun("orders-lazy-once", "orders-lazy", vacuumv1alpha1.RunRunning, now.Add(-90*time.Second))
	r.Status.Table, r.Status.Progress, r.Status.PagesPerSecond, r.Status.ReadRate = "orders", "42%", 1234, "12Mi/s"
	lines := renderTable([]vacuumv1alpha1.VacuumRun{r}, now)
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want header and one row: %q", len(lines), lines)
	}
	if strings.Index(lines[0], "PHASE") != strings.Index(lines[1], "Running") {
		t.Errorf("PHASE column misaligned:\n%s\n%s", lines[0], lines[1])
	}
	for _, want := range []string{"orders-lazy", "orders", "42%", "1234", "12Mi/s", "<none>", "90s"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("row %q lacks %q", lines[1], want)
		}
	}
}

func TestAllEndedWaitsForEveryPolicyAndEveryRun(t *testing.T) {
	now := time.Now()
	policies := []string{"a", "b"}
	cases := []struct {
		name string
		runs []vacuumv1alpha1.VacuumRun
		want bool
	}{
		{"no runs yet", nil, false},
		{"one policy has no run", []vacuumv1alpha1.VacuumRun{testRun("a-1", "a", vacuumv1alpha1.RunSucceeded, now)}, false},
		{"a run still going", []vacuumv1alpha1.VacuumRun{testRun("a-1", "a", vacuumv1alpha1.RunSucceeded, now), testRun("b-1", "b", vacuumv1alpha1.RunRunning, now)}, false},
		{"all ended", []vacuumv1alpha1.VacuumRun{testRun("a-1", "a", vacuumv1alpha1.RunFailed, now), testRun("b-1", "b", vacuumv1alpha1.RunSucceeded, now)}, true},
	}
	for _, c := range cases {
		if got := allEnded(c.runs, policies); got != c.want {
			t.Errorf("%s: allEnded = %v, want %v", c.name, got, c.want)
		}
	}
}
