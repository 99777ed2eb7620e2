package btree

import (
	"math/rand/v2"
	"testing"
	"time"
)

func BenchmarkInsertRandom(b *testing.B) {
	env := newEnv(b, 4096)
	ix := mustCreate(b, env, 10)
	es := randomEntries(10, b.N, 1<<40)
	b.ResetTimer()
	start := time.Now()
	for _, e := range es {
		if err := ix.Insert(e.Key, e.TID, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "inserts/s")
}

func BenchmarkLookupParallel(b *testing.B) {
	env := newEnv(b, 4096)
	ix := mustCreate(b, env, 10)
	es := randomEntries(11, 200_000, 1<<40)
	insertAll(b, ix, es)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		r := rand.New(rand.NewPCG(rand.Uint64(), 2))
		for pb.Next() {
			e := es[r.IntN(len(es))]
			tids, err := ix.Lookup(e.Key, nil)
			if err != nil || len(tids) == 0 {
				b.Errorf("lookup %x: %v %v", e.Key, tids, err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "lookups/s")
}
