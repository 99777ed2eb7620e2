package btree

import (
	"cmp"
	"encoding/binary"
	"fmt"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
)

// Entry is one index entry: a key and the heap tuple it points at. Entries
// are unique as pairs and ordered by key, then TID.
type Entry struct {
	Key int64
	TID page.TID
}

// Compare orders entries by key, then TID block, then TID offset.
func Compare(a, b Entry) int {
	return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.TID.Block, b.TID.Block), cmp.Compare(a.TID.Off, b.TID.Off))
}

// minEntry is the smallest entry with key k.
func minEntry(k int64) Entry { return Entry{Key: k} }

// Item and special-space sizes (see doc.go).
const (
	leafItemSize     = 14 // key 8, TID block 4, TID offset 2
	internalItemSize = 18 // leaf item + child block 4
	specialSize      = 32
	layoutVersion    = 1
	metaMagic        = 0x45525442 // "BTRE" little-endian
	metaBlock        = storage.BlockNumber(0)
	noBlock          = storage.BlockNumber(0) // "no sibling": block 0 is the meta page
)

// Page flags in the special space.
const (
	flagLeaf    uint16 = 1 << 0
	flagMeta    uint16 = 1 << 1
	flagHasHigh uint16 = 1 << 2 // the page has a high key (it is not rightmost)
	knownFlags         = flagLeaf | flagMeta | flagHasHigh
)

// opaque is the decoded special space of a tree page.
type opaque struct {
	left, right storage.BlockNumber
	level       uint32
	flags       uint16
	high        Entry // valid when flags&flagHasHigh != 0
}

func (o opaque) isLeaf() bool  { return o.flags&flagLeaf != 0 }
func (o opaque) hasHigh() bool { return o.flags&flagHasHigh != 0 }

// itemSize is the item size of pages at o's level.
func (o opaque) itemSize() int {
	if o.isLeaf() {
		return leafItemSize
	}
	return internalItemSize
}

// beyondHigh reports whether e belongs to a page right of this one.
func (o opaque) beyondHigh(e Entry) bool { return o.hasHigh() && Compare(e, o.high) >= 0 }

func encodeOpaque(b []byte, o opaque) {
	binary.LittleEndian.PutUint32(b[0:], uint32(o.left))
	binary.LittleEndian.PutUint32(b[4:], uint32(o.right))
	binary.LittleEndian.PutUint32(b[8:], o.level)
	binary.LittleEndian.PutUint16(b[12:], o.flags)
	binary.LittleEndian.PutUint16(b[14:], layoutVersion)
	putEntry(b[16:], o.high)
	clear(b[30:32])
}

// decodeOpaque parses a tree page's special space; it never panics.
func decodeOpaque(b []byte) (opaque, error) {
	if len(b) != specialSize {
		return opaque{}, fmt.Errorf("special space is %d bytes, want %d", len(b), specialSize)
	}
	o := opaque{
		left:  storage.BlockNumber(binary.LittleEndian.Uint32(b[0:])),
		right: storage.BlockNumber(binary.LittleEndian.Uint32(b[4:])),
		level: binary.LittleEndian.Uint32(b[8:]),
		flags: binary.LittleEndian.Uint16(b[12:]),
		high:  getEntry(b[16:]),
	}
	if v := binary.LittleEndian.Uint16(b[14:]); v != layoutVersion {
		return opaque{}, fmt.Errorf("btree layout version %d, want %d", v, layoutVersion)
	}
	if o.flags&^knownFlags != 0 || o.flags&flagMeta != 0 {
		return opaque{}, fmt.Errorf("not a tree page (flags %#x)", o.flags)
	}
	if o.isLeaf() != (o.level == 0) {
		return opaque{}, fmt.Errorf("level %d with leaf flag %v", o.level, o.isLeaf())
	}
	if o.hasHigh() != (o.right != noBlock) {
		return opaque{}, fmt.Errorf("right link %d with high-key flag %v", o.right, o.hasHigh())
	}
	return o, nil
}

// meta is the decoded meta page (block 0).
type meta struct {
	root  storage.BlockNumber
	level uint32
}

func encodeMeta(b []byte, m meta) {
	clear(b)
	binary.LittleEndian.PutUint32(b[0:], uint32(m.root))
	binary.LittleEndian.PutUint32(b[4:], m.level)
	binary.LittleEndian.PutUint32(b[8:], metaMagic)
	binary.LittleEndian.PutUint16(b[12:], flagMeta)
	binary.LittleEndian.PutUint16(b[14:], layoutVersion)
}

