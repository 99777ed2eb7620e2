package btree

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
)

// Entry is one index entry: a key and the heap tuple it points at. Entries
// are unique as pairs and ordered by key (bytewise), then TID. Keys are
// encoded by the caller so that bytewise order is the order it wants
// (package row's index keys).
type Entry struct {
	Key []byte
	TID page.TID
}

// Compare orders entries by key bytes, then TID block, then TID offset.
func Compare(a, b Entry) int {
	return cmp.Or(bytes.Compare(a.Key, b.Key), cmp.Compare(a.TID.Block, b.TID.Block), cmp.Compare(a.TID.Off, b.TID.Off))
}

// MaxKeySize is the largest key an index entry may have (layout 2), so
// that a page always holds a high key and enough entries to split.
const MaxKeySize = 1024

// ErrKeyTooLong is returned by Insert and Build for a key longer than
// MaxKeySize (PostgreSQL's "index row size exceeds maximum").
var ErrKeyTooLong = errors.New("index key too long")

// errNotIntegerKey: a layout-1 page holds only 9-byte integer keys.
var errNotIntegerKey = errors.New("a layout-1 index holds only single integer keys")

// Page layouts (the version field of every page's special space).
const (
	layout1 uint16 = 1 // fixed 14/18-byte items, high key in the special space
	layout2 uint16 = 2 // variable-length keys, high key as item 1
)

// Item and special-space sizes (see doc.go).
const (
	leafItemSize1     = 14 // layout 1: key 8, TID block 4, TID offset 2
	internalItemSize1 = 18 // layout 1: leaf item + child block 4
	specialSize1      = 32
	tupleHeader2      = 8  // layout 2: TID block 4, TID offset 2, size 2
	pivotHeader2      = 12 // layout 2: tuple header + child block 4
	specialSize2      = 16
	metaMagic         = 0x45525442 // "BTRE" little-endian
	metaBlock         = storage.BlockNumber(0)
	noBlock           = storage.BlockNumber(0) // "no sibling": block 0 is the meta page
)

// Page flags in the special space.
const (
	flagLeaf    uint16 = 1 << 0
	flagMeta    uint16 = 1 << 1
	flagHasHigh uint16 = 1 << 2 // the page has a high key (it is not rightmost)
	knownFlags         = flagLeaf | flagMeta | flagHasHigh
)

// intKeyTag is row's tag of a non-NULL key column: a layout-1 key k is,
// in key bytes, intKeyTag then k big-endian with its sign bit flipped (row's
// integer key encoding), so both layouts order and compare alike.
const intKeyTag = 0x01

// IntKey is the key bytes of the integer k, as package row encodes a
// one-column integer key (and as layout-1 keys read).
func IntKey(k int64) []byte {
	return binary.BigEndian.AppendUint64([]byte{intKeyTag}, uint64(k)^(1<<63))
}

// intOfKey is the inverse of IntKey.
func intOfKey(key []byte) (int64, error) {
	if len(key) != 9 || key[0] != intKeyTag {
		return 0, errNotIntegerKey
	}
	return int64(binary.BigEndian.Uint64(key[1:]) ^ (1 << 63)), nil
}

// opaque is the decoded special space of a tree page, with its high key
// (layout 1 keeps it in the special space, layout 2 as item 1).
type opaque struct {
	left, right storage.BlockNumber
	level       uint32
	flags       uint16
	layout      uint16
	high        Entry // valid when flags&flagHasHigh != 0
}

func (o opaque) isLeaf() bool  { return o.flags&flagLeaf != 0 }
func (o opaque) hasHigh() bool { return o.flags&flagHasHigh != 0 }

func (o opaque) specialSize() int {
	if o.layout == layout1 {
		return specialSize1
	}
	return specialSize2
}

// beyondHigh reports whether e belongs to a page right of this one.
func (o opaque) beyondHigh(e Entry) bool { return o.hasHigh() && Compare(e, o.high) >= 0 }

// encodeOpaque writes o's special space (len(b) == o.specialSize()).
// Layout 1 stores the high key there; the caller has checked that it is an
// integer key (encodeItem).
func encodeOpaque(b []byte, o opaque) {
	binary.LittleEndian.PutUint32(b[0:], uint32(o.left))
	binary.LittleEndian.PutUint32(b[4:], uint32(o.right))
	binary.LittleEndian.PutUint32(b[8:], o.level)
	binary.LittleEndian.PutUint16(b[12:], o.flags)
	binary.LittleEndian.PutUint16(b[14:], o.layout)
	if o.layout == layout1 {
		var k int64
		if o.hasHigh() {
			k, _ = intOfKey(o.high.Key)
		}
		putEntry1(b[16:], k, o.high.TID)
		clear(b[30:32])
	}
}

