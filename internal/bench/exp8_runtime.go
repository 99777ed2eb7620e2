package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"time"
)

// The engine server of experiment 8 runs in this process, so the Go runtime's own counters
// say what a VACUUM costs its sessions beyond its cost units: garbage-collection cycles and
// the CPU their mark assists take from the goroutines that allocate (the sessions among
// them), stop-the-world pauses, time goroutines wait on contended mutexes (buffer, WAL and
// lock-table mutexes), and how long runnable goroutines wait for a processor. Each onlineRow
// of the engine server carries these over the stretch alone and over the VACUUM, per second,
// so the two can be set side by side in the run's log (docs/benchmarks/online-cost.md).

// runtimeSample is a reading of the counters below at one instant.
type runtimeSample struct {
	at                          time.Time
	cycles                      uint64
	assist, pauseCPU, mutexWait float64 // seconds
	pauses, sched               *metrics.Float64Histogram
	allocBytes                  uint64
}

var runtimeMetricNames = []string{
	"/gc/cycles/total:gc-cycles",
	"/cpu/classes/gc/mark/assist:cpu-seconds",
	"/cpu/classes/gc/pause:cpu-seconds",
	"/sync/mutex/wait/total:seconds",
	"/sched/pauses/total/gc:seconds",
	"/sched/latencies:seconds",
	"/gc/heap/allocs:bytes",
}

func readRuntime() runtimeSample {
	ms := make([]metrics.Sample, len(runtimeMetricNames))
	for i, n := range runtimeMetricNames {
		ms[i].Name = n
	}
	metrics.Read(ms)
	s := runtimeSample{at: time.Now()}
	for _, m := range ms {
		switch m.Value.Kind() {
		case metrics.KindUint64:
			switch m.Name {
			case "/gc/cycles/total:gc-cycles":
				s.cycles = m.Value.Uint64()
			case "/gc/heap/allocs:bytes":
				s.allocBytes = m.Value.Uint64()
			}
		case metrics.KindFloat64:
			switch m.Name {
			case "/cpu/classes/gc/mark/assist:cpu-seconds":
				s.assist = m.Value.Float64()
			case "/cpu/classes/gc/pause:cpu-seconds":
				s.pauseCPU = m.Value.Float64()
			case "/sync/mutex/wait/total:seconds":
				s.mutexWait = m.Value.Float64()
			}
		case metrics.KindFloat64Histogram:
			switch m.Name {
			case "/sched/pauses/total/gc:seconds":
				s.pauses = m.Value.Float64Histogram()
			case "/sched/latencies:seconds":
				s.sched = m.Value.Float64Histogram()
			}
		}
	}
	return s
}

// runtimeDelta is what the runtime counted between two samples.
type runtimeDelta struct {
	secs             float64
	cycles           uint64
	allocMiB         float64
	assistMs         float64 // CPU ms in mark assists
	pauseCPUMs       float64 // CPU ms in stop-the-world pauses (GOMAXPROCS x wall)
	mutexWaitMs      float64 // ms goroutines waited on contended sync mutexes
	pauseN           uint64  // stop-the-world pauses
	maxPauseUs       float64 // the longest, by its histogram bucket's upper bound
	schedP99Us       float64 // p99 of the time runnable goroutines waited to run
	schedOver1msFrac float64 // the share of those waits over 1 ms
}

func (b runtimeSample) since(a runtimeSample) runtimeDelta {
	d := runtimeDelta{
		secs:        b.at.Sub(a.at).Seconds(),
		cycles:      b.cycles - a.cycles,
		allocMiB:    float64(b.allocBytes-a.allocBytes) / (1 << 20),
		assistMs:    1000 * (b.assist - a.assist),
		pauseCPUMs:  1000 * (b.pauseCPU - a.pauseCPU),
		mutexWaitMs: 1000 * (b.mutexWait - a.mutexWait),
	}
	if a.pauses != nil && b.pauses != nil {
		for i := range b.pauses.Counts {
			if n := b.pauses.Counts[i] - a.pauses.Counts[i]; n > 0 {
				d.pauseN += n
				d.maxPauseUs = 1e6 * b.pauses.Buckets[i+1]
			}
		}
	}
	if a.sched != nil && b.sched != nil {
		var total, over uint64
		counts := make([]uint64, len(b.sched.Counts))
		for i := range counts {
			counts[i] = b.sched.Counts[i] - a.sched.Counts[i]
			total += counts[i]
			if b.sched.Buckets[i] >= 1e-3 {
				over += counts[i]
			}
		}
		if total > 0 {
			d.schedOver1msFrac = float64(over) / float64(total)
			want, seen := uint64(float64(total)*0.99), uint64(0)
			for i, n := range counts {
				seen += n
				if seen >= want {
					d.schedP99Us = 1e6 * b.sched.Buckets[i+1]
					break
				}
			}
		}
	}
	return d
}

// String gives the counts per second, so a stretch alone and a VACUUM of other lengths compare.
func (d runtimeDelta) String() string {
	if d.secs <= 0 {
		return "no interval"
	}
	return fmt.Sprintf("%.2f s: %d GC cycles (%.1f/s), %.0f MiB allocated (%.0f MiB/s), mark assist %.1f ms/s, "+
		"STW pauses %d (%.1f ms/s of CPU, longest <= %.0f us), mutex wait %.1f ms/s, scheduling wait p99 <= %.0f us (%.2f%% over 1 ms)",
		d.secs, d.cycles, float64(d.cycles)/d.secs, d.allocMiB, d.allocMiB/d.secs, d.assistMs/d.secs,
		d.pauseN, d.pauseCPUMs/d.secs, d.maxPauseUs, d.mutexWaitMs/d.secs, d.schedP99Us, 100*d.schedOver1msFrac)
}

// Exp8ProfileEnv names a directory: when set, experiment 8 (and its cost test) records the
// process's mutex and block profiles at the start and at the end of each stretch alone and
// each VACUUM, so `go tool pprof -diff_base` shows who held (mutex) and who waited (block)
// during either. Profiling costs the server a little; a measurement, not a bench figure.
const Exp8ProfileEnv = "VACBENCH_EXP8_PROFILE_DIR"

// exp8Profiles writes the mutex and block profiles named for tag into $VACBENCH_EXP8_PROFILE_DIR,
// turning both profiles on the first time; without the variable it does nothing.
func exp8Profiles(tag string) error {
	dir := os.Getenv(Exp8ProfileEnv)
	if dir == "" {
		return nil
	}
	if runtime.SetMutexProfileFraction(-1) == 0 {
		runtime.SetMutexProfileFraction(5)
		runtime.SetBlockProfileRate(100_000) // one sample per 100 us blocked
	}
	for _, kind := range []string{"mutex", "block"} {
		f, err := os.Create(filepath.Join(dir, kind+"-"+tag+".pprof"))
		if err != nil {
			return fmt.Errorf("experiment 8 profiles: %w", err)
		}
		werr := pprof.Lookup(kind).WriteTo(f, 0)
		if err := f.Close(); werr == nil {
			werr = err
		}
		if werr != nil {
			return fmt.Errorf("experiment 8 profiles: %s: %w", f.Name(), werr)
		}
	}
	return nil
}
