package managerstat

import (
	"math"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

const exposition = `# HELP controller_runtime_reconcile_time_seconds Length of time per reconciliation per controller
# TYPE controller_runtime_reconcile_time_seconds histogram
controller_runtime_reconcile_time_seconds_bucket{controller="vacuumpolicy",le="0.005"} 50
controller_runtime_reconcile_time_seconds_bucket{controller="vacuumpolicy",le="0.01"} 90
controller_runtime_reconcile_time_seconds_bucket{controller="vacuumpolicy",le="0.05"} 98
controller_runtime_reconcile_time_seconds_bucket{controller="vacuumpolicy",le="+Inf"} 100
controller_runtime_reconcile_time_seconds_sum{controller="vacuumpolicy"} 1.5
controller_runtime_reconcile_time_seconds_count{controller="vacuumpolicy"} 100
controller_runtime_reconcile_time_seconds_bucket{controller="vacuumrun",le="0.005"} 0
controller_runtime_reconcile_time_seconds_bucket{controller="vacuumrun",le="0.01"} 0
controller_runtime_reconcile_time_seconds_bucket{controller="vacuumrun",le="0.05"} 10
controller_runtime_reconcile_time_seconds_bucket{controller="vacuumrun",le="+Inf"} 10
controller_runtime_reconcile_time_seconds_sum{controller="vacuumrun"} 0.3
controller_runtime_reconcile_time_seconds_count{controller="vacuumrun"} 10
# HELP rest_client_requests_total Number of HTTP requests, partitioned by status code, method, and host.
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",host="127.0.0.1:1",method="GET"} 7
rest_client_requests_total{code="201",host="127.0.0.1:1",method="POST"} 3
# HELP go_memstats_heap_alloc_bytes Number of heap bytes allocated and currently in use.
# TYPE go_memstats_heap_alloc_bytes gauge
go_memstats_heap_alloc_bytes 1.048576e+07
`

func parsed(t *testing.T) Sample {
	t.Helper()
	s, err := Parse(strings.NewReader(exposition))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSumAddsTheMatchingSeriesOfCountersAndGauges(t *testing.T) {
	s := parsed(t)
	for _, c := range []struct {
		name string
		sel  Labels
		want float64
	}{
		{"rest_client_requests_total", nil, 10},
		{"rest_client_requests_total", Labels{"method": "POST"}, 3},
		{"rest_client_requests_total", Labels{"method": "PUT"}, 0},
		{"go_memstats_heap_alloc_bytes", nil, 10 << 20},
		{"no_such_metric", nil, 0},
	} {
		if got := s.Sum(c.name, c.sel); got != c.want {
			t.Errorf("Sum(%s, %v) = %v, want %v", c.name, c.sel, got, c.want)
		}
	}
}

// The estimate is Prometheus's: linear within the bucket holding the rank.
func TestQuantileInterpolatesWithinTheBucketAsHistogramQuantileDoes(t *testing.T) {
	s := parsed(t)
	h, err := s.Histogram("controller_runtime_reconcile_time_seconds", Labels{"controller": "vacuumpolicy"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ q, want float64 }{
		{0.25, 0.0025}, // rank 25 of 50 in [0, 5 ms]
		{0.5, 0.005},   // rank 50: the top of the first bucket
		{0.7, 0.0075},  // rank 70: half-way through (5, 10 ms]
		{0.94, 0.03},   // rank 94: half-way through (10, 50 ms]
		{0.995, 0.05},  // in +Inf: the highest finite bound
	} {
		if got := h.Quantile(c.q); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("q%.3f = %v, want %v", c.q, got, c.want)
		}
	}
	if got := (Histogram{}).Quantile(0.5); !math.IsNaN(got) {
		t.Errorf("quantile of nothing = %v, want NaN", got)
	}
}

func TestHistogramSubKeepsOnlyTheObservationsInBetween(t *testing.T) {
	s := parsed(t)
	all, err := s.Histogram("controller_runtime_reconcile_time_seconds", nil)
	if err != nil {
		t.Fatal(err)
	}
	if all.Count != 110 || all.Counts[2] != 108 {
		t.Fatalf("both controllers: count %v, le 0.05 %v; want 110, 108", all.Count, all.Counts[2])
	}
	run, _ := s.Histogram("controller_runtime_reconcile_time_seconds", Labels{"controller": "vacuumrun"})
	policy, err := all.Sub(run)
	if err != nil {
		t.Fatal(err)
	}
	if policy.Count != 100 || policy.Counts[0] != 50 || math.Abs(policy.Sum-1.5) > 1e-12 {
		t.Errorf("all minus vacuumrun: %+v, want vacuumpolicy's", policy)
	}
	if _, err := s.Histogram("controller_runtime_reconcile_time_seconds", Labels{"controller": "other"}); err == nil {
		t.Error("a selector matching no series gave no error")
	}
}

func TestReadProcSeesThisProcessSpendCPUAndHoldMemory(t *testing.T) {
	before, err := ReadProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Spin until the kernel's own account (getrusage) has 200 ms more of this process's CPU.
	start := rusageCPU(t)
	spins := 0
	for rusageCPU(t)-start < 200*time.Millisecond {
		spins++
	}
	t.Logf("%d reads of getrusage to spend 200 ms", spins)
	after, err := ReadProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if d := after.CPU - before.CPU; d < 150*time.Millisecond {
		t.Errorf("200 ms of CPU by getrusage counted %s in /proc", d)
	}
	if after.RSSBytes < 1<<20 {
		t.Errorf("resident set %d bytes: a Go test binary holds more than 1 MiB", after.RSSBytes)
	}
	if _, err := ReadProc(1 << 30); err == nil {
		t.Error("a process that does not exist gave no error")
	}
}

// rusageCPU is this process's user plus system time by getrusage(2).
func rusageCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
