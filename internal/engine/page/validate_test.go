package page

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestValidateRejectsCorruptPages(t *testing.T) {
	base := func(t *testing.T) Page {
		p := newPage(t, 16)
		for _, n := range []int{10, 20, 30} {
			if _, err := p.AddItem(item(n, byte(n)), 0); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	setLP := func(p Page, off OffsetNumber, id ItemID) { p.setItem(off, id) }
	cases := []struct {
		name    string
		corrupt func(p Page)
		want    string
	}{
		{"bad version", func(p Page) { p.put16(offVersion, 9) }, "layout version"},
		{"lower below header", func(p Page) { p.put16(offLower, 8) }, "bounds"},
		{"lower above upper", func(p Page) { p.put16(offLower, uint16(p.upper()+4)) }, "bounds"},
		{"upper above special", func(p Page) { p.put16(offUpper, uint16(p.special()+8)) }, "bounds"},
		{"special beyond page", func(p Page) { p.put16(offSpecial, Size+8) }, "bounds"},
		{"special unaligned", func(p Page) { p.put16(offSpecial, uint16(p.special()+4)) }, "aligned"},
		{"lower mid line pointer", func(p Page) { p.put16(offLower, uint16(p.lower()-2)) }, "line pointer"},
		{"item below upper", func(p Page) { setLP(p, 1, ItemID{LPNormal, uint16(p.upper() - 8), 4}) }, "outside tuple area"},
		{"item past special", func(p Page) { setLP(p, 1, ItemID{LPNormal, uint16(p.special() - 8), 12}) }, "outside tuple area"},
		{"item overlaps another", func(p Page) {
			id := p.Item(2)
			setLP(p, 1, ItemID{LPNormal, id.Off, 5})
		}, "overlaps"},
		{"item unaligned", func(p Page) {
			id := p.Item(3)
			setLP(p, 3, ItemID{LPNormal, id.Off + 1, 4})
		}, "aligned"},
		{"normal with zero length", func(p Page) { setLP(p, 2, ItemID{LPNormal, p.Item(2).Off, 0}) }, "length 0"},
		{"redirect out of range", func(p Page) { setLP(p, 1, ItemID{LPRedirect, 4, 0}) }, "redirect target"},
		{"redirect to self", func(p Page) { setLP(p, 2, ItemID{LPRedirect, 2, 0}) }, "redirect target"},
		{"redirect to dead item", func(p Page) { p.SetDead(3); setLP(p, 1, ItemID{LPRedirect, 3, 0}) }, "want normal"},
		{"redirect with length", func(p Page) { setLP(p, 2, ItemID{LPRedirect, 1, 3}) }, "redirect has length"},
		{"dead with storage", func(p Page) { setLP(p, 2, ItemID{LPDead, p.Item(2).Off, 3}) }, "dead line pointer"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := base(t)
			c.corrupt(p)
			err := p.Validate()
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Validate = %v, want *ValidationError", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate = %q, want it to mention %q", err, c.want)
			}
		})
	}
}

// checkAccessors calls every accessor and mutator on a copy of p; it must
// not panic, and a page that validated must still validate after each
// mutation.
func checkAccessors(t *testing.T, p Page) {
	_, _, _, _ = p.LSN(), p.Flags(), p.PruneXID(), p.IsNew()
	_, _ = p.Special(), p.FreeSpace()
	n := p.NumItems()
	for i := 0; i <= n+1; i++ {
		off := OffsetNumber(i)
		id := p.Item(off)
		d := p.ItemData(off)
		if id.State == LPNormal && i >= 1 && i <= n && len(d) != int(id.Len) {
			t.Fatalf("item %d: ItemData has %d bytes, line pointer says %d", i, len(d), id.Len)
		}
	}
	hasRedirect := false
	for i := 1; i <= n; i++ {
		hasRedirect = hasRedirect || p.Item(OffsetNumber(i)).State == LPRedirect
	}
	// Mutations that keep a valid page valid (InsertItemAt and DeleteItems
	// renumber items, so only on pages without redirects, like B-tree pages).
	keep := []func(q Page){
		func(q Page) { q.Compact() },
		func(q Page) { _, _ = q.AddItem([]byte("fuzz"), 0) },
		func(q Page) { _, _ = q.AddItem([]byte("fuzz"), OffsetNumber(n+1)) },
	}
	if !hasRedirect {
		keep = append(keep,
			func(q Page) { _ = q.InsertItemAt([]byte("fuzzfuzzfuzz"), 1) },
			func(q Page) { q.DeleteItems([]OffsetNumber{1, OffsetNumber(n)}) })
	}
	// Compact's presorted pass and its bucket sort give the same bytes.
	q1, q2 := append(Page(nil), p...), append(Page(nil), p...)
	q1.compact(false)
	q2.compact(true)
	if !bytes.Equal(q1, q2) {
		t.Fatal("Compact's presorted pass and its bucket sort give different pages")
	}
	for i, m := range keep {
		q := append(Page(nil), p...)
		m(q)
		if err := q.Validate(); err != nil {
			t.Fatalf("mutation %d broke a valid page: %v", i, err)
		}
	}
	// State changes may break invariants the caller owns (a redirect's
	// target); they must only not panic.
	q := append(Page(nil), p...)
	q.SetDead(1)
	q.SetUnused(OffsetNumber(n))
	q.SetRedirect(OffsetNumber(n), 1)
	q.Compact()
	_ = q.Validate()
}

func FuzzPageDecode(f *testing.F) {
	for _, s := range seedPages() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p := make(Page, Size)
		copy(p, data)
		_ = VerifyChecksum(p, 0)
		if err := p.Validate(); err != nil {
			return
		}
		checkAccessors(t, p)
	})
}

func seedPages() [][]byte {
	var seeds [][]byte
	empty := make(Page, Size)
	Init(empty, 0)
	seeds = append(seeds, make([]byte, Size), append([]byte(nil), empty...))
	p := make(Page, Size)
	Init(p, 16)
	for i := 1; i <= 40; i++ {
		_, _ = p.AddItem(make([]byte, i*3), 0)
	}
	p.SetDead(3)
	p.SetRedirect(5, 6)
	p.SetUnused(7)
	SetChecksum(p, 0)
	seeds = append(seeds, append([]byte(nil), p...))
	p.Compact()
	seeds = append(seeds, append([]byte(nil), p...))
	hdr := make([]byte, HeaderSize+8)
	binary.LittleEndian.PutUint16(hdr[offLower:], 0xFFFF)
	seeds = append(seeds, hdr)
	return seeds
}

var updateCorpus = flag.Bool("update-corpus", false, "rewrite testdata/fuzz/FuzzPageDecode seeds")

// TestWriteFuzzCorpus regenerates the checked-in seed corpus when run with
// -update-corpus; otherwise it checks the corpus is present.
func TestWriteFuzzCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzPageDecode")
	if !*updateCorpus {
		ents, err := os.ReadDir(dir)
		if err != nil || len(ents) == 0 {
			t.Fatalf("seed corpus missing in %s (run go test -run TestWriteFuzzCorpus -update-corpus): %v", dir, err)
		}
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, s := range seedPages() {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
