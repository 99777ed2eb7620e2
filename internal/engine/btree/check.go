package btree

import (
	"fmt"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
)

// Check verifies the tree's structure and reports every problem found
// through report (block and message); it returns an error only when pages
// cannot be read. It walks each level left to right from the root and
// checks, per page: the layout, level and sibling links; keys strictly
// ascending; every entry below the page's high key and at or above its left
// sibling's; for each downlink, that the child is one level down, that its
// high key equals the next separator (or the parent's high key), and that
// consecutive children are right-linked. Finally every initialised page
// must have been reached. Holds the index read lock throughout.
func (ix *Index) Check(report func(blk storage.BlockNumber, msg string)) error {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	n, err := ix.nblocks()
	if err != nil {
		return err
	}
	c := &checker{ix: ix, report: report, nblocks: n, visited: map[storage.BlockNumber]bool{}}
	mp, err := c.snapshot(metaBlock)
	if err != nil {
		return err
	}
	m, err := decodeMeta(mp.Special())
	if err != nil {
		report(metaBlock, err.Error())
		return nil
	}
	c.layout = m.layout
	if m.root >= n {
		report(metaBlock, fmt.Sprintf("root block %d is past the end (%d blocks)", m.root, n))
		return nil
	}
	first := m.root
	for level := int64(m.level); level >= 0 && first != noBlock; level-- {
		if first, err = c.checkLevel(first, uint32(level)); err != nil {
			return err
		}
	}
	for blk := storage.BlockNumber(1); blk < n; blk++ {
		if c.visited[blk] {
			continue
		}
		p, err := c.snapshot(blk)
		if err != nil {
			return err
		}
		if !p.IsNew() {
			report(blk, "page is not reachable from the root")
		}
	}
	return nil
}

type checker struct {
	ix      *Index
	report  func(storage.BlockNumber, string)
	nblocks storage.BlockNumber
	visited map[storage.BlockNumber]bool
	layout  uint16 // the meta page's
}

func (c *checker) reportf(blk storage.BlockNumber, format string, args ...any) {
	c.report(blk, fmt.Sprintf(format, args...))
}

// snapshot returns a private copy of block blk read under a share lock.
func (c *checker) snapshot(blk storage.BlockNumber) (page.Page, error) {
	b, err := c.ix.read(blk, nil)
	if err != nil {
		return nil, err
	}
	defer b.Release()
	b.RLock()
	defer b.RUnlock()
	return append(page.Page(nil), b.Page()...), nil
}

// load reads and decodes blk, reporting a page that does not decode.
func (c *checker) load(blk storage.BlockNumber) (node, bool, error) {
	if blk == metaBlock || blk >= c.nblocks {
		c.reportf(blk, "link to block %d, outside the tree pages 1..%d", blk, c.nblocks-1)
		return node{}, false, nil
	}
	p, err := c.snapshot(blk)
	if err != nil {
		return node{}, false, err
	}
	n, err := loadNode(p)
	if err != nil {
		c.report(blk, err.Error())
		return node{}, false, nil
	}
	return n, true, nil
}

// checkLevel walks one level from its leftmost page and returns the
// leftmost page of the level below (noBlock at the leaves or when the
// level is too broken to continue).
func (c *checker) checkLevel(first storage.BlockNumber, level uint32) (storage.BlockNumber, error) {
	below := noBlock
	prev := noBlock
	var lower *Entry // the left sibling's high key
	for blk := first; blk != noBlock; {
		if c.visited[blk] {
			c.reportf(blk, "reached twice (a cycle in links)")
			break
		}
		c.visited[blk] = true
		n, ok, err := c.load(blk)
		if err != nil || !ok {
			return noBlock, err
		}
		if n.op.level != level {
			c.reportf(blk, "level %d, want %d", n.op.level, level)
		}
		if n.op.layout != c.layout {
			c.reportf(blk, "page layout %d in an index of layout %d", n.op.layout, c.layout)
		}
		if n.op.left != prev {
			c.reportf(blk, "left link %d, want %d", n.op.left, prev)
		}
		entries, children := c.items(blk, n)
		c.checkOrder(blk, n, entries, lower)
		if level > 0 && len(children) > 0 {
			if blk == first {
				below = children[0]
			}
			if err := c.checkDownlinks(blk, n, entries, children, lower); err != nil {
				return noBlock, err
			}
		}
		if n.op.hasHigh() {
			h := n.op.high
			lower = &h
		}
		prev, blk = blk, n.op.right
	}
	return below, nil
}

