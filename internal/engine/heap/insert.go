package heap

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/vacuumops/vacuum-operator/internal/engine/buffer"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/txn"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// maxCandidates bounds how many FSM answers one insert tries before it
// extends the relation (the FSM is a hint and may be stale).
const maxCandidates = 8

// Insert stores data as a new tuple version created by t and returns its
// TID. The page is chosen by the last insert's target, then the free space
// map, else the relation is extended. Rows over MaxTupleData bytes fail
// with ErrTupleTooLarge.
func (r *Rel) Insert(t *txn.Txn, data []byte, s *buffer.Strategy) (page.TID, error) {
	if len(data) > MaxTupleData {
		return page.TID{}, fmt.Errorf("insert %d-byte row into relation %d (max %d): %w", len(data), r.node, MaxTupleData, ErrTupleTooLarge)
	}
	t.MarkWritten()
	tup := EncodeTuple(TupleHeader{Xmin: t.XID(), Infomask: XmaxInvalid}, data)
	return r.insertTuple(tup, t.XID(), s)
}

// InsertRaw stores a tuple with the given header as it is (xmin, xmax and
// hint bits kept; the ctid is reset to the new TID and Updated cleared).
// VACUUM FULL uses it to fill the new relation; the record carries no xid.
func (r *Rel) InsertRaw(h TupleHeader, data []byte, s *buffer.Strategy) (page.TID, error) {
	if len(data) > MaxTupleData {
		return page.TID{}, fmt.Errorf("insert %d-byte row into relation %d (max %d): %w", len(data), r.node, MaxTupleData, ErrTupleTooLarge)
	}
	h.Infomask &^= Updated
	if h.Xmax == txn.InvalidXID {
		h.Infomask = h.Infomask&^XmaxCommitted | XmaxInvalid
	}
	tup := EncodeTuple(h, data)
	if _, _, err := DecodeTuple(tup); err != nil {
		return page.TID{}, fmt.Errorf("insert raw tuple into relation %d: %w", r.node, err)
	}
	return r.insertTuple(tup, txn.InvalidXID, s)
}

// insertTuple places tup on a page with room and logs it.
func (r *Rel) insertTuple(tup []byte, xid txn.XID, s *buffer.Strategy) (page.TID, error) {
	for {
		b, err := r.candidate(len(tup), -1, s)
		if err != nil {
			return page.TID{}, err
		}
		b.Lock()
		p := b.Page()
		if !itemsFit(p, len(tup)) {
			free := p.FreeSpace()
			b.Unlock()
			b.Release()
			if err := r.fsm.Record(b.Tag().Block, free, s); err != nil {
				return page.TID{}, err
			}
			continue
		}
		tid, err := r.placeAndLog(b, tup, xid, s)
		b.Unlock()
		b.Release()
		if err == nil {
			r.target.Store(int64(tid.Block))
		}
		return tid, err
	}
}

// placeAndLog adds tup to b's page (exclusively locked, with room) and
// WAL-logs the insert.
func (r *Rel) placeAndLog(b *buffer.Buffer, tup []byte, xid txn.XID, s *buffer.Strategy) (page.TID, error) {
	blk := uint32(b.Tag().Block)
	p := b.Page()
	var flags uint8
	if p.IsNew() {
		page.Init(p, 0)
		flags |= flagInitPage
	}
	cleared, err := r.clearAllVisible(blk, p, s)
	if err != nil {
		return page.TID{}, err
	}
	flags |= cleared
	off, err := placeTuple(p, blk, tup, 0)
	if err != nil {
		return page.TID{}, fmt.Errorf("insert into block %d of relation %d: %w", blk, r.node, err)
	}
	b.MarkDirty(s)
	rec := &wal.Record{Rmgr: wal.RmgrHeap, Info: InfoInsert, XID: uint64(xid),
		Blocks: []wal.BlockRef{{Rel: r.node, Fork: storage.MainFork, Block: storage.BlockNumber(blk),
			Page: p, WillInit: flags&flagInitPage != 0, Data: encodeInsert(off, flags, p.ItemData(off))}}}
	if err := r.logChange(rec, s, p); err != nil {
		return page.TID{}, err
	}
	return page.TID{Block: blk, Off: off}, nil
}

// placeTuple adds tup at off (0 = any free slot) and points its ctid at
// itself.
func placeTuple(p page.Page, blk uint32, tup []byte, off page.OffsetNumber) (page.OffsetNumber, error) {
	off, err := p.AddItem(tup, off)
	if err != nil {
		return 0, err
	}
	item := p.ItemData(off)
	binary.LittleEndian.PutUint32(item[offCtidBlk:], blk)
	binary.LittleEndian.PutUint16(item[offCtidOff:], uint16(off))
	return off, nil
}

// candidate returns a pinned, unlocked buffer that had room for an item
// of n bytes when it was looked at (the caller re-checks under its lock),
// never block exclude (-1 for none). It tries the insert target, then the
// FSM, then extends the relation.
func (r *Rel) candidate(n int, exclude int64, s *buffer.Strategy) (*buffer.Buffer, error) {
	need := (n + page.MaxAlign - 1) &^ (page.MaxAlign - 1)
	for try := 0; try < maxCandidates; try++ {
		blk := r.target.Load()
		fromTarget := blk >= 0 && blk != exclude
		if !fromTarget {
			fb, ok, err := r.fsm.Search(need, s)
			if err != nil {
				return nil, err
			}
			if !ok {
				break
			}
			blk = int64(fb)
		}
		stale := blk == exclude
		if !fromTarget { // the FSM may be stale; the target is reset by Truncate
			nblocks, err := r.NBlocks()
			if err != nil {
				return nil, err
			}
			stale = stale || blk >= int64(nblocks)
		}
		if stale {
			// Stale hint (truncated relation) or the page being updated.
			r.target.CompareAndSwap(blk, -1)
			if !fromTarget {
				if err := r.fsm.Record(storage.BlockNumber(blk), 0, s); err != nil {
					return nil, err
				}
			}
			continue
		}
		b, err := r.read(uint32(blk), s)
		if fromTarget && errors.Is(err, storage.ErrBeyondEnd) {
			r.target.CompareAndSwap(blk, -1) // the relation was truncated under the hint
			continue
		}
		if err != nil {
			return nil, err
		}
		b.RLock()
		fits, free := itemsFit(b.Page(), n), b.Page().FreeSpace()
		b.RUnlock()
		if fits {
			return b, nil
		}
		b.Release()
		if fromTarget {
			r.target.CompareAndSwap(blk, -1)
		}
		if err := r.fsm.Record(storage.BlockNumber(blk), free, s); err != nil {
			return nil, err
		}
	}
	return r.extend(s)
}

// extend appends a zeroed page and returns it pinned and unlocked.
func (r *Rel) extend(s *buffer.Strategy) (*buffer.Buffer, error) {
	r.extendMu.Lock()
	b, err := r.d.Pool.Extend(r.node, storage.MainFork, s)
	r.extendMu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("extend heap relation %d: %w", r.node, err)
	}
	b.Unlock()
	r.target.Store(int64(b.Tag().Block))
	return b, nil
}
