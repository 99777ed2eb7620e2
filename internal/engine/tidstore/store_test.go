package tidstore

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
)

type blockOffs struct {
	blk  uint32
	offs []page.OffsetNumber
}

func offsets(xs ...int) []page.OffsetNumber {
	out := make([]page.OffsetNumber, len(xs))
	for i, x := range xs {
		out[i] = page.OffsetNumber(x)
	}
	return out
}

func tid(blk uint32, off page.OffsetNumber) page.TID { return page.TID{Block: blk, Off: off} }

func rangeOffs(lo, hi int) []page.OffsetNumber {
	var out []page.OffsetNumber
	for o := lo; o <= hi; o++ {
		out = append(out, page.OffsetNumber(o))
	}
	return out
}

// collect returns the store's content as Iterate reports it.
func collect(t *testing.T, s *Store) []blockOffs {
	t.Helper()
	var got []blockOffs
	err := s.Iterate(func(blk uint32, offs []page.OffsetNumber) error {
		got = append(got, blockOffs{blk, slices.Clone(offs)})
		return nil
	})
	if err != nil {
		t.Fatalf("Iterate: %v", err)
	}
	return got
}

func TestStoreHoldsExactlyTheAddedTIDs(t *testing.T) {
	cases := []struct {
		name   string
		add    []blockOffs
		want   []blockOffs // Iterate's output: sorted, deduplicated
		absent []page.TID
	}{
		{
			name:   "one tid",
			add:    []blockOffs{{7, offsets(3)}},
			want:   []blockOffs{{7, offsets(3)}},
			absent: []page.TID{tid(7, 2), tid(7, 4), tid(6, 3), tid(8, 3), tid(7, 0), tid(7, 67)},
		},
		{
			name:   "unsorted offsets with duplicates",
			add:    []blockOffs{{0, offsets(9, 1, 64, 9, 65, 1)}},
			want:   []blockOffs{{0, offsets(1, 9, 64, 65)}},
			absent: []page.TID{tid(0, 2), tid(0, 63), tid(0, 66), tid(0, 128)},
		},
		{
			name: "uniform then wider block in one chunk (variable layout)",
			add: []blockOffs{
				{1, offsets(1, 60)}, {2, offsets(5)}, {3, offsets(int(MaxOffset))}, {5, offsets(64, 65)}, {63, offsets(2)},
			},
			want: []blockOffs{
				{1, offsets(1, 60)}, {2, offsets(5)}, {3, offsets(int(MaxOffset))}, {5, offsets(64, 65)}, {63, offsets(2)},
			},
			absent: []page.TID{tid(3, 1), tid(3, MaxOffset-1), tid(4, 1), tid(5, 63), tid(5, 66), tid(63, 1), tid(62, 2), tid(64, 2)},
		},
		{
			name: "sparse blocks far apart",
			add: []blockOffs{
				{0, offsets(1)}, {64, offsets(2)}, {65, offsets(3)}, {1 << 20, offsets(4)}, {math.MaxUint32, offsets(5)},
			},
			want: []blockOffs{
				{0, offsets(1)}, {64, offsets(2)}, {65, offsets(3)}, {1 << 20, offsets(4)}, {math.MaxUint32, offsets(5)},
			},
			absent: []page.TID{tid(1, 1), tid(63, 1), tid(66, 3), tid(1<<20-1, 4), tid(1<<20+1, 4), tid(math.MaxUint32-1, 5)},
		},
		{
			name:   "empty offsets add nothing",
			add:    []blockOffs{{3, nil}, {4, offsets(1)}},
			want:   []blockOffs{{4, offsets(1)}},
			absent: []page.TID{tid(3, 1)},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := New()
			for _, b := range tc.add {
				if err := s.AddBlock(b.blk, b.offs); err != nil {
					t.Fatalf("AddBlock(%d): %v", b.blk, err)
				}
			}
			n := 0
			for _, b := range tc.want {
				for _, o := range b.offs {
					n++
					if !s.Contains(page.TID{Block: b.blk, Off: o}) {
						t.Errorf("Contains(%d,%d) = false, want true", b.blk, o)
					}
				}
			}
			for _, tid := range tc.absent {
				if s.Contains(tid) {
					t.Errorf("Contains(%d,%d) = true, want false", tid.Block, tid.Off)
				}
			}
			if s.Len() != n {
				t.Errorf("Len = %d, want %d", s.Len(), n)
			}
			if got := collect(t, s); !slices.EqualFunc(got, tc.want, func(a, b blockOffs) bool {
				return a.blk == b.blk && slices.Equal(a.offs, b.offs)
			}) {
				t.Errorf("Iterate = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAddBlockRejectsBadInputAndLeavesStoreUnchanged(t *testing.T) {
	cases := []struct {
		name string
		blk  uint32
		offs []page.OffsetNumber
		want error
	}{
		{"same block again", 10, offsets(2), ErrOutOfOrder},
		{"lower block", 9, offsets(2), ErrOutOfOrder},
		{"offset zero", 11, offsets(1, 0), ErrInvalidOffset},
		{"offset above MaxOffset", 11, offsets(int(MaxOffset) + 1), ErrInvalidOffset},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := New()
			if err := s.AddBlock(10, offsets(1)); err != nil {
				t.Fatal(err)
			}
			mem := s.MemoryBytes()
			err := s.AddBlock(tc.blk, tc.offs)
			if !errors.Is(err, tc.want) {
				t.Fatalf("AddBlock(%d, %v) = %v, want %v", tc.blk, tc.offs, err, tc.want)
			}
			if s.Len() != 1 || s.Blocks() != 1 || s.MemoryBytes() != mem {
				t.Errorf("store changed: Len=%d Blocks=%d mem=%d->%d", s.Len(), s.Blocks(), mem, s.MemoryBytes())
			}
			if err := s.AddBlock(11, offsets(1)); err != nil {
				t.Errorf("next valid AddBlock: %v", err)
			}
		})
	}
}

func TestIterateStopsAtFirstError(t *testing.T) {
	s := New()
	for b := uint32(0); b < 10; b++ {
		if err := s.AddBlock(b, offsets(1)); err != nil {
			t.Fatal(err)
		}
	}
	stop := errors.New("stop")
	calls := 0
	err := s.Iterate(func(blk uint32, _ []page.OffsetNumber) error {
		calls++
		if blk == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || calls != 4 {
		t.Fatalf("Iterate = %v after %d calls, want stop after 4", err, calls)
	}
}

// TestStoreMatchesMapOracleOnRandomSets builds random stores (dense and
// sparse block runs, narrow and wide pages, every density) and checks every
// TID of the covered range, Len and Iterate against a map.
func TestStoreMatchesMapOracleOnRandomSets(t *testing.T) {
	for seed := uint64(1); seed <= 16; seed++ {
		rng := rand.New(rand.NewPCG(seed, seed*7919))
		s := New()
		oracle := map[page.TID]bool{}
		maxOffOf := map[uint32]int{}
		blk := uint32(rng.IntN(200))
		nblocks := 1 + rng.IntN(300)
		density := rng.Float64()
		for range nblocks {
			width := 1 + rng.IntN(int(MaxOffset))
			if rng.IntN(3) > 0 {
				width = 1 + rng.IntN(70) // mostly narrow pages, some wide ones
			}
			var offs []page.OffsetNumber
			for o := 1; o <= width; o++ {
				if rng.Float64() < density {
					offs = append(offs, page.OffsetNumber(o))
					oracle[page.TID{Block: blk, Off: page.OffsetNumber(o)}] = true
				}
			}
			rng.Shuffle(len(offs), func(i, j int) { offs[i], offs[j] = offs[j], offs[i] })
			if err := s.AddBlock(blk, offs); err != nil {
				t.Fatalf("seed %d: AddBlock(%d): %v", seed, blk, err)
			}
			maxOffOf[blk] = width
			if rng.IntN(4) == 0 {
				blk += 1 + uint32(rng.IntN(500)) // a gap, often to another chunk
			} else {
				blk++
			}
		}
		if s.Len() != len(oracle) {
			t.Fatalf("seed %d: Len = %d, want %d", seed, s.Len(), len(oracle))
		}
		// Probe every added block and its neighbours (other chunks, gaps)
		// plus random blocks of the range, each over all offsets and beyond.
		probe := map[uint32]bool{}
		for b := range maxOffOf {
			probe[b-1], probe[b], probe[b+1] = true, true, true
		}
		for range 200 {
			probe[uint32(rng.IntN(int(blk)+1))] = true
		}
		for b := range probe {
			for o := 0; o <= maxOffOf[b]+70; o++ {
				tid := page.TID{Block: b, Off: page.OffsetNumber(o)}
				if got := s.Contains(tid); got != oracle[tid] {
					t.Fatalf("seed %d: Contains(%d,%d) = %v, want %v", seed, b, o, got, oracle[tid])
				}
			}
		}
		var prev page.TID
		n := 0
		for _, bo := range collect(t, s) {
			for _, o := range bo.offs {
				tid := page.TID{Block: bo.blk, Off: o}
				if !oracle[tid] {
					t.Fatalf("seed %d: Iterate yielded %v not in oracle", seed, tid)
				}
				if n > 0 && (tid.Block < prev.Block || tid.Block == prev.Block && tid.Off <= prev.Off) {
					t.Fatalf("seed %d: Iterate order %v after %v", seed, tid, prev)
				}
				prev = tid
				n++
			}
		}
		if n != len(oracle) {
			t.Fatalf("seed %d: Iterate yielded %d TIDs, want %d", seed, n, len(oracle))
		}
	}
}

func TestMemoryBytesMatchesHandComputedLayout(t *testing.T) {
	const (
		wordSeg  = 8192 * 8  // one bitmap segment
		chunkSeg = 1024 * 24 // one chunk segment
		auxSeg   = 4096 * 2  // one aux segment
		spineEnt = 24        // one slice header in a spine
	)
	s := New()
	if got := s.MemoryBytes(); got != 0 {
		t.Fatalf("empty store MemoryBytes = %d, want 0", got)
	}
	add := func(blk uint32, offs []page.OffsetNumber) {
		t.Helper()
		if err := s.AddBlock(blk, offs); err != nil {
			t.Fatal(err)
		}
	}
	// 8192 one-word blocks fill exactly one bitmap segment and 128 chunks.
	for b := uint32(0); b < 8192; b++ {
		add(b, rangeOffs(1, 60))
	}
	if want := int64(wordSeg + spineEnt + chunkSeg + spineEnt); s.MemoryBytes() != want {
		t.Fatalf("after 8192 blocks MemoryBytes = %d, want %d", s.MemoryBytes(), want)
	}
	// One more word opens a second segment; the spine doubles to 2 entries.
	add(8192, offsets(1))
	if want := int64(2*wordSeg + 2*spineEnt + chunkSeg + spineEnt); s.MemoryBytes() != want {
		t.Fatalf("after 8193 blocks MemoryBytes = %d, want %d", s.MemoryBytes(), want)
	}
	// A two-word block in the same chunk turns the chunk variable: the aux
	// array gets its first segment.
	add(8193, offsets(100))
	if want := int64(2*wordSeg + 2*spineEnt + chunkSeg + spineEnt + auxSeg + spineEnt); s.MemoryBytes() != want {
		t.Fatalf("after a wide block MemoryBytes = %d, want %d", s.MemoryBytes(), want)
	}
	// 5 segments need a spine of 8 entries.
	for b := uint32(8194); s.words.n <= 4*8192; b++ {
		add(b, offsets(1))
	}
	if want := int64(5*wordSeg + 8*spineEnt + chunkSeg + spineEnt + auxSeg + spineEnt); s.MemoryBytes() != want {
		t.Fatalf("with 5 word segments MemoryBytes = %d, want %d", s.MemoryBytes(), want)
	}
	s.Reset()
	if s.MemoryBytes() != 0 || s.Len() != 0 || s.Contains(page.TID{Block: 1, Off: 1}) {
		t.Fatalf("after Reset: MemoryBytes=%d Len=%d", s.MemoryBytes(), s.Len())
	}
}

// TestMemoryBytesAgreesWithTheAllocator checks the accounting against the
// Go runtime: the bytes the runtime allocated while building the store are
// the store's arrays plus the spines it discarded while doubling them.
func TestMemoryBytesAgreesWithTheAllocator(t *testing.T) {
	blocks, offs := deadLayout(60, 0.2, 1<<20, 1)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := New()
	for i, b := range blocks {
		if err := s.AddBlock(b, offs[i]); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	alloc := int64(after.TotalAlloc - before.TotalAlloc)
	mem := s.MemoryBytes()
	// Discarded spines sum to less than the final ones; allow the test
	// runtime's own small allocations on top.
	if alloc < mem || alloc > mem+mem/50+64<<10 {
		t.Fatalf("allocator reports %d bytes for a store accounting %d", alloc, mem)
	}
	t.Logf("%d TIDs: MemoryBytes %d, allocator %d (%.3f bytes/TID)", s.Len(), mem, alloc, float64(mem)/float64(s.Len()))
}

func TestFullKeepsMemoryWithinLimit(t *testing.T) {
	for _, limit := range []int64{1, 100 << 10, 1 << 20, 2<<20 + 12345} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(limit), 1))
			s := New()
			all := rangeOffs(1, int(MaxOffset))
			blk := uint32(0)
			for !s.Full(limit) {
				width := 1 + rng.IntN(80)
				if rng.IntN(50) == 0 {
					width = int(MaxOffset)
				}
				if err := s.AddBlock(blk, all[:width]); err != nil {
					t.Fatal(err)
				}
				blk += 1 + uint32(rng.IntN(3))
				if s.MemoryBytes() > max(limit, 0) && s.Blocks() > 1 {
					t.Fatalf("MemoryBytes %d above limit %d after %d blocks", s.MemoryBytes(), limit, s.Blocks())
				}
			}
			if s.Blocks() == 0 {
				t.Fatal("an empty store reported full")
			}
			// Full only when the next block could need a new segment.
			if limit > 1<<20 && s.MemoryBytes() < limit-(64<<10+24<<10+8<<10+4<<10) {
				t.Errorf("reported full at %d bytes, well below limit %d", s.MemoryBytes(), limit)
			}
		})
	}
}