// items decodes a page's entries and (internal pages) downlinks.
func (c *checker) items(blk storage.BlockNumber, n node) ([]Entry, []storage.BlockNumber) {
	var entries []Entry
	var children []storage.BlockNumber
	for off := n.first(); off <= n.last(); off++ {
		e, child, err := n.item(off)
		if err != nil {
			c.reportf(blk, "item %d: %v", off, err)
			return nil, nil
		}
		entries = append(entries, e)
		if !n.op.isLeaf() {
			children = append(children, child)
		}
	}
	if !n.op.isLeaf() && len(children) == 0 {
		c.reportf(blk, "internal page without downlinks")
	}
	return entries, children
}

// checkOrder checks keys ascending and within [lower, high).
func (c *checker) checkOrder(blk storage.BlockNumber, n node, entries []Entry, lower *Entry) {
	from := 0
	if !n.op.isLeaf() {
		from = 1 // item 1 of an internal page is -infinity
	}
	for i := from; i < len(entries); i++ {
		e := entries[i]
		if i > from && Compare(entries[i-1], e) >= 0 {
			c.reportf(blk, "entry %d (key %x tid %v) is not above entry %d (key %x tid %v)",
				i+1, e.Key, e.TID, i, entries[i-1].Key, entries[i-1].TID)
		}
		if n.op.hasHigh() && Compare(e, n.op.high) >= 0 {
			c.reportf(blk, "entry %d (key %x) is not below the high key %x", i+1, e.Key, n.op.high.Key)
		}
		if lower != nil && Compare(e, *lower) < 0 {
			c.reportf(blk, "entry %d (key %x) is below the left sibling's high key %x", i+1, e.Key, lower.Key)
		}
	}
}

// checkDownlinks checks each child against its separators.
func (c *checker) checkDownlinks(blk storage.BlockNumber, n node, seps []Entry, children []storage.BlockNumber, lower *Entry) error {
	for i, child := range children {
		cn, ok, err := c.load(child)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if cn.op.level+1 != n.op.level {
			c.reportf(blk, "downlink %d to block %d at level %d, want %d", i+1, child, cn.op.level, n.op.level-1)
		}
		upperFinite, upper := n.op.hasHigh(), n.op.high
		if i+1 < len(children) {
			upperFinite, upper = true, seps[i+1]
			if cn.op.right != children[i+1] {
				c.reportf(blk, "child %d right-links to %d, but the next downlink is %d", child, cn.op.right, children[i+1])
			}
		}
		switch {
		case upperFinite && (!cn.op.hasHigh() || Compare(cn.op.high, upper) != 0):
			c.reportf(blk, "child %d high key (%x, has %v) differs from its upper separator %x", child, cn.op.high.Key, cn.op.hasHigh(), upper.Key)
		case !upperFinite && cn.op.hasHigh():
			c.reportf(blk, "rightmost child %d has a high key", child)
		}
		lo := lower
		if i > 0 {
			lo = &seps[i]
		}
		if lo != nil && cn.entries() > 0 {
			first := cn.first()
			if !cn.op.isLeaf() {
				first++
			}
			if first <= cn.last() {
				if e, _, err := cn.item(first); err == nil && Compare(e, *lo) < 0 {
					c.reportf(child, "first key %x is below its separator %x in block %d", e.Key, lo.Key, blk)
				}
			}
		}
	}
	return nil
}
