package btree

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
)

// corruptPage applies damage to page blk directly in the buffer pool.
func corruptPage(t *testing.T, ix *Index, blk storage.BlockNumber, damage func(p page.Page)) {
	t.Helper()
	b, err := ix.read(blk, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.Lock()
	damage(b.Page())
	b.MarkDirty(nil)
	b.Unlock()
	b.Release()
}

func TestCheckDetectsDamagedPages(t *testing.T) {
	tests := []struct {
		name   string
		damage func(p page.Page)
		want   string
	}{
		{"swapped pair of keys", func(p page.Page) {
			a, b := 32+4*4, 32+4*5 // line pointers of items 5 and 6
			x := binary.LittleEndian.Uint32(p[a:])
			binary.LittleEndian.PutUint32(p[a:], binary.LittleEndian.Uint32(p[b:]))
			binary.LittleEndian.PutUint32(p[b:], x)
		}, "is not above entry"},
		{"wrong left link", func(p page.Page) {
			n, _ := loadNode(p)
			n.op.left = 77
			encodeOpaque(p.Special(), n.op)
		}, "left link 77"},
		{"key above the high key", func(p page.Page) {
			n, _ := loadNode(p)
			// The last entry's key, made greater than the high key.
			it := p.ItemData(page.OffsetNumber(n.last()))
			if n.op.layout == layout1 {
				binary.LittleEndian.PutUint64(it, uint64(keyInt(t, n.op.high.Key)+5))
			} else {
				copy(it[tupleHeader2:], IntKey(keyInt(t, n.op.high.Key)+5))
			}
		}, "is not below the high key"},
		{"bad special space", func(p page.Page) { p.Special()[14] = 9 }, "layout version 9"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := newEnv(t, 128)
			ix := mustCreate(t, env, 10)
			for i := range 3_000 {
				if err := ix.Insert(IntKey(int64(i)), tidFor(i), nil); err != nil {
					t.Fatal(err)
				}
			}
			mustCheck(t, ix)
			// A middle leaf: it has a left sibling and a high key.
			leaf, err := ix.findLeaf(Entry{Key: IntKey(1500)}, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			corruptPage(t, ix, leaf, tc.damage)
			var msgs []string
			if err := ix.Check(func(blk storage.BlockNumber, msg string) {
				msgs = append(msgs, msg)
			}); err != nil {
				t.Fatal(err)
			}
			joined := strings.Join(msgs, "\n")
			if !strings.Contains(joined, tc.want) {
				t.Fatalf("check reported %q, want a message containing %q", joined, tc.want)
			}
		})
	}
}