func decodeMeta(b []byte) (meta, error) {
	if len(b) != specialSize {
		return meta{}, fmt.Errorf("meta special space is %d bytes, want %d", len(b), specialSize)
	}
	if binary.LittleEndian.Uint32(b[8:]) != metaMagic || binary.LittleEndian.Uint16(b[12:]) != flagMeta {
		return meta{}, fmt.Errorf("not a btree meta page")
	}
	if v := binary.LittleEndian.Uint16(b[14:]); v != layoutVersion {
		return meta{}, fmt.Errorf("btree layout version %d, want %d", v, layoutVersion)
	}
	m := meta{root: storage.BlockNumber(binary.LittleEndian.Uint32(b[0:])), level: binary.LittleEndian.Uint32(b[4:])}
	if m.root == metaBlock {
		return meta{}, fmt.Errorf("meta page names block 0 as the root")
	}
	return m, nil
}

func putEntry(b []byte, e Entry) {
	binary.LittleEndian.PutUint64(b[0:], uint64(e.Key))
	binary.LittleEndian.PutUint32(b[8:], e.TID.Block)
	binary.LittleEndian.PutUint16(b[12:], uint16(e.TID.Off))
}

func getEntry(b []byte) Entry {
	return Entry{
		Key: int64(binary.LittleEndian.Uint64(b[0:])),
		TID: page.TID{Block: binary.LittleEndian.Uint32(b[8:]), Off: page.OffsetNumber(binary.LittleEndian.Uint16(b[12:]))},
	}
}

// encodeLeafItem returns the item bytes of a leaf entry.
func encodeLeafItem(e Entry) []byte {
	b := make([]byte, leafItemSize)
	putEntry(b, e)
	return b
}

// encodeInternalItem returns the item bytes of a downlink: child holds
// entries >= sep (sep is ignored on the first item of a page: -infinity).
func encodeInternalItem(sep Entry, child storage.BlockNumber) []byte {
	b := make([]byte, internalItemSize)
	putEntry(b, sep)
	binary.LittleEndian.PutUint32(b[leafItemSize:], uint32(child))
	return b
}

// decodeItem parses an item of a leaf (leaf true) or internal page. child
// is noBlock for leaf items. It never panics on bad input.
func decodeItem(b []byte, leaf bool) (e Entry, child storage.BlockNumber, err error) {
	want := internalItemSize
	if leaf {
		want = leafItemSize
	}
	if len(b) != want {
		return Entry{}, noBlock, fmt.Errorf("item of %d bytes, want %d", len(b), want)
	}
	e = getEntry(b)
	if !leaf {
		child = storage.BlockNumber(binary.LittleEndian.Uint32(b[leafItemSize:]))
		if child == metaBlock {
			return Entry{}, noBlock, fmt.Errorf("downlink to block 0 (the meta page)")
		}
	}
	return e, child, nil
}

// node is a pinned tree page with its decoded special space.
type node struct {
	p  page.Page
	op opaque
}

func loadNode(p page.Page) (node, error) {
	if p.IsNew() {
		return node{}, fmt.Errorf("page is not initialised")
	}
	op, err := decodeOpaque(p.Special())
	if err != nil {
		return node{}, err
	}
	return node{p: p, op: op}, nil
}

func (n node) count() int { return n.p.NumItems() }

// item decodes item off (1-based).
func (n node) item(off int) (Entry, storage.BlockNumber, error) {
	return decodeItem(n.p.ItemData(page.OffsetNumber(off)), n.op.isLeaf())
}

// lowerBound returns the first offset whose entry is >= e (count()+1 when
// none), and whether that entry equals e. On internal pages item 1 counts
// as -infinity.
func (n node) lowerBound(e Entry) (int, bool, error) {
	lo, hi := 1, n.count()+1
	if !n.op.isLeaf() {
		lo = min(2, hi)
	}
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		it, _, err := n.item(mid)
		if err != nil {
			return 0, false, err
		}
		if Compare(it, e) < 0 {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo <= n.count() {
		it, _, err := n.item(lo)
		if err != nil {
			return 0, false, err
		}
		return lo, Compare(it, e) == 0, nil
	}
	return lo, false, nil
}

// childFor returns the downlink of an internal page to follow for e: the
// last item whose separator is <= e (item 1 being -infinity).
func (n node) childFor(e Entry) (storage.BlockNumber, error) {
	if n.count() == 0 {
		return noBlock, fmt.Errorf("internal page has no downlinks")
	}
	pos, eq, err := n.lowerBound(e)
	if err != nil {
		return noBlock, err
	}
	if !eq {
		pos-- // last separator < e
	}
	pos = max(pos, 1)
	_, child, err := n.item(pos)
	return child, err
}

// buildPage formats p as a tree page with op and the given items in order.
// The forward path and redo both use it, so they build identical pages.
func buildPage(p page.Page, op opaque, items [][]byte) error {
	page.Init(p, specialSize)
	encodeOpaque(p.Special(), op)
	for i, it := range items {
		if _, err := p.AddItem(it, page.OffsetNumber(i+1)); err != nil {
			return fmt.Errorf("build page: item %d: %w", i+1, err)
		}
	}
	return nil
}

// buildMeta formats p as the meta page.
func buildMeta(p page.Page, m meta) {
	page.Init(p, specialSize)
	encodeMeta(p.Special(), m)
}
