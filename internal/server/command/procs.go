package command

import (
	"os"
	"runtime"
	"sync"
)

// minServeProcs is the fewest Go processors (GOMAXPROCS) serve runs with by default.
// A VACUUM, a checkpoint or a GC mark worker is a goroutine that keeps its processor for
// up to Go's 10 ms time slice; with as many processors as cores (two here) one of them
// holds half the server, and a session whose message arrived waits for the slice to end.
// With more processors than cores the kernel interleaves the threads at a finer grain, as
// it does PostgreSQL's backends: on this project's 2-core machine 8 processors took
// pgbench select-only's p99 from 2.6 to 0.85 ms at the same throughput and CPU a
// transaction (docs/benchmarks/online-cost.md).
const minServeProcs = 8

// serveProcs is the GOMAXPROCS serve runs with: flag when it is positive; otherwise
// current (Go's own choice) when the GOMAXPROCS variable set it or a container's CPU limit
// lowered it below the machine's cores, since more threads than a CPU quota allows burn the
// quota in bursts and get throttled; otherwise at least minServeProcs.
func serveProcs(flag int, env string, current, cores int) int {
	switch {
	case flag > 0:
		return flag
	case env != "" || current < cores:
		return current
	}
	return max(current, minServeProcs)
}

// serving counts the serve runs of this process that hold its GOMAXPROCS, and keeps the
// value Go had chosen before the first of them, so two in-process servers (tests, vacbench)
// share one setting: the second one's rule reads Go's choice, not the first one's raise, and
// only the last one to return restores it.
var serving struct {
	sync.Mutex
	runs  int
	saved int
}

// setServeProcs sets GOMAXPROCS for a serve run by serveProcs's rule and returns what
// restores the process's value when the last serve run of the process returns, so an
// in-process server leaves its process as it found it.
func setServeProcs(flag int, logf func(string, ...any)) (restore func()) {
	serving.Lock()
	defer serving.Unlock()
	if serving.runs == 0 {
		serving.saved = runtime.GOMAXPROCS(0)
	}
	serving.runs++
	n := serveProcs(flag, os.Getenv("GOMAXPROCS"), serving.saved, runtime.NumCPU())
	if prev := runtime.GOMAXPROCS(0); n != prev {
		runtime.GOMAXPROCS(n)
		logf("GOMAXPROCS %d (Go chose %d on %d cores)", n, serving.saved, runtime.NumCPU())
	}
	return func() {
		serving.Lock()
		defer serving.Unlock()
		serving.runs--
		if serving.runs == 0 && runtime.GOMAXPROCS(0) != serving.saved {
			runtime.GOMAXPROCS(serving.saved)
		}
	}
}
