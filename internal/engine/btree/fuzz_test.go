package btree

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
)

func mustItem(layout uint16, kind itemKind, e Entry, child storage.BlockNumber) []byte {
	b, err := encodeItem(layout, kind, e, child)
	if err != nil {
		panic(err)
	}
	return b
}

func mustInitOp(op opaque, items [][]byte) []byte {
	b, err := encodeInitOp(op, items)
	if err != nil {
		panic(err)
	}
	return b
}

// seedLeafPage is a leaf with a high key in layout (layout 2 with keys of
// every length from 0 to 49 bytes).
func seedLeafPage(layout uint16) page.Page {
	p := make(page.Page, page.Size)
	var items [][]byte
	for i := range 50 {
		k := IntKey(int64(i * 3))
		if layout == layout2 {
			k = append(bytes.Repeat([]byte{'a'}, i), 0, 1)
		}
		items = append(items, mustItem(layout, leafItem, Entry{Key: k, TID: tidFor(i)}, noBlock))
	}
	high := IntKey(200)
	if layout == layout2 {
		high = []byte{0xff}
	}
	_ = buildPage(p, opaque{left: 4, right: 9, flags: flagLeaf | flagHasHigh, layout: layout, high: Entry{Key: high}}, items)
	return p
}

func seedInternalPage(layout uint16) page.Page {
	p := make(page.Page, page.Size)
	items := [][]byte{mustItem(layout, pivotItem, Entry{Key: IntKey(0)}, 1), mustItem(layout, pivotItem, Entry{Key: IntKey(10)}, 2),
		mustItem(layout, pivotItem, Entry{Key: IntKey(20)}, 3)}
	_ = buildPage(p, opaque{level: 1, layout: layout}, items)
	return p
}

type itemSeed struct {
	data   []byte
	layout uint16
	kind   itemKind
}

func itemSeeds() []itemSeed {
	return []itemSeed{
		{mustItem(layout1, leafItem, Entry{Key: IntKey(-5), TID: page.TID{Block: 7, Off: 3}}, noBlock), layout1, leafItem},
		{mustItem(layout1, pivotItem, Entry{Key: IntKey(99), TID: page.TID{Block: 1, Off: 1}}, 12), layout1, pivotItem},
		{mustItem(layout2, leafItem, Entry{Key: []byte("\x01abc\x00\x01"), TID: page.TID{Block: 7, Off: 3}}, noBlock), layout2, leafItem},
		{mustItem(layout2, pivotItem, Entry{Key: IntKey(99), TID: page.TID{Block: 1, Off: 1}}, 12), layout2, pivotItem},
		{mustItem(layout2, highItem, Entry{Key: []byte{}}, noBlock), layout2, highItem},
		{[]byte{1, 2, 3}, layout2, leafItem},
	}
}

func blockOpSeeds() [][]byte {
	var out [][]byte
	for _, layout := range []uint16{layout1, layout2} {
		leaf := seedLeafPage(layout)
		n, _ := loadNode(leaf)
		var items [][]byte
		for off := n.first(); off <= n.last(); off++ {
			items = append(items, leaf.ItemData(page.OffsetNumber(off)))
		}
		out = append(out,
			mustInitOp(n.op, items),
			mustInitOp(opaque{level: 1, layout: layout}, [][]byte{mustItem(layout, pivotItem, Entry{Key: IntKey(0)}, 5)}),
			encodeInsertOp(3, mustItem(layout, leafItem, Entry{Key: IntKey(4)}, noBlock)),
			encodeMetaOp(meta{root: 3, level: 1, layout: layout}))
	}
	return append(out,
		encodeSetLeftOp(8),
		encodeDeleteOp([]page.OffsetNumber{1, 4, 9}),
		[]byte{opDelete, 0xFF, 0xFF},
		[]byte{})
}

