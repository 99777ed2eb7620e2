package heap

import (
	"context"
	"fmt"

	"github.com/vacuumops/vacuum-operator/internal/engine/buffer"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/txn"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// PruneResult is what PruneBlock did and found on one page.
type PruneResult struct {
	// TuplesRemoved counts tuples this call turned into LP_DEAD.
	TuplesRemoved int
	// TuplesRemaining counts tuples left on the page (live, recently
	// dead, in progress).
	TuplesRemaining int
	// RecentlyDead counts remaining tuples deleted above the horizon.
	RecentlyDead int
	// DeadOffsets lists every LP_DEAD slot on the page after pruning
	// (new and older ones): index entries pointing at them must be removed
	// before VacuumBlock frees them.
	DeadOffsets []page.OffsetNumber
	// AllVisible: every remaining tuple is visible to all and no LP_DEAD
	// slot remains (the page may get the VM bit).
	AllVisible bool
	// FreeSpace is the page's free space after pruning.
	FreeSpace int
	// New: the page was never initialised (extended, then a crash).
	New bool
	// WALLogged: the page changed and a prune record was written.
	WALLogged bool
}

// pageScan is the classification of one page's items against a horizon.
type pageScan struct {
	newDead    []page.OffsetNumber
	oldDead    []page.OffsetNumber
	remaining  int
	recent     int
	allVisible bool // no LP_DEAD slot and every remaining tuple visible to all
	// tuplesVisible: every tuple that is not dead is visible to all (dead
	// tuples and LP_DEAD slots aside).
	tuplesVisible bool
	pruneXID      txn.XID
	hinted        bool
}

// classifyPage classifies every item (exclusive lock held) and writes the
// hint bits it learns directly into the page.
func (r *Rel) classifyPage(p page.Page, blk uint32, horizon txn.XID) (pageScan, error) {
	ps := pageScan{allVisible: true, tuplesVisible: true}
	n := p.NumItems()
	for i := 1; i <= n; i++ {
		off := page.OffsetNumber(i)
		switch p.Item(off).State {
		case page.LPDead:
			ps.oldDead = append(ps.oldDead, off)
			ps.allVisible = false
			continue
		case page.LPNormal:
		default:
			continue
		}
		item, h, _, err := tupleAt(p, off)
		if err != nil {
			return ps, fmt.Errorf("tuple %d/%d of relation %d: %w", blk, off, r.node, err)
		}
		st, hints := r.SatisfiesVacuum(&h, horizon)
		if setHints(item, &h, hints) {
			ps.hinted = true
		}
		switch st {
		case Dead:
			ps.newDead = append(ps.newDead, off)
			continue
		case RecentlyDead, DeleteInProgress:
			if st == RecentlyDead {
				ps.recent++
			}
			if ps.pruneXID == 0 || h.Xmax < ps.pruneXID {
				ps.pruneXID = h.Xmax
			}
		}
		ps.remaining++
		if !visibleToAll(&h, st, horizon) {
			ps.allVisible = false
			ps.tuplesVisible = false
		}
	}
	return ps, nil
}

// PruneBlock removes the tuples of block blk that are dead for every
// snapshot (per horizon): their slots become LP_DEAD, their storage is
// reclaimed by compacting the page, and one prune record is logged.
// Recently dead and in-progress tuples stay. It is idempotent: a page with
// nothing to prune is not changed (except for hint bits).
func (r *Rel) PruneBlock(blk uint32, horizon txn.XID, s *buffer.Strategy) (PruneResult, error) {
	b, err := r.read(blk, s)
	if err != nil {
		return PruneResult{}, err
	}
	defer b.Release()
	b.Lock()
	defer b.Unlock()
	p := b.Page()
	if p.IsNew() {
		return PruneResult{New: true, FreeSpace: MaxItemSize}, nil
	}
	ps, err := r.classifyPage(p, blk, horizon)
	if err != nil {
		return PruneResult{}, err
	}
	res := PruneResult{
		TuplesRemoved:   len(ps.newDead),
		TuplesRemaining: ps.remaining,
		RecentlyDead:    ps.recent,
		AllVisible:      ps.allVisible && len(ps.newDead) == 0,
	}
	if len(ps.newDead) > 0 {
		for _, off := range ps.newDead {
			p.SetDead(off)
		}
		p.Compact()
		p.SetPruneXID(uint64(ps.pruneXID))
		b.MarkDirty(s)
		rec := &wal.Record{Rmgr: wal.RmgrHeap, Info: InfoPrune,
			Blocks: []wal.BlockRef{{Rel: r.node, Fork: storage.MainFork, Block: storage.BlockNumber(blk),
				Page: p, Data: encodePrune(uint64(ps.pruneXID), ps.newDead)}}}
		if err := r.logChange(rec, s, p); err != nil {
			return PruneResult{}, err
		}
		res.WALLogged = true
	} else if ps.hinted {
		b.MarkDirtyHint(s)
	}
	for i := 1; i <= p.NumItems(); i++ {
		if p.Item(page.OffsetNumber(i)).State == page.LPDead {
			res.DeadOffsets = append(res.DeadOffsets, page.OffsetNumber(i))
		}
	}
	res.FreeSpace = p.FreeSpace()
	return res, nil
}

// VacuumResult is what VacuumBlock or ReclaimBlock did.
type VacuumResult struct {
	Freed         int  // slots made LP_UNUSED
	TuplesRemoved int  // of those, dead tuples (ReclaimBlock only; the rest were LP_DEAD)
	FreeSpace     int  // page free space afterwards (also recorded in the FSM)
	AllVisible    bool // the page is now marked all-visible (flag + VM bit)
}

// VacuumBlock makes the given LP_DEAD slots of block blk LP_UNUSED (their
// index entries are gone), compacts the page, logs one vacuum record,
// records the free space in the FSM, and marks the page all-visible when
// every remaining tuple is visible to all per horizon. Offsets that are not
// LP_DEAD are ignored. With no offsets it only does the last two steps, so
// lazy vacuum can call it for every page it pruned.
func (r *Rel) VacuumBlock(blk uint32, offs []page.OffsetNumber, horizon txn.XID, s *buffer.Strategy) (VacuumResult, error) {
	return r.vacuumPage(blk, offs, horizon, s, false, nil, nil)
}

// SetAllVisible marks block blk all-visible (page flag and VM bit,
// WAL-logged) if, checked under its lock, every tuple on it is visible to
// all per horizon and no LP_DEAD slot remains. It reports whether the page
// is all-visible afterwards.
func (r *Rel) SetAllVisible(blk uint32, horizon txn.XID, s *buffer.Strategy) (bool, error) {
	b, err := r.read(blk, s)
	if err != nil {
		return false, err
	}
	defer b.Release()
	b.Lock()
	defer b.Unlock()
	if b.Page().IsNew() {
		return false, nil
	}
	ps, err := r.classifyPage(b.Page(), blk, horizon)
	if err != nil {
		return false, err
	}
	return r.finishAllVisibleLocked(b, blk, &ps, s, nil)
}

// RecordFreeSpace records block blk's current free space in the FSM.
func (r *Rel) RecordFreeSpace(blk uint32, s *buffer.Strategy) error {
	b, err := r.read(blk, s)
	if err != nil {
		return err
	}
	b.RLock()
	free := MaxItemSize
	if !b.Page().IsNew() {
		free = b.Page().FreeSpace()
	}
	b.RUnlock()
	b.Release()
	return r.fsm.Record(storage.BlockNumber(blk), free, s.Plain())
}

// RebuildFSM records every page's free space (after a crash lost FSM
// updates, or after VACUUM FULL). The context is checked once per page.
func (r *Rel) RebuildFSM(ctx context.Context, s *buffer.Strategy) error {
	n, err := r.NBlocks()
	if err != nil {
		return err
	}
	for blk := uint32(0); blk < n; blk++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := r.RecordFreeSpace(blk, s); err != nil {
			return err
		}
	}
	r.fsm.Reset()
	return nil
}
