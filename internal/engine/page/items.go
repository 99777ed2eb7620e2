package page

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// maxItemLen is the largest length a line pointer can encode.
const maxItemLen = 0x7FFF

func (p Page) checkHeader() error {
	if len(p) != Size {
		return headerErr("page is %d bytes, want %d", len(p), Size)
	}
	return p.validateHeader()
}

// headerSane is the cheap check the mutators without an error result make
// before touching the page: on a page that fails it they do nothing.
func (p Page) headerSane() bool { return p.checkHeader() == nil }

func (p Page) firstUnused(from OffsetNumber) OffsetNumber {
	n := p.NumItems()
	for i := int(from); i <= n; i++ {
		if p.Item(OffsetNumber(i)).State == LPUnused {
			return OffsetNumber(i)
		}
	}
	return 0
}

// placeData copies data below upper and returns its offset; the caller has
// checked that the space is there.
func (p Page) placeData(data []byte) int {
	alen := maxAlign(len(data))
	up := p.upper() - alen
	copy(p[up:], data)
	clear(p[up+len(data) : up+alen])
	p.put16(offUpper, uint16(up))
	return up
}

func checkItemLen(data []byte) error {
	if len(data) == 0 {
		return errors.New("cannot add an empty item")
	}
	if len(data) > maxItemLen {
		return fmt.Errorf("item of %d bytes exceeds %d: %w", len(data), maxItemLen, ErrNoSpace)
	}
	return nil
}

// AddItem stores data in a new item. With off == 0 it reuses the first
// unused line pointer or appends one; with off != 0 it places the item at
// exactly that OffsetNumber (used by redo; the slot must be unused or one
// past the end). ErrNoSpace (wrapped) when the page cannot hold it.
func (p Page) AddItem(data []byte, off OffsetNumber) (OffsetNumber, error) {
	if err := p.checkHeader(); err != nil {
		return 0, fmt.Errorf("add item: %w", err)
	}
	if err := checkItemLen(data); err != nil {
		return 0, err
	}
	n := p.NumItems()
	reuse := false
	switch {
	case off == 0:
		if p.Flags()&FlagHasFreeLines != 0 {
			off = p.firstUnused(1)
			if off == 0 {
				p.SetFlags(p.Flags() &^ FlagHasFreeLines)
			}
		}
		if off == 0 {
			off = OffsetNumber(n + 1)
		} else {
			reuse = true
		}
	case int(off) > n+1:
		return 0, fmt.Errorf("add item at offset %d: page has %d items", off, n)
	case int(off) <= n:
		if st := p.Item(off).State; st != LPUnused {
			return 0, fmt.Errorf("add item at offset %d: slot is %s", off, st)
		}
		reuse = true
	}
	if !reuse && n+1 > maxItemLen {
		return 0, fmt.Errorf("add item: line pointer array full: %w", ErrNoSpace)
	}
	need := maxAlign(len(data))
	if !reuse {
		need += ItemIDSize
	}
	if free := p.upper() - p.lower(); need > free {
		return 0, fmt.Errorf("item of %d bytes needs %d, page has %d free: %w", len(data), need, free, ErrNoSpace)
	}
	if !reuse {
		p.put16(offLower, uint16(p.lower()+ItemIDSize))
	}
	start := p.placeData(data)
	p.setItem(off, ItemID{State: LPNormal, Off: uint16(start), Len: uint16(len(data))})
	if reuse && p.Flags()&FlagHasFreeLines != 0 && p.firstUnused(off+1) == 0 {
		p.SetFlags(p.Flags() &^ FlagHasFreeLines)
	}
	return off, nil
}

