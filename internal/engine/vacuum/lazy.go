package vacuum

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"unsafe"

	"github.com/vacuumops/vacuum-operator/internal/engine/buffer"
	"github.com/vacuumops/vacuum-operator/internal/engine/heap"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/tidstore"
	"github.com/vacuumops/vacuum-operator/internal/engine/txn"
)

// lazy is one table's lazy vacuum (see doc.go for the algorithm).
type lazy struct {
	run   *Batch
	t     *Target
	ts    *tableState
	rep   *Report
	w     *worker // the table's own worker: heap scan, heap vacuum
	store *tidstore.Store
	mem   int64
	// reclaim holds, for each block of the store in the same (ascending)
	// order, what the first pass learnt of it, so that the second pass
	// skips classifying a page that has not changed since
	// (heap.ReclaimBlockAfterScan). Its memory counts against mem.
	reclaim []blockReclaim
	horizon txn.XID
	idx     []IndexReport

	// A uniform sample of the all-visible blocks skipped (reservoir), to
	// estimate the tuples on them.
	skipSample []uint32
	unscanned  int64 // blocks not scanned: skipped all-visible ones and those behind the resume point
	rng        *rand.Rand

	// The saved position (position.go): next is the block the scan visits
	// next, saved the last position recorded, started whether the scan
	// began (so a stop may record where it is).
	nblocks uint32
	next    uint32
	saved   uint32
	first   uint32 // the first block the store holds, when it holds any
	started bool

	// The heap passes' read-ahead (readahead.go): the first pass's, stopped
	// while a dead-items cycle runs, and the ring every read-ahead of this
	// table uses in turn (as the worker's own ring serves both passes).
	scanAhead *readAhead
	heapAhead *aheadRing
}

// positionEveryBlocks is how often a table without indexes, whose blocks
// are finished one by one, records its position (each record flushes the
// WAL and replaces a small file).
const positionEveryBlocks = 1024

// SkippedSamplePages is how many of the all-visible pages a lazy vacuum
// skipped it reads afterwards to estimate the tuples on all of them
// (Report.TuplesRemaining).
const SkippedSamplePages = 64

// Vacuum runs lazy vacuum on table t as part of the run. On error
// (including cancellation) the table is consistent and the returned report
// describes the work done until then.
func (r *Batch) Vacuum(ctx context.Context, t *Target) (*Report, error) {
	defer t.release()
	if err := t.check(false); err != nil {
		return nil, fmt.Errorf("vacuum %q: %w", t.Name, err)
	}
	ts, err := r.beginTable(t.Name, ModeLazy)
	if err != nil {
		return nil, err
	}
	rep := &Report{Table: t.Name, Mode: ModeLazy}
	lv := &lazy{run: r, t: t, ts: ts, rep: rep, store: tidstore.New(), mem: r.opts.workMem(),
		w: r.newWorker(ctx, ts, t.Pool, buffer.Vacuum, r.opts.RingSize)}
	for _, ix := range t.Indexes {
		lv.idx = append(lv.idx, IndexReport{Name: ix.Name})
	}
	err = lv.vacuum()
	rep.Indexes = lv.idx
	rep.setCutoff(lv.horizon, t.Txns.NextXID())
	r.finish(ts, rep)
	r.endTable(ts, rep)
	if err != nil {
		return rep, fmt.Errorf("vacuum %q: %w", t.Name, err)
	}
	return rep, nil
}

func (lv *lazy) vacuum() error {
	err := lv.scanAndClean()
	if err == nil {
		lv.rep.Complete = true
		lv.rep.BlockReached = lv.rep.PagesTotal
		return lv.savePosition(Position{Block: lv.nblocks, Blocks: lv.nblocks, Horizon: lv.horizon, Finished: true})
	}
	if lv.started && lv.w.ctx.Err() != nil {
		// Stopped: every block below the first one the store holds (or
		// below the next to scan) is finished. Recording it keeps this
		// vacuum's work for a resume; the store's cycle is redone.
		blk := lv.next
		if lv.store.Len() > 0 {
			blk = min(blk, lv.first)
		}
		if serr := lv.save(blk); serr != nil {
			return errors.Join(err, serr)
		}
	}
	return err
}

