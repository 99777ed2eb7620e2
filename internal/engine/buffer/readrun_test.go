package buffer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/usage"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// runStorage is a real storage manager that counts the system calls the
// pool makes through it: single-block reads and multi-block runs.
type runStorage struct {
	*storage.Manager
	mu         sync.Mutex
	reads      int
	runs       []int // pages asked for by each ReadRun
	runStarts  []storage.BlockNumber
	readBlocks []storage.BlockNumber
	writes     int
	writeRuns  []int
}

func (s *runStorage) WritePrivate(rel storage.RelFileNode, fork storage.ForkNum, blk storage.BlockNumber, buf []byte, u *usage.Counters) error {
	s.mu.Lock()
	s.writes++
	s.mu.Unlock()
	return s.Manager.WritePrivate(rel, fork, blk, buf, u)
}

func (s *runStorage) WriteRun(rel storage.RelFileNode, fork storage.ForkNum, start storage.BlockNumber, buf []byte, u *usage.Counters) error {
	s.mu.Lock()
	s.writeRuns = append(s.writeRuns, len(buf)/page.Size)
	s.mu.Unlock()
	return s.Manager.WriteRun(rel, fork, start, buf, u)
}

func (s *runStorage) Read(rel storage.RelFileNode, fork storage.ForkNum, blk storage.BlockNumber, buf []byte, u *usage.Counters) error {
	s.mu.Lock()
	s.reads++
	s.readBlocks = append(s.readBlocks, blk)
	s.mu.Unlock()
	return s.Manager.Read(rel, fork, blk, buf, u)
}

func (s *runStorage) ReadRun(rel storage.RelFileNode, fork storage.ForkNum, start storage.BlockNumber, buf []byte, u *usage.Counters) (int, error) {
	s.mu.Lock()
	s.runs = append(s.runs, len(buf)/page.Size)
	s.runStarts = append(s.runStarts, start)
	s.mu.Unlock()
	return s.Manager.ReadRun(rel, fork, start, buf, u)
}

// runPage is a valid page whose one item names its block.
func runPage(blk int) []byte {
	p := page.Page(make([]byte, page.Size))
	page.Init(p, 0)
	if _, err := p.AddItem(fmt.Appendf(nil, "block-%d", blk), 0); err != nil {
		panic(err)
	}
	return p
}

// walOf is the fake WAL under a pool made by newRunPool.
func walOf(t *testing.T, p *Pool) *fakeWAL {
	t.Helper()
	w, ok := p.log.(*fakeWAL)
	if !ok {
		t.Fatalf("pool WAL is %T", p.log)
	}
	return w
}

func itemOf(b *Buffer) string { return string(b.Page().ItemData(1)) }

const runRel storage.RelFileNode = 9