// InsertItemAt inserts data as item number off, shifting items off.. up by
// one (ordered pages such as B-tree pages). off must be in 1..NumItems()+1.
// Redirect targets are not renumbered: use it only on pages without
// redirects.
func (p Page) InsertItemAt(data []byte, off OffsetNumber) error {
	if err := p.checkHeader(); err != nil {
		return fmt.Errorf("insert item: %w", err)
	}
	if err := checkItemLen(data); err != nil {
		return err
	}
	n := p.NumItems()
	if off == 0 || int(off) > n+1 {
		return fmt.Errorf("insert item at offset %d: valid offsets are 1..%d", off, n+1)
	}
	need := maxAlign(len(data)) + ItemIDSize
	if free := p.upper() - p.lower(); need > free {
		return fmt.Errorf("item of %d bytes needs %d, page has %d free: %w", len(data), need, free, ErrNoSpace)
	}
	at := lpOffset(off)
	lo := p.lower()
	copy(p[at+ItemIDSize:lo+ItemIDSize], p[at:lo])
	p.put16(offLower, uint16(lo+ItemIDSize))
	start := p.placeData(data)
	p.setItem(off, ItemID{State: LPNormal, Off: uint16(start), Len: uint16(len(data))})
	return nil
}

// DeleteItems removes the given items from an ordered page, shifting later
// items down, and compacts the freed space. Offsets out of range are
// ignored, as are duplicates. Like InsertItemAt it does not renumber
// redirect targets.
func (p Page) DeleteItems(offs []OffsetNumber) {
	if !p.headerSane() || len(offs) == 0 {
		return
	}
	n := p.NumItems()
	var delBuf [(Size-HeaderSize)/ItemIDSize + 1]bool
	del := delBuf[:n+1]
	for _, o := range offs {
		if o >= 1 && int(o) <= n {
			del[o] = true
		}
	}
	// Shift the kept line pointers down, one 4-byte word each (a B-tree
	// leaf holds hundreds; a slice copy per pointer costs a memmove call).
	kept := 0
	for i := 1; i <= n; i++ {
		if del[i] {
			continue
		}
		kept++
		if kept != i {
			binary.LittleEndian.PutUint32(p[lpOffset(OffsetNumber(kept)):],
				binary.LittleEndian.Uint32(p[lpOffset(OffsetNumber(i)):]))
		}
	}
	lo := HeaderSize + kept*ItemIDSize
	clear(p[lo:p.lower()])
	p.put16(offLower, uint16(lo))
	p.Compact()
}

// SetUnused marks a line pointer unused (free for reuse by AddItem). Like
// SetDead and SetRedirect it leaves the item's storage to be reclaimed by
// the next Compact. Out-of-range offsets are ignored.
func (p Page) SetUnused(off OffsetNumber) {
	if !p.headerSane() || off == 0 || int(off) > p.NumItems() {
		return
	}
	p.setItem(off, ItemID{})
	p.SetFlags(p.Flags() | FlagHasFreeLines)
}

// SetDead marks a line pointer dead (storage reclaimable, slot kept).
func (p Page) SetDead(off OffsetNumber) {
	if !p.headerSane() || off == 0 || int(off) > p.NumItems() {
		return
	}
	p.setItem(off, ItemID{State: LPDead})
}

// SetRedirect makes off point at target. It does nothing when either is out
// of range or target == off.
func (p Page) SetRedirect(off, target OffsetNumber) {
	n := p.NumItems()
	if !p.headerSane() || off == 0 || int(off) > n || target == 0 || int(target) > n || target == off {
		return
	}
	p.setItem(off, ItemID{State: LPRedirect, Off: uint16(target)})
}

// Compact repacks normal items at the end of the page, keeping their
// OffsetNumbers, and drops trailing unused line pointers. Freed bytes are
// zeroed. A damaged page (items out of bounds, unaligned or sharing a
// start) is left unchanged.
//
// A page whose items lie in descending order of address as their offsets
// ascend, each clear of the next (what AddItem in offset order, a bulk
// load and a bottom-up B-tree build leave, and what Compact itself
// leaves), is repacked in one pass over the line pointers, an item already
// in place not copied (PostgreSQL's compactify_tuples has the same
// presorted case); any other page goes through a bucket sort of the item
// starts. Both give the same bytes.
func (p Page) Compact() { p.compact(false) }

