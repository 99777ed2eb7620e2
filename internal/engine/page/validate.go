package page

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// ValidationError describes the first inconsistency Validate found.
type ValidationError struct {
	Item   OffsetNumber // 0 when the problem is in the header
	Reason string
}

func (e *ValidationError) Error() string {
	if e.Item == 0 {
		return "invalid page header: " + e.Reason
	}
	return fmt.Sprintf("invalid line pointer %d: %s", e.Item, e.Reason)
}

func headerErr(format string, args ...any) error {
	return &ValidationError{Reason: fmt.Sprintf(format, args...)}
}

func itemErr(off OffsetNumber, format string, args ...any) error {
	return &ValidationError{Item: off, Reason: fmt.Sprintf(format, args...)}
}

// Validate checks the header bounds and every line pointer (inside the
// tuple area, no overlaps, lengths within the page) and returns the first
// problem found, as a *ValidationError. An all-zero (new) page is valid.
func (p Page) Validate() error {
	if len(p) != Size {
		return headerErr("page is %d bytes, want %d", len(p), Size)
	}
	if AllZero(p) {
		return nil
	}
	if err := p.validateHeader(); err != nil {
		return err
	}
	return p.validateItems()
}

func (p Page) validateHeader() error {
	lo, up, sp := p.lower(), p.upper(), p.special()
	if v := p.Version(); v != LayoutVersion {
		return headerErr("layout version %d, want %d", v, LayoutVersion)
	}
	if lo < HeaderSize || lo > up || up > sp || sp > Size {
		return headerErr("bounds out of order: want %d <= lower %d <= upper %d <= special %d <= %d",
			HeaderSize, lo, up, sp, Size)
	}
	if (lo-HeaderSize)%ItemIDSize != 0 {
		return headerErr("lower %d does not end a line pointer", lo)
	}
	if sp%MaxAlign != 0 {
		return headerErr("special %d is not %d-byte aligned", sp, MaxAlign)
	}
	if up%MaxAlign != 0 {
		// Every writer keeps upper aligned (items are placed at aligned offsets below
		// it); an unaligned upper would make the next AddItem write an unaligned item.
		return headerErr("upper %d is not %d-byte aligned", up, MaxAlign)
	}
	return nil
}

type span struct {
	off   OffsetNumber
	start int
	end   int
}

// validateItems checks every line pointer in one pass: each is decoded
// once, checked for its state, and a normal item's 8-byte units are marked
// in a bitmap to detect overlaps (starts are aligned, checked first, so two
// items share a unit exactly when they share a byte). An overlap is only
// noted during the pass: a line-pointer error anywhere is reported first,
// and the overlap is then reported in start order by overlapErr (the slow
// path, taken only for a corrupt page). No allocation, linear in the item
// count.
func (p Page) validateItems() error {
	n := p.NumItems()
	up, sp := p.upper(), p.special()
	var used [Size / MaxAlign / 64]uint64
	overlap := false
	for i := 1; i <= n; i++ {
		off := OffsetNumber(i)
		id := decodeItemID(binary.LittleEndian.Uint32(p[lpOffset(off):]))
		switch id.State {
		case LPNormal:
			start, end := int(id.Off), int(id.Off)+int(id.Len)
			if id.Len == 0 {
				return itemErr(off, "normal item has length 0")
			}
			if start < up || end > sp {
				return itemErr(off, "item [%d,%d) outside tuple area [%d,%d)", start, end, up, sp)
			}
			if start%MaxAlign != 0 {
				return itemErr(off, "item offset %d is not %d-byte aligned", start, MaxAlign)
			}
			if overlap {
				continue
			}
			u, e := start/MaxAlign, (end+MaxAlign-1)/MaxAlign
			for u < e {
				w, b := u/64, uint(u%64)
				k := min(64-int(b), e-u)
				mask := ^uint64(0) >> (64 - uint(k)) << b
				if used[w]&mask != 0 {
					overlap = true
					break
				}
				used[w] |= mask
				u += k
			}
		case LPRedirect:
			if id.Len != 0 {
				return itemErr(off, "redirect has length %d", id.Len)
			}
			if t := int(id.Off); t < 1 || t > n || t == i {
				return itemErr(off, "redirect target %d out of range 1..%d or self", t, n)
			}
			if st := p.Item(OffsetNumber(id.Off)).State; st != LPNormal {
				return itemErr(off, "redirect target %d is %s, want normal", id.Off, st)
			}
		case LPDead, LPUnused:
			if id.Off != 0 || id.Len != 0 {
				return itemErr(off, "%s line pointer has offset %d length %d", id.State, id.Off, id.Len)
			}
		}
	}
	if overlap {
		return p.overlapErr(n)
	}
	return nil
}

// overlapErr finds and reports the first overlap in start order (the slow
// path, taken only for a corrupt page).
func (p Page) overlapErr(n int) error {
	spans := make([]span, 0, n)
	for i := 1; i <= n; i++ {
		off := OffsetNumber(i)
		if id := p.Item(off); id.State == LPNormal {
			spans = append(spans, span{off, int(id.Off), int(id.Off) + int(id.Len)})
		}
	}
	slices.SortFunc(spans, func(a, b span) int { return a.start - b.start })
	for i := 1; i < len(spans); i++ {
		if a, b := spans[i-1], spans[i]; a.end > b.start {
			return itemErr(b.off, "item [%d,%d) overlaps item %d [%d,%d)", b.start, b.end, a.off, a.start, a.end)
		}
	}
	return nil
}