func FuzzBtreeItem(f *testing.F) {
	for _, s := range itemSeeds() {
		f.Add(s.data, s.layout == layout2, uint8(s.kind))
	}
	f.Fuzz(func(t *testing.T, data []byte, two bool, kind uint8) {
		layout := layout1
		if two {
			layout = layout2
		}
		k := itemKind(kind % 3)
		e, child, err := decodeItem(data, layout, k)
		if k == leafItem {
			// The bulk delete's TID-only reader accepts exactly what
			// decodeItem accepts and reads the same TID.
			tid, terr := leafTID(data, layout)
			if (terr == nil) != (err == nil) || (err == nil && tid != e.TID) {
				t.Fatalf("leaf item %x: leafTID %v, %v; decodeItem %v, %v", data, tid, terr, e.TID, err)
			}
		}
		if err != nil {
			return
		}
		re, err := encodeItem(layout, k, e, child)
		if err != nil {
			t.Fatalf("item %x decodes to %+v/%d, which does not encode: %v", data, e, child, err)
		}
		if !bytes.Equal(re, data) {
			t.Fatalf("item %x decodes to %+v/%d, which encodes to %x", data, e, child, re)
		}
	})
}

func FuzzBtreeBlockOp(f *testing.F) {
	for _, s := range blockOpSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := decodeBlockOp(data)
		if err != nil {
			return
		}
		for _, base := range []page.Page{seedLeafPage(layout1), seedInternalPage(layout1), seedLeafPage(layout2),
			seedInternalPage(layout2), make(page.Page, page.Size)} {
			if d.apply(base) != nil {
				continue
			}
			if d.kind == opInit || d.kind == opInsert { // a page redo built must load and decode
				n, err := loadNode(base)
				if err != nil {
					t.Fatalf("page built by op %x does not load: %v", data, err)
				}
				for off := n.first(); off <= n.last(); off++ {
					if _, _, err := n.item(off); err != nil {
						t.Fatalf("page built by op %x: item %d: %v", data, off, err)
					}
				}
			}
		}
	})
}

func FuzzBtreePage(f *testing.F) {
	for _, layout := range []uint16{layout1, layout2} {
		f.Add([]byte(seedLeafPage(layout)))
		f.Add([]byte(seedInternalPage(layout)))
	}
	f.Add(make([]byte, page.Size))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := make(page.Page, page.Size)
		copy(p, data)
		n, err := loadNode(p)
		if err != nil {
			return
		}
		for off := 0; off <= n.last()+1; off++ {
			_, _, _ = n.item(off)
		}
		_, _, _ = n.lowerBound(Entry{Key: IntKey(17)})
		if !n.op.isLeaf() {
			_, _ = n.childFor(Entry{Key: IntKey(17)})
		}
	})
}

var updateCorpus = flag.Bool("update-corpus", false, "rewrite the testdata/fuzz seed corpora")

// TestFuzzCorpusIsCheckedIn regenerates the seed corpora with
// -update-corpus; otherwise it checks they are present.
func TestFuzzCorpusIsCheckedIn(t *testing.T) {
	corpora := map[string][]string{}
	for _, s := range itemSeeds() {
		corpora["FuzzBtreeItem"] = append(corpora["FuzzBtreeItem"],
			fmt.Sprintf("go test fuzz v1\n[]byte(%q)\nbool(%v)\nbyte(%q)\n", s.data, s.layout == layout2, byte(s.kind)))
	}
	for _, s := range blockOpSeeds() {
		corpora["FuzzBtreeBlockOp"] = append(corpora["FuzzBtreeBlockOp"], fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s))
	}
	for _, s := range []page.Page{seedLeafPage(layout1), seedInternalPage(layout1), seedLeafPage(layout2), seedInternalPage(layout2)} {
		corpora["FuzzBtreePage"] = append(corpora["FuzzBtreePage"], fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", []byte(s)))
	}
	for name, bodies := range corpora {
		dir := filepath.Join("testdata", "fuzz", name)
		if !*updateCorpus {
			if ents, err := os.ReadDir(dir); err != nil || len(ents) == 0 {
				t.Fatalf("seed corpus missing in %s (run go test -run TestFuzzCorpusIsCheckedIn -update-corpus): %v", dir, err)
			}
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i, body := range bodies {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
