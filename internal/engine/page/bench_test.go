package page

import "testing"

// benchPage fills a page with items of itemLen bytes in offset order (as a
// bulk load or a bottom-up B-tree build leaves it) and returns it with
// every fifth offset, starting at the third: the 20 % a lazy vacuum of
// bulkdata's table removes.
func benchPage(b *testing.B, itemLen, special int) (Page, []OffsetNumber) {
	b.Helper()
	p := make(Page, Size)
	Init(p, special)
	data := make([]byte, itemLen)
	var dead []OffsetNumber
	for {
		off, err := p.AddItem(data, 0)
		if err != nil {
			break
		}
		if off%5 == 3 {
			dead = append(dead, off)
		}
	}
	return p, dead
}

// BenchmarkCompactAfterSetUnused is the second heap pass's page change: a
// fifth of the slots of a full heap page (bulkdata's 55 rows a page)
// become unused and the page is compacted.
func BenchmarkCompactAfterSetUnused(b *testing.B) {
	src, dead := benchPage(b, 140, 0)
	p := make(Page, Size)
	for b.Loop() {
		copy(p, src)
		for _, off := range dead {
			p.SetUnused(off)
		}
		p.Compact()
	}
}

// BenchmarkDeleteItemsOfALeaf is the B-tree bulk delete's page change: a
// fifth of the entries of a full leaf (24-byte items, 16 bytes of special
// space) are deleted.
func BenchmarkDeleteItemsOfALeaf(b *testing.B) {
	src, dead := benchPage(b, 24, 16)
	p := make(Page, Size)
	for b.Loop() {
		copy(p, src)
		p.DeleteItems(dead)
	}
}
