package bench

import (
	"fmt"
	"runtime/metrics"
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
// beside pgbench's, to see whether it explains the gap before the law is given it.

const schedLatencies = "/sched/latencies:seconds"

// schedSnap is one reading of the cumulative scheduling-latency histogram.
type schedSnap struct {
	at     time.Time
	counts []uint64
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
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.buckets == nil {
		s.buckets = append([]float64(nil), h.Buckets...)
	}
	s.snaps = append(s.snaps, schedSnap{at: time.Now(), counts: append([]uint64(nil), h.Counts...)})
}

// Stop ends the sampling (after one last reading).
func (s *schedSampler) Stop() {
	close(s.stop)
	<-s.done
}

// quantile is the q quantile (0..1) of the scheduling latencies between from and to, in
// seconds (the upper bound of the bucket it falls in), from the last reading at or before
// from to the first at or after to; ok is false when there are no such readings or no
// latencies between them.
func (s *schedSampler) quantile(q float64, from, to time.Time) (float64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var a, b *schedSnap
	for i := range s.snaps {
		x := &s.snaps[i]
		if !x.at.After(from) {
			a = x
		}
		if b == nil && !x.at.Before(to) {
			b = x
		}
	}
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

// schedTimeline is the p99 of the scheduling latency in each window of splitWindows's split
// of [start, end], in ms.
func (s *schedSampler) schedTimeline(start, end time.Time, width time.Duration) string {
	var b strings.Builder
	n := len(splitWindows(nil, start, end, width))
	for i := range n {
		from, to := start.Add(time.Duration(i)*width), start.Add(time.Duration(i+1)*width)
		if i == n-1 {
			to = end
		}
		if v, ok := s.quantile(0.99, from, to); ok {
			fmt.Fprintf(&b, "[%d: %.2f] ", i+1, 1000*v)
		} else {
			fmt.Fprintf(&b, "[%d: none] ", i+1)
		}
	}
	return strings.TrimSpace(b.String())
}