// decodeOpaque parses a tree page's special space (the high key of a
// layout-2 page is read from its item 1 by loadNode); it never panics.
func decodeOpaque(b []byte) (opaque, error) {
	if len(b) != specialSize1 && len(b) != specialSize2 {
		return opaque{}, fmt.Errorf("special space is %d bytes, want %d or %d", len(b), specialSize2, specialSize1)
	}
	o := opaque{
		left:   storage.BlockNumber(binary.LittleEndian.Uint32(b[0:])),
		right:  storage.BlockNumber(binary.LittleEndian.Uint32(b[4:])),
		level:  binary.LittleEndian.Uint32(b[8:]),
		flags:  binary.LittleEndian.Uint16(b[12:]),
		layout: binary.LittleEndian.Uint16(b[14:]),
	}
	switch {
	case o.layout == layout1 && len(b) == specialSize1:
		k, tid := getEntry1(b[16:])
		o.high = Entry{Key: IntKey(k), TID: tid}
	case o.layout == layout2 && len(b) == specialSize2:
	default:
		return opaque{}, fmt.Errorf("btree layout version %d in a %d-byte special space", o.layout, len(b))
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
	if !o.hasHigh() {
		o.high = Entry{}
	}
	return o, nil
}

// meta is the decoded meta page (block 0).
type meta struct {
	root   storage.BlockNumber
	level  uint32
	layout uint16
}

func (m meta) specialSize() int {
	if m.layout == layout1 {
		return specialSize1
	}
	return specialSize2
}

func encodeMeta(b []byte, m meta) {
	clear(b)
	binary.LittleEndian.PutUint32(b[0:], uint32(m.root))
	binary.LittleEndian.PutUint32(b[4:], m.level)
	binary.LittleEndian.PutUint32(b[8:], metaMagic)
	binary.LittleEndian.PutUint16(b[12:], flagMeta)
	binary.LittleEndian.PutUint16(b[14:], m.layout)
}

func decodeMeta(b []byte) (meta, error) {
	if len(b) != specialSize1 && len(b) != specialSize2 {
		return meta{}, fmt.Errorf("meta special space is %d bytes, want %d or %d", len(b), specialSize2, specialSize1)
	}
	if binary.LittleEndian.Uint32(b[8:]) != metaMagic || binary.LittleEndian.Uint16(b[12:]) != flagMeta {
		return meta{}, fmt.Errorf("not a btree meta page")
	}
	m := meta{root: storage.BlockNumber(binary.LittleEndian.Uint32(b[0:])), level: binary.LittleEndian.Uint32(b[4:]),
		layout: binary.LittleEndian.Uint16(b[14:])}
	if !(m.layout == layout1 && len(b) == specialSize1) && !(m.layout == layout2 && len(b) == specialSize2) {
		return meta{}, fmt.Errorf("btree layout version %d in a %d-byte meta special space", m.layout, len(b))
	}
	if m.root == metaBlock {
		return meta{}, fmt.Errorf("meta page names block 0 as the root")
	}
	return m, nil
}

func putEntry1(b []byte, k int64, tid page.TID) {
	binary.LittleEndian.PutUint64(b[0:], uint64(k))
	binary.LittleEndian.PutUint32(b[8:], tid.Block)
	binary.LittleEndian.PutUint16(b[12:], uint16(tid.Off))
}

func getEntry1(b []byte) (int64, page.TID) {
	return int64(binary.LittleEndian.Uint64(b[0:])),
		page.TID{Block: binary.LittleEndian.Uint32(b[8:]), Off: page.OffsetNumber(binary.LittleEndian.Uint16(b[12:]))}
}

// itemKind says which of a page's items an item is.
type itemKind uint8

const (
	leafItem  itemKind = iota // an entry on a leaf
	pivotItem                 // a separator and downlink on an internal page
	highItem                  // a layout-2 high key (item 1 of a page with a right sibling)
)

// encodeItem returns the item bytes of e (and child, for a pivot) in
// layout. Layout-2 keys longer than MaxKeySize are ErrKeyTooLong; layout 1
// takes only integer keys.
func encodeItem(layout uint16, kind itemKind, e Entry, child storage.BlockNumber) ([]byte, error) {
	if layout == layout1 {
		k, err := intOfKey(e.Key)
		if err != nil {
			return nil, err
		}
		size := leafItemSize1
		if kind == pivotItem {
			size = internalItemSize1
		}
		b := make([]byte, size)
		putEntry1(b, k, e.TID)
		if kind == pivotItem {
			binary.LittleEndian.PutUint32(b[leafItemSize1:], uint32(child))
		}
		return b, nil
	}
	if len(e.Key) > MaxKeySize {
		return nil, fmt.Errorf("%d-byte key, at most %d: %w", len(e.Key), MaxKeySize, ErrKeyTooLong)
	}
	h := tupleHeader2
	if kind == pivotItem {
		h = pivotHeader2
	}
	b := make([]byte, h, h+len(e.Key))
	binary.LittleEndian.PutUint32(b[0:], e.TID.Block)
	binary.LittleEndian.PutUint16(b[4:], uint16(e.TID.Off))
	binary.LittleEndian.PutUint16(b[6:], uint16(h+len(e.Key)))
	if kind == pivotItem {
		binary.LittleEndian.PutUint32(b[8:], uint32(child))
	}
	return append(b, e.Key...), nil
}

// decodeItem parses an item of kind in layout; child is noBlock unless
// kind is pivotItem. The key is a copy (never aliasing b). It never
// panics on bad input.
func decodeItem(b []byte, layout uint16, kind itemKind) (Entry, storage.BlockNumber, error) {
	var buf intKeyBuf
	v, child, err := viewItem(b, layout, kind, &buf)
	if err != nil {
		return Entry{}, noBlock, err
	}
	return Entry{Key: append([]byte{}, v.Key...), TID: v.TID}, child, nil
}

// intKeyBuf holds a layout-1 item's key (IntKey's encoding) for viewItem.
type intKeyBuf [9]byte

// viewItem is decodeItem without the copy, for comparing entries under the
// page's lock (a descent's binary search reads about log2(items) of them per
// page): the key of a layout-2 item aliases b, that of a layout-1 item is
// written into buf. The key must not be kept past the lock or the next use
// of buf. It never panics on bad input.
func viewItem(b []byte, layout uint16, kind itemKind, buf *intKeyBuf) (e Entry, child storage.BlockNumber, err error) {
	if layout == layout1 {
		want := leafItemSize1
		if kind == pivotItem {
			want = internalItemSize1
		}
		if kind == highItem || len(b) != want {
			return Entry{}, noBlock, fmt.Errorf("layout-1 item of %d bytes, want %d", len(b), want)
		}
		k, tid := getEntry1(b)
		buf[0] = intKeyTag
		binary.BigEndian.PutUint64(buf[1:], uint64(k)^(1<<63))
		e = Entry{Key: buf[:], TID: tid}
		if kind == pivotItem {
			child = storage.BlockNumber(binary.LittleEndian.Uint32(b[leafItemSize1:]))
		}
	} else {
		h := tupleHeader2
		if kind == pivotItem {
			h = pivotHeader2
		}
		if len(b) < h {
			return Entry{}, noBlock, fmt.Errorf("item of %d bytes, shorter than its %d-byte header", len(b), h)
		}
		if size := int(binary.LittleEndian.Uint16(b[6:])); size != len(b) {
			return Entry{}, noBlock, fmt.Errorf("item of %d bytes says it has %d", len(b), size)
		}
		if len(b)-h > MaxKeySize {
			return Entry{}, noBlock, fmt.Errorf("%d-byte key, at most %d", len(b)-h, MaxKeySize)
		}
		e = Entry{TID: page.TID{Block: binary.LittleEndian.Uint32(b[0:]), Off: page.OffsetNumber(binary.LittleEndian.Uint16(b[4:]))},
			Key: b[h:len(b):len(b)]}
		if kind == pivotItem {
			child = storage.BlockNumber(binary.LittleEndian.Uint32(b[8:]))
		}
	}
	if kind == pivotItem && child == metaBlock {
		return Entry{}, noBlock, fmt.Errorf("downlink to block 0 (the meta page)")
	}
	return e, child, nil
}

// leafTID parses only the TID of a leaf item in layout, with the same
// size checks as decodeItem but without copying the key: the bulk delete
// reads every entry of every leaf and needs nothing else. It never panics
// on bad input.
func leafTID(b []byte, layout uint16) (page.TID, error) {
	if layout == layout1 {
		if len(b) != leafItemSize1 {
			return page.TID{}, fmt.Errorf("layout-1 item of %d bytes, want %d", len(b), leafItemSize1)
		}
		_, tid := getEntry1(b)
		return tid, nil
	}
	if len(b) < tupleHeader2 {
		return page.TID{}, fmt.Errorf("item of %d bytes, shorter than its %d-byte header", len(b), tupleHeader2)
	}
	if size := int(binary.LittleEndian.Uint16(b[6:])); size != len(b) {
		return page.TID{}, fmt.Errorf("item of %d bytes says it has %d", len(b), size)
	}
	if len(b)-tupleHeader2 > MaxKeySize {
		return page.TID{}, fmt.Errorf("%d-byte key, at most %d", len(b)-tupleHeader2, MaxKeySize)
	}
	return page.TID{Block: binary.LittleEndian.Uint32(b[0:]), Off: page.OffsetNumber(binary.LittleEndian.Uint16(b[4:]))}, nil
}

// node is a pinned tree page with its decoded special space and high key.
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
	n := node{p: p, op: op}
	if op.layout == layout2 && op.hasHigh() {
		if p.NumItems() < 1 {
			return node{}, fmt.Errorf("page with a right sibling has no high key item")
		}
		if n.op.high, _, err = decodeItem(p.ItemData(1), layout2, highItem); err != nil {
			return node{}, fmt.Errorf("high key: %w", err)
		}
	}
	return n, nil
}

