package buffer

import (
	"testing"
	"unsafe"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/usage"
)

func uintptrOfPage(p page.Page) uintptr { return uintptr(unsafe.Pointer(&p[0])) }

func TestRingSizes(t *testing.T) {
	tests := []struct {
		name      string
		frames    int
		kind      StrategyKind
		ringBytes int64
		want      int
	}{
		{"normal has no ring", 1024, Normal, 1 << 20, 0},
		{"vacuum with 0 bytes has no ring", 1024, Vacuum, 0, 0},
		{"vacuum below the minimum is raised to 128 KiB", 1024, Vacuum, 8192, 16},
		{"vacuum of 512 KiB", 1024, Vacuum, 512 << 10, 64},
		{"vacuum capped at 1/8 of the pool", 1024, Vacuum, 16 << 30, 128},
		{"bulk read is 256 KiB", 1024, BulkRead, 0, 32},
		{"bulk write capped at 1/8 of the pool", 1024, BulkWrite, 0, 128},
		{"bulk write in a big pool is 16 MiB", 1 << 15, BulkWrite, 0, 2048},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ringBuffersFor(tc.kind, tc.ringBytes, tc.frames); got != tc.want {
				t.Fatalf("ring of %d buffers, want %d", got, tc.want)
			}
		})
	}
	p, _, _ := newTestPool(t, 1024)
	if got := p.NewStrategy(Vacuum, 512<<10, nil).RingBuffers(); got != 64 {
		t.Fatalf("NewStrategy(Vacuum, 512 KiB).RingBuffers() = %d, want 64", got)
	}
	if got := (&Strategy{Kind: BulkRead}).RingBuffers(); got != 0 {
		t.Fatalf("a literal strategy has %d ring buffers before its first use, want 0", got)
	}
}

// scanKeepsHotPages reads 32 hot pages often, scans ten times the pool
// with s, and returns how many hot pages still hit afterwards.
func scanKeepsHotPages(t *testing.T, p *Pool, st *fakeStorage, s *Strategy) int {
	t.Helper()
	for range 5 {
		for i := range 32 {
			readRelease(t, p, blk(1, i), nil)
		}
	}
	for i := range 10 * p.Frames() {
		readRelease(t, p, blk(2, i), s)
	}
	hits := 0
	for i := range 32 {
		readRelease(t, p, blk(1, i), nil)
		if st.readCount(blk(1, i)) == 1 {
			hits++
		}
	}
	return hits
}

func TestVacuumRingKeepsAScanFromEvictingThePool(t *testing.T) {
	p, st, _ := newTestPool(t, 128)
	var u usage.Counters
	s := p.NewStrategy(Vacuum, 128<<10, &u)
	if hot := scanKeepsHotPages(t, p, st, s); hot != 32 {
		t.Fatalf("after a vacuum-ring scan of 10x the pool only %d of 32 hot pages are still cached", hot)
	}
	if m := u.Read().Misses; m != 1280 {
		t.Fatalf("scan misses = %d, want 1280", m)
	}

	// The same scan without a ring evicts the hot pages: the ring is what
	// protects them.
	p2, st2, _ := newTestPool(t, 128)
	if hot := scanKeepsHotPages(t, p2, st2, p2.NewStrategy(Vacuum, 0, nil)); hot != 0 {
		t.Fatalf("a ringless scan of 10x the pool left %d hot pages cached, want 0", hot)
	}
}

func TestHitsThroughARingDoNotEnterTheRing(t *testing.T) {
	p, st, _ := newTestPool(t, 128)
	s := p.NewStrategy(BulkRead, 0, nil) // 16 buffers (1/8 of 128)
	for i := range 8 {
		readRelease(t, p, blk(1, i), nil) // cached before the scan
	}
	for i := range 200 {
		readRelease(t, p, blk(1, i), s)
	}
	for i := range 8 {
		readRelease(t, p, blk(1, i), nil)
		if n := st.readCount(blk(1, i)); n != 1 {
			t.Errorf("page %d, a hit during the scan, was evicted by the ring", i)
		}
	}
}

