package vacuum

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"
	"sync/atomic"

	"github.com/vacuumops/vacuum-operator/internal/engine/buffer"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
)

// readAhead reads the blocks a heap pass will visit next while the pass
// works on the current one (PostgreSQL 17's streaming reads, 18's
// asynchronous I/O): one goroutine with its own vacuum ring walks the
// pass's blocks in the same order, coalesces consecutive ones into runs of
// up to buffer.MaxRunBlocks read with one system call, and stays at most
// a distance of blocks ahead of the pass, so that nothing it read is
// evicted from its ring before the pass reaches it. The pass then finds
// its pages in the pool; buffer.Pool.Prefetch leaves them flagged so that
// each first access still counts as the miss it replaces, so counters,
// costs and the report are those of the pass without read-ahead. It
// changes no page. It stops when the pass calls stop, or when the
// vacuum's context is cancelled.
//
// A read-ahead owns the table's read-ahead ring from startReadAhead until
// stop returns, whether or not its goroutine has finished: a second
// startReadAhead meanwhile is refused with buffer.ErrStrategyShared, as the
// two would share the ring's slots and run buffers (the pool refuses such
// overlapping calls too, but only when they happen to overlap). Its
// goroutine stops on any read error, which the pass's own read then
// reports; a refusal by the pool is a bug, so reached returns it.
type readAhead struct {
	ring   *aheadRing
	from   uint32
	at     atomic.Int64 // the block the pass is at
	kick   chan struct{}
	cancel context.CancelFunc
	wg     sync.WaitGroup
	blocks atomic.Int64 // blocks read ahead, for tests
	failed atomic.Pointer[error]
}

// aheadRing is a ring read-aheads use in turn, and the one holding it
// (from startReadAhead until its stop). It belongs to the goroutine of the
// pass that starts and stops its read-aheads.
type aheadRing struct {
	s     *buffer.Strategy
	owner *readAhead
}

// prefetchFunc reads up to n blocks of one relation from blk on ahead
// through s (heap.Rel.Prefetch, or buffer.Pool.Prefetch on an index).
type prefetchFunc func(blk uint32, n int, s *buffer.Strategy) (int, error)

// readAheadTotal counts the blocks every read-ahead of the process read and
// readAheadRunning its goroutines still running (for tests).
var readAheadTotal, readAheadRunning atomic.Int64

// indexAheadTotal counts the index blocks of readAheadTotal and
// heapJobAheadTotal the parallel heap pass's; indexAheadStarts counts the
// read-aheads the index bulk deletes started, one a bulk delete, and
// heapJobAheadStarts those the parallel heap pass started, one a job (for
// tests).
var indexAheadTotal, indexAheadStarts, heapJobAheadTotal, heapJobAheadStarts atomic.Int64

// readAheadRun is the longest run read ahead with one system call.
const readAheadRun = buffer.MaxRunBlocks

// startReadAhead starts reading ahead the heap blocks of seq (ascending,
// from block from on) into the table's heap read-ahead ring, of the
// vacuum's ring size; it returns nil when read-ahead is off or the ring is
// too small for it. At most one read-ahead of the ring runs at a time (the
// ring is not shared): it fails while an earlier one has not been stopped.
func (lv *lazy) startReadAhead(from uint32, seq iter.Seq[uint32]) (*readAhead, error) {
	if lv.heapAhead == nil {
		lv.heapAhead = lv.newAheadRing(lv.w)
	}
	return lv.readAheadInto(lv.heapAhead, lv.w, lv.t.Heap.Prefetch, from, seq)
}

// newAheadRing returns a read-ahead ring of the vacuum's ring size charging
// w's counters, or nil when read-ahead is off.
func (lv *lazy) newAheadRing(w *worker) *aheadRing {
	if lv.run.opts.DisableReadAhead || lv.run.opts.RingSize <= 0 {
		return nil
	}
	return &aheadRing{s: lv.t.Pool.NewStrategy(buffer.Vacuum, lv.run.opts.RingSize, w.u)}
}

