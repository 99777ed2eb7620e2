package buffer

import (
	"math/rand/v2"
	"testing"
	"time"
)

// BenchmarkReadBufferHitParallel measures the hit path (page table lookup,
// pin, unpin) from parallel goroutines on a pool whose pages are cached.
func BenchmarkReadBufferHitParallel(b *testing.B) {
	p, _, _ := newTestPool(b, 4096)
	const pages = 2048
	for i := range pages {
		readRelease(b, p, blk(1, i), nil)
	}
	start := time.Now()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		r := rand.New(rand.NewPCG(rand.Uint64(), 1))
		for pb.Next() {
			buf, err := p.Read(blk(1, r.IntN(pages)), nil)
			if err != nil {
				b.Error(err)
				return
			}
			buf.Release()
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "hits/s")
}