// first is the offset of the page's first entry (item 1 of a layout-2
// page with a right sibling is its high key).
func (n node) first() int {
	if n.op.layout == layout2 && n.op.hasHigh() {
		return 2
	}
	return 1
}

// last is the offset of the page's last entry (first()-1 when it has none).
func (n node) last() int { return n.p.NumItems() }

// entries is the number of entries (downlinks on internal pages).
func (n node) entries() int { return n.last() - n.first() + 1 }

func (n node) kind() itemKind {
	if n.op.isLeaf() {
		return leafItem
	}
	return pivotItem
}

// item decodes the entry at offset off (first() <= off <= last()).
func (n node) item(off int) (Entry, storage.BlockNumber, error) {
	return decodeItem(n.p.ItemData(page.OffsetNumber(off)), n.op.layout, n.kind())
}

// view is item without the copy (viewItem): for a comparison or a downlink
// read under the page's lock.
func (n node) view(off int, buf *intKeyBuf) (Entry, storage.BlockNumber, error) {
	return viewItem(n.p.ItemData(page.OffsetNumber(off)), n.op.layout, n.kind(), buf)
}

// encode returns the item bytes of an entry (and child) for this page.
func (n node) encode(e Entry, child storage.BlockNumber) ([]byte, error) {
	return encodeItem(n.op.layout, n.kind(), e, child)
}

