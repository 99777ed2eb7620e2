package btree

import (
	"fmt"

	"github.com/vacuumops/vacuum-operator/internal/engine/buffer"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
)

// buildFill is how full Build packs each page, in percent.
const buildFill = 90

// downlink is a (separator, child) pair collected for the level above.
type downlink struct {
	sep   Entry
	child storage.BlockNumber
}

// Build creates the index in rel (page layout 2) (a new, empty relation) bottom-up from
// next, which yields entries in strictly ascending order and ok == false
// at the end (VACUUM FULL and CREATE INDEX). Leaves and internal pages are
// packed about 90 % full, each page WAL-logged as a new page (WillInit)
// as soon as it is complete; pageHook, if not nil, is called after each
// page (the throttle and cancellation point).
func Build(d Deps, rel storage.RelFileNode, next func() (Entry, bool, error), s *buffer.Strategy, pageHook func() error) (*Index, error) {
	ix := Open(d, rel)
	mb, err := ix.newFork(s)
	if err != nil {
		return nil, err
	}
	root, level, err := ix.buildLevels(next, s, pageHook)
	if err != nil {
		mb.Unlock()
		mb.Release()
		return nil, fmt.Errorf("build index %d: %w", rel, err)
	}
	m := meta{root: root, level: level, layout: layout2}
	buildMeta(mb.Page(), m)
	cs := changeSet{ix: ix}
	cs.add(mb, encodeMetaOp(m), true)
	if err := cs.commit(InfoBuild, s); err != nil {
		return nil, fmt.Errorf("build index %d: %w", rel, err)
	}
	return ix, nil
}

// buildLevels writes the leaves, then each level of internal pages above
// them, until one page remains: the root.
func (ix *Index) buildLevels(next func() (Entry, bool, error), s *buffer.Strategy, pageHook func() error) (_ storage.BlockNumber, _ uint32, err error) {
	lb := &levelBuilder{ix: ix, s: s, hook: pageHook, flags: flagLeaf}
	defer func() {
		if err != nil && lb.cur != nil { // the page being filled was never logged
			lb.cur.Unlock()
			lb.cur.Release()
		}
	}()
	var prev *Entry
	for {
		e, ok, err := next()
		if err != nil {
			return noBlock, 0, err
		}
		if !ok {
			break
		}
		if prev != nil && Compare(*prev, e) >= 0 {
			return noBlock, 0, fmt.Errorf("entries out of order: (%x, %v) after (%x, %v)", e.Key, e.TID, prev.Key, prev.TID)
		}
		prev = &e
		item, err := encodeItem(layout2, leafItem, e, noBlock)
		if err != nil {
			return noBlock, 0, err
		}
		if err := lb.add(e, item); err != nil {
			return noBlock, 0, err
		}
	}
	var links []downlink
	if links, err = lb.finish(); err != nil {
		return noBlock, 0, err
	}
	level := uint32(0)
	for len(links) > 1 {
		level++
		lb = &levelBuilder{ix: ix, s: s, hook: pageHook, level: level}
		for _, l := range links {
			item, err := encodeItem(layout2, pivotItem, l.sep, l.child)
			if err != nil {
				return noBlock, 0, err
			}
			if err := lb.add(l.sep, item); err != nil {
				return noBlock, 0, err
			}
		}
		if links, err = lb.finish(); err != nil {
			return noBlock, 0, err
		}
	}
	return links[0].child, level, nil
}

// levelBuilder fills the pages of one level left to right. The page being
// filled is kept in memory (items) with its buffer already allocated, so
// that when it is full the next page's block is known for its right link.
type levelBuilder struct {
	ix    *Index
	s     *buffer.Strategy
	hook  func() error
	level uint32
	flags uint16

	cur     *buffer.Buffer // allocated, locked; written when full
	items   [][]byte
	entries []Entry // items' entries
	used    int
	left    storage.BlockNumber
	links   []downlink
}

// limit is the room a page's entries may take: buildFill percent of it.
func (lb *levelBuilder) limit() int { return pageCapacity(layout2) * buildFill / 100 }

// add appends item (whose entry is e) to the level. When the page is full
// it is written with e's key as its high key, or, if that high key would
// not fit beside the entries, with the key of the last entries that are
// carried over to the next page (an entry's high key takes no more room
// than the entry, so carrying one always makes room).
func (lb *levelBuilder) add(e Entry, item []byte) error {
	if lb.cur != nil && len(lb.items) > 0 && lb.used+itemCost(item) > lb.limit() {
		carry, used, high := 0, lb.used, e
		for used+highCost(layout2, high) > pageCapacity(layout2) && len(lb.items)-carry > 1 {
			carry++
			used -= itemCost(lb.items[len(lb.items)-carry])
			high = lb.entries[len(lb.entries)-carry]
		}
		nb, err := lb.ix.extend(lb.s)
		if err != nil {
			return err
		}
		if err := lb.flush(nb.Tag().Block, high, len(lb.items)-carry); err != nil {
			nb.Unlock()
			nb.Release()
			return err
		}
		lb.cur = nb
	}
	if lb.cur == nil {
		nb, err := lb.ix.extend(lb.s)
		if err != nil {
			return err
		}
		lb.cur = nb
	}
	lb.items = append(lb.items, item)
	lb.entries = append(lb.entries, e)
	lb.used += itemCost(item)
	return nil
}

// flush writes the current page with its first n items, the given right
// link and high key (right == noBlock: rightmost, no high key), and keeps
// the items after n for the next page.
func (lb *levelBuilder) flush(right storage.BlockNumber, high Entry, n int) error {
	b := lb.cur
	lb.cur = nil // from here on b is unlocked by this function, whatever happens
	op := opaque{left: lb.left, right: right, level: lb.level, flags: lb.flags, layout: layout2}
	if right != noBlock {
		op.flags |= flagHasHigh
		op.high = high
	}
	data, err := encodeInitOp(op, lb.items[:n])
	if err == nil {
		err = buildPage(b.Page(), op, lb.items[:n])
	}
	if err != nil {
		b.Unlock()
		b.Release()
		return lb.ix.corrupt(b.Tag().Block, err)
	}
	cs := changeSet{ix: lb.ix}
	cs.add(b, data, true)
	if err := cs.commit(InfoBuild, lb.s); err != nil {
		return err
	}
	blk := b.Tag().Block
	first := Entry{}
	if len(lb.entries) > 0 {
		first = lb.entries[0]
	}
	lb.links = append(lb.links, downlink{sep: first, child: blk})
	lb.left = blk
	lb.items = append([][]byte(nil), lb.items[n:]...)
	lb.entries = append([]Entry(nil), lb.entries[n:]...)
	lb.used = 0
	for _, it := range lb.items {
		lb.used += itemCost(it)
	}
	if lb.hook != nil {
		return lb.hook()
	}
	return nil
}

// finish writes the last page of the level (an empty leaf if the level
// got no items at all) and returns the level's downlinks.
func (lb *levelBuilder) finish() ([]downlink, error) {
	if lb.cur == nil {
		nb, err := lb.ix.extend(lb.s)
		if err != nil {
			return nil, err
		}
		lb.cur = nb
	}
	if err := lb.flush(noBlock, Entry{}, len(lb.items)); err != nil {
		return nil, err
	}
	return lb.links, nil
}