// newRunPool writes nblocks pages of runRel (4 MiB segments, so runs of 16
// never meet a segment end unless the test asks) into a fresh directory and
// returns a 256-frame pool over them.
func newRunPool(t *testing.T, nblocks int, direct bool) (*Pool, *runStorage, string) {
	t.Helper()
	dir := t.TempDir()
	m, err := storage.Open(vfs.NewOS(t.Logf), dir, storage.Options{Direct: direct, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	for i := range nblocks {
		if err := m.Write(runRel, storage.MainFork, storage.BlockNumber(i), runPage(i), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.SyncAll(); err != nil {
		t.Fatal(err)
	}
	st := &runStorage{Manager: m}
	p, err := New(st, newFakeWAL(), Options{Frames: 256, Direct: direct})
	if err != nil {
		t.Fatal(err)
	}
	return p, st, dir
}

// scan reads blocks [from, to) in order through s, checks each page and
// releases it.
func scan(t *testing.T, p *Pool, s *Strategy, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		b, err := p.Read(blk(runRel, i), s)
		if err != nil {
			t.Fatalf("read block %d: %v", i, err)
		}
		if got, want := itemOf(b), fmt.Sprintf("block-%d", i); got != want {
			t.Fatalf("block %d holds %q", i, got)
		}
		b.Release()
	}
}

func TestSequentialRingReadsUseRunsAndChargeOneMissPerPage(t *testing.T) {
	cases := []struct {
		name     string
		kind     StrategyKind
		ring     int64
		direct   bool
		wantRuns int // runs after the first single-block read
	}{
		{"vacuum ring 2 MiB", Vacuum, 2 << 20, false, 4},                // 1 + 15,16,16,16,... blocks
		{"bulk read ring", BulkRead, 0, false, 4},                       // 256 KiB ring: runs of 16
		{"vacuum ring 128 KiB, runs of 8", Vacuum, 128 << 10, false, 8}, // 16-frame ring: half of it
		{"O_DIRECT", Vacuum, 2 << 20, true, 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, st, _ := newRunPool(t, 64, c.direct)
			if c.direct {
				t.Logf("O_DIRECT in effect: %v", st.Direct())
			}
			var u usage.Counters
			s := p.NewStrategy(c.kind, c.ring, &u)
			scan(t, p, s, 0, 64)
			if st.reads != 1 {
				t.Fatalf("%d single-block reads, want 1 (the first block)", st.reads)
			}
			if len(st.runs) != c.wantRuns {
				t.Fatalf("%d runs %v, want %d", len(st.runs), st.runs, c.wantRuns)
			}
			if snap := u.Read(); snap.Misses != 64 || snap.Hits != 0 || snap.ReadBytes != 64*page.Size {
				t.Fatalf("misses %d hits %d read bytes %d, want 64, 0, %d", snap.Misses, snap.Hits, snap.ReadBytes, 64*page.Size)
			}
			// A second lap reads the pages again (the ring recycled them),
			// still one miss per page.
			scan(t, p, s, 0, 64)
			if snap := u.Read(); snap.Misses+snap.Hits != 128 {
				t.Fatalf("second lap: misses %d hits %d, want 128 accesses", snap.Misses, snap.Hits)
			}
		})
	}
}

func TestNormalAndRandomReadsDoNotUseRuns(t *testing.T) {
	p, st, _ := newRunPool(t, 32, false)
	scan(t, p, nil, 0, 16) // Normal strategy
	s := p.NewStrategy(Vacuum, 2<<20, nil)
	for _, i := range []int{20, 18, 22, 30, 24} {
		scan(t, p, s, i, i+1)
	}
	if len(st.runs) != 0 || st.reads != 21 {
		t.Fatalf("runs %v single reads %d, want none and 21", st.runs, st.reads)
	}
}

func TestRunSpanningABlockInThePoolKeepsThePoolsCopy(t *testing.T) {
	p, st, _ := newRunPool(t, 40, false)
	log := walOf(t, p)
	// Block 5 is in the pool, changed and not written back.
	b, err := p.Read(blk(runRel, 5), nil)
	if err != nil {
		t.Fatal(err)
	}
	b.Lock()
	b.Page().SetLSN(uint64(log.insert))
	copy(b.Page().ItemData(1), "BLOCK")
	b.MarkDirty(nil)
	b.Unlock()
	b.Release()

	var u usage.Counters
	s := p.NewStrategy(Vacuum, 2<<20, &u)
	for i := range 20 {
		b, err := p.Read(blk(runRel, i), s)
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("block-%d", i)
		if i == 5 {
			want = "BLOCK-5"
		}
		if got := itemOf(b); got != want {
			t.Fatalf("block %d holds %q, want %q", i, got, want)
		}
		b.Release()
	}
	if len(st.runStarts) == 0 || st.runStarts[0] != 1 || st.runs[0] != 16 {
		t.Fatalf("runs %v from %v, want the first of 16 blocks from block 1 (across block 5)", st.runs, st.runStarts)
	}
	for _, r := range st.readBlocks[1:] {
		if r == 5 {
			t.Fatalf("block 5 was read from storage again: single reads %v", st.readBlocks)
		}
	}
	// 19 misses and one hit (block 5) for the strategy.
	if snap := u.Read(); snap.Misses != 19 || snap.Hits != 1 {
		t.Fatalf("misses %d hits %d, want 19 and 1", snap.Misses, snap.Hits)
	}
}

func TestRunAtTheEndOfTheForkLeavesNoBuffersPastIt(t *testing.T) {
	p, st, _ := newRunPool(t, 10, false)
	s := p.NewStrategy(Vacuum, 2<<20, nil)
	scan(t, p, s, 0, 10)
	if len(st.runs) != 1 || st.runs[0] != 16 {
		t.Fatalf("runs %v, want one asking for 16 blocks", st.runs)
	}
	for i := 10; i < 17; i++ {
		if p.inTable(blk(runRel, i)) {
			t.Fatalf("block %d, past the end, is in the page table", i)
		}
	}
	if _, err := p.Read(blk(runRel, 10), s); !errors.Is(err, storage.ErrBeyondEnd) {
		t.Fatalf("read past the end = %v, want ErrBeyondEnd", err)
	}
	// The fork grows: the new block reads as itself.
	if err := st.Write(runRel, storage.MainFork, 10, runPage(10), nil); err != nil {
		t.Fatal(err)
	}
	scan(t, p, s, 10, 11)
}

func TestChecksumFailureInTheMiddleOfARunNamesTheBlock(t *testing.T) {
	p, st, dir := newRunPool(t, 40, false)
	// Corrupt block 9 on disk.
	name := filepath.Join(dir, "base", fmt.Sprint(runRel))
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	one := []byte{0}
	if _, err := f.ReadAt(one, 9*page.Size+4000); err != nil {
		t.Fatal(err)
	}
	one[0] ^= 0x40
	if _, err := f.WriteAt(one, 9*page.Size+4000); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	s := p.NewStrategy(Vacuum, 2<<20, nil)
	scan(t, p, s, 0, 9) // blocks 1-8 come from a run that went on to block 16
	if len(st.runs) != 1 {
		t.Fatalf("runs %v, want 1", st.runs)
	}
	for i := 9; i < 17; i++ {
		if p.inTable(blk(runRel, i)) {
			t.Fatalf("block %d, at or after the corrupt one, stayed in the page table", i)
		}
	}
	_, err = p.Read(blk(runRel, 9), s)
	var ce *storage.CorruptPageError
	if !errors.As(err, &ce) || ce.Block != 9 || ce.File != name {
		t.Fatalf("read of block 9 = %v, want *CorruptPageError for %s block 9", err, name)
	}
	if p.inTable(blk(runRel, 9)) {
		t.Fatal("the corrupt block stayed in the page table")
	}
	scan(t, p, s, 10, 40) // the rest of the table still reads
}

func TestConcurrentSequentialScansShareTheirRuns(t *testing.T) {
	p, _, _ := newRunPool(t, 200, false)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			s := p.NewStrategy(BulkRead, 0, nil)
			for i := range 200 {
				b, err := p.Read(blk(runRel, i), s)
				if err != nil {
					t.Error(err)
					return
				}
				if got, want := itemOf(b), fmt.Sprintf("block-%d", i); got != want {
					t.Errorf("block %d holds %q", i, got)
				}
				b.Release()
			}
		})
	}
	wg.Wait()
}

