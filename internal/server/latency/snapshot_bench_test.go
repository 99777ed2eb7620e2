package latency

import (
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// busyRecorder is a recorder over a full window of a busy foreground: 3,000 statements a
// second of two kinds, 0.2-20 ms, for the last Window; its clock stands still after that.
func busyRecorder() *Recorder {
	t0 := time.Unix(1_000_000, 0)
	now := t0
	r := newAt(func() time.Time { return now })
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range int(Window/time.Second) * 3000 {
		now = t0.Add(time.Duration(i) * time.Second / 3000)
		d := 200*time.Microsecond + time.Duration(rng.ExpFloat64()*float64(time.Millisecond))
		r.Observe([]string{"select", "commit"}[i%2], min(d, 20*time.Millisecond))
	}
	return r
}

// BenchmarkSnapshotBesideLoad times one Snapshot of a busy window.
func BenchmarkSnapshotBesideLoad(b *testing.B) {
	r := busyRecorder()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if len(r.Snapshot()) == 0 {
			b.Fatal("empty snapshot")
		}
	}
}

// BenchmarkObserveBesideSnapshots times Observe, what every foreground statement calls,
// while another goroutine reads Snapshot over and over (a reader of the view that never
// stops): its p99 and max say how long a statement can queue behind a reader of the view.
func BenchmarkObserveBesideSnapshots(b *testing.B) {
	r := busyRecorder()
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for !stop.Load() {
			r.Snapshot()
			time.Sleep(100 * time.Microsecond) // let the observer take the lock between reads
		}
	})
	took := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		r.Observe("select", time.Millisecond)
		took = append(took, time.Since(start))
	}
	b.StopTimer()
	stop.Store(true)
	wg.Wait()
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-us")
	b.ReportMetric(float64(took[len(took)-1].Microseconds()), "max-us")
}