// scanAndClean is the whole lazy vacuum of the table (see doc.go).
func (lv *lazy) scanAndClean() error {
	lv.ts.setPhase(PhaseInitializing)
	lv.horizon = lv.t.Txns.OldestXmin()
	if skip, err := lv.belowThreshold(); err != nil || skip {
		return err
	}
	nblocks, err := lv.t.Heap.NBlocks()
	if err != nil {
		return err
	}
	lv.nblocks = nblocks
	lv.rep.PagesTotal = int64(nblocks)
	lv.ts.blocksTotal.Store(int64(nblocks))
	start, done, err := lv.resumePoint()
	if err != nil || done {
		return err
	}
	lv.next, lv.saved, lv.started = start, start, true
	flusher := startWALFlusher(lv.t.Log, lv.w.u, lv.run.lowerThread)
	defer flusher.stopAndWait()
	lv.ts.setPhase(PhaseScanningHeap)
	if err := lv.behind(start); err != nil {
		return err
	}
	if lv.scanAhead, err = lv.startReadAhead(start, lv.unskippedBlocks(start, nblocks)); err != nil {
		return err
	}
	defer func() { lv.scanAhead.stop() }()
	defer lv.w.releaseVM()
	for blk := start; blk < nblocks; blk++ {
		if err := lv.w.delay(); err != nil {
			return err
		}
		if err := lv.scanAhead.reached(blk); err != nil {
			return err
		}
		if err := lv.scanBlock(blk); err != nil {
			return err
		}
		lv.next = blk + 1
		lv.ts.blocksScanned.Add(1)
		if len(lv.t.Indexes) == 0 && lv.next-lv.saved >= positionEveryBlocks {
			if err := lv.save(lv.next); err != nil {
				return err
			}
		}
	}
	lv.w.releaseVM()
	if err := lv.estimateSkipped(); err != nil {
		return err
	}
	// The scan's read-ahead stops before the last cycle, whose second pass
	// starts its own on the same ring: a ring (its slots, its run buffers) is
	// one goroutine's at a time. Left running, it shared the ring with the
	// second pass's and could leave a page under IO for ever, so the pass
	// waited on it (a hang of bench's quick run); startReadAhead now refuses
	// a ring not yet given back.
	lv.scanAhead.stop()
	lv.scanAhead = nil
	if lv.store.Len() > 0 {
		if err := lv.vacuumDead(); err != nil {
			return err
		}
		if err := lv.save(nblocks); err != nil {
			return err
		}
	}
	if err := lv.cleanupIndexes(); err != nil {
		return err
	}
	if err := lv.truncate(); err != nil {
		return err
	}
	n, err := lv.t.Heap.NBlocks()
	lv.rep.PagesRemaining = int64(n)
	return err
}

// resumePoint is the block the scan starts at: 0, or with Options.Resume
// the table's saved position when it can be trusted. done says the saved
// position is a finished vacuum's: the table is reported skipped.
func (lv *lazy) resumePoint() (start uint32, done bool, err error) {
	if !lv.run.opts.Resume || lv.t.Table == nil {
		return 0, false, nil
	}
	sp, err := lv.t.Table.SavedPosition()
	switch {
	case err != nil:
		return 0, false, err
	case sp.Untrusted != "":
		lv.rep.ResumeUntrusted = sp.Untrusted
		return 0, false, nil
	case !sp.Found:
		return 0, false, nil
	case sp.Horizon > lv.horizon:
		lv.rep.ResumeUntrusted = fmt.Sprintf("saved position's horizon %d is above today's %d", sp.Horizon, lv.horizon)
		return 0, false, nil
	case sp.Finished:
		lv.rep.Skipped = true
		lv.rep.SkipReason = "its vacuum finished in an earlier run; resume has nothing left to do"
		lv.rep.ResumedFromBlock = int64(sp.Block)
		lv.rep.PagesRemaining = lv.rep.PagesTotal
		return 0, true, nil
	}
	start = min(sp.Block, lv.nblocks)
	lv.rep.Resumed = true
	lv.rep.ResumedFromBlock = int64(start)
	return start, false, nil
}

