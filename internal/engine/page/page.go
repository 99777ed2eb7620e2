package page

import (
	"encoding/binary"
	"errors"
)

// Size is the size of every page in bytes.
const Size = 8192

// Header field offsets and sizes (see doc.go for the layout).
const (
	offLSN      = 0
	offChecksum = 8
	offFlags    = 12
	offLower    = 14
	offUpper    = 16
	offSpecial  = 18
	offVersion  = 20
	offPruneXID = 24

	// HeaderSize is the size of the page header; line pointers follow it.
	HeaderSize = 32
	// ItemIDSize is the size of one line pointer.
	ItemIDSize = 4
	// MaxAlign is the alignment of every item and of the special space.
	MaxAlign = 8
	// LayoutVersion is the page layout version stored in every header.
	LayoutVersion = 1
)

// OffsetNumber is a 1-based line pointer number; 0 is invalid.
type OffsetNumber uint16

// InvalidOffset is the OffsetNumber no item has.
const InvalidOffset OffsetNumber = 0

// LPState is the state of a line pointer.
type LPState uint8

// Line pointer states.
const (
	LPUnused   LPState = 0
	LPNormal   LPState = 1
	LPRedirect LPState = 2 // Off holds the target OffsetNumber, Len 0
	LPDead     LPState = 3 // storage reclaimed, slot kept until indexes are cleaned
)

// String names the state, for messages.
func (s LPState) String() string {
	switch s {
	case LPUnused:
		return "unused"
	case LPNormal:
		return "normal"
	case LPRedirect:
		return "redirect"
	case LPDead:
		return "dead"
	}
	return "invalid"
}

// Page header flags.
const (
	FlagAllVisible   uint16 = 1 << 0 // every tuple visible to everyone (mirrors the VM bit)
	FlagHasFreeLines uint16 = 1 << 1 // there are unused line pointers to reuse
)

// ErrNoSpace is returned by AddItem when the page cannot hold the item.
var ErrNoSpace = errors.New("page has no room for the item")

// ItemID is a decoded line pointer.
type ItemID struct {
	State LPState
	Off   uint16 // byte offset of the item (LPNormal) or redirect target (LPRedirect)
	Len   uint16 // item length in bytes (LPNormal)
}

func decodeItemID(v uint32) ItemID {
	return ItemID{
		Off:   uint16(v & 0x7FFF),
		State: LPState((v >> 15) & 0x3),
		Len:   uint16(v >> 17),
	}
}

func encodeItemID(id ItemID) uint32 {
	return uint32(id.Off&0x7FFF) | uint32(id.State&0x3)<<15 | uint32(id.Len&0x7FFF)<<17
}

// Page is one page's bytes (len == Size). Methods never panic on a page
// that passes Validate; on arbitrary bytes they return errors instead.
type Page []byte

// MaxItemSize is the largest item an empty page with no special space holds.
const MaxItemSize = Size - 64

// TID is a tuple identifier: heap block and line pointer. Index entries
// point at heap tuples with TIDs.
type TID struct {
	Block uint32
	Off   OffsetNumber
}

func maxAlign(n int) int { return (n + MaxAlign - 1) &^ (MaxAlign - 1) }

func (p Page) ok() bool { return len(p) == Size }

func (p Page) u16(off int) uint16 { return binary.LittleEndian.Uint16(p[off:]) }

func (p Page) put16(off int, v uint16) { binary.LittleEndian.PutUint16(p[off:], v) }

func (p Page) lower() int   { return int(p.u16(offLower)) }
func (p Page) upper() int   { return int(p.u16(offUpper)) }
func (p Page) special() int { return int(p.u16(offSpecial)) }

// Init formats p as an empty page with specialSize bytes of special space
// at its end (0 for heap pages; B-tree pages keep their links there). The
// special size is rounded up to MaxAlign and clamped to what the page can
// hold. A Page of the wrong length is left untouched.
func Init(p Page, specialSize int) {
	if !p.ok() {
		return
	}
	clear(p)
	specialSize = min(max(maxAlign(specialSize), 0), (Size-HeaderSize)&^(MaxAlign-1))
	p.put16(offLower, HeaderSize)
	p.put16(offUpper, uint16(Size-specialSize))
	p.put16(offSpecial, uint16(Size-specialSize))
	p.put16(offVersion, LayoutVersion)
}

// IsNew reports whether p was never initialized (all header fields zero).
// Init always sets upper, so a zero upper means "new", as in PostgreSQL.
func (p Page) IsNew() bool {
	return len(p) < HeaderSize || p.upper() == 0
}

