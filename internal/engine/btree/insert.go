package btree

import (
	"errors"
	"fmt"

	"github.com/vacuumops/vacuum-operator/internal/engine/buffer"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
)

// rightmostFill is the share of items a split of the rightmost page keeps
// on the left when the new entry goes at its end (ascending inserts then
// leave pages 90 % full, as PostgreSQL's fillfactor does).
const rightmostFill = 90

// Insert adds the entry (key, tid). It returns ErrDuplicate (wrapped) if
// the pair is already present. A page without room splits in two, and the
// split propagates up to a new root when needed; all the pages one insert
// changes are WAL-logged in one record, so redo never sees half a split.
func (ix *Index) Insert(key int64, tid page.TID, s *buffer.Strategy) error {
	e := Entry{Key: key, TID: tid}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	var stack []storage.BlockNumber
	leaf, err := ix.findLeaf(e, s, &stack)
	if err != nil {
		return err
	}
	cs := changeSet{ix: ix}
	info, err := ix.insertItem(&cs, leaf, stack, e, encodeLeafItem(e), s)
	if err != nil {
		if errors.Is(err, ErrDuplicate) {
			return fmt.Errorf("insert key %d tid (%d,%d) into index %d: %w", key, tid.Block, tid.Off, ix.rel, err)
		}
		// cs holds only pages already changed: a split whose downlink
		// could not be added to the parent. That state is valid (right
		// links reach the new page), so it is logged, not dropped.
		if cerr := cs.commit(InfoSplit, s); cerr != nil {
			err = errors.Join(err, cerr)
		}
		return fmt.Errorf("insert into index %d: %w", ix.rel, err)
	}
	return cs.commit(info, s)
}

// insertItem puts item (whose entry is e) into page blk, splitting it (and
// its ancestors, popped from stack) as needed. Every changed page is added
// to cs, locked. A page is added to cs only once it is changed, and a
// failing level unlocks the pages it had locked itself, so on error cs
// holds exactly the pages already changed.
func (ix *Index) insertItem(cs *changeSet, blk storage.BlockNumber, stack []storage.BlockNumber, e Entry, item []byte, s *buffer.Strategy) (uint8, error) {
	b, err := ix.read(blk, s)
	if err != nil {
		return 0, err
	}
	b.Lock()
	n, err := loadNode(b.Page())
	if err == nil && len(item) != n.op.itemSize() {
		err = fmt.Errorf("%d-byte item for a level-%d page", len(item), n.op.level)
	}
	var pos int
	var dup bool
	if err == nil {
		pos, dup, err = n.lowerBound(e)
	}
	if err != nil {
		b.Unlock()
		b.Release()
		return 0, ix.corrupt(blk, err)
	}
	if dup && n.op.isLeaf() {
		b.Unlock()
		b.Release()
		return 0, ErrDuplicate
	}
	err = b.Page().InsertItemAt(item, page.OffsetNumber(pos))
	if err == nil {
		cs.add(b, encodeInsertOp(pos, item), false)
		return InfoInsert, nil
	}
	if !errors.Is(err, page.ErrNoSpace) {
		b.Unlock()
		b.Release()
		return 0, ix.corrupt(blk, err)
	}
	if err := ix.split(cs, b, n, stack, pos, item, s); err != nil {
		return 0, err
	}
	return InfoSplit, nil
}

