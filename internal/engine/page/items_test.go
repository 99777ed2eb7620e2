package page

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

func newPage(t *testing.T, special int) Page {
	t.Helper()
	p := make(Page, Size)
	Init(p, special)
	if err := p.Validate(); err != nil {
		t.Fatalf("fresh page invalid: %v", err)
	}
	return p
}

func item(n int, b byte) []byte { return bytes.Repeat([]byte{b}, n) }

// mustValid fails the test when p does not validate; every mutation in
// these tests is followed by it.
func mustValid(t *testing.T, p Page) {
	t.Helper()
	if err := p.Validate(); err != nil {
		t.Fatalf("page invalid after mutation: %v", err)
	}
}

func TestInitLeavesEmptyPageWithSpecialSpace(t *testing.T) {
	cases := []struct{ special, want int }{{0, 0}, {16, 16}, {13, 16}, {-5, 0}, {Size * 2, Size - HeaderSize}}
	for _, c := range cases {
		p := newPage(t, c.special)
		if got := len(p.Special()); got != c.want {
			t.Errorf("Init(special=%d): special space %d bytes, want %d", c.special, got, c.want)
		}
		if p.NumItems() != 0 || p.IsNew() {
			t.Errorf("Init(special=%d): NumItems=%d IsNew=%v", c.special, p.NumItems(), p.IsNew())
		}
	}
	if !Page(make([]byte, Size)).IsNew() {
		t.Error("zero page is not IsNew")
	}
}

func TestAddItemStoresDataAlignedAndReturnsOffsets(t *testing.T) {
	p := newPage(t, 0)
	lens := []int{1, 7, 8, 9, 100}
	for i, l := range lens {
		off, err := p.AddItem(item(l, byte(i+1)), 0)
		if err != nil {
			t.Fatalf("AddItem(%d bytes): %v", l, err)
		}
		if off != OffsetNumber(i+1) {
			t.Fatalf("AddItem #%d returned offset %d", i, off)
		}
		mustValid(t, p)
	}
	for i, l := range lens {
		id := p.Item(OffsetNumber(i + 1))
		if id.State != LPNormal || int(id.Len) != l || id.Off%MaxAlign != 0 {
			t.Errorf("item %d: %+v", i+1, id)
		}
		if !bytes.Equal(p.ItemData(OffsetNumber(i+1)), item(l, byte(i+1))) {
			t.Errorf("item %d data differs", i+1)
		}
	}
}

func TestAddItemFillsPageThenReportsNoSpace(t *testing.T) {
	p := newPage(t, 0)
	for {
		fs := p.FreeSpace()
		if fs < 40 {
			break
		}
		if _, err := p.AddItem(item(40, 1), 0); err != nil {
			t.Fatalf("AddItem of 40 bytes with FreeSpace %d: %v", fs, err)
		}
	}
	mustValid(t, p)
	if _, err := p.AddItem(item(p.FreeSpace()+MaxAlign, 1), 0); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("AddItem beyond free space: err=%v, want ErrNoSpace", err)
	}
	if _, err := newPage(t, 0).AddItem(item(MaxItemSize, 1), 0); err != nil {
		t.Fatalf("MaxItemSize item does not fit an empty page: %v", err)
	}
}

func TestFreeSpaceIsAlwaysEnoughForAnItemOfThatSize(t *testing.T) {
	for special := 0; special <= 64; special += 8 {
		for fill := 1; fill < 200; fill += 13 {
			p := newPage(t, special)
			for p.FreeSpace() > fill+16 {
				if _, err := p.AddItem(item(fill, 2), 0); err != nil {
					t.Fatal(err)
				}
			}
			if fs := p.FreeSpace(); fs > 0 {
				if _, err := p.AddItem(item(fs, 3), 0); err != nil {
					t.Fatalf("special %d fill %d: AddItem(FreeSpace()=%d): %v", special, fill, fs, err)
				}
			}
			mustValid(t, p)
		}
	}
}

