package btree

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
)

func seedLeafPage() page.Page {
	p := make(page.Page, page.Size)
	var items [][]byte
	for i := range 50 {
		items = append(items, encodeLeafItem(Entry{Key: int64(i * 3), TID: tidFor(i)}))
	}
	_ = buildPage(p, opaque{left: 4, right: 9, flags: flagLeaf | flagHasHigh, high: Entry{Key: 200}}, items)
	return p
}

func seedInternalPage() page.Page {
	p := make(page.Page, page.Size)
	items := [][]byte{encodeInternalItem(Entry{}, 1), encodeInternalItem(Entry{Key: 10}, 2), encodeInternalItem(Entry{Key: 20}, 3)}
	_ = buildPage(p, opaque{level: 1}, items)
	return p
}

type itemSeed struct {
	data []byte
	leaf bool
}

func itemSeeds() []itemSeed {
	return []itemSeed{
		{encodeLeafItem(Entry{Key: -5, TID: page.TID{Block: 7, Off: 3}}), true},
		{encodeInternalItem(Entry{Key: 99, TID: page.TID{Block: 1, Off: 1}}, 12), false},
		{encodeInternalItem(Entry{Key: 99}, 0), false},
		{[]byte{1, 2, 3}, true},
	}
}

func blockOpSeeds() [][]byte {
	leaf := seedLeafPage()
	n, _ := loadNode(leaf)
	var items [][]byte
	for off := 1; off <= n.count(); off++ {
		items = append(items, leaf.ItemData(page.OffsetNumber(off)))
	}
	return [][]byte{
		encodeInitOp(n.op, items),
		encodeInitOp(opaque{level: 1}, [][]byte{encodeInternalItem(Entry{}, 5)}),
		encodeInsertOp(3, encodeLeafItem(Entry{Key: 4})),
		encodeSetLeftOp(8),
		encodeDeleteOp([]page.OffsetNumber{1, 4, 9}),
		encodeMetaOp(meta{root: 3, level: 1}),
		{opDelete, 0xFF, 0xFF},
		{},
	}
}

func FuzzBtreeItem(f *testing.F) {
	for _, s := range itemSeeds() {
		f.Add(s.data, s.leaf)
	}
	f.Fuzz(func(t *testing.T, data []byte, leaf bool) {
		e, child, err := decodeItem(data, leaf)
		if err != nil {
			return
		}
		re := encodeLeafItem(e)
		if !leaf {
			re = encodeInternalItem(e, child)
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
		for _, base := range []page.Page{seedLeafPage(), seedInternalPage(), make(page.Page, page.Size)} {
			_ = d.apply(base) // errors are fine, panics are not
		}
	})
}

func FuzzBtreePage(f *testing.F) {
	f.Add([]byte(seedLeafPage()))
	f.Add([]byte(seedInternalPage()))
	f.Add(make([]byte, page.Size))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := make(page.Page, page.Size)
		copy(p, data)
		n, err := loadNode(p)
		if err != nil {
			return
		}
		for off := 0; off <= n.count()+1; off++ {
			_, _, _ = n.item(off)
		}
		_, _, _ = n.lowerBound(Entry{Key: 17})
		if !n.op.isLeaf() {
			_, _ = n.childFor(Entry{Key: 17})
		}
	})
}

var updateCorpus = flag.Bool("update-corpus", false, "rewrite the testdata/fuzz seed corpora")

// TestFuzzCorpusIsCheckedIn regenerates the seed corpora with
// -update-corpus; otherwise it checks they are present.
func TestFuzzCorpusIsCheckedIn(t *testing.T) {
	corpora := map[string][]string{}
	for _, s := range itemSeeds() {
		corpora["FuzzBtreeItem"] = append(corpora["FuzzBtreeItem"], fmt.Sprintf("go test fuzz v1\n[]byte(%q)\nbool(%v)\n", s.data, s.leaf))
	}
	for _, s := range blockOpSeeds() {
		corpora["FuzzBtreeBlockOp"] = append(corpora["FuzzBtreeBlockOp"], fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s))
	}
	for _, s := range []page.Page{seedLeafPage(), seedInternalPage()} {
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
