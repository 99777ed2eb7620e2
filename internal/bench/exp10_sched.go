package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Experiment 10's look at what the adaptive law does not see: the engine server times a
// statement from its planning to the end of its execution, while pgbench waits from the
// transaction's scheduled start to its answer; in windows where pgbench's p99 missed the
// target the law's own signal stayed under it. One candidate is the Go scheduler's run queue:
// the VACUUM's goroutines and the sessions' share the process's Ps, and a session whose
// message has arrived waits runnable before it reads it. runtime/metrics's
// /sched/latencies:seconds is that wait (for every goroutine of this process, which runs the
// engine server; pgbench is another process), cheap to read: the runs log its p99 per window
// beside pgbench's, to see whether it explains the gap before the law is given it. Beside it,
// what the kernel shows of the same: /proc/pressure/cpu's "some" stall time (the share of
// time in which a runnable task of the machine waited for a CPU; pgbench's included) and this
// process's threads' run-queue wait from /proc/self/task/*/schedstat, each per second of a
// window. A goroutine Go counts as running can still be waiting for the kernel to run its
// thread.

const schedLatencies = "/sched/latencies:seconds"

// schedSnap is one reading of the cumulative scheduling-latency histogram.
type schedSnap struct {
	at     time.Time
	counts []uint64
	psi    float64 // /proc/pressure/cpu some total, µs (-1: not read)
	rq     float64 // this process's threads' run-queue wait, ns (-1: not read)
}

// schedSampler reads /sched/latencies:seconds every period until stopped.
type schedSampler struct {
	buckets []float64
	stop    chan struct{}
	done    chan struct{}

	mu    sync.Mutex
	snaps []schedSnap
}

// startSched starts a schedSampler.
func startSched(period time.Duration) *schedSampler {
	s := &schedSampler{stop: make(chan struct{}), done: make(chan struct{})}
	s.read()
	go func() {
		defer close(s.done)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				s.read()
				return
			case <-t.C:
				s.read()
			}
		}
	}()
	return s
}

func (s *schedSampler) read() {
	m := []metrics.Sample{{Name: schedLatencies}}
	metrics.Read(m)
	if m[0].Value.Kind() != metrics.KindFloat64Histogram {
		return
	}
	h := m[0].Value.Float64Histogram()
	psi, rq := cpuPressure(), runQueueWait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.buckets == nil {
		s.buckets = append([]float64(nil), h.Buckets...)
	}
	s.snaps = append(s.snaps, schedSnap{at: time.Now(), counts: append([]uint64(nil), h.Counts...), psi: psi, rq: rq})
}

// Stop ends the sampling (after one last reading).
func (s *schedSampler) Stop() {
	close(s.stop)
	<-s.done
}

// cpuPressure is /proc/pressure/cpu's "some" total in µs, or -1.
func cpuPressure() float64 {
	b, err := os.ReadFile("/proc/pressure/cpu")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "some ") {
			continue
		}
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "total="); ok {
				if x, err := strconv.ParseFloat(v, 64); err == nil {
					return x
				}
			}
		}
	}
	return -1
}

// runQueueWait is the time this process's threads have waited on a run queue, in ns (the
// second field of each /proc/self/task/*/schedstat; a thread gone since is no longer
// counted, so a window's figure is a lower bound), or -1.
func runQueueWait() float64 {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return -1
	}
	total := 0.0
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc/self/task", t.Name(), "schedstat"))
		if err != nil {
			continue
		}
		if fs := strings.Fields(string(b)); len(fs) >= 2 {
			if x, err := strconv.ParseFloat(fs[1], 64); err == nil {
				total += x
			}
		}
	}
	return total
}

// around is the last reading at or before from and the first at or after to.
func (s *schedSampler) around(from, to time.Time) (a, b *schedSnap) {
	for i := range s.snaps {
		x := &s.snaps[i]
		if !x.at.After(from) {
			a = x
		}
		if b == nil && !x.at.Before(to) {
			b = x
		}
	}
	return a, b
}

// perSecond is the kernel's CPU pressure stall and this process's run-queue wait between
// from and to, in ms per second; ok is false without readings around the span.
func (s *schedSampler) perSecond(from, to time.Time) (psi, rq float64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, b := s.around(from, to)
	if a == nil || b == nil || a.psi < 0 || b.psi < 0 || a.rq < 0 || b.rq < 0 {
		return 0, 0, false
	}
	secs := b.at.Sub(a.at).Seconds()
	if secs <= 0 {
		return 0, 0, false
	}
	return (b.psi - a.psi) / 1e3 / secs, max(0, b.rq-a.rq) / 1e6 / secs, true
}

// quantile is the q quantile (0..1) of the scheduling latencies between from and to, in
// seconds (the upper bound of the bucket it falls in), from the last reading at or before
// from to the first at or after to; ok is false when there are no such readings or no
// latencies between them.
func (s *schedSampler) quantile(q float64, from, to time.Time) (float64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, b := s.around(from, to)
	if a == nil || b == nil {
		return 0, false
	}
	return histQuantile(s.buckets, a.counts, b.counts, q)
}

// histQuantile is the q quantile of the histogram of the counts added from before to after
// (buckets are the len(counts)+1 boundaries): the upper boundary of the bucket that holds it,
// or its lower one when the upper is +Inf.
func histQuantile(buckets []float64, before, after []uint64, q float64) (float64, bool) {
	var total uint64
	for i := range after {
		total += after[i] - before[i]
	}
	if total == 0 {
		return 0, false
	}
	rank := uint64(q*float64(total) + 0.999999)
	var seen uint64
	for i := range after {
		seen += after[i] - before[i]
		if seen >= max(rank, 1) {
			if hi := buckets[i+1]; hi < 1e300 {
				return hi, true
			}
			return buckets[i], true
		}
	}
	return buckets[len(buckets)-1], true
}

// cpuSummary describes [from, to] for a run's log line: the Go scheduling latency p99, the
// machine's CPU pressure stall and this process's run-queue wait.
func (s *schedSampler) cpuSummary(from, to time.Time) string {
	var b strings.Builder
	b.WriteString("CPU:")
	if v, ok := s.quantile(0.99, from, to); ok {
		fmt.Fprintf(&b, " Go scheduling latency p99 %.2f ms", 1000*v)
	}
	if psi, rq, ok := s.perSecond(from, to); ok {
		fmt.Fprintf(&b, ", the machine's CPU pressure stall %.0f ms/s, this process's run-queue wait %.0f ms/s", psi, rq)
	}
	return b.String()
}

// schedTimeline is, for each window of splitWindows's split of [start, end], the p99 of the
// Go scheduling latency (ms), the machine's CPU pressure stall and this process's run-queue
// wait (ms per second).
func (s *schedSampler) schedTimeline(start, end time.Time, width time.Duration) string {
	var b strings.Builder
	n := len(splitWindows(nil, start, end, width))
	for i := range n {
		from, to := start.Add(time.Duration(i)*width), start.Add(time.Duration(i+1)*width)
		if i == n-1 {
			to = end
		}
		fmt.Fprintf(&b, "[%d:", i+1)
		if v, ok := s.quantile(0.99, from, to); ok {
			fmt.Fprintf(&b, " go %.2f", 1000*v)
		}
		if psi, rq, ok := s.perSecond(from, to); ok {
			fmt.Fprintf(&b, " psi %.0f rq %.0f", psi, rq)
		}
		b.WriteString("] ")
	}
	return strings.TrimSpace(b.String())
}