// behind handles the blocks below the resume point, which this vacuum
// does not scan: they count as unscanned for the tuple estimate, and those
// no longer all-visible (rows deleted or updated there since, or tuples
// that were not yet removable) are counted in PagesLeftBehind: the next
// vacuum without resume covers them.
func (lv *lazy) behind(start uint32) error {
	for blk := range start {
		if blk%positionEveryBlocks == positionEveryBlocks-1 {
			if err := lv.w.delay(); err != nil {
				return err
			}
		}
		set, err := lv.t.Heap.VM().IsSet(storage.BlockNumber(blk), lv.w.s.Plain())
		if err != nil {
			return err
		}
		if !set {
			lv.rep.PagesLeftBehind++
		}
		lv.sampleSkipped(blk)
	}
	return nil
}

// save records blk as the table's position (Table.SavePosition), when
// the Target has a Table.
func (lv *lazy) save(blk uint32) error {
	lv.rep.BlockReached = int64(blk)
	return lv.savePosition(Position{Block: blk, Blocks: lv.nblocks, Horizon: lv.horizon})
}

func (lv *lazy) savePosition(p Position) error {
	if lv.t.Table == nil || !lv.started {
		return nil
	}
	if err := lv.t.Table.SavePosition(p); err != nil {
		return err
	}
	lv.saved = p.Block
	lv.rep.PositionsSaved++
	return nil
}

// belowThreshold measures the dead fraction when MinDeadTuplePercent asks
// for it and marks the report skipped when the table is under it.
func (lv *lazy) belowThreshold() (bool, error) {
	minPct := lv.run.opts.MinDeadTuplePercent
	if minPct <= 0 {
		return false, nil
	}
	c, err := lv.t.Heap.CountTuplesPaced(lv.w.ctx, lv.horizon, lv.w.s, lv.w.delay)
	if err != nil {
		return false, err
	}
	dead := c.Dead + c.DeadLinePointers
	all := dead + c.Live + c.RecentlyDead + c.InsertInProgress + c.DeleteInProgress
	pct := 0.0
	if all > 0 {
		pct = 100 * float64(dead) / float64(all)
	}
	if pct >= minPct {
		return false, nil
	}
	lv.rep.Skipped = true
	lv.rep.SkipReason = fmt.Sprintf("%.2f%% dead, below the %.2f%% threshold", pct, minPct)
	lv.rep.PagesTotal = c.Pages
	lv.rep.PagesRemaining = c.Pages
	return true, nil
}