func TestAddItemAtExplicitOffset(t *testing.T) {
	cases := []struct {
		name    string
		prepare func(p Page)
		off     OffsetNumber
		wantErr bool
	}{
		{"one past end of empty page", func(Page) {}, 1, false},
		{"beyond end", func(Page) {}, 2, true},
		{"occupied slot", func(p Page) { _, _ = p.AddItem(item(8, 1), 0) }, 1, true},
		{"dead slot", func(p Page) { _, _ = p.AddItem(item(8, 1), 0); p.SetDead(1) }, 1, true},
		{"unused slot", func(p Page) {
			_, _ = p.AddItem(item(8, 1), 0)
			_, _ = p.AddItem(item(8, 1), 0)
			p.SetUnused(1)
		}, 1, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newPage(t, 0)
			c.prepare(p)
			got, err := p.AddItem(item(16, 9), c.off)
			if (err != nil) != c.wantErr {
				t.Fatalf("AddItem at %d: err=%v, wantErr=%v", c.off, err, c.wantErr)
			}
			if err == nil && (got != c.off || !bytes.Equal(p.ItemData(got), item(16, 9))) {
				t.Fatalf("AddItem at %d stored at %d", c.off, got)
			}
			mustValid(t, p)
		})
	}
}

func TestAddItemReusesFirstUnusedSlot(t *testing.T) {
	p := newPage(t, 0)
	for i := 0; i < 4; i++ {
		if _, err := p.AddItem(item(8, byte(i)), 0); err != nil {
			t.Fatal(err)
		}
	}
	p.SetUnused(2)
	p.SetUnused(3)
	if p.Flags()&FlagHasFreeLines == 0 {
		t.Fatal("SetUnused did not set FlagHasFreeLines")
	}
	for _, want := range []OffsetNumber{2, 3, 5} {
		got, err := p.AddItem(item(8, 7), 0)
		if err != nil || got != want {
			t.Fatalf("AddItem = %d, %v; want %d", got, err, want)
		}
		mustValid(t, p)
	}
	if p.Flags()&FlagHasFreeLines != 0 {
		t.Fatal("FlagHasFreeLines still set with no unused slot")
	}
}

func TestLinePointerStateChangesAndCompact(t *testing.T) {
	type op func(p Page)
	cases := []struct {
		name      string
		ops       []op
		wantState []LPState // per OffsetNumber after Compact
		wantFree  func(before int) bool
	}{
		{
			name:      "dead keeps slot and frees storage",
			ops:       []op{func(p Page) { p.SetDead(2) }},
			wantState: []LPState{LPNormal, LPDead, LPNormal},
		},
		{
			name:      "trailing unused line pointers are dropped",
			ops:       []op{func(p Page) { p.SetUnused(3) }, func(p Page) { p.SetUnused(2) }},
			wantState: []LPState{LPNormal},
		},
		{
			name:      "middle unused slot is kept",
			ops:       []op{func(p Page) { p.SetUnused(2) }},
			wantState: []LPState{LPNormal, LPUnused, LPNormal},
		},
		{
			name:      "redirect keeps slot and points at target",
			ops:       []op{func(p Page) { p.SetRedirect(1, 3) }, func(p Page) { p.SetUnused(2) }},
			wantState: []LPState{LPRedirect, LPUnused, LPNormal},
		},
		{
			name:      "redirect to self is ignored",
			ops:       []op{func(p Page) { p.SetRedirect(1, 1) }, func(p Page) { p.SetRedirect(1, 9) }},
			wantState: []LPState{LPNormal, LPNormal, LPNormal},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newPage(t, 24)
			for i := 1; i <= 3; i++ {
				if _, err := p.AddItem(item(10*i, byte(i)), 0); err != nil {
					t.Fatal(err)
				}
			}
			freeBefore := p.FreeSpace()
			for _, o := range c.ops {
				o(p)
				mustValid(t, p)
			}
			p.Compact()
			mustValid(t, p)
			if p.NumItems() != len(c.wantState) {
				t.Fatalf("NumItems = %d, want %d", p.NumItems(), len(c.wantState))
			}
			reclaimed := 0
			for i, want := range c.wantState {
				off := OffsetNumber(i + 1)
				id := p.Item(off)
				if id.State != want {
					t.Errorf("item %d state %s, want %s", off, id.State, want)
				}
				if want == LPNormal && !bytes.Equal(p.ItemData(off), item(10*(i+1), byte(i+1))) {
					t.Errorf("item %d data changed by Compact", off)
				}
			}
			for i := 1; i <= 3; i++ {
				if i > len(c.wantState) || c.wantState[i-1] != LPNormal {
					reclaimed += maxAlign(10 * i)
				}
			}
			if got := p.FreeSpace(); got < freeBefore+reclaimed {
				t.Errorf("FreeSpace after Compact %d, want at least %d", got, freeBefore+reclaimed)
			}
			if p.Item(1).State == LPRedirect && p.Item(1).Off != 3 {
				t.Errorf("redirect target %d, want 3", p.Item(1).Off)
			}
		})
	}
}

