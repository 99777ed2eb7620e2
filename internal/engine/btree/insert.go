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
// the pair is already present, ErrKeyTooLong for a key longer than
// MaxKeySize. A page without room splits in two, and the split propagates
// up to a new root when needed; all the pages one insert changes are
// WAL-logged in one record, so redo never sees half a split.
func (ix *Index) Insert(key []byte, tid page.TID, s *buffer.Strategy) error {
	e := Entry{Key: key, TID: tid}
	if len(key) > MaxKeySize {
		return fmt.Errorf("insert into index %d: %d-byte key, at most %d: %w", ix.rel, len(key), MaxKeySize, ErrKeyTooLong)
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	var stack []storage.BlockNumber
	leaf, err := ix.findLeaf(e, s, &stack)
	if err != nil {
		return err
	}
	cs := changeSet{ix: ix}
	info, err := ix.insertItem(&cs, leaf, stack, e, noBlock, s)
	if err != nil {
		if errors.Is(err, ErrDuplicate) {
			return fmt.Errorf("insert key %x tid (%d,%d) into index %d: %w", key, tid.Block, tid.Off, ix.rel, err)
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

// insertItem puts entry e (with child, on an internal page) into page blk,
// splitting it (and its ancestors, popped from stack) as needed. Every
// changed page is added to cs, locked. A page is added to cs only once it
// is changed, and a failing level unlocks the pages it had locked itself,
// so on error cs holds exactly the pages already changed.
func (ix *Index) insertItem(cs *changeSet, blk storage.BlockNumber, stack []storage.BlockNumber, e Entry, child storage.BlockNumber, s *buffer.Strategy) (uint8, error) {
	b, err := ix.read(blk, s)
	if err != nil {
		return 0, err
	}
	b.Lock()
	n, err := loadNode(b.Page())
	var item []byte
	if err == nil && n.op.isLeaf() != (child == noBlock) {
		err = fmt.Errorf("downlink %d for a level-%d page", child, n.op.level)
	}
	if err == nil {
		if item, err = n.encode(e, child); err != nil {
			b.Unlock()
			b.Release()
			return 0, fmt.Errorf("index %d block %d: %w", ix.rel, blk, err)
		}
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

// splitPoint returns the index of the first item that goes to the right
// half: about half the bytes stay left (fill percent of them when the
// rightmost page splits at its end), moved so that each half, with its
// high key, fits a page.
func splitPoint(n node, items [][]byte, rightmostEnd bool) (int, error) {
	costs := make([]int, len(items)+1) // costs[i]: room of items[:i]
	for i, it := range items {
		costs[i+1] = costs[i] + itemCost(it)
	}
	total := costs[len(items)]
	target := total / 2
	if rightmostEnd {
		target = total * rightmostFill / 100
	}
	at := 1
	for at < len(items)-1 && costs[at] < target {
		at++
	}
	capacity := pageCapacity(n.op.layout)
	sepAt := func(i int) (Entry, error) {
		e, _, err := decodeItem(items[i], n.op.layout, n.kind())
		return e, err
	}
	leftFits := func(i int) (bool, error) {
		sep, err := sepAt(i)
		return costs[i]+highCost(n.op.layout, sep) <= capacity, err
	}
	rightFits := func(i int) bool {
		rc := total - costs[i]
		if n.op.hasHigh() {
			rc += highCost(n.op.layout, n.op.high)
		}
		return rc <= capacity
	}
	for at > 1 {
		ok, err := leftFits(at)
		if err != nil {
			return 0, err
		}
		if ok {
			break
		}
		at--
	}
	for at < len(items)-1 && !rightFits(at) {
		at++
	}
	if ok, err := leftFits(at); err != nil || !ok || !rightFits(at) {
		return 0, errors.Join(err, fmt.Errorf("no split of %d items (%d bytes) fits two pages", len(items), total))
	}
	return at, nil
}

// split divides the full page b (decoded as n) after inserting item at pos:
// the lower half stays in b, the upper half goes to a new page to its
// right, and a downlink to the new page is inserted into the parent (the
// last block of stack), or into a new root when b was the root.
func (ix *Index) split(cs *changeSet, b *buffer.Buffer, n node, stack []storage.BlockNumber, pos int, item []byte, s *buffer.Strategy) error {
	blk := b.Tag().Block
	items := make([][]byte, 0, n.entries()+1)
	for off := n.first(); off <= n.last(); off++ {
		if off == pos {
			items = append(items, item)
		}
		items = append(items, append([]byte(nil), n.p.ItemData(page.OffsetNumber(off))...))
	}
	if pos == n.last()+1 {
		items = append(items, item)
	}
	at, err := splitPoint(n, items, !n.op.hasHigh() && pos == n.last()+1)
	var sep Entry
	if err == nil {
		sep, _, err = decodeItem(items[at], n.op.layout, n.kind())
	}
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
	rightOp := opaque{left: blk, right: n.op.right, level: n.op.level, flags: n.op.flags, layout: n.op.layout, high: n.op.high}
	leftOp := opaque{left: n.op.left, right: rblk, level: n.op.level, flags: n.op.flags | flagHasHigh, layout: n.op.layout, high: sep}
	leftData, err := encodeInitOp(leftOp, items[:at])
	var rightData []byte
	if err == nil {
		rightData, err = encodeInitOp(rightOp, items[at:])
	}
	if err == nil {
		err = buildPage(rb.Page(), rightOp, items[at:])
	}
	if err != nil {
		return ix.splitFailed(blk, err, b, rb, sib)
	}
	if err := buildPage(b.Page(), leftOp, items[:at]); err != nil {
		return ix.splitFailed(blk, err, b, rb, sib)
	}
	cs.add(b, leftData, true)
	cs.add(rb, rightData, true)
	if sib != nil {
		if sn, err := loadNode(sib.Page()); err == nil {
			sn.op.left = rblk
			encodeOpaque(sib.Page().Special(), sn.op)
		}
		cs.add(sib, encodeSetLeftOp(rblk), false)
	}

	if len(stack) > 0 {
		parent := stack[len(stack)-1]
		_, err := ix.insertItem(cs, parent, stack[:len(stack)-1], sep, rblk, s)
		return err
	}
	return ix.newRoot(cs, blk, n.op.level+1, n.op.layout, sep, rblk, s)
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
// to left (-infinity) and right (entries >= sep), and points the meta page
// at it.
func (ix *Index) newRoot(cs *changeSet, left storage.BlockNumber, level uint32, layout uint16, sep Entry, right storage.BlockNumber, s *buffer.Strategy) error {
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
	op := opaque{level: level, layout: layout}
	minusInf := Entry{}
	if layout == layout1 {
		minusInf.Key = IntKey(0) // ignored: the first downlink is -infinity
	}
	l, err := encodeItem(layout, pivotItem, minusInf, left)
	var r []byte
	if err == nil {
		r, err = encodeItem(layout, pivotItem, sep, right)
	}
	items := [][]byte{l, r}
	var data []byte
	if err == nil {
		data, err = encodeInitOp(op, items)
	}
	if err == nil {
		err = buildPage(rootBuf.Page(), op, items)
	}
	if err != nil {
		return ix.splitFailed(rootBuf.Tag().Block, err, mb, rootBuf)
	}
	cs.add(rootBuf, data, true)
	m := meta{root: rootBuf.Tag().Block, level: level, layout: layout}
	buildMeta(mb.Page(), m)
	cs.add(mb, encodeMetaOp(m), true)
	return nil
}