// scanBlock is the first heap pass over one block: skip it if
// all-visible, otherwise classify it and remember its dead slots (dead
// tuples and LP_DEAD pointers). The page is not changed when it has dead
// slots: the second pass frees them and their storage in one step, so each
// page is dirtied, written and imaged once per vacuum rather than once for
// pruning and again for freeing. A page without dead slots is finished at
// once (free space recorded, VM bit set when every tuple is visible to all).
func (lv *lazy) scanBlock(blk uint32) error {
	t, s := lv.t, lv.w.s
	vmr := lv.w.vmReader(t)
	set, err := vmr.IsSet(storage.BlockNumber(blk))
	if err != nil {
		return err
	}
	if set {
		lv.rep.PagesSkipped++
		lv.sampleSkipped(blk)
		return nil
	}
	// The store must have room for this block's TIDs before we scan it.
	if len(t.Indexes) > 0 && (lv.store.Full(lv.mem-lv.reclaimBytes()) || lv.cycleDue(blk)) {
		// The second pass's read-ahead takes the ring over meanwhile.
		lv.scanAhead.stop()
		lv.scanAhead = nil
		if err := lv.vacuumDead(); err != nil {
			return err
		}
		var err error
		if lv.scanAhead, err = lv.startReadAhead(blk, lv.unskippedBlocks(blk, lv.nblocks)); err != nil {
			return err
		}
		if err := lv.save(blk); err != nil {
			return err
		}
		lv.ts.setPhase(PhaseScanningHeap)
	}
	res, err := t.Heap.ScanForVacuumPinned(blk, lv.horizon, s, vmr)
	if err != nil {
		return err
	}
	lv.rep.PagesScanned++
	lv.rep.TuplesRemaining += int64(res.TuplesRemaining)
	lv.rep.RecentlyDead += int64(res.RecentlyDead)
	switch {
	case len(res.DeadOffsets) == 0:
		return nil
	case len(t.Indexes) == 0:
		// No index can point at the dead slots: free them at once
		// (PostgreSQL's one-pass strategy).
		return lv.vacuumBlock(blk, res.DeadOffsets, &res.Reclaim)
	default:
		if lv.store.Len() == 0 {
			lv.first = blk
		}
		if err := lv.store.AddBlock(blk, res.DeadOffsets); err != nil {
			return err
		}
		lv.reclaim = append(lv.reclaim, blockReclaim{blk: blk, hint: res.Reclaim})
		lv.ts.deadTIDs.Store(int64(lv.store.Len()))
		lv.ts.deadBytes.Store(lv.store.MemoryBytes() + lv.reclaimBytes())
		return nil
	}
}

// cycleDue says whether Options.CycleBlocks asks for a dead-items cycle
// before block blk.
func (lv *lazy) cycleDue(blk uint32) bool {
	n := lv.run.opts.CycleBlocks
	return n > 0 && lv.store.Len() > 0 && int64(blk-lv.saved) >= n
}

// sampleSkipped keeps blk in the reservoir of skipped blocks (algorithm
// R: after n skipped blocks each is in the sample with equal probability).
func (lv *lazy) sampleSkipped(blk uint32) {
	lv.unscanned++
	n := lv.unscanned // including blk
	if len(lv.skipSample) < SkippedSamplePages {
		lv.skipSample = append(lv.skipSample, blk)
		return
	}
	if lv.rng == nil {
		lv.rng = rand.New(rand.NewPCG(uint64(lv.rep.PagesTotal), 0x5eed))
	}
	if j := lv.rng.Int64N(n); j < SkippedSamplePages {
		lv.skipSample[j] = blk
	}
}

// estimateSkipped adds to TuplesRemaining the tuples of the skipped
// all-visible pages: every one of them when all were sampled, else the
// sample's mean scaled to all skipped pages. Each sampled page is a delay
// point like any other.
func (lv *lazy) estimateSkipped() error {
	if len(lv.skipSample) == 0 {
		return nil
	}
	slices.Sort(lv.skipSample)
	var tuples int64
	for _, blk := range lv.skipSample {
		c, err := lv.t.Heap.CountPage(blk, lv.horizon, lv.w.s)
		if err != nil {
			return err
		}
		tuples += c.Live + c.RecentlyDead + c.InsertInProgress + c.DeleteInProgress
		if err := lv.w.delay(); err != nil {
			return err
		}
	}
	skipped, sampled := lv.unscanned, int64(len(lv.skipSample))
	if sampled < skipped {
		lv.rep.TuplesRemainingEstimated = true
		tuples = int64(math.Round(float64(tuples) * float64(skipped) / float64(sampled)))
	}
	lv.rep.TuplesRemaining += tuples
	return nil
}