// compact is Compact; sorting forces the bucket sort even on a presorted
// page (tests compare the two).
func (p Page) compact(sorting bool) {
	if !p.headerSane() {
		return
	}
	n := p.NumItems()
	sp, lo := p.special(), p.lower()
	// One pass over the line pointers: bounds and alignment of every
	// normal item, whether they are presorted, the last used slot and the
	// first unused one.
	presorted := true
	prev, total := sp, 0
	last, firstFree := 0, 0
	for i := 1; i <= n; i++ {
		id := decodeItemID(binary.LittleEndian.Uint32(p[lpOffset(OffsetNumber(i)):]))
		if id.State == LPUnused {
			if firstFree == 0 {
				firstFree = i
			}
			continue
		}
		last = i
		if id.State != LPNormal {
			continue
		}
		start, end := int(id.Off), int(id.Off)+int(id.Len)
		if id.Len == 0 || start < lo || end > sp || start%MaxAlign != 0 {
			return
		}
		a := maxAlign(int(id.Len))
		total += a
		if start+a > prev {
			presorted = false
		}
		prev = start
	}
	if total > sp-lo {
		return
	}
	var up int
	if presorted && !sorting {
		up = p.compactPresorted(n, sp)
	} else if up = p.compactSorting(n, sp); up < 0 {
		return
	}
	lower := HeaderSize + last*ItemIDSize
	clear(p[lower:up])
	p.put16(offLower, uint16(lower))
	p.put16(offUpper, uint16(up))
	if firstFree != 0 && firstFree < last {
		p.SetFlags(p.Flags() | FlagHasFreeLines)
	} else {
		p.SetFlags(p.Flags() &^ FlagHasFreeLines)
	}
}

// moveItem moves normal item off, l bytes at start, to just below up and
// returns the new upper bound; the alignment padding after it is zeroed.
func (p Page) moveItem(off OffsetNumber, start, l, up int) int {
	up -= maxAlign(l)
	if up != start {
		copy(p[up:], p[start:start+l])
		p.setItem(off, ItemID{State: LPNormal, Off: uint16(up), Len: uint16(l)})
	}
	clear(p[up+l : up+maxAlign(l)])
	return up
}

// compactPresorted is Compact of a page whose normal items' starts descend
// as their offsets ascend, each item ending at or below the previous
// one's start: moving them in offset order, each destination lies at or
// above its source and below every item already moved, so no source is
// overwritten before it is copied. It returns the new upper bound.
func (p Page) compactPresorted(n, sp int) int {
	up := sp
	for i := 1; i <= n; i++ {
		id := decodeItemID(binary.LittleEndian.Uint32(p[lpOffset(OffsetNumber(i)):]))
		if id.State == LPNormal {
			up = p.moveItem(OffsetNumber(i), int(id.Off), int(id.Len), up)
		}
	}
	return up
}

// compactSorting is Compact of any other page: its normal items are
// bucketed by start unit (on a valid page starts are distinct and aligned,
// Validate checks it), so one pass over the units visits them in order of
// address, and they are moved highest first. It returns the new upper
// bound, or -1 (nothing changed) when two items share a start.
func (p Page) compactSorting(n, sp int) int {
	var byStart [Size / MaxAlign]uint16
	for i := 1; i <= n; i++ {
		id := p.Item(OffsetNumber(i))
		if id.State != LPNormal {
			continue
		}
		u := int(id.Off) / MaxAlign
		if byStart[u] != 0 {
			return -1
		}
		byStart[u] = uint16(i)
	}
	up := sp
	// Move items in descending order of start: each destination lies at or
	// above its source and below every item already moved, so no source is
	// overwritten before it is copied.
	for u := sp/MaxAlign - 1; u >= 0; u-- {
		if i := byStart[u]; i != 0 {
			id := p.Item(OffsetNumber(i))
			up = p.moveItem(OffsetNumber(i), int(id.Off), int(id.Len), up)
		}
	}
	return up
}