// lowerBound returns the first offset whose entry is >= e (last()+1 when
// none), and whether that entry equals e. On internal pages the first
// entry counts as -infinity.
func (n node) lowerBound(e Entry) (int, bool, error) {
	lo, hi := n.first(), n.last()+1
	if !n.op.isLeaf() {
		lo = min(lo+1, hi)
	}
	var buf intKeyBuf
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		it, _, err := n.view(mid, &buf)
		if err != nil {
			return 0, false, err
		}
		if Compare(it, e) < 0 {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo <= n.last() {
		it, _, err := n.view(lo, &buf)
		if err != nil {
			return 0, false, err
		}
		return lo, Compare(it, e) == 0, nil
	}
	return lo, false, nil
}

// childFor returns the downlink of an internal page to follow for e: the
// last entry whose separator is <= e (the first being -infinity).
func (n node) childFor(e Entry) (storage.BlockNumber, error) {
	if n.entries() <= 0 {
		return noBlock, fmt.Errorf("internal page has no downlinks")
	}
	pos, eq, err := n.lowerBound(e)
	if err != nil {
		return noBlock, err
	}
	if !eq {
		pos-- // last separator < e
	}
	pos = max(pos, n.first())
	var buf intKeyBuf
	_, child, err := n.view(pos, &buf)
	return child, err
}

// buildPage formats p as a tree page with op (its high key included) and
// the given entry items in order. The forward path and redo both use it,
// so they build identical pages.
func buildPage(p page.Page, op opaque, items [][]byte) error {
	page.Init(p, op.specialSize())
	encodeOpaque(p.Special(), op)
	off := 1
	if op.layout == layout2 && op.hasHigh() {
		hi, err := encodeItem(layout2, highItem, op.high, noBlock)
		if err != nil {
			return fmt.Errorf("build page: high key: %w", err)
		}
		if _, err := p.AddItem(hi, 1); err != nil {
			return fmt.Errorf("build page: high key: %w", err)
		}
		off = 2
	}
	for i, it := range items {
		if _, err := p.AddItem(it, page.OffsetNumber(off+i)); err != nil {
			return fmt.Errorf("build page: item %d: %w", off+i, err)
		}
	}
	return nil
}

// buildMeta formats p as the meta page.
func buildMeta(p page.Page, m meta) {
	page.Init(p, m.specialSize())
	encodeMeta(p.Special(), m)
}

// pageCapacity is the room for line pointers and items on a tree page.
func pageCapacity(layout uint16) int {
	sp := specialSize2
	if layout == layout1 {
		sp = specialSize1
	}
	return page.Size - page.HeaderSize - sp
}

// itemCost is the room an item takes on a page: its aligned bytes and its
// line pointer.
func itemCost(it []byte) int { return (len(it)+page.MaxAlign-1)&^(page.MaxAlign-1) + page.ItemIDSize }

// highCost is the room a layout-2 high key of key e takes (0 in layout 1).
func highCost(layout uint16, e Entry) int {
	if layout == layout1 {
		return 0
	}
	return itemCost(make([]byte, tupleHeader2+len(e.Key)))
}