// vacuumBlock frees the dead slots of one block whose index entries are
// gone (second heap pass): dead tuples and LP_DEAD pointers alike; hint is
// what the first pass learnt of the block (nil: classify it again).
func (lv *lazy) vacuumBlock(blk uint32, offs []page.OffsetNumber, hint *heap.ReclaimHint) error {
	var c reclaimCounts
	if err := lv.reclaimBlock(lv.w, blk, offs, hint, &c); err != nil {
		return err
	}
	c.addTo(lv.rep)
	return nil
}

// reclaimCounts are one heap worker's share of the report.
type reclaimCounts struct{ tuplesRemoved, freed, pages int64 }

func (c *reclaimCounts) addTo(rep *Report) {
	rep.TuplesRemoved += c.tuplesRemoved
	rep.DeadItemsFreed += c.freed
	rep.PagesVacuumed += c.pages
}

// reclaimBlock frees one block's dead slots on worker w, counting into c;
// with hint (what the first pass learnt of the block, offs being exactly
// the offsets it found) a page unchanged since is not classified again.
func (lv *lazy) reclaimBlock(w *worker, blk uint32, offs []page.OffsetNumber, hint *heap.ReclaimHint, c *reclaimCounts) error {
	var res heap.VacuumResult
	var err error
	if hint != nil {
		res, err = lv.t.Heap.ReclaimBlockAfterScan(blk, offs, *hint, lv.horizon, w.s, w.vmReader(lv.t))
	} else {
		res, err = lv.t.Heap.ReclaimBlockPinned(blk, offs, lv.horizon, w.s, w.vmReader(lv.t))
	}
	if err != nil {
		return err
	}
	c.tuplesRemoved += int64(res.TuplesRemoved)
	c.freed += int64(res.Freed)
	c.pages++
	lv.ts.tuplesRemoved.Add(int64(res.TuplesRemoved))
	lv.ts.blocksVacuumd.Add(1)
	return nil
}

// heapChunk is how many consecutive blocks a heap worker takes at a time
// (its reads stay sequential).
const heapChunk = 32

// heapJob is a run of blocks of the store with their dead offsets and
// what the first pass learnt of each (nil when it was not kept).
type heapJob struct {
	blks  []uint32
	offs  [][]page.OffsetNumber
	hints []*heap.ReclaimHint
}

// blockReclaim is the first pass's heap.ReclaimHint for block blk.
type blockReclaim struct {
	blk  uint32
	hint heap.ReclaimHint
}

// reclaimBytes is the memory lv.reclaim holds, counted against the
// store's budget.
func (lv *lazy) reclaimBytes() int64 {
	return int64(cap(lv.reclaim)) * int64(unsafe.Sizeof(blockReclaim{}))
}

// reclaimHints returns a function that, called with the store's blocks in
// Iterate's (ascending) order, gives each one's first-pass hint, or nil
// when lv.reclaim does not hold that block (a block added to the store
// some other way is classified again, as before).
func (lv *lazy) reclaimHints() func(blk uint32) *heap.ReclaimHint {
	i := 0
	return func(blk uint32) *heap.ReclaimHint {
		for i < len(lv.reclaim) && lv.reclaim[i].blk < blk {
			i++
		}
		if i < len(lv.reclaim) && lv.reclaim[i].blk == blk {
			return &lv.reclaim[i].hint
		}
		return nil
	}
}