// readAheadInto starts a read-ahead of the blocks of seq into r for a pass
// on worker w (nil r: read-ahead is off).
func (lv *lazy) readAheadInto(r *aheadRing, w *worker, prefetch prefetchFunc, from uint32, seq iter.Seq[uint32]) (*readAhead, error) {
	if r == nil {
		return nil, nil
	}
	if o := r.owner; o != nil {
		return nil, fmt.Errorf("read ahead from block %d: the read-ahead started at block %d still holds the ring: %w",
			from, o.from, buffer.ErrStrategyShared)
	}
	s := r.s
	ringBlocks := s.RingBuffers() // the pool clamps the ring to its size
	run := min(readAheadRun, ringBlocks/4)
	// A page read ahead must still be in the ring when the pass gets
	// there: the ring holds ringBlocks pages, and the read-ahead is at
	// most distance blocks plus one run past the pass.
	distance := int64(ringBlocks/2 - run)
	if run < 2 || distance < int64(run) {
		return nil, nil
	}
	ctx, cancel := context.WithCancel(w.ctx)
	ra := &readAhead{ring: r, from: from, kick: make(chan struct{}, 1), cancel: cancel}
	r.owner = ra
	ra.at.Store(int64(from) - 1)
	ra.wg.Add(1)
	readAheadRunning.Add(1)
	go func() {
		defer ra.wg.Done()
		defer readAheadRunning.Add(-1)
		lv.run.lowerThread()
		start, n := uint32(0), 0
		flush := func() bool {
			if n == 0 {
				return true
			}
			// Wait until the run's first block is within distance of the pass.
			for int64(start) > ra.at.Load()+distance {
				select {
				case <-ra.kick:
				case <-ctx.Done():
					return false
				}
			}
			if ctx.Err() != nil {
				return false
			}
			got, err := prefetch(start, n, s)
			if errors.Is(err, buffer.ErrStrategyShared) {
				ra.failed.Store(&err)
			}
			if err != nil {
				return false // any other error: the pass's own reads report it
			}
			ra.blocks.Add(int64(got))
			readAheadTotal.Add(int64(got))
			n = 0
			return true
		}
		for blk := range seq {
			if n > 0 && blk == start+uint32(n) && n < run {
				n++
				continue
			}
			if !flush() {
				return
			}
			start, n = blk, 1
		}
		flush()
	}()
	return ra, nil
}

// reached tells the read-ahead that the pass is at block blk. It returns
// the error that stopped the read-ahead when the pool refused its ring as
// shared (a bug that must not pass silently).
func (ra *readAhead) reached(blk uint32) error {
	if ra == nil {
		return nil
	}
	if err := ra.failed.Load(); err != nil {
		return fmt.Errorf("read-ahead started at block %d: %w", ra.from, *err)
	}
	ra.at.Store(int64(blk))
	select {
	case ra.kick <- struct{}{}:
	default:
	}
	return nil
}

// stop ends the read-ahead and waits for its goroutine; the ring may be
// used again when stop returns. It may be called more than once.
func (ra *readAhead) stop() {
	if ra == nil {
		return
	}
	ra.cancel()
	ra.wg.Wait()
	if ra.ring.owner == ra {
		ra.ring.owner = nil
	}
}

// unskippedBlocks yields the blocks from start below n whose VM bit is not
// set: those the first heap pass reads (the VM is read without counters,
// as the pass's own check is what counts).
func (lv *lazy) unskippedBlocks(start, n uint32) iter.Seq[uint32] {
	vm := lv.t.Heap.VM()
	return func(yield func(uint32) bool) {
		for blk := start; blk < n; blk++ {
			if set, err := vm.IsSet(storage.BlockNumber(blk), nil); err == nil && set {
				continue
			}
			if !yield(blk) {
				return
			}
		}
	}
}

// indexReadAhead starts reading ahead index ix's blocks 1 .. its last, the
// order its bulk delete visits them, into r for the bulk delete on worker w.
// The returned hook is the bulk delete's page hook: it tells the read-ahead
// that the pass is one page further, then runs w's delay point. With
// O_DIRECT the index pass otherwise waits for every run it reads.
func (lv *lazy) indexReadAhead(r *aheadRing, w *worker, ix Index) (ra *readAhead, hook func() error, err error) {
	rel := ix.Tree.Rel()
	nblocks, err := lv.t.Storage.NBlocks(rel, storage.MainFork)
	if err != nil || nblocks < 2 {
		return nil, w.delay, err
	}
	prefetch := func(blk uint32, n int, s *buffer.Strategy) (int, error) {
		got, err := lv.t.Pool.Prefetch(buffer.Tag{Rel: rel, Fork: storage.MainFork, Block: storage.BlockNumber(blk)}, n, s)
		indexAheadTotal.Add(int64(got))
		if err != nil {
			return got, fmt.Errorf("prefetch block %d of index %q: %w", blk, ix.Name, err)
		}
		return got, nil
	}
	blocks := func(yield func(uint32) bool) {
		for blk := uint32(1); blk < uint32(nblocks); blk++ {
			if !yield(blk) {
				return
			}
		}
	}
	if ra, err = lv.readAheadInto(r, w, prefetch, 1, blocks); err != nil || ra == nil {
		return nil, w.delay, err
	}
	indexAheadStarts.Add(1)
	next := uint32(1)
	hook = func() error {
		next++
		if err := ra.reached(next); err != nil {
			return err
		}
		return w.delay()
	}
	return ra, hook, nil
}
