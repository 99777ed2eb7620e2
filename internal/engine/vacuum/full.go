package vacuum

import (
	"context"
	"errors"
	"fmt"

	"github.com/vacuumops/vacuum-operator/internal/engine/btree"
	"github.com/vacuumops/vacuum-operator/internal/engine/buffer"
	"github.com/vacuumops/vacuum-operator/internal/engine/heap"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/row"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/txn"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum/throttle"
)

var (
	// ErrNoSpace is wrapped by *NoSpaceError: VACUUM FULL refused to start
	// because the volume lacks room for the copy; nothing changed.
	ErrNoSpace = errors.New("not enough free space for VACUUM FULL")
	// ErrTableChanged means the table's relations changed during VACUUM FULL
	// (concurrent DDL); the rewrite was discarded.
	ErrTableChanged = errors.New("table changed during vacuum")
)

// NoSpaceError says how much VACUUM FULL needed and how much was free.
type NoSpaceError struct {
	Table string
	Dir   string
	Need  uint64 // estimate: new heap + new indexes + their WAL (+ margin)
	Free  uint64 // available to the engine on the data directory's volume
}

func (e *NoSpaceError) Error() string {
	return fmt.Sprintf("VACUUM FULL of %q needs about %d bytes free on %s, only %d available", e.Table, e.Need, e.Dir, e.Free)
}

// Unwrap makes errors.Is(err, ErrNoSpace) true.
func (e *NoSpaceError) Unwrap() error { return ErrNoSpace }

// Per-item overheads of the space estimate.
const (
	heapItemOverhead = page.ItemIDSize + page.MaxAlign // line pointer + alignment
	indexItemBytes   = 24 + page.ItemIDSize            // layout-2 leaf item of an integer key (aligned) + line pointer
	walPerRecord     = 64                              // record header and block reference
	fillSlack        = 1.15                            // pages are not filled to the last byte
)

// walFlushAfter is how much WAL a VACUUM FULL under a WAL-rate limit leaves unflushed at a
// delay point (see (*full).delay). A lazy vacuum's background flush waits for more
// (lazyWALFlushAfter).
const walFlushAfter = 256 << 10

// full is one table's VACUUM FULL.
type full struct {
	run     *Batch
	t       *Target
	ts      *tableState
	rep     *Report
	w       *worker          // reads the old heap (vacuum ring), throttled
	ws      *buffer.Strategy // writes the new files (bulk-write ring), same counters
	horizon txn.XID
	created []storage.RelFileNode
	counted int64 // tuples in the old heap, all states but Dead line pointers
}

// VacuumFull rewrites table t into new files (live and recently dead
// tuples only), builds its indexes afresh, and switches the catalog to the
// new files atomically. It holds the table's exclusive lock throughout.
// Any error before the switch, ENOSPC and cancellation included, leaves
// the old table as it was and removes the new files; an error of the
// switch itself is Table.Swap's to clean up.
func (r *Batch) VacuumFull(ctx context.Context, t *Target) (*Report, error) {
	defer t.release()
	if err := t.check(true); err != nil {
		return nil, fmt.Errorf("vacuum full %q: %w", t.Name, err)
	}
	ts, err := r.beginTable(t.Name, ModeFull)
	if err != nil {
		return nil, err
	}
	rep := &Report{Table: t.Name, Mode: ModeFull}
	f := &full{run: r, t: t, ts: ts, rep: rep, w: r.newWorker(ctx, ts, t.Pool, buffer.Vacuum, r.opts.RingSize)}
	f.ws = t.Pool.NewStrategy(buffer.BulkWrite, 0, f.w.u)
	err = f.rewrite()
	if err != nil {
		f.dropNew()
	} else {
		rep.Complete = true
		rep.BlockReached = rep.PagesTotal
	}
	rep.setCutoff(f.horizon, t.Txns.NextXID())
	r.finish(ts, rep)
	r.endTable(ts, rep)
	if err != nil {
		return rep, fmt.Errorf("vacuum full %q: %w", t.Name, err)
	}
	return rep, nil
}