func TestDirtyRingPagesAreWrittenInRunsWALFirst(t *testing.T) {
	for _, direct := range []bool{false, true} {
		t.Run(fmt.Sprintf("direct=%v", direct), func(t *testing.T) {
			p, st, _ := newRunPool(t, 96, direct)
			log := walOf(t, p)
			var u usage.Counters
			s := p.NewStrategy(Vacuum, 256<<10, &u) // 32-frame ring, runs of 16
			for i := range 96 {
				b, err := p.Read(blk(runRel, i), s)
				if err != nil {
					t.Fatal(err)
				}
				b.Lock()
				copy(b.Page().ItemData(1), "BLOCK")
				b.MarkDirty(s)
				lsn, err := log.Insert(&wal.Record{Rmgr: wal.RmgrHeap, Blocks: []wal.BlockRef{{
					Rel: runRel, Fork: storage.MainFork, Block: storage.BlockNumber(i), Page: b.Page(), Data: []byte{1},
				}}}, nil)
				if err != nil {
					t.Fatal(err)
				}
				b.Page().SetLSN(uint64(lsn))
				b.Unlock()
				b.Release()
			}
			if len(st.writeRuns) == 0 {
				t.Fatalf("no run writes (single writes %d)", st.writes)
			}
			runPages := 0
			for _, n := range st.writeRuns {
				runPages += n
			}
			snap := u.Read()
			if int64(runPages+st.writes) != snap.Written || snap.Written != snap.RingDirtyEvictions {
				t.Fatalf("run pages %d + single writes %d, counters written %d ring evictions %d",
					runPages, st.writes, snap.Written, snap.RingDirtyEvictions)
			}
			if runPages < 48 {
				t.Fatalf("only %d of %d evicted pages written in runs %v", runPages, snap.Written, st.writeRuns)
			}
			if err := p.FlushAll(); err != nil {
				t.Fatal(err)
			}
			// Every page on disk is the changed one, with a valid checksum,
			// and was never written ahead of its WAL.
			buf := vfs.AlignedBuffer(page.Size)
			for i := range 96 {
				if err := st.Manager.Read(runRel, storage.MainFork, storage.BlockNumber(i), buf, nil); err != nil {
					t.Fatal(err)
				}
				if got, want := string(page.Page(buf).ItemData(1)), fmt.Sprintf("BLOCK-%d", i); got != want {
					t.Fatalf("block %d on disk holds %q, want %q", i, got, want)
				}
				if lsn := page.Page(buf).LSN(); wal.LSN(lsn) > log.FlushedLSN() {
					t.Fatalf("block %d on disk has LSN %d past the flushed WAL %d", i, lsn, log.FlushedLSN())
				}
			}
		})
	}
}

