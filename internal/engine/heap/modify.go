package heap

import (
	"fmt"

	"github.com/vacuumops/vacuum-operator/internal/engine/buffer"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/txn"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// checkModifiable decides whether t may delete or update the tuple at
// (p, off), under the page's exclusive lock. It returns the item and its
// header with any hint bits folded in (the caller writes the header back).
//
// With newest (READ COMMITTED's re-check of a row's newest version), the
// tuple need not be visible to t's snapshot: its inserter must have
// committed (or be t).
func (r *Rel) checkModifiable(p page.Page, tid page.TID, t *txn.Txn, newest bool) ([]byte, TupleHeader, error) {
	item, h, _, err := tupleAt(p, tid.Off)
	if err != nil {
		return nil, h, fmt.Errorf("tuple %d/%d of relation %d: %w", tid.Block, tid.Off, r.node, err)
	}
	var vis bool
	var hints uint16
	if newest && h.Xmin != t.XID() {
		var st txn.Status
		st, hints = r.xminStatus(&h)
		vis = st == txn.Committed
	} else {
		vis, hints = r.Visible(&h, t.Snapshot())
	}
	h.Infomask |= hints
	if !vis {
		return nil, h, fmt.Errorf("tuple %d/%d of relation %d: %w", tid.Block, tid.Off, r.node, ErrNotFound)
	}
	if h.HasXmax() && !t.Snapshot().IsCurrent(h.Xmax) {
		st, hint := r.xmaxStatus(&h)
		h.Infomask |= hint
		if st != txn.Aborted {
			return nil, h, fmt.Errorf("tuple %d/%d of relation %d: %w", tid.Block, tid.Off, r.node,
				&ConcurrentUpdateError{Xmax: h.Xmax, InProgress: st == txn.InProgress, Updated: h.Infomask&Updated != 0, Next: h.Ctid})
		}
	}
	return item, h, nil
}

// ConcurrentUpdateError is ErrConcurrentUpdate with what a waiting
// writer needs: the transaction that changed the tuple (Xmax), whether it
// is still running, and, when it updated rather than deleted the tuple,
// the newer version's TID (Next).
type ConcurrentUpdateError struct {
	Xmax       txn.XID
	InProgress bool
	Updated    bool
	Next       page.TID
}

func (e *ConcurrentUpdateError) Error() string {
	state := "committed"
	if e.InProgress {
		state = "in progress"
	}
	return fmt.Sprintf("xmax %d %s: %v", e.Xmax, state, ErrConcurrentUpdate)
}

// Unwrap makes errors.Is(err, ErrConcurrentUpdate) true.
func (e *ConcurrentUpdateError) Unwrap() error { return ErrConcurrentUpdate }

// markDeleted sets the deleter on a tuple header: xmax = xid, xmax hints
// cleared, ctid = next (self for a delete).
func markDeleted(item []byte, h *TupleHeader, xid txn.XID, next page.TID, updated bool) {
	h.Xmax = xid
	h.Infomask &^= XmaxCommitted | XmaxInvalid | Updated
	if updated {
		h.Infomask |= Updated
	}
	h.Ctid = next
	writeHeader(item, h)
}

// Delete marks the tuple at tid deleted by t. ErrNotFound when t cannot
// see it; ErrConcurrentUpdate when another transaction got there first.
func (r *Rel) Delete(t *txn.Txn, tid page.TID, s *buffer.Strategy) error {
	return r.delete(t, tid, s, false)
}

// DeleteNewest is Delete of a version t's snapshot may not see (the
// newest of an update chain, committed after the snapshot): READ
// COMMITTED's delete after a wait.
func (r *Rel) DeleteNewest(t *txn.Txn, tid page.TID, s *buffer.Strategy) error {
	return r.delete(t, tid, s, true)
}

func (r *Rel) delete(t *txn.Txn, tid page.TID, s *buffer.Strategy, newest bool) error {
	// The caller found the row: its page's usage count already counts this access.
	b, err := r.readTID(tid, buffer.RevisitOf(s))
	if err != nil {
		return err
	}
	defer b.Release()
	b.Lock()
	defer b.Unlock()
	p := b.Page()
	item, h, err := r.checkModifiable(p, tid, t, newest)
	if err != nil {
		r.keepHints(b, p, tid.Off, &h, s)
		return err
	}
	t.MarkWritten()
	flags, err := r.clearAllVisible(tid.Block, p, s)
	if err != nil {
		return err
	}
	markDeleted(item, &h, t.XID(), tid, false)
	setPruneXID(p, t.XID())
	b.MarkDirty(s)
	rec := &wal.Record{Rmgr: wal.RmgrHeap, Info: InfoDelete, XID: uint64(t.XID()),
		Blocks: []wal.BlockRef{{Rel: r.node, Fork: storage.MainFork, Block: storage.BlockNumber(tid.Block),
			Page: p, Data: encodeDelete(tid.Off, flags)}}}
	return r.logChange(rec, s, p)
}

// keepHints writes hint bits gathered by a failed check (exclusive lock
// held): the page is otherwise unchanged, so it is a hint-only change.
func (r *Rel) keepHints(b *buffer.Buffer, p page.Page, off page.OffsetNumber, h *TupleHeader, s *buffer.Strategy) {
	item, cur, _, err := tupleAt(p, off)
	if err != nil || cur.Xmin != h.Xmin || cur.Xmax != h.Xmax {
		return
	}
	if setHints(item, &cur, h.Infomask&hintBits) {
		b.MarkDirtyHint(s)
	}
}

// readTID pins the block of tid, or returns ErrNotFound when the block is
// past the end of the relation.
func (r *Rel) readTID(tid page.TID, s *buffer.Strategy) (*buffer.Buffer, error) {
	n, err := r.NBlocks()
	if err != nil {
		return nil, err
	}
	if tid.Block >= n || tid.Off == page.InvalidOffset {
		return nil, fmt.Errorf("tuple %d/%d of relation %d (%d blocks): %w", tid.Block, tid.Off, r.node, n, ErrNotFound)
	}
	return r.read(tid.Block, s)
}

// Update replaces the tuple at tid with a new version holding data,
// created by t, and returns the new version's TID. The old version gets
// xmax = t and a ctid pointing at the new one; both changes are in one WAL
// record. Errors as Delete, plus ErrTupleTooLarge.
func (r *Rel) Update(t *txn.Txn, tid page.TID, data []byte, s *buffer.Strategy) (page.TID, error) {
	return r.update(t, tid, data, s, false)
}

// UpdateNewest is Update of a version t's snapshot may not see (see
// DeleteNewest).
func (r *Rel) UpdateNewest(t *txn.Txn, tid page.TID, data []byte, s *buffer.Strategy) (page.TID, error) {
	return r.update(t, tid, data, s, true)
}

func (r *Rel) update(t *txn.Txn, tid page.TID, data []byte, s *buffer.Strategy, newest bool) (page.TID, error) {
	if len(data) > MaxTupleData {
		return page.TID{}, fmt.Errorf("update with a %d-byte row in relation %d (max %d): %w", len(data), r.node, MaxTupleData, ErrTupleTooLarge)
	}
	tup := EncodeTuple(TupleHeader{Xmin: t.XID(), Infomask: XmaxInvalid}, data)
	// The caller found the row: its page's usage count already counts this access (the
	// page of the new version, below, is a new access and counts).
	old, err := r.readTID(tid, buffer.RevisitOf(s))
	if err != nil {
		return page.TID{}, err
	}
	defer old.Release()
	old.Lock()
	p := old.Page()
	item, h, err := r.checkModifiable(p, tid, t, newest)
	if err != nil {
		r.keepHints(old, p, tid.Off, &h, s)
		old.Unlock()
		return page.TID{}, err
	}
	t.MarkWritten()
	if itemsFit(p, len(tup)) {
		defer old.Unlock()
		return r.updateSamePage(old, tid, item, &h, tup, t.XID(), s)
	}
	old.Unlock()
	for {
		nb, err := r.candidate(len(tup), int64(tid.Block), s)
		if err != nil {
			return page.TID{}, err
		}
		newTID, retry, err := r.updateTwoPages(old, nb, tid, tup, t, s, newest)
		nb.Release()
		if !retry {
			return newTID, err
		}
	}
}

func (r *Rel) updateSamePage(b *buffer.Buffer, tid page.TID, item []byte, h *TupleHeader, tup []byte, xid txn.XID, s *buffer.Strategy) (page.TID, error) {
	p := b.Page()
	flags, err := r.clearAllVisible(tid.Block, p, s)
	if err != nil {
		return page.TID{}, err
	}
	writeHeader(item, h) // hints found by the check
	newOff, err := placeTuple(p, tid.Block, tup, 0)
	if err != nil {
		return page.TID{}, fmt.Errorf("update in block %d of relation %d: %w", tid.Block, r.node, err)
	}
	newTID := page.TID{Block: tid.Block, Off: newOff}
	markDeleted(p.ItemData(tid.Off), h, xid, newTID, true)
	setPruneXID(p, xid)
	b.MarkDirty(s)
	rec := &wal.Record{Rmgr: wal.RmgrHeap, Info: InfoUpdate, XID: uint64(xid),
		Blocks: []wal.BlockRef{{Rel: r.node, Fork: storage.MainFork, Block: storage.BlockNumber(tid.Block),
			Page: p, Data: encodeUpdateNew(newOff, flags|flagSameBlock, tid.Off, p.ItemData(newOff))}}}
	if err := r.logChange(rec, s, p); err != nil {
		return page.TID{}, err
	}
	return newTID, nil
}

// updateTwoPages moves the new version to nb's page. Both pages are locked
// in block order; the old tuple is re-checked since its lock was dropped.
// retry is true when nb turned out to have no room.
func (r *Rel) updateTwoPages(old, nb *buffer.Buffer, tid page.TID, tup []byte, t *txn.Txn, s *buffer.Strategy, newest bool) (page.TID, bool, error) {
	newBlk := uint32(nb.Tag().Block)
	if newBlk < tid.Block {
		nb.Lock()
		old.Lock()
	} else {
		old.Lock()
		nb.Lock()
	}
	defer old.Unlock()
	defer nb.Unlock()
	op, np := old.Page(), nb.Page()
	item, h, err := r.checkModifiable(op, tid, t, newest)
	if err != nil {
		r.keepHints(old, op, tid.Off, &h, s)
		return page.TID{}, false, err
	}
	if !itemsFit(np, len(tup)) {
		free := np.FreeSpace()
		if err := r.fsm.Record(storage.BlockNumber(newBlk), free, s); err != nil {
			return page.TID{}, false, err
		}
		return page.TID{}, true, nil
	}
	var newFlags uint8
	if np.IsNew() {
		page.Init(np, 0)
		newFlags |= flagInitPage
	}
	cleared, err := r.clearAllVisible(newBlk, np, s)
	if err != nil {
		return page.TID{}, false, err
	}
	newFlags |= cleared
	oldFlags, err := r.clearAllVisible(tid.Block, op, s)
	if err != nil {
		return page.TID{}, false, err
	}
	newOff, err := placeTuple(np, newBlk, tup, 0)
	if err != nil {
		return page.TID{}, false, fmt.Errorf("update into block %d of relation %d: %w", newBlk, r.node, err)
	}
	newTID := page.TID{Block: newBlk, Off: newOff}
	markDeleted(item, &h, t.XID(), newTID, true)
	setPruneXID(op, t.XID())
	nb.MarkDirty(s)
	old.MarkDirty(s)
	rec := &wal.Record{Rmgr: wal.RmgrHeap, Info: InfoUpdate, XID: uint64(t.XID()),
		Blocks: []wal.BlockRef{
			{Rel: r.node, Fork: storage.MainFork, Block: storage.BlockNumber(newBlk), Page: np,
				WillInit: newFlags&flagInitPage != 0, Data: encodeUpdateNew(newOff, newFlags, tid.Off, np.ItemData(newOff))},
			{Rel: r.node, Fork: storage.MainFork, Block: storage.BlockNumber(tid.Block), Page: op,
				Data: encodeDelete(tid.Off, oldFlags)},
		}}
	if err := r.logChange(rec, s, np, op); err != nil {
		return page.TID{}, false, err
	}
	r.target.Store(int64(newBlk))
	return newTID, false, nil
}
