package buffer

import (
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/usage"
)

func TestNewRejectsTooSmallPool(t *testing.T) {
	log := newFakeWAL()
	if _, err := New(newFakeStorage(log), log, Options{Frames: 8}); err == nil {
		t.Fatal("New accepted an 8-frame pool")
	}
}

func TestFramesAreAlignedForDirectIO(t *testing.T) {
	p, _, _ := newTestPool(t, 16)
	for i := range p.bufs {
		if a := uintptrOfPage(p.bufs[i].frame) % 4096; a != 0 {
			t.Fatalf("frame %d misaligned by %d", i, a)
		}
	}
}

func TestReadChargesMissThenHit(t *testing.T) {
	p, st, _ := newTestPool(t, 16)
	var u usage.Counters
	s := p.NewStrategy(Normal, 0, &u)
	tag := blk(1, 7)

	b, err := p.Read(tag, s)
	if err != nil {
		t.Fatal(err)
	}
	if got := stampOf(b.Page()); got != tag {
		t.Fatalf("buffer holds %v, want %v", got, tag)
	}
	b.Release()
	readRelease(t, p, tag, s)

	snap := u.Read()
	if snap.Misses != 1 || snap.Hits != 1 || snap.ReadBytes != page.Size {
		t.Fatalf("counters = %+v, want 1 miss, 1 hit, %d read bytes", snap, page.Size)
	}
	if ps := p.Stats(); ps.Misses != 1 || ps.Hits != 1 {
		t.Fatalf("pool stats = %+v, want 1 miss, 1 hit", ps)
	}
	if n := st.readCount(tag); n != 1 {
		t.Fatalf("storage read the page %d times, want 1", n)
	}
}

func TestClockSweepEvictsTheLeastUsedUnpinnedPage(t *testing.T) {
	p, st, _ := newTestPool(t, 16)
	for i := range 16 {
		readRelease(t, p, blk(1, i), nil)
	}
	// Every page but 15 becomes hot.
	for range 4 {
		for i := range 15 {
			readRelease(t, p, blk(1, i), nil)
		}
	}
	readRelease(t, p, blk(1, 100), nil) // needs one victim

	for i := range 15 {
		if n := st.readCount(blk(1, i)); n != 1 {
			t.Errorf("hot page %d was read %d times, want 1 (it was evicted)", i, n)
		}
		readRelease(t, p, blk(1, i), nil)
		if n := st.readCount(blk(1, i)); n != 1 {
			t.Errorf("hot page %d missed after the eviction", i)
		}
	}
	readRelease(t, p, blk(1, 15), nil)
	if n := st.readCount(blk(1, 15)); n != 2 {
		t.Errorf("cold page 15 was read %d times, want 2 (it should have been the victim)", n)
	}
	if ev := p.Stats().Evictions; ev < 2 {
		t.Errorf("evictions = %d, want at least 2", ev)
	}
}

func TestPinnedBufferIsNeverEvicted(t *testing.T) {
	p, st, _ := newTestPool(t, 16)
	pinned, err := p.Read(blk(1, 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 200; i++ {
		readRelease(t, p, blk(2, i), nil)
	}
	again, err := p.Read(blk(1, 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Release()
	pinned.Release()
	if again != pinned || stampOf(again.Page()) != blk(1, 0) {
		t.Fatal("the pinned page moved or changed while pinned")
	}
	if n := st.readCount(blk(1, 0)); n != 1 {
		t.Fatalf("pinned page read %d times, want 1", n)
	}
}

func TestAllBuffersPinnedIsAClearError(t *testing.T) {
	p, _, _ := newTestPool(t, 16)
	held := make([]*Buffer, 0, 16)
	for i := range 16 {
		b, err := p.Read(blk(1, i), nil)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, b)
	}
	_, err := p.Read(blk(1, 99), nil)
	if !errors.Is(err, ErrNoUnpinnedBuffers) {
		t.Fatalf("read with every buffer pinned: err = %v, want ErrNoUnpinnedBuffers", err)
	}
	held[3].Release()
	b, err := p.Read(blk(1, 99), nil)
	if err != nil {
		t.Fatalf("read after releasing one buffer: %v", err)
	}
	b.Release()
	for i, h := range held {
		if i != 3 {
			h.Release()
		}
	}
}

func TestConcurrentReadersOfAMissingPageShareOneRead(t *testing.T) {
	p, st, _ := newTestPool(t, 16)
	st.readDelay = 20 * time.Millisecond
	tag := blk(1, 5)
	var u usage.Counters
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			b, err := p.Read(tag, &Strategy{Usage: &u})
			if err != nil {
				t.Error(err)
				return
			}
			if got := stampOf(b.Page()); got != tag {
				t.Errorf("reader got %v", got)
			}
			b.Release()
		})
	}
	wg.Wait()
	if n := st.readCount(tag); n != 1 {
		t.Fatalf("storage read the page %d times, want 1", n)
	}
	if s := u.Read(); s.Misses != 1 || s.Hits != 7 {
		t.Fatalf("misses %d hits %d, want 1 and 7", s.Misses, s.Hits)
	}
}

