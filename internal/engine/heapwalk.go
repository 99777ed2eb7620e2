package engine

import (
	"context"
	"fmt"

	"github.com/vacuumops/vacuum-operator/internal/engine/buffer"
	"github.com/vacuumops/vacuum-operator/internal/engine/heap"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/txn"
)

// heapTuple is one normal tuple found by walkHeap, classified against the
// walk's horizon.
type heapTuple struct {
	TID    page.TID
	Header heap.TupleHeader
	Data   []byte // a copy
	Status heap.VacuumStatus
}

// heapPage is what walkHeap reports per page: its line pointers' states
// and its normal tuples.
type heapPage struct {
	Block      uint32
	AllVisible bool // page header flag
	Items      []page.ItemID
	Tuples     []heapTuple
	Bad        []string // tuples that do not decode
}

// walkHeap reads every page of heap relation rel through the pool (share
// lock, copies taken) and calls fn after releasing the page, so fn may do
// anything, including index insertions.
func (db *DB) walkHeap(ctx context.Context, rel storage.RelFileNode, horizon txn.XID, s *buffer.Strategy, fn func(*heapPage) error) error {
	h := db.heapRel(rel)
	n, err := h.NBlocks()
	if err != nil {
		return err
	}
	for blk := uint32(0); blk < n; blk++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		hp, err := db.readHeapPage(h, blk, horizon, s)
		if err != nil {
			return err
		}
		if err := fn(hp); err != nil {
			return err
		}
	}
	return nil
}

func (db *DB) readHeapPage(h *heap.Rel, blk uint32, horizon txn.XID, s *buffer.Strategy) (*heapPage, error) {
	b, err := db.pool.Read(buffer.Tag{Rel: h.Node(), Fork: storage.MainFork, Block: storage.BlockNumber(blk)}, s)
	if err != nil {
		return nil, fmt.Errorf("read block %d of %s: %w", blk, db.st.Path(h.Node(), storage.MainFork), err)
	}
	defer b.Release()
	b.RLock()
	defer b.RUnlock()
	p := b.Page()
	hp := &heapPage{Block: blk, AllVisible: p.Flags()&page.FlagAllVisible != 0}
	if p.IsNew() {
		return hp, nil
	}
	n := p.NumItems()
	hp.Items = make([]page.ItemID, n+1)
	for off := 1; off <= n; off++ {
		id := p.Item(page.OffsetNumber(off))
		hp.Items[off] = id
		if id.State != page.LPNormal {
			continue
		}
		hdr, data, err := heap.DecodeTuple(p.ItemData(page.OffsetNumber(off)))
		if err != nil {
			hp.Bad = append(hp.Bad, fmt.Sprintf("tuple %d: %v", off, err))
			continue
		}
		st, _ := h.SatisfiesVacuum(&hdr, horizon)
		hp.Tuples = append(hp.Tuples, heapTuple{TID: page.TID{Block: blk, Off: page.OffsetNumber(off)},
			Header: hdr, Data: append([]byte(nil), data...), Status: st})
	}
	return hp, nil
}