// parallelHeapPass is the second heap pass on n workers: the store is cut
// into runs of heapChunk blocks handed to whichever worker is free. Each
// worker has its own ring, counters and meter under the table's throttle,
// a delay point after every block, like the table's own worker. Pages are
// independent (one WAL record each), so their order does not matter; the
// pass still starts only after every index pass is complete.
func (lv *lazy) parallelHeapPass(n int) error {
	counts := make([]reclaimCounts, n)
	reclaim := func(w *worker, k int, j heapJob) error {
		ra, err := lv.heapJobReadAhead(w, j)
		if err != nil {
			return err
		}
		defer ra.stop()
		for i, blk := range j.blks {
			if err := ra.reached(blk); err != nil {
				return err
			}
			if err := lv.reclaimBlock(w, blk, j.offs[i], j.hints[i], &counts[k]); err != nil {
				return err
			}
			if err := w.delay(); err != nil {
				return err
			}
		}
		return nil
	}
	err := runPool(lv, n, reclaim, func(send func(heapJob) error) error {
		var cur heapJob
		hintOf := lv.reclaimHints()
		err := lv.store.Iterate(func(blk uint32, offs []page.OffsetNumber) error {
			cur.blks = append(cur.blks, blk)
			cur.offs = append(cur.offs, slices.Clone(offs))
			cur.hints = append(cur.hints, hintOf(blk))
			if len(cur.blks) < heapChunk {
				return nil
			}
			err := send(cur)
			cur = heapJob{}
			return err
		})
		if err == nil && len(cur.blks) > 0 {
			err = send(cur)
		}
		return err
	})
	for k := range counts {
		counts[k].addTo(lv.rep)
	}
	return err
}

// heapJobReadAhead starts reading job j's blocks ahead into worker w's own
// read-ahead ring, as the serial pass reads the store's blocks ahead: without
// it each heap worker read its blocks one system call at a time and waited
// for each. Nil when read-ahead is off.
func (lv *lazy) heapJobReadAhead(w *worker, j heapJob) (*readAhead, error) {
	if len(j.blks) == 0 {
		return nil, nil
	}
	if w.heapAhead == nil {
		w.heapAhead = lv.newAheadRing(w)
	}
	prefetch := func(blk uint32, n int, s *buffer.Strategy) (int, error) {
		got, err := lv.t.Heap.Prefetch(blk, n, s)
		heapJobAheadTotal.Add(int64(got))
		return got, err
	}
	ra, err := lv.readAheadInto(w.heapAhead, w, prefetch, j.blks[0], slices.Values(j.blks))
	if ra != nil {
		heapJobAheadStarts.Add(1)
	}
	return ra, err
}

// vacuumDead removes the stored TIDs from every index, then frees their
// line pointers in the heap, then empties the store. The order matters:
// a line pointer freed while an index entry still points at it could be
// reused by a new tuple that the stale entry would then reach.
func (lv *lazy) vacuumDead() error {
	lv.ts.setPhase(PhaseVacuumingIndexes)
	if err := lv.indexPass(); err != nil {
		return err
	}
	lv.rep.IndexPasses++
	lv.ts.indexPasses.Add(1)
	lv.ts.setPhase(PhaseVacuumingHeap)
	var err error
	if lv.run.opts.heapWorkers() > 1 && lv.store.Blocks() > 1 {
		err = lv.parallelHeapPass(lv.run.opts.heapWorkers())
	} else {
		err = lv.serialHeapPass()
	}
	if err != nil {
		return err
	}
	lv.store.Reset()
	lv.reclaim = lv.reclaim[:0]
	lv.ts.deadTIDs.Store(0)
	lv.ts.deadBytes.Store(lv.store.MemoryBytes() + lv.reclaimBytes())
	return nil
}

// serialHeapPass is the second heap pass on the table's own worker, with
// the stored blocks read ahead.
func (lv *lazy) serialHeapPass() error {
	blocks := make([]uint32, 0, lv.store.Blocks())
	_ = lv.store.Iterate(func(blk uint32, _ []page.OffsetNumber) error {
		blocks = append(blocks, blk)
		return nil
	})
	var ra *readAhead
	if len(blocks) > 0 {
		var err error
		if ra, err = lv.startReadAhead(blocks[0], slices.Values(blocks)); err != nil {
			return err
		}
	}
	defer ra.stop()
	defer lv.w.releaseVM()
	hintOf := lv.reclaimHints()
	return lv.store.Iterate(func(blk uint32, offs []page.OffsetNumber) error {
		if err := ra.reached(blk); err != nil {
			return err
		}
		var c reclaimCounts
		if err := lv.reclaimBlock(lv.w, blk, offs, hintOf(blk), &c); err != nil {
			return err
		}
		c.addTo(lv.rep)
		return lv.w.delay()
	})
}