func TestConcurrentReadersSeeTheBuiltStore(t *testing.T) {
	blocks, offs := deadLayout(60, 0.2, 50_000, 3)
	s := New()
	want := map[page.TID]bool{}
	for i, b := range blocks {
		if err := s.AddBlock(b, offs[i]); err != nil {
			t.Fatal(err)
		}
		for _, o := range offs[i] {
			want[page.TID{Block: b, Off: o}] = true
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 9))
			for range 100_000 {
				tid := page.TID{Block: uint32(rng.IntN(len(blocks) + 10)), Off: page.OffsetNumber(1 + rng.IntN(60))}
				if s.Contains(tid) != want[tid] {
					errs <- fmt.Errorf("Contains(%v) = %v", tid, !want[tid])
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// deadLayout returns the dead offsets of a heap where each page holds
// tuplesPerPage tuples and each is dead with probability dead, for enough
// pages to hold about nTIDs dead TIDs. Pages without dead tuples are absent.
func deadLayout(tuplesPerPage int, dead float64, nTIDs int, seed uint64) ([]uint32, [][]page.OffsetNumber) {
	rng := rand.New(rand.NewPCG(seed, 42))
	var blocks []uint32
	var offs [][]page.OffsetNumber
	total := 0
	for blk := uint32(0); total < nTIDs; blk++ {
		var o []page.OffsetNumber
		for off := 1; off <= tuplesPerPage; off++ {
			if rng.Float64() < dead {
				o = append(o, page.OffsetNumber(off))
			}
		}
		if len(o) > 0 {
			blocks = append(blocks, blk)
			offs = append(offs, o)
			total += len(o)
		}
	}
	return blocks, offs
}
