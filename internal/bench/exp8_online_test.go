package bench

import (
	"testing"
	"time"
)

func TestExperiment8sUnthrottledBaselineIsTheMedianRunNotTheFirst(t *testing.T) {
	runs := []onlineRow{
		{vacuum: 1620 * time.Millisecond, during: 3 * time.Millisecond}, // the first, on a busy machine
		{vacuum: 670 * time.Millisecond, during: 1 * time.Millisecond},
		{vacuum: 900 * time.Millisecond, during: 2 * time.Millisecond},
	}
	got := medianVacuum(runs)
	if got.vacuum != 900*time.Millisecond || got.during != 2*time.Millisecond {
		t.Fatalf("median of 1.62, 0.67 and 0.90 s = the run of %v (p99 %v), want the 0.90 s run", got.vacuum, got.during)
	}
	if runs[0].vacuum != 1620*time.Millisecond {
		t.Fatal("medianVacuum reordered its argument")
	}
	if got := medianVacuum(runs[:2]); got.vacuum != 670*time.Millisecond {
		t.Fatalf("median of two = %v, want the lower (0.67 s)", got.vacuum)
	}
	if got := vacuumTimes(runs); got != "1.62, 0.67, 0.90" {
		t.Fatalf("vacuumTimes = %q", got)
	}
}
