package heap

import (
	"slices"

	"github.com/vacuumops/vacuum-operator/internal/engine/buffer"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/txn"
	"github.com/vacuumops/vacuum-operator/internal/engine/vm"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// ScanResult is what ScanForVacuum found on one page.
type ScanResult struct {
	// DeadOffsets lists, ascending, every slot that must lose its index
	// entries before ReclaimBlock may free it: LP_DEAD pointers and tuples
	// dead for the horizon (which still hold their storage).
	DeadOffsets []page.OffsetNumber
	// DeadTuples counts the dead tuples among DeadOffsets (the others are
	// LP_DEAD pointers left by an earlier prune).
	DeadTuples int
	// TuplesRemaining counts tuples that are not dead (live, recently
	// dead, in progress).
	TuplesRemaining int
	// RecentlyDead counts remaining tuples deleted above the horizon.
	RecentlyDead int
	// AllVisible: the page has no dead slot and every tuple is visible to
	// all; it is now marked all-visible (flag and VM bit).
	AllVisible bool
	// FreeSpace is the page's free space (MaxItemSize for a new page).
	FreeSpace int
	// New: the page was never initialised (extended, then a crash).
	New bool
	// Reclaim is what ReclaimBlockAfterScan needs to free DeadOffsets
	// without classifying the page again (set when DeadOffsets is not
	// empty).
	Reclaim ReclaimHint
}

// ReclaimHint is what lazy vacuum's first pass learnt of a page with dead
// slots, so that the second pass can skip classifying every tuple again
// when the page has not changed since.
type ReclaimHint struct {
	// LSN is the page's LSN when the first pass classified it. Every
	// change of a tuple or line pointer is WAL-logged and moves it; only
	// hint bits change a page without moving it.
	LSN uint64
	// TuplesVisible: every tuple that was not dead was visible to all per
	// the first pass's horizon.
	TuplesVisible bool
}

// ScanForVacuum is lazy vacuum's first pass over block blk. A page with
// dead slots is left unchanged: their offsets are returned for the index
// pass, after which ReclaimBlock frees them and their storage in one
// WAL-logged step, so the page is written once per vacuum instead of once
// for pruning and again for freeing. A page without dead slots is
// finished here: its free space is recorded in the FSM and, when every
// tuple is visible to all per horizon, it is marked all-visible.
//
// Hint bits learnt while classifying are written into the page; on a page
// with dead slots the buffer is not marked dirty for them (they are
// re-derived and logged with ReclaimBlock's change; if the buffer is
// evicted clean meanwhile they are simply lost, which is harmless).
func (r *Rel) ScanForVacuum(blk uint32, horizon txn.XID, s *buffer.Strategy) (ScanResult, error) {
	return r.ScanForVacuumPinned(blk, horizon, s, nil)
}

// ScanForVacuumPinned is ScanForVacuum reading and setting the VM bit through vmr, which
// keeps the VM page pinned from one block to the next (nil: ScanForVacuum).
func (r *Rel) ScanForVacuumPinned(blk uint32, horizon txn.XID, s *buffer.Strategy, vmr *vm.Reader) (ScanResult, error) {
	b, err := r.read(blk, s)
	if err != nil {
		return ScanResult{}, err
	}
	defer b.Release()
	b.Lock()
	p := b.Page()
	if p.IsNew() {
		b.Unlock()
		res := ScanResult{New: true, FreeSpace: MaxItemSize}
		return res, r.fsm.Record(storage.BlockNumber(blk), res.FreeSpace, s.Plain())
	}
	ps, err := r.classifyPage(p, blk, horizon)
	if err != nil {
		b.Unlock()
		return ScanResult{}, err
	}
	res := ScanResult{
		DeadTuples:      len(ps.newDead),
		TuplesRemaining: ps.remaining,
		RecentlyDead:    ps.recent,
	}
	if len(ps.newDead)+len(ps.oldDead) > 0 {
		res.DeadOffsets = mergeOffsets(ps.oldDead, ps.newDead)
		res.Reclaim = ReclaimHint{LSN: p.LSN(), TuplesVisible: ps.tuplesVisible}
		res.FreeSpace = p.FreeSpace()
		b.Unlock()
		return res, nil
	}
	res.AllVisible, err = r.finishAllVisibleLocked(b, blk, &ps, s, vmr)
	res.FreeSpace = p.FreeSpace()
	b.Unlock()
	if err != nil {
		return res, err
	}
	return res, r.fsm.Record(storage.BlockNumber(blk), res.FreeSpace, s.Plain())
}

// mergeOffsets merges two ascending offset lists into a new one.
func mergeOffsets(a, b []page.OffsetNumber) []page.OffsetNumber {
	if len(a) == 0 {
		return b
	}
	if len(b) == 0 {
		return a
	}
	out := make([]page.OffsetNumber, 0, len(a)+len(b))
	out = append(append(out, a...), b...)
	slices.Sort(out)
	return out
}

// ReclaimBlock is lazy vacuum's second pass over block blk, once every
// index of the table dropped its entries for the given slots: each offset
// that is an LP_DEAD pointer, or a tuple dead for horizon (re-checked
// here), becomes LP_UNUSED and the page is compacted, all in one vacuum
// record, which also sets the page all-visible (flag and VM bit) when it
// qualifies afterwards (InfoVacuumVisible); then the free space is
// recorded. Offsets that are neither are
// ignored.
func (r *Rel) ReclaimBlock(blk uint32, offs []page.OffsetNumber, horizon txn.XID, s *buffer.Strategy) (VacuumResult, error) {
	return r.vacuumPage(blk, offs, horizon, s, true, nil, nil)
}

// ReclaimBlockPinned is ReclaimBlock reading and setting the VM bit through vmr, which
// keeps the VM page pinned from one block to the next (nil: ReclaimBlock).
func (r *Rel) ReclaimBlockPinned(blk uint32, offs []page.OffsetNumber, horizon txn.XID, s *buffer.Strategy, vmr *vm.Reader) (VacuumResult, error) {
	return r.vacuumPage(blk, offs, horizon, s, true, vmr, nil)
}

// ReclaimBlockAfterScan is ReclaimBlockPinned for offs exactly as
// ScanForVacuumPinned returned them with hint, under the same horizon: when
// the page's LSN is still hint.LSN the page has not changed since that
// scan, so it is not classified again. Every slot of offs is then still
// dead: a tuple dead for the horizon stays dead (its deleter committed below
// the horizon, which does not move back), and only lazy vacuum, which holds
// the table's vacuum lock, frees a slot, so none can have been reused; an
// LP_DEAD pointer stays LP_DEAD. The remaining tuples are visible to all
// exactly when hint.TuplesVisible says so. Hint bits the scan set on the
// page ride along with the vacuum record if the buffer kept them; ones an
// eviction dropped are not set again (the page becomes all-visible when
// hint.TuplesVisible, and readers then need none). A page whose LSN moved
// is classified again, as ReclaimBlockPinned does.
func (r *Rel) ReclaimBlockAfterScan(blk uint32, offs []page.OffsetNumber, hint ReclaimHint, horizon txn.XID, s *buffer.Strategy, vmr *vm.Reader) (VacuumResult, error) {
	return r.vacuumPage(blk, offs, horizon, s, true, vmr, &hint)
}

// classifyUnchanged is the classification of a page ReclaimBlockAfterScan
// found unchanged since the first pass: offs's dead tuples and LP_DEAD
// pointers, the rest as hint says.
func classifyUnchanged(p page.Page, offs []page.OffsetNumber, hint *ReclaimHint) pageScan {
	ps := pageScan{allVisible: hint.TuplesVisible, tuplesVisible: hint.TuplesVisible}
	for _, off := range offs {
		switch p.Item(off).State {
		case page.LPDead:
			ps.oldDead = append(ps.oldDead, off)
		case page.LPNormal:
			ps.newDead = append(ps.newDead, off)
		}
	}
	return ps
}

// vacuumPage frees the given slots of block blk: LP_DEAD ones, and with
// tuples set also tuples dead for horizon; then it sets the page
// all-visible when it qualifies and records its free space. With hint
// (tuples set) and the page's LSN still hint.LSN, the first pass's
// classification stands (ReclaimBlockAfterScan).
func (r *Rel) vacuumPage(blk uint32, offs []page.OffsetNumber, horizon txn.XID, s *buffer.Strategy, tuples bool, vmr *vm.Reader, hint *ReclaimHint) (VacuumResult, error) {
	b, err := r.read(blk, s)
	if err != nil {
		return VacuumResult{}, err
	}
	defer b.Release()
	b.Lock()
	p := b.Page()
	res := VacuumResult{FreeSpace: MaxItemSize} // a new page
	if p.IsNew() {
		b.Unlock()
		return res, r.fsm.Record(storage.BlockNumber(blk), res.FreeSpace, s.Plain())
	}
	var ps pageScan
	if tuples && hint != nil && p.LSN() == hint.LSN {
		ps = classifyUnchanged(p, offs, hint)
	} else if ps, err = r.classifyPage(p, blk, horizon); err != nil {
		b.Unlock()
		return res, err
	}
	var freed []page.OffsetNumber
	for _, off := range offs {
		switch p.Item(off).State {
		case page.LPDead:
		case page.LPNormal:
			if !tuples {
				continue
			}
			if _, dead := slices.BinarySearch(ps.newDead, off); !dead {
				continue
			}
			res.TuplesRemoved++
		default:
			continue
		}
		p.SetUnused(off)
		freed = append(freed, off)
	}
	res.Freed = len(freed)
	if len(freed) == len(ps.oldDead)+len(ps.newDead) {
		// Nothing dead is left: the classification stands for the page.
		ps.allVisible = ps.tuplesVisible
		ps.oldDead, ps.newDead = nil, nil
	} else {
		ps.allVisible = false
	}
	if len(freed) > 0 {
		ps.hinted = false // the hints ride along with the logged change
		p.Compact()
		b.MarkDirty(s)
		rec := &wal.Record{Rmgr: wal.RmgrHeap, Info: InfoVacuum,
			Blocks: []wal.BlockRef{{Rel: r.node, Fork: storage.MainFork, Block: storage.BlockNumber(blk),
				Page: p, Data: encodeOffsets(nil, freed)}}}
		if ps.allVisible {
			// Free the slots and set the VM bit in one record.
			rec.Info = InfoVacuumVisible
			err = r.vm.SetPinned(storage.BlockNumber(blk), b, s.Plain(), rec, vmr)
			res.AllVisible = err == nil
		} else {
			err = r.logChange(rec, s, p)
		}
		if err != nil {
			b.Unlock()
			return res, err
		}
	}
	if !res.AllVisible {
		res.AllVisible, err = r.finishAllVisibleLocked(b, blk, &ps, s, vmr)
	}
	res.FreeSpace = p.FreeSpace()
	b.Unlock()
	if err != nil {
		return res, err
	}
	return res, r.fsm.Record(storage.BlockNumber(blk), res.FreeSpace, s.Plain())
}

// finishAllVisibleLocked marks the page all-visible (flag and VM bit,
// WAL-logged) when the classification ps says it qualifies, and otherwise
// marks hint bits dirty when ps learnt any. The caller holds b's exclusive
// lock; ps must describe the page as it is now.
func (r *Rel) finishAllVisibleLocked(b *buffer.Buffer, blk uint32, ps *pageScan, s *buffer.Strategy, vmr *vm.Reader) (bool, error) {
	p := b.Page()
	if !ps.allVisible || len(ps.newDead) > 0 {
		if ps.hinted {
			b.MarkDirtyHint(s)
		}
		return false, nil
	}
	var set bool
	var err error
	if vmr != nil {
		set, err = vmr.IsSet(storage.BlockNumber(blk))
	} else {
		set, err = r.vm.IsSet(storage.BlockNumber(blk), s.Plain())
	}
	if err != nil {
		return false, err
	}
	if set && p.Flags()&page.FlagAllVisible != 0 {
		if ps.hinted {
			b.MarkDirtyHint(s)
		}
		return true, nil
	}
	// vm.Set logs this page as the record's second block (imaging it when
	// needed), so hint bits set while classifying ride along with it.
	if err := r.vm.SetPinned(storage.BlockNumber(blk), b, s.Plain(), nil, vmr); err != nil {
		return false, err
	}
	return true, nil
}