func TestRunIntoAdjacentFramesAndIntoStagingReadTheSamePages(t *testing.T) {
	// A fresh pool hands out clock victims in frame order, so the first
	// run (blocks 1-16) lands in adjacent frames and is read in place; a
	// run spanning a mapped block goes through the staging buffer (the
	// spanning test). Here: the adjacent case, checked to be one.
	p, st, _ := newRunPool(t, 40, false)
	s := p.NewStrategy(Vacuum, 2<<20, nil)
	ids := make([]int32, 0, 17)
	for i := range 17 {
		b, err := p.Read(blk(runRel, i), s)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := itemOf(b), fmt.Sprintf("block-%d", i); got != want {
			t.Fatalf("block %d holds %q", i, got)
		}
		ids = append(ids, b.id)
		b.Release()
	}
	for i := 2; i < 17; i++ {
		if ids[i] != ids[1]+int32(i-1) {
			t.Fatalf("run frames %v are not adjacent: the in-place path was not taken", ids[1:])
		}
	}
	if len(st.runs) != 1 || st.runs[0] != 16 {
		t.Fatalf("runs %v, want one of 16", st.runs)
	}
}

func TestRunStartingNearTheLastFrameWrapsThroughStaging(t *testing.T) {
	// 250 Normal reads leave the clock hand at frame 250 of 256: the run
	// from block 1 starts in frame 251 and its later victims wrap around
	// to low frames, so it must go through the staging buffer.
	p, st, _ := newRunPool(t, 300, false)
	scan(t, p, nil, 50, 300)
	s := p.NewStrategy(Vacuum, 2<<20, nil)
	scan(t, p, s, 0, 40)
	if len(st.runs) == 0 || st.runs[0] != 16 {
		t.Fatalf("runs %v, want runs of 16", st.runs)
	}
}