// indexPass bulk-deletes the stored TIDs from every index: one by one on
// the table's worker, or IndexWorkers at a time, each index worker with
// its own strategy, counters and meter under the table's throttle.
func (lv *lazy) indexPass() error {
	n := len(lv.t.Indexes)
	workers := min(lv.run.opts.indexWorkers(), n)
	if workers <= 1 {
		for i := range n {
			if err := lv.bulkDelete(lv.w, i); err != nil {
				return err
			}
		}
		return nil
	}
	bulkDelete := func(w *worker, _ int, i int) error { return lv.bulkDelete(w, i) }
	return runPool(lv, workers, bulkDelete, func(send func(int) error) error {
		for i := range n {
			if err := send(i); err != nil {
				return err
			}
		}
		return nil
	})
}

// bulkDelete runs one index's bulk delete on worker w, a delay point
// after every index page, with the index's blocks read ahead into w's
// index read-ahead ring.
func (lv *lazy) bulkDelete(w *worker, i int) error {
	ix := lv.t.Indexes[i]
	if w.indexAhead == nil {
		w.indexAhead = lv.newAheadRing(w)
	}
	ra, hook, err := lv.indexReadAhead(w.indexAhead, w, ix)
	if err != nil {
		return fmt.Errorf("index %q: %w", ix.Name, err)
	}
	st, err := ix.Tree.BulkDelete(lv.store.Contains, w.s, hook)
	ra.stop()
	r := &lv.idx[i]
	r.PagesScanned += st.PagesScanned
	r.EntriesRemoved += st.EntriesRemoved
	r.EntriesRemaining = st.EntriesRemaining
	r.Pages = st.Pages
	if err != nil {
		return fmt.Errorf("index %q: %w", ix.Name, err)
	}
	return nil
}

// cleanupIndexes gathers each index's final size. After a bulk-delete
// pass the figures are already known (the pass visited every page);
// otherwise the index is scanned once, as btvacuumcleanup does.
func (lv *lazy) cleanupIndexes() error {
	lv.ts.setPhase(PhaseCleaningUpIndexes)
	if lv.rep.IndexPasses > 0 {
		return nil
	}
	for i, ix := range lv.t.Indexes {
		cs, err := ix.Tree.CleanupPaced(lv.w.s, lv.w.delay)
		if err != nil {
			return fmt.Errorf("index %q cleanup: %w", ix.Name, err)
		}
		lv.idx[i].Pages = cs.Pages
		lv.idx[i].EntriesRemaining = cs.Entries
	}
	return nil
}

// truncate gives back the empty pages at the end of the heap, under the
// table's exclusive lock (inserts would otherwise race the shrink).
func (lv *lazy) truncate() error {
	if lv.run.opts.DisableTruncate {
		return nil
	}
	lv.ts.setPhase(PhaseTruncatingHeap)
	h, s := lv.t.Heap, lv.w.s
	cur, err := h.NBlocks()
	if err != nil {
		return err
	}
	n, err := h.TrailingEmptyBlocks(s)
	if err != nil || n >= cur {
		return err
	}
	if lv.t.Table == nil {
		lv.rep.TruncateSkippedWhy = "no table lock available"
		return nil
	}
	if err := lv.w.delay(); err != nil {
		return err
	}
	unlock, err := lv.t.Table.Lock()
	if err != nil {
		return err
	}
	defer unlock()
	// Re-check under the lock: an insert may have used a page since.
	if cur, err = h.NBlocks(); err != nil {
		return err
	}
	if n, err = h.TrailingEmptyBlocks(s); err != nil || n >= cur {
		return err
	}
	if err := h.Truncate(n, s); err != nil {
		return err
	}
	lv.rep.PagesRemoved = int64(cur - n)
	return nil
}
