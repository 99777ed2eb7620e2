package throttle

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkAchievedVsCeiling runs a synthetic vacuum worker (20 µs of CPU
// and cost 22 per page: one miss, one page dirtied) under this package's
// Throttle and under PostgreSQL's rule side by side, at cost limit 200 and
// several delays, and reports the achieved cost rate as a fraction of the
// ceiling (limit/delay). ns/op is the wall time per page. impl=unthrottled
// shows what the worker alone reaches (a loaded machine caps it).
func BenchmarkAchievedVsCeiling(b *testing.B) {
	const cpu = 20 * time.Microsecond
	for _, delay := range []time.Duration{500 * time.Microsecond, time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond} {
		s := costSettings(delay)
		ctx := context.Background()
		b.Run(fmt.Sprintf("delay=%v/impl=ours", delay), func(b *testing.B) {
			th := mustNew(b, s)
			m := th.Meter(nil)
			pages := 0
			start := time.Now()
			for b.Loop() {
				spin(cpu)
				m.Charge(page)
				if err := m.Wait(ctx); err != nil {
					b.Fatal(err)
				}
				pages++
			}
			elapsed := time.Since(start)
			b.ReportMetric(float64(pages)*s.Units(Cost, page)/(s.Rate(Cost)*elapsed.Seconds()), "achieved/ceiling")
			b.ReportMetric(th.Stats().Slept.Seconds()/elapsed.Seconds(), "slept/elapsed")
		})
		b.Run(fmt.Sprintf("delay=%v/impl=unthrottled", delay), func(b *testing.B) {
			// What the worker reaches with no throttle on this machine now:
			// a ratio below 1 for both throttles is the worker, not them.
			pages := 0
			start := time.Now()
			for b.Loop() {
				spin(cpu)
				pages++
			}
			elapsed := time.Since(start)
			b.ReportMetric(float64(pages)*s.Units(Cost, page)/(s.Rate(Cost)*elapsed.Seconds()), "achieved/ceiling")
		})
		b.Run(fmt.Sprintf("delay=%v/impl=postgres", delay), func(b *testing.B) {
			p, err := NewPostgresNap(s, nil)
			if err != nil {
				b.Fatal(err)
			}
			pages := 0
			start := time.Now()
			for b.Loop() {
				spin(cpu)
				p.Charge(page)
				if err := p.Wait(ctx); err != nil {
					b.Fatal(err)
				}
				pages++
			}
			elapsed := time.Since(start)
			b.ReportMetric(float64(pages)*s.Units(Cost, page)/(s.Rate(Cost)*elapsed.Seconds()), "achieved/ceiling")
			b.ReportMetric(p.Stats().Slept.Seconds()/elapsed.Seconds(), "slept/elapsed")
		})
	}
}

// BenchmarkWaitOverhead is the cost of a delay point that does not sleep
// (limits far above the usage), with 1 and 2 workers per CPU sharing one
// throttle (ns/op is per Wait across all workers).
func BenchmarkWaitOverhead(b *testing.B) {
	s := DefaultSettings()
	s.CostLimit = 1 << 30
	for _, par := range []int{1, 2} {
		b.Run(fmt.Sprintf("workers-per-cpu=%d", par), func(b *testing.B) {
			th := mustNew(b, s)
			b.SetParallelism(par)
			b.RunParallel(func(pb *testing.PB) {
				m := th.Meter(nil)
				for pb.Next() {
					m.Charge(page)
					if err := m.Wait(context.Background()); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
