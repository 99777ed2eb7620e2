package tidstore

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2/roaring64"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
)

// The baseline: PostgreSQL's pre-17 dead-tuple array, a sorted array of
// 6-byte ItemPointers searched with binary search.
type tid6 struct{ hi, lo, off uint16 }

type sorted6 []tid6

func buildSorted6(blocks []uint32, offs [][]page.OffsetNumber) sorted6 {
	n := 0
	for _, o := range offs {
		n += len(o)
	}
	a := make(sorted6, 0, n)
	for i, b := range blocks {
		for _, o := range offs[i] {
			a = append(a, tid6{uint16(b >> 16), uint16(b), uint16(o)})
		}
	}
	return a
}

func (a sorted6) bytes() int64 { return int64(cap(a)) * 6 }

func (a sorted6) contains(t page.TID) bool {
	key := uint64(t.Block)<<16 | uint64(t.Off)
	lo, hi := 0, len(a)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		e := a[m]
		k := uint64(e.hi)<<32 | uint64(e.lo)<<16 | uint64(e.off)
		switch {
		case k < key:
			lo = m + 1
		case k > key:
			hi = m
		default:
			return true
		}
	}
	return false
}

func buildRoaring(blocks []uint32, offs [][]page.OffsetNumber) *roaring64.Bitmap {
	r := roaring64.New()
	for i, b := range blocks {
		for _, o := range offs[i] {
			r.Add(uint64(b)<<16 | uint64(o))
		}
	}
	r.RunOptimize()
	return r
}

func buildStore(b *testing.B, blocks []uint32, offs [][]page.OffsetNumber) *Store {
	s := New()
	for i, blk := range blocks {
		if err := s.AddBlock(blk, offs[i]); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// probes are what index vacuum asks: every heap tuple's TID (live or dead)
// in random order, so the hit rate equals the dead fraction.
func probes(nblocks uint32, tuplesPerPage int) []page.TID {
	rng := rand.New(rand.NewPCG(7, 7))
	p := make([]page.TID, 1<<18)
	for i := range p {
		p[i] = page.TID{Block: uint32(rng.IntN(int(nblocks))), Off: page.OffsetNumber(1 + rng.IntN(tuplesPerPage))}
	}
	return p
}

const (
	benchTuplesPerPage = 60
	benchTIDs          = 1 << 20
)

var benchDead = []float64{0.05, 0.20, 0.60}

var sink bool

// BenchmarkDeadTIDLookup measures each structure alone: ns/op is one random
// lookup; bytes/TID is the memory the structure holds per dead TID (exact
// for tidstore and sorted6, roaring's own GetSizeInBytes estimate for
// roaring64).
func BenchmarkDeadTIDLookup(b *testing.B) {
	for _, dead := range benchDead {
		blocks, offs := deadLayout(benchTuplesPerPage, dead, benchTIDs, 1)
		p := probes(blocks[len(blocks)-1]+1, benchTuplesPerPage)
		impls := []struct {
			name  string
			build func() (contains func(page.TID) bool, bytes int64, n int)
		}{
			{"tidstore", func() (func(page.TID) bool, int64, int) {
				s := buildStore(b, blocks, offs)
				return s.Contains, s.MemoryBytes(), s.Len()
			}},
			{"sorted6", func() (func(page.TID) bool, int64, int) {
				a := buildSorted6(blocks, offs)
				return a.contains, a.bytes(), len(a)
			}},
			{"roaring64", func() (func(page.TID) bool, int64, int) {
				r := buildRoaring(blocks, offs)
				return func(t page.TID) bool { return r.Contains(uint64(t.Block)<<16 | uint64(t.Off)) },
					int64(r.GetSizeInBytes()), int(r.GetCardinality())
			}},
		}
		for _, impl := range impls {
			b.Run(fmt.Sprintf("dead=%.0f%%/impl=%s", dead*100, impl.name), func(b *testing.B) {
				contains, bytes, n := impl.build()
				i := 0
				for b.Loop() {
					sink = contains(p[i&(len(p)-1)])
					i++
				}
				b.ReportMetric(float64(bytes)/float64(n), "bytes/TID")
			})
		}
	}
}

// BenchmarkTIDStoreVsSorted6 runs the store and the sorted 6-byte array side
// by side on the same probes and reports the ratios the design asks for:
// memory per TID (sorted6 / tidstore) and lookup time (sorted6 / tidstore).
func BenchmarkTIDStoreVsSorted6(b *testing.B) {
	for _, dead := range benchDead {
		b.Run(fmt.Sprintf("dead=%.0f%%", dead*100), func(b *testing.B) {
			blocks, offs := deadLayout(benchTuplesPerPage, dead, benchTIDs, 1)
			s := buildStore(b, blocks, offs)
			a := buildSorted6(blocks, offs)
			p := probes(blocks[len(blocks)-1]+1, benchTuplesPerPage)
			const batch = 4096
			var tStore, tArray time.Duration
			lookups, pos := 0, 0
			for b.Loop() {
				start := time.Now()
				for j := range batch {
					sink = s.Contains(p[(pos+j)&(len(p)-1)])
				}
				mid := time.Now()
				for j := range batch {
					sink = a.contains(p[(pos+j)&(len(p)-1)])
				}
				tStore += mid.Sub(start)
				tArray += time.Since(mid)
				pos += batch
				lookups += batch
			}
			storeBPT := float64(s.MemoryBytes()) / float64(s.Len())
			arrayBPT := float64(a.bytes()) / float64(len(a))
			nsStore := float64(tStore.Nanoseconds()) / float64(lookups)
			nsArray := float64(tArray.Nanoseconds()) / float64(lookups)
			b.ReportMetric(storeBPT, "tidstore-bytes/TID")
			b.ReportMetric(arrayBPT, "sorted6-bytes/TID")
			b.ReportMetric(arrayBPT/storeBPT, "mem-ratio")
			b.ReportMetric(nsStore, "tidstore-ns/lookup")
			b.ReportMetric(nsArray, "sorted6-ns/lookup")
			b.ReportMetric(nsArray/nsStore, "speedup")
		})
	}
}