// split divides the full page b (decoded as n) after inserting item at pos:
// the lower half stays in b, the upper half goes to a new page to its
// right, and a downlink to the new page is inserted into the parent (the
// last block of stack), or into a new root when b was the root.
func (ix *Index) split(cs *changeSet, b *buffer.Buffer, n node, stack []storage.BlockNumber, pos int, item []byte, s *buffer.Strategy) error {
	blk := b.Tag().Block
	items := make([][]byte, 0, n.count()+1)
	for off := 1; off <= n.count(); off++ {
		if off == pos {
			items = append(items, item)
		}
		items = append(items, append([]byte(nil), n.p.ItemData(page.OffsetNumber(off))...))
	}
	if pos == n.count()+1 {
		items = append(items, item)
	}
	at := len(items) / 2
	if !n.op.hasHigh() && pos == len(items) {
		at = len(items) * rightmostFill / 100
	}
	at = min(max(at, 1), len(items)-1)
	sep, _, err := decodeItem(items[at][:leafItemSize], true)
	if err != nil {
		b.Unlock()
		b.Release()
		return ix.corrupt(blk, err)
	}

	var sib *buffer.Buffer // old right sibling, whose left link changes
	if n.op.right != noBlock {
		if sib, err = ix.read(n.op.right, s); err != nil {
			b.Unlock()
			b.Release()
			return err
		}
		sib.Lock()
		if _, err := loadNode(sib.Page()); err != nil {
			sib.Unlock()
			sib.Release()
			b.Unlock()
			b.Release()
			return ix.corrupt(n.op.right, err)
		}
	}
	rb, err := ix.extend(s)
	if err != nil {
		if sib != nil {
			sib.Unlock()
			sib.Release()
		}
		b.Unlock()
		b.Release()
		return err
	}
	rblk := rb.Tag().Block
	rightOp := opaque{left: blk, right: n.op.right, level: n.op.level, flags: n.op.flags, high: n.op.high}
	leftOp := opaque{left: n.op.left, right: rblk, level: n.op.level, flags: n.op.flags | flagHasHigh, high: sep}
	if err := buildPage(rb.Page(), rightOp, items[at:]); err != nil {
		return ix.splitFailed(blk, err, b, rb, sib)
	}
	if err := buildPage(b.Page(), leftOp, items[:at]); err != nil {
		return ix.splitFailed(blk, err, b, rb, sib)
	}
	cs.add(b, encodeInitOp(leftOp, items[:at]), true)
	cs.add(rb, encodeInitOp(rightOp, items[at:]), true)
	if sib != nil {
		if sn, err := loadNode(sib.Page()); err == nil {
			sn.op.left = rblk
			encodeOpaque(sib.Page().Special(), sn.op)
		}
		cs.add(sib, encodeSetLeftOp(rblk), false)
	}

	downlink := encodeInternalItem(sep, rblk)
	if len(stack) > 0 {
		parent := stack[len(stack)-1]
		_, err := ix.insertItem(cs, parent, stack[:len(stack)-1], sep, downlink, s)
		return err
	}
	return ix.newRoot(cs, blk, n.op.level+1, downlink, s)
}

// splitFailed gives up a split before any page was changed in place (a
// build error here means the items did not fit, i.e. a corrupt page).
func (ix *Index) splitFailed(blk storage.BlockNumber, err error, bufs ...*buffer.Buffer) error {
	for _, b := range bufs {
		if b != nil {
			b.Unlock()
			b.Release()
		}
	}
	return ix.corrupt(blk, err)
}

// newRoot makes a root at level above the old root left, with downlinks
// to left (-infinity) and right, and points the meta page at it.
func (ix *Index) newRoot(cs *changeSet, left storage.BlockNumber, level uint32, rightDownlink []byte, s *buffer.Strategy) error {
	mb, err := ix.read(metaBlock, s)
	if err != nil {
		return err
	}
	mb.Lock()
	rootBuf, err := ix.extend(s)
	if err != nil {
		mb.Unlock()
		mb.Release()
		return err
	}
	items := [][]byte{encodeInternalItem(Entry{}, left), rightDownlink}
	op := opaque{level: level}
	if err := buildPage(rootBuf.Page(), op, items); err != nil {
		return ix.splitFailed(rootBuf.Tag().Block, err, mb, rootBuf)
	}
	cs.add(rootBuf, encodeInitOp(op, items), true)
	m := meta{root: rootBuf.Tag().Block, level: level}
	buildMeta(mb.Page(), m)
	cs.add(mb, encodeMetaOp(m), true)
	return nil
}
