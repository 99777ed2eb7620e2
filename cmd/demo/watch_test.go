package main

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

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
	o := testRun("shop-online-once", "shop-online", vacuumv1alpha1.RunRunning, now.Add(-5*time.Second))
	o.Status.SetForeground(200, 20, 150, 900, 400, 600)
	lines := renderTable([]vacuumv1alpha1.VacuumRun{r, o}, now)
	if len(lines) != 3 {
		t.Fatalf("got %d lines, want header and two rows: %q", len(lines), lines)
	}
	if strings.Index(lines[0], "PHASE") != strings.Index(lines[1], "Running") {
		t.Errorf("PHASE column misaligned:\n%s\n%s", lines[0], lines[1])
	}
	for _, want := range []string{"orders-lazy", "orders", "42%", "1234", "12Mi/s", "<none>", "90s"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("row %q lacks %q", lines[1], want)
		}
	}
	if col(lines[0], "FG-P99") != col(lines[2], "900µs") {
		t.Errorf("FG-P99 column misaligned or wrong:\n%s\n%s", lines[0], lines[2])
	}
	if col(lines[0], "FG-VS-BASELINE") != col(lines[2], "1.5x") {
		t.Errorf("FG-VS-BASELINE column misaligned or wrong:\n%s\n%s", lines[0], lines[2])
	}
}

// col is the column (in runes, as tabwriter aligns them) where sub starts in line, -1 if absent.
func col(line, sub string) int {
	i := strings.Index(line, sub)
	if i < 0 {
		return -1
	}
	return utf8.RuneCountInString(line[:i])
}

func TestHigherForegroundKeepsTheHighestP99AgainstItsBaseline(t *testing.T) {
	fg := func(p99, base int64) *vacuumv1alpha1.ForegroundStatus {
		var s vacuumv1alpha1.VacuumRunStatus
		s.SetForeground(100, 10, p99/2, p99, 100, base)
		return s.Foreground
	}
	var peak *vacuumv1alpha1.ForegroundStatus
	for _, f := range []*vacuumv1alpha1.ForegroundStatus{nil, fg(1200, 1000), {}, fg(3000, 1000), fg(1500, 1000)} {
		peak = higherForeground(peak, f)
	}
	if peak == nil || peak.P99VsBaseline != "3.0x" {
		t.Fatalf("peak = %+v, want the 3.0x one", peak)
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