// gatedRuns is a runStorage whose first ReadRun waits, once it has been
// entered, until release is closed: a run read held in flight.
type gatedRuns struct {
	*runStorage
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (g *gatedRuns) ReadRun(rel storage.RelFileNode, fork storage.ForkNum, start storage.BlockNumber, buf []byte, u *usage.Counters) (int, error) {
	first := false
	g.once.Do(func() { first = true })
	if first {
		close(g.entered)
		<-g.release
	}
	return g.runStorage.ReadRun(rel, fork, start, buf, u)
}

// readBlock reads block i of runRel without a strategy in a goroutine of its
// own and sends the outcome: nil when the block holds what the test wrote.
func readBlock(p *Pool, i int) <-chan error {
	done := make(chan error, 1)
	go func() {
		b, err := p.Read(blk(runRel, i), nil)
		if err == nil {
			if got, want := itemOf(b), fmt.Sprintf("block-%d", i); got != want {
				err = fmt.Errorf("block %d holds %q", i, got)
			}
			b.Release()
		}
		done <- err
	}()
	return done
}

// readWithin reads block i through a strategy of its own and fails the test
// if the read has not returned after d: the page was left under IO by a
// read that will never end it.
func readWithin(t *testing.T, p *Pool, i int, d time.Duration) {
	t.Helper()
	select {
	case err := <-readBlock(p, i):
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(d):
		t.Fatalf("a read of block %d has not returned after %v: its buffer is under IO that no goroutine will end "+
			"(two goroutines shared one Strategy's run buffers)", i, d)
	}
}

// Two goroutines reading ahead through one ring at once (the read-ahead hang
// of a lazy vacuum whose two heap passes' read-aheads overlapped): the
// second's run reused the first's run buffers while the first's read was in
// flight, so the first never ended the IO of its pages and every later read
// of them waited for ever. The pool now refuses the second call.
func TestASecondGoroutineOnAStrategyInUseIsRefusedInsteadOfLeavingPagesUnderIO(t *testing.T) {
	_, st, _ := newRunPool(t, 200, false)
	g := &gatedRuns{runStorage: st, entered: make(chan struct{}), release: make(chan struct{})}
	p, err := New(g, newFakeWAL(), Options{Frames: 256})
	if err != nil {
		t.Fatal(err)
	}
	s := p.NewStrategy(Vacuum, 512<<10, nil) // 32 slots: an eighth of the pool
	first := make(chan error, 1)
	go func() {
		_, err := p.Prefetch(blk(runRel, 0), 8, s)
		first <- err
	}()
	select {
	case <-g.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the first prefetch never reached its run read")
	}
	// The first prefetch's run read is in flight; another goroutine uses s.
	_, err = p.Prefetch(blk(runRel, 64), 8, s)
	close(g.release)
	if !errors.Is(err, ErrStrategyShared) {
		t.Errorf("a prefetch through a strategy another goroutine is using returned %v, want ErrStrategyShared", err)
	}
	if err := <-first; err != nil {
		t.Fatalf("the first prefetch: %v", err)
	}
	for i := range 8 {
		readWithin(t, p, i, 10*time.Second)
	}
	if p.inTable(blk(runRel, 64)) {
		t.Error("the refused prefetch mapped block 64")
	}
	// Used by one goroutine at a time again, s works as before.
	if n, err := p.Prefetch(blk(runRel, 64), 8, s); err != nil || n != 8 {
		t.Fatalf("prefetch of 8 blocks from 64 after the first ended = %d, %v", n, err)
	}
	readWithin(t, p, 64, 10*time.Second)
}

// gatedWrites is a runStorage whose single-page writes, once armed, let
// pass writes before the gate and then wait, each, until release is
// closed: the eviction of a dirty victim held in flight.
type gatedWrites struct {
	*runStorage
	mu      sync.Mutex
	armed   bool
	pass    int
	entered chan struct{}
	release chan struct{}
}

func (g *gatedWrites) WritePrivate(rel storage.RelFileNode, fork storage.ForkNum, blk storage.BlockNumber, buf []byte, u *usage.Counters) error {
	g.mu.Lock()
	wait := false
	if g.armed {
		if g.pass == 0 {
			wait = true
			g.armed = false
		} else {
			g.pass--
		}
	}
	g.mu.Unlock()
	if wait {
		close(g.entered)
		<-g.release
	}
	return g.runStorage.WritePrivate(rel, fork, blk, buf, u)
}

// A sequential ring read whose victims are dirty: the run's later victims
// are written (one write each, the ring's dirty pages not consecutive) while
// the run is being assembled. A foreground reader of the run's first block
// must not wait behind those writes: it once did, because each block was
// installed under IO as its victim was found, and a reader of an installed
// block waited for the whole run's victims and read.
func TestForegroundReadOfARunsBlockDoesNotWaitForTheRunsVictimWrites(t *testing.T) {
	_, st, _ := newRunPool(t, 300, false)
	g := &gatedWrites{runStorage: st, entered: make(chan struct{}), release: make(chan struct{})}
	p, err := New(g, newFakeWAL(), Options{Frames: 256})
	if err != nil {
		t.Fatal(err)
	}
	log := walOf(t, p)
	s := p.NewStrategy(Vacuum, 256<<10, nil) // 32 slots, runs of 16
	// Fill the ring with dirty pages of every second block from 200: no two
	// slots hold consecutive blocks, so they are written one by one.
	for i := range 32 {
		b, err := p.Read(blk(runRel, 200+2*i), s)
		if err != nil {
			t.Fatal(err)
		}
		modify(t, b, log, s)
		b.Release()
	}
	// Block 0 takes the first dirty slot (written before the gate is armed);
	// block 1 then starts a sequential run of 16.
	readRelease(t, p, blk(runRel, 0), s)
	g.mu.Lock()
	g.armed, g.pass = true, 1 // the run's first victim's write passes, its second waits
	g.mu.Unlock()
	vac := make(chan error, 1)
	go func() {
		b, err := p.Read(blk(runRel, 1), s)
		if err == nil {
			if got := itemOf(b); got != "block-1" {
				err = fmt.Errorf("the run's block 1 holds %q", got)
			}
			b.Release()
		}
		vac <- err
	}()
	select {
	case <-g.entered:
	case err := <-vac:
		t.Fatalf("the run ended (%v) without writing a second dirty victim: the test did not set up what it means to", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the run never reached its second victim's write")
	}
	// The run's second victim's write is in flight: the foreground reads the
	// run's first block and a later one.
	readWithinOrRelease(t, p, g.release, 1, 5*time.Second)
	readWithinOrRelease(t, p, g.release, 5, 5*time.Second)
	close(g.release)
	if err := <-vac; err != nil {
		t.Fatalf("the run's read: %v", err)
	}
	// Runs still work: blocks 2-16 take one run read (or none).
	before := len(st.runs) + st.reads
	scan(t, p, s, 2, 17)
	if after := len(st.runs) + st.reads; after > before+1 {
		t.Errorf("blocks 2-16 took %d more reads, want at most one run", after-before)
	}
}

// readWithinOrRelease reads block i through the Normal strategy and fails
// the test if it has not returned after d (closing release first, so the
// goroutine holding the pages gets going and the test ends).
func readWithinOrRelease(t *testing.T, p *Pool, release chan struct{}, i int, d time.Duration) {
	t.Helper()
	select {
	case err := <-readBlock(p, i):
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(d):
		close(release)
		t.Fatalf("a foreground read of block %d waited more than %v behind the run's write of a dirty victim", i, d)
	}
}