func TestInsertItemAtShiftsLaterItems(t *testing.T) {
	p := newPage(t, 16)
	for _, s := range []string{"a", "c", "e"} {
		if _, err := p.AddItem([]byte(s), 0); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		off  OffsetNumber
		data string
	}{{2, "b"}, {4, "d"}, {1, "0"}, {7, "f"}}
	for _, s := range steps {
		if err := p.InsertItemAt([]byte(s.data), s.off); err != nil {
			t.Fatalf("InsertItemAt(%q, %d): %v", s.data, s.off, err)
		}
		mustValid(t, p)
	}
	if got := itemsString(p); got != "0abcdef" {
		t.Fatalf("items %q, want 0abcdef", got)
	}
	for _, bad := range []OffsetNumber{0, 9} {
		if err := p.InsertItemAt([]byte("x"), bad); err == nil {
			t.Errorf("InsertItemAt at %d succeeded", bad)
		}
	}
}

func TestDeleteItemsShiftsDownAndReclaimsSpace(t *testing.T) {
	cases := []struct {
		del  []OffsetNumber
		want string
	}{
		{nil, "abcdef"},
		{[]OffsetNumber{1}, "bcdef"},
		{[]OffsetNumber{6}, "abcde"},
		{[]OffsetNumber{2, 4, 4, 99, 0}, "acef"},
		{[]OffsetNumber{1, 2, 3, 4, 5, 6}, ""},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.del), func(t *testing.T) {
			p := newPage(t, 16)
			for _, r := range "abcdef" {
				if _, err := p.AddItem(item(20, byte(r)), 0); err != nil {
					t.Fatal(err)
				}
			}
			p.DeleteItems(c.del)
			mustValid(t, p)
			if got := itemsString(p); got != c.want {
				t.Fatalf("items %q, want %q", got, c.want)
			}
			k := len(c.want)
			wantFree := (Size - 16 - HeaderSize - k*(24+ItemIDSize) - ItemIDSize) &^ (MaxAlign - 1)
			if p.FreeSpace() != wantFree {
				t.Fatalf("FreeSpace %d, want %d", p.FreeSpace(), wantFree)
			}
		})
	}
}

func itemsString(p Page) string {
	var b []byte
	for i := 1; i <= p.NumItems(); i++ {
		if d := p.ItemData(OffsetNumber(i)); d != nil {
			b = append(b, d[0])
		}
	}
	return string(b)
}

func TestMutatorsIgnoreUninitializedAndShortPages(t *testing.T) {
	for _, p := range []Page{make(Page, Size), make(Page, 10), nil} {
		if _, err := p.AddItem([]byte("x"), 0); err == nil {
			t.Errorf("AddItem on %d-byte uninitialized page succeeded", len(p))
		}
		if err := p.InsertItemAt([]byte("x"), 1); err == nil {
			t.Errorf("InsertItemAt on %d-byte uninitialized page succeeded", len(p))
		}
		p.SetDead(1)
		p.SetUnused(1)
		p.SetRedirect(1, 2)
		p.DeleteItems([]OffsetNumber{1})
		p.Compact()
		Init(p, 0)
		SetChecksum(p, 1)
		p.SetLSN(5)
		if p.NumItems() != 0 || p.ItemData(1) != nil || p.FreeSpace() != 0 && len(p) != Size {
			t.Errorf("%d-byte page reports items", len(p))
		}
	}
}