func TestFailedReadIsNotCachedAndIsRetried(t *testing.T) {
	p, st, _ := newTestPool(t, 16)
	tag := blk(1, 3)
	st.corrupt[tag] = true
	var corrupt *storage.CorruptPageError
	if _, err := p.Read(tag, nil); !errors.As(err, &corrupt) {
		t.Fatalf("read of a corrupt page: err = %v, want *storage.CorruptPageError", err)
	}
	if _, err := p.Read(tag, nil); !errors.As(err, &corrupt) {
		t.Fatalf("second read of a corrupt page: err = %v", err)
	}
	if n := st.readCount(tag); n != 2 {
		t.Fatalf("storage read %d times, want 2 (failed reads are not cached)", n)
	}
}

func TestReadOrZeroReturnsZeroPageForCorruptOrMissingBlocks(t *testing.T) {
	tests := []struct {
		name  string
		setup func(st *fakeStorage, tag Tag)
	}{
		{"corrupt", func(st *fakeStorage, tag Tag) { st.corrupt[tag] = true }},
		{"past end of fork", func(st *fakeStorage, tag Tag) { st.setSize(tag.Rel, tag.Fork, tag.Block) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, st, _ := newTestPool(t, 16)
			tag := Tag{Rel: 4, Fork: storage.FSMFork, Block: 2}
			tc.setup(st, tag)
			if _, err := p.Read(tag, nil); err == nil {
				t.Fatal("plain Read did not fail")
			}
			b, err := p.ReadOrZero(tag, nil)
			if err != nil {
				t.Fatalf("ReadOrZero: %v", err)
			}
			defer b.Release()
			if !page.IsZero(b.Page()) {
				t.Fatal("ReadOrZero did not return a zeroed page")
			}
		})
	}
}