// dirtyingScan reads n pages through s and WAL-logs a change to each, as
// a vacuum pruning every page does.
func dirtyingScan(t *testing.T, p *Pool, log *fakeWAL, s *Strategy, n int) {
	t.Helper()
	for i := range n {
		b, err := p.Read(blk(3, i), s)
		if err != nil {
			t.Fatal(err)
		}
		modify(t, b, log, s)
		b.Release()
	}
}

func TestRingDirtyEvictionsForceWALFlushesAndABiggerRingNeedsFewer(t *testing.T) {
	forced := map[int64]int64{}
	for _, ringBytes := range []int64{128 << 10, 1 << 20} {
		p, st, log := newTestPool(t, 1024)
		var u usage.Counters
		s := p.NewStrategy(Vacuum, ringBytes, &u)
		dirtyingScan(t, p, log, s, 4096)
		st.checkWALRule(t)
		snap := u.Read()
		ring := int64(s.RingBuffers())
		if want := 4096 - ring; snap.RingDirtyEvictions != want {
			t.Errorf("ring %d: RingDirtyEvictions = %d, want %d (every reuse wrote a dirty page)",
				ring, snap.RingDirtyEvictions, want)
		}
		if snap.RingWALFlushes == 0 || snap.RingWALFlushes > snap.RingDirtyEvictions {
			t.Errorf("ring %d: RingWALFlushes = %d, want in (0, %d]", ring, snap.RingWALFlushes, snap.RingDirtyEvictions)
		}
		if ps := p.Stats(); ps.RingWALFlushes != snap.RingWALFlushes || ps.RingDirtyEvictions != snap.RingDirtyEvictions {
			t.Errorf("pool stats %+v disagree with the strategy's counters %+v", ps, snap)
		}
		if snap.WALFlushes != snap.RingWALFlushes {
			t.Errorf("ring %d: WAL flushes %d, ring-forced %d: every flush here was forced by the ring",
				ring, snap.WALFlushes, snap.RingWALFlushes)
		}
		if snap.Written != snap.RingDirtyEvictions {
			t.Errorf("Written = %d, want %d", snap.Written, snap.RingDirtyEvictions)
		}
		forced[ring] = snap.RingWALFlushes
	}
	if !(forced[128] < forced[16]) {
		t.Fatalf("forced WAL flushes: ring of 16 = %d, ring of 128 = %d; a bigger ring should force fewer",
			forced[16], forced[128])
	}
	t.Logf("forced WAL flushes for 4096 dirtied pages: ring 16 -> %d, ring 128 -> %d", forced[16], forced[128])
}

// TestPlainStrategyBypassesTheRingAndChargesTheSameCounters: a page read
// through the ring strategy's Plain sibling (a visibility map page, say)
// stays in the pool while the ring laps, and its accesses are charged to
// the ring strategy's counters.
func TestPlainStrategyBypassesTheRingAndChargesTheSameCounters(t *testing.T) {
	p, st, _ := newTestPool(t, 1024)
	var u usage.Counters
	s := p.NewStrategy(Vacuum, MinVacuumRingBytes, &u)
	plain := s.Plain()
	if plain.RingBuffers() != 0 || plain.Usage != &u || s.Plain() != plain {
		t.Fatalf("Plain() = %+v: want a cached ringless strategy with the same counters", plain)
	}
	if (&Strategy{Kind: Normal}).Plain() == nil || (*Strategy)(nil).Plain() != nil {
		t.Fatal("Plain of a Normal strategy must be itself, of nil nil")
	}
	mapPage := blk(9, 0)
	for i := range 4 * s.RingBuffers() {
		readRelease(t, p, mapPage, plain)
		readRelease(t, p, blk(2, i), s)
	}
	if n := st.readCount(mapPage); n != 1 {
		t.Errorf("the map page was read %d times while the ring lapped, want once", n)
	}
	if got, want := u.Hits.Load()+u.Misses.Load(), int64(8*s.RingBuffers()); got != want {
		t.Errorf("counters saw %d accesses, want %d", got, want)
	}
}