// TestCompactLeavesDamagedPageUnchanged: Compact must not move bytes of a page whose items
// overlap, are unaligned or leave their bounds (moving them could overwrite live data).
func TestCompactLeavesDamagedPageUnchanged(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(p Page)
	}{
		{"two items share a start", func(p Page) {
			id := p.Item(2)
			p.setItem(3, ItemID{State: LPNormal, Off: id.Off, Len: id.Len})
		}},
		{"unaligned start", func(p Page) {
			id := p.Item(2)
			p.setItem(2, ItemID{State: LPNormal, Off: id.Off + 1, Len: id.Len - 1})
		}},
		{"item beyond the special space", func(p Page) {
			p.setItem(1, ItemID{State: LPNormal, Off: uint16(Size - 8), Len: 64})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPage(t, 0)
			for i := 0; i < 4; i++ {
				if _, err := p.AddItem(item(40+i, byte('a'+i)), 0); err != nil {
					t.Fatal(err)
				}
			}
			p.SetDead(4) // something for Compact to reclaim
			tc.damage(p)
			before := bytes.Clone(p)
			p.Compact()
			if !bytes.Equal(before, p) {
				t.Fatal("Compact changed a damaged page")
			}
		})
	}
}

// TestCompactOfAPresortedPageMatchesTheBucketSort: a page whose items lie
// in descending address order (filled in offset order, as a bulk load or a
// bottom-up B-tree build leaves it) is compacted in one pass over its line
// pointers; the result is byte for byte the one the bucket sort of item
// starts gives, and the items keep their data.
func TestCompactOfAPresortedPageMatchesTheBucketSort(t *testing.T) {
	cases := map[string]func(p Page){
		"heap page, every fifth slot unused": func(p Page) {
			for off := OffsetNumber(3); int(off) <= p.NumItems(); off += 5 {
				p.SetUnused(off)
			}
		},
		"heap page, dead and trailing unused slots": func(p Page) {
			p.SetDead(1)
			p.SetUnused(2)
			p.SetUnused(OffsetNumber(p.NumItems()))
			p.SetUnused(OffsetNumber(p.NumItems() - 1))
		},
		"ordered page, every fifth item deleted": func(p Page) {
			var offs []OffsetNumber
			for off := OffsetNumber(3); int(off) <= p.NumItems(); off += 5 {
				offs = append(offs, off)
			}
			p.DeleteItems(offs) // compacts through the presorted pass
		},
		"nothing to reclaim": func(Page) {},
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			p := newPage(t, 16)
			var want []string
			for i := 0; ; i++ {
				d := []byte(fmt.Sprintf("item-%03d-%s", i, bytes.Repeat([]byte{'x'}, i%13)))
				if _, err := p.AddItem(d, 0); err != nil {
					break
				}
			}
			change(p)
			for i := 1; i <= p.NumItems(); i++ {
				if d := p.ItemData(OffsetNumber(i)); d != nil {
					want = append(want, string(d))
				}
			}
			fast, sorted := append(Page(nil), p...), append(Page(nil), p...)
			fast.compact(false)
			sorted.compact(true)
			mustValid(t, fast)
			if !bytes.Equal(fast, sorted) {
				t.Fatal("presorted pass and bucket sort give different pages")
			}
			var got []string
			for i := 1; i <= fast.NumItems(); i++ {
				if d := fast.ItemData(OffsetNumber(i)); d != nil {
					got = append(got, string(d))
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("items after Compact %q, want %q", got, want)
			}
			if fast.FreeSpace() < p.FreeSpace() {
				t.Fatalf("free space fell from %d to %d", p.FreeSpace(), fast.FreeSpace())
			}
		})
	}
}