func (f *full) rewrite() error {
	t := f.t
	f.ts.setPhase(PhaseInitializing)
	unlock, err := t.Table.Lock()
	if err != nil {
		return err
	}
	defer unlock()
	f.horizon = t.Txns.OldestXmin()
	if err := f.checkSpace(); err != nil {
		return err
	}

	f.ts.setPhase(PhaseRewritingHeap)
	newHeap, err := f.alloc()
	if err != nil {
		return err
	}
	nh, err := heap.Create(t.HeapDeps, newHeap)
	if err != nil {
		return err
	}
	mem := f.run.opts.workMem() / int64(max(len(t.Indexes), 1))
	sorters := make([]*entrySorter, len(t.Indexes))
	for i := range sorters {
		sorters[i] = newEntrySorter(f.run.opts.TempDir, mem)
		defer sorters[i].close()
	}
	var kept int64
	hook := func() error {
		f.rep.PagesScanned++
		f.ts.blocksScanned.Add(1)
		return f.delay()
	}
	err = t.Heap.ScanLiveForRewrite(f.w.ctx, f.horizon, f.w.s, hook, func(_ page.TID, h heap.TupleHeader, data []byte) error {
		tid, err := nh.InsertRaw(h, data, f.ws)
		if err != nil {
			return err
		}
		kept++
		for i, ix := range t.Indexes {
			key, ok, err := row.KeyOf(t.Columns, data, ix.KeyColumns)
			if err != nil {
				return fmt.Errorf("key of index %q for tuple %v: %w", ix.Name, tid, err)
			}
			if !ok {
				continue // an all-NULL key has no entry
			}
			if err := sorters[i].add(btree.Entry{Key: key, TID: tid}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	n, err := nh.NBlocks()
	if err != nil {
		return err
	}
	if n > 0 {
		if err := nh.RecordFreeSpace(n-1, f.ws); err != nil {
			return err
		}
	}
	f.rep.TuplesRemaining = kept
	f.rep.TuplesRemoved = max(f.counted-kept, 0)
	f.ts.tuplesRemoved.Store(f.rep.TuplesRemoved)

	f.ts.setPhase(PhaseRebuildingIndexes)
	newIndexes := make(map[string]storage.RelFileNode, len(t.Indexes))
	for i, ix := range t.Indexes {
		rel, err := f.alloc()
		if err != nil {
			return err
		}
		next, err := sorters[i].iterator()
		if err != nil {
			return err
		}
		if _, err := btree.Build(t.BtreeDeps, rel, next, f.ws, f.delay); err != nil {
			return fmt.Errorf("index %q: %w", ix.Name, err)
		}
		sorters[i].close()
		pages, err := t.Storage.NBlocks(rel, storage.MainFork)
		if err != nil {
			return err
		}
		f.rep.Indexes = append(f.rep.Indexes, IndexReport{Name: ix.Name, Pages: int64(pages), EntriesRemaining: sorters[i].total})
		newIndexes[ix.Name] = rel
	}
	if err := f.w.ctx.Err(); err != nil {
		return err
	}
	// From here on the new files belong to Swap: it removes them itself
	// when the catalog never named them, and keeps them when the switch
	// may have reached the disk (the catalog there may name them).
	f.created = nil
	if err := t.Table.Swap(newHeap, newIndexes); err != nil {
		return err
	}
	f.rep.PagesRemaining = int64(n)
	f.rep.PagesRemoved = max(f.rep.PagesTotal-int64(n), 0)
	f.rep.RelfilenodesRemoved = 1 + len(t.Indexes)
	return nil
}

// checkSpace counts the old heap (exact figures for the report and the
// estimate) and refuses to start when the volume cannot hold the new
// heap, the new indexes, the WAL that writing them produces and, when
// Options.TempDir is set, the index sort runs.
func (f *full) checkSpace() error {
	t := f.t
	c, err := t.Heap.CountTuplesPaced(f.w.ctx, f.horizon, f.w.s, f.delay)
	if err != nil {
		return err
	}
	f.rep.PagesTotal = c.Pages
	f.ts.blocksTotal.Store(c.Pages)
	f.counted = c.Live + c.Dead + c.RecentlyDead + c.InsertInProgress + c.DeleteInProgress
	keptTuples := f.counted - c.Dead
	keptBytes := c.LiveBytes
	if c.RecentlyDead > 0 {
		keptBytes += c.DeadBytes // recently dead versions are kept; DeadBytes bounds them
	}
	heapBytes := float64(keptBytes+keptTuples*heapItemOverhead) * fillSlack
	indexBytes := float64(keptTuples*int64(len(t.Indexes))*indexItemBytes) * fillSlack / 0.9
	walBytes := heapBytes + indexBytes + float64(keptTuples*walPerRecord)
	// Sort runs in TempDir (the runner puts it on the data volume): at worst every kept
	// entry of every index, spilled at once.
	var sortBytes float64
	if f.run.opts.TempDir != "" {
		sortBytes = float64(keptTuples * int64(len(t.Indexes)) * (runHeader + 9)) // 9: an integer key (longer keys are not estimated)
	}
	need := uint64(heapBytes+indexBytes+walBytes+sortBytes) + uint64(f.run.opts.FullSpaceMargin) + 2*page.Size
	free, err := t.FS.FreeBytes(t.Dir)
	if err != nil {
		return fmt.Errorf("free space of %s: %w", t.Dir, err)
	}
	if free < need {
		return &NoSpaceError{Table: t.Name, Dir: t.Dir, Need: need, Free: free}
	}
	return nil
}

// delay is the FULL's delay point (every page of the count, the copy and the index
// builds): the worker's throttle and cancellation, then, when a WAL-rate limit is on, a
// flush of the log once more than walFlushAfter of it is unflushed. The limit paces the WAL
// the FULL inserts, but a standby is sent only flushed WAL, and a FULL commits nothing
// until its swap: its WAL became durable only when a ring eviction or another session's
// commit forced a flush, each time all of it at once (4.8 MB in one flush in
// TestVacuumFullWALLimitBoundsTheWALItInsertsAndFlushesInHeapCopyAndIndexRebuild, under
// an 8 MB/s limit), so the standby's lag jumped by that much whatever the limit.
// Flushing behind the throttle makes the WAL a standby receives follow the limit too, as
// PostgreSQL's WAL writer (wal_writer_flush_after = 1MB) does for its FULL.
func (f *full) delay() error {
	if err := f.w.delay(); err != nil {
		return err
	}
	if effectiveRate(f.ts.thr.Settings(), f.run.thr.Settings(), throttle.WALBytes) == 0 {
		return nil
	}
	log := f.t.Log
	if end := log.InsertLSN(); end-log.FlushedLSN() >= walFlushAfter {
		if err := log.Flush(end, f.w.u); err != nil {
			return fmt.Errorf("flush WAL behind the WAL-rate limit: %w", err)
		}
	}
	return nil
}

func (f *full) alloc() (storage.RelFileNode, error) {
	rel, err := f.t.Table.NewRelfilenode()
	if err != nil {
		return 0, err
	}
	f.created = append(f.created, rel)
	return rel, nil
}

// dropNew removes the files of an abandoned rewrite (Table.Abandon, which
// logs it for standbys). Their WAL records name relfilenodes the catalog
// never held; a file left behind by a crash here is an orphan the next
// Open removes.
func (f *full) dropNew() {
	if len(f.created) > 0 {
		f.t.Table.Abandon(f.created)
	}
	f.created = nil
}