func TestExtendReturnsZeroedExclusivelyLockedPage(t *testing.T) {
	p, st, _ := newTestPool(t, 16)
	st.setSize(9, storage.MainFork, 3)
	b, err := p.Extend(9, storage.MainFork, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.Tag() != blk(9, 3) {
		t.Fatalf("extended block = %v, want block 3", b.Tag())
	}
	if b.content.TryRLock() {
		t.Fatal("extended buffer is not exclusively locked")
	}
	if !page.IsZero(b.Page()) {
		t.Fatal("extended page is not zeroed")
	}
	page.Init(b.Page(), 0)
	b.MarkDirty(nil)
	b.Unlock()
	b.Release()
	if err := p.FlushAll(); err != nil {
		t.Fatal(err)
	}
	if st.writeCount(blk(9, 3)) != 1 {
		t.Fatal("extended and dirtied page was not written by FlushAll")
	}
}

func TestDropRelForgetsBuffersWithoutWritingThem(t *testing.T) {
	p, st, log := newTestPool(t, 16)
	for i := range 4 {
		b, err := p.Read(blk(1, i), nil)
		if err != nil {
			t.Fatal(err)
		}
		modify(t, b, log, nil)
		b.Release()
		readRelease(t, p, blk(2, i), nil)
	}
	p.DropRel(1)
	if err := p.FlushAll(); err != nil {
		t.Fatal(err)
	}
	if n := st.totalWrites(); n != 0 {
		t.Fatalf("%d writes after dropping the only dirty relation, want 0", n)
	}
	readRelease(t, p, blk(1, 0), nil)
	readRelease(t, p, blk(2, 0), nil)
	if st.readCount(blk(1, 0)) != 2 || st.readCount(blk(2, 0)) != 1 {
		t.Fatal("DropRel should forget rel 1's pages and keep rel 2's")
	}
}

func TestDropBlocksFromKeepsEarlierBlocks(t *testing.T) {
	p, st, _ := newTestPool(t, 16)
	for i := range 6 {
		readRelease(t, p, blk(1, i), nil)
	}
	p.DropBlocksFrom(1, storage.MainFork, 4)
	for i := range 6 {
		readRelease(t, p, blk(1, i), nil)
		want := 1
		if i >= 4 {
			want = 2
		}
		if n := st.readCount(blk(1, i)); n != want {
			t.Errorf("block %d read %d times, want %d", i, n, want)
		}
	}
}

func TestDirtyPageIsWrittenOnlyAfterItsWALIsFlushed(t *testing.T) {
	p, st, log := newTestPool(t, 16)
	var lsns []uint64
	for i := range 8 {
		b, err := p.Read(blk(1, i), nil)
		if err != nil {
			t.Fatal(err)
		}
		lsns = append(lsns, uint64(modify(t, b, log, nil)))
		b.Release()
	}
	if log.flushCount() != 0 {
		t.Fatal("WAL flushed before any page was written")
	}
	// Push the dirty pages out with a scan of other pages.
	for i := range 64 {
		readRelease(t, p, blk(2, i), nil)
	}
	st.checkWALRule(t)
	if n := st.totalWrites(); n < 8 {
		t.Fatalf("%d pages written, want the 8 dirty ones evicted", n)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.events) == 0 || log.events[0][:5] != "flush" {
		t.Fatalf("first event %q, want a WAL flush before the first write", log.events)
	}
	for i := range 8 {
		if got := page.Page(st.pages[blk(1, i)]).LSN(); got != lsns[i] {
			t.Errorf("block %d written with LSN %d, want %d", i, got, lsns[i])
		}
	}
}

func TestFlushAllWritesDirtyPagesOnceLeavesThemCleanAndCountsThem(t *testing.T) {
	p, st, log := newTestPool(t, 32)
	for i := range 10 {
		b, err := p.Read(blk(1, i), nil)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			modify(t, b, log, nil)
		}
		b.Release()
	}
	for round, want := range []int{5, 0} {
		n, err := p.FlushAllPaced(nil)
		if err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Errorf("flush %d says it wrote %d buffers, want %d", round+1, n, want)
		}
	}
	st.checkWALRule(t)
	for i := range 10 {
		want := 0
		if i%2 == 0 {
			want = 1
		}
		if n := st.writeCount(blk(1, i)); n != want {
			t.Errorf("block %d written %d times, want %d", i, n, want)
		}
	}
	if w := p.Stats().Written; w != 5 {
		t.Errorf("Stats.Written = %d, want 5", w)
	}
}

func TestFlushAllReportsWALFailureAndKeepsPageDirty(t *testing.T) {
	p, st, log := newTestPool(t, 16)
	b, err := p.Read(blk(1, 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	modify(t, b, log, nil)
	b.Release()
	log.flushErr = errors.New("fsync failed")
	if err := p.FlushAll(); err == nil {
		t.Fatal("FlushAll succeeded although the WAL could not be flushed")
	}
	if st.totalWrites() != 0 {
		t.Fatal("page written although its WAL is not durable")
	}
	log.flushErr = nil
	if err := p.FlushAll(); err != nil {
		t.Fatal(err)
	}
	if st.writeCount(blk(1, 0)) != 1 {
		t.Fatal("page still dirty after the WAL recovered was not written")
	}
}

// TestConcurrentAccessKeepsEveryPageItsOwn hammers a small pool from many
// goroutines with reads, changes and evictions and checks each buffer
// always holds the page it was asked for, and that WAL-before-data held.
func TestConcurrentAccessKeepsEveryPageItsOwn(t *testing.T) {
	p, st, log := newTestPool(t, 32)
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			s := &Strategy{}
			if g%3 == 0 {
				s = p.NewStrategy(Vacuum, 1, nil)
			}
			for range 2000 {
				tag := blk(storage.RelFileNode(1+r.IntN(2)), r.IntN(80))
				b, err := p.Read(tag, s)
				if err != nil {
					t.Error(err)
					return
				}
				if r.IntN(4) == 0 {
					modify(t, b, log, s)
				}
				b.RLock()
				got := stampOf(b.Page())
				b.RUnlock()
				if got != tag || b.Tag() != tag {
					t.Errorf("asked for %v, buffer holds %v (tag %v)", tag, got, b.Tag())
				}
				b.Release()
				if r.IntN(500) == 0 {
					if err := p.FlushAll(); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	st.checkWALRule(t)
}
