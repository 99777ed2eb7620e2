package bench

import (
	"math"
	"os"
	"testing"
	"time"
)

// TestSchedQuantileIsOfTheLatenciesAddedBetweenTwoReadings: the histogram is cumulative, so a
// window's quantile comes from the counts added between the readings around it, not from all
// the process has seen.
func TestSchedQuantileIsOfTheLatenciesAddedBetweenTwoReadings(t *testing.T) {
	buckets := []float64{0, 0.001, 0.01, 0.1, math.Inf(1)}
	before := []uint64{1000, 0, 0, 0} // a quiet past: every latency under 1 ms
	after := []uint64{1090, 0, 5, 5}  // the window: 90 under 1 ms, 5 under 100 ms, 5 above
	if v, ok := histQuantile(buckets, before, after, 0.5); !ok || v != 0.001 {
		t.Errorf("p50 %v (%v), want 0.001", v, ok)
	}
	if v, ok := histQuantile(buckets, before, after, 0.93); !ok || v != 0.1 {
		t.Errorf("p93 %v (%v), want 0.1 (the window's, not the past's)", v, ok)
	}
	if v, ok := histQuantile(buckets, before, after, 0.99); !ok || v != 0.1 {
		t.Errorf("p99 %v (%v), want the +Inf bucket's lower bound 0.1", v, ok)
	}
	if _, ok := histQuantile(buckets, after, after, 0.99); ok {
		t.Error("no latency between two equal readings, yet a quantile")
	}
	t0 := time.Now()
	s := &schedSampler{buckets: buckets, snaps: []schedSnap{{at: t0, counts: before, psi: 1e6, rq: 0}, {at: t0.Add(time.Second), counts: after, psi: 1.25e6, rq: 4e7}}}
	if v, ok := s.quantile(0.5, t0.Add(100*time.Millisecond), t0.Add(900*time.Millisecond)); !ok || v != 0.001 {
		t.Errorf("sampler p50 over a span inside the readings %v (%v), want 0.001", v, ok)
	}
	if _, ok := s.quantile(0.5, t0.Add(-time.Second), t0.Add(900*time.Millisecond)); ok {
		t.Error("a span starting before the first reading has a quantile")
	}
	// The kernel's figures are per second between the same readings: 250 ms of CPU pressure
	// stall and 40 ms of run-queue wait over 1 s.
	if psi, rq, ok := s.perSecond(t0.Add(100*time.Millisecond), t0.Add(900*time.Millisecond)); !ok || math.Abs(psi-250) > 1e-9 || math.Abs(rq-40) > 1e-9 {
		t.Errorf("per second: psi %v rq %v (%v), want 250 and 40 ms/s", psi, rq, ok)
	}
}

// TestTheKernelsCPUFiguresAreReadWhereTheKernelHasThem: on Linux with pressure stall
// information the readers return a total, elsewhere -1 (the log then leaves them out).
func TestTheKernelsCPUFiguresAreReadWhereTheKernelHasThem(t *testing.T) {
	if rq := runQueueWait(); rq < 0 {
		t.Skip("no /proc/self/task schedstat here")
	}
	if _, err := os.Stat("/proc/pressure/cpu"); err == nil && cpuPressure() < 0 {
		t.Error("/proc/pressure/cpu exists but its some total was not read")
	}
}