// LSN is the LSN of the last WAL record that changed p.
func (p Page) LSN() uint64 {
	if len(p) < HeaderSize {
		return 0
	}
	return binary.LittleEndian.Uint64(p[offLSN:])
}

// SetLSN sets the page LSN.
func (p Page) SetLSN(lsn uint64) {
	if len(p) >= HeaderSize {
		binary.LittleEndian.PutUint64(p[offLSN:], lsn)
	}
}

// Checksum returns the stored checksum field.
func (p Page) Checksum() uint32 {
	if len(p) < HeaderSize {
		return 0
	}
	return binary.LittleEndian.Uint32(p[offChecksum:])
}

// Flags returns the header flags; SetFlags replaces them.
func (p Page) Flags() uint16 {
	if len(p) < HeaderSize {
		return 0
	}
	return p.u16(offFlags)
}

// SetFlags replaces the header flags.
func (p Page) SetFlags(f uint16) {
	if len(p) >= HeaderSize {
		p.put16(offFlags, f)
	}
}

// Version returns the layout version stored in the header.
func (p Page) Version() uint16 {
	if len(p) < HeaderSize {
		return 0
	}
	return p.u16(offVersion)
}

// PruneXID returns the header's prune hint: the oldest transaction id whose
// deletion on this page may make a tuple prunable (0 = nothing to prune).
func (p Page) PruneXID() uint64 {
	if len(p) < HeaderSize {
		return 0
	}
	return binary.LittleEndian.Uint64(p[offPruneXID:])
}

// SetPruneXID sets the prune hint.
func (p Page) SetPruneXID(xid uint64) {
	if len(p) >= HeaderSize {
		binary.LittleEndian.PutUint64(p[offPruneXID:], xid)
	}
}

// Lower returns the end of the line pointer array.
func (p Page) Lower() int {
	if len(p) < HeaderSize {
		return 0
	}
	return p.lower()
}

// Upper returns the start of the item area.
func (p Page) Upper() int {
	if len(p) < HeaderSize {
		return 0
	}
	return p.upper()
}

// SpecialOffset returns the start of the special space.
func (p Page) SpecialOffset() int {
	if len(p) < HeaderSize {
		return 0
	}
	return p.special()
}

// NumItems is the number of line pointers (the highest OffsetNumber).
func (p Page) NumItems() int {
	if !p.ok() {
		return 0
	}
	l := p.lower()
	if l <= HeaderSize || l > Size {
		return 0
	}
	return (l - HeaderSize) / ItemIDSize
}

func lpOffset(off OffsetNumber) int { return HeaderSize + (int(off)-1)*ItemIDSize }

// Item returns line pointer off; out-of-range offsets give an unused ItemID.
func (p Page) Item(off OffsetNumber) ItemID {
	if off == 0 || int(off) > p.NumItems() {
		return ItemID{}
	}
	return decodeItemID(binary.LittleEndian.Uint32(p[lpOffset(off):]))
}

func (p Page) setItem(off OffsetNumber, id ItemID) {
	binary.LittleEndian.PutUint32(p[lpOffset(off):], encodeItemID(id))
}

// ItemData returns the bytes of a normal item, aliasing the page. It returns
// nil for other states, out-of-range offsets and items outside the page.
func (p Page) ItemData(off OffsetNumber) []byte {
	id := p.Item(off)
	if id.State != LPNormal || id.Len == 0 {
		return nil
	}
	start, end := int(id.Off), int(id.Off)+int(id.Len)
	if start < HeaderSize || end > Size {
		return nil
	}
	return p[start:end:end]
}

// Special returns the special space (aliasing the page), or nil when the
// header's special offset is out of range.
func (p Page) Special() []byte {
	if !p.ok() {
		return nil
	}
	s := p.special()
	if s < HeaderSize || s > Size {
		return nil
	}
	return p[s:Size:Size]
}

// FreeSpace is the number of bytes a new item (plus its line pointer) may
// use: AddItem of at most FreeSpace bytes is guaranteed to succeed. Like
// PostgreSQL's PageGetFreeSpace it always reserves room for a new line
// pointer, and it is rounded down to MaxAlign.
func (p Page) FreeSpace() int {
	if !p.ok() {
		return 0
	}
	lo, up := p.lower(), p.upper()
	if lo < HeaderSize || up > Size || up < lo {
		return 0
	}
	n := up - lo - ItemIDSize
	if n < 0 {
		return 0
	}
	return n &^ (MaxAlign - 1)
}
