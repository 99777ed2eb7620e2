package btree

import (
	"encoding/binary"
	"fmt"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/redo"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// Record kinds (wal.Record.Info under wal.RmgrBtree). They name what
// happened; redo does not need them, since every block reference carries
// its own operation (see doc.go).
const (
	InfoCreate     uint8 = 1 // meta page and empty root leaf
	InfoInsert     uint8 = 2 // one entry into a page with room
	InfoSplit      uint8 = 3 // an insert that split pages, up to a new root
	InfoBulkDelete uint8 = 4 // entries removed from one leaf by vacuum
	InfoBuild      uint8 = 5 // pages written by a bottom-up build
)

// Per-block operations: the first byte of BlockRef.Data.
const (
	opInit    byte = 1 // rebuild the page: special space + items (WillInit)
	opInsert  byte = 2 // insert one item at an offset
	opSetLeft byte = 3 // set the left-sibling link
	opDelete  byte = 4 // delete items at offsets
	opMeta    byte = 5 // rebuild the meta page (WillInit)
)

// blockOp is a decoded per-block operation.
type blockOp struct {
	kind  byte
	op    opaque   // opInit
	items [][]byte // opInit
	off   int      // opInsert
	item  []byte   // opInsert
	left  storage.BlockNumber
	offs  []page.OffsetNumber // opDelete
	meta  meta                // opMeta
}

// encodeInitOp logs a page rebuilt with op and its entry items. Layout 1:
// special space (32), count u16, fixed-size items. Layout 2: special space
// (16), count u16, then each item (the high key first when the page has
// one) as length u16 + bytes.
func encodeInitOp(op opaque, items [][]byte) ([]byte, error) {
	b := make([]byte, 1+op.specialSize()+2, 1+op.specialSize()+2+len(items)*(internalItemSize1+2))
	b[0] = opInit
	encodeOpaque(b[1:1+op.specialSize()], op)
	all := items
	if op.layout == layout2 && op.hasHigh() {
		hi, err := encodeItem(layout2, highItem, op.high, noBlock)
		if err != nil {
			return nil, err
		}
		all = append([][]byte{hi}, items...)
	}
	binary.LittleEndian.PutUint16(b[1+op.specialSize():], uint16(len(all)))
	for _, it := range all {
		if op.layout == layout2 {
			b = binary.LittleEndian.AppendUint16(b, uint16(len(it)))
		}
		b = append(b, it...)
	}
	return b, nil
}

func encodeInsertOp(off int, item []byte) []byte {
	b := make([]byte, 3, 3+len(item))
	b[0] = opInsert
	binary.LittleEndian.PutUint16(b[1:], uint16(off))
	return append(b, item...)
}

func encodeSetLeftOp(left storage.BlockNumber) []byte {
	b := make([]byte, 5)
	b[0] = opSetLeft
	binary.LittleEndian.PutUint32(b[1:], uint32(left))
	return b
}

func encodeDeleteOp(offs []page.OffsetNumber) []byte {
	b := make([]byte, 3, 3+2*len(offs))
	b[0] = opDelete
	binary.LittleEndian.PutUint16(b[1:], uint16(len(offs)))
	for _, o := range offs {
		b = binary.LittleEndian.AppendUint16(b, uint16(o))
	}
	return b
}

func encodeMetaOp(m meta) []byte {
	b := make([]byte, 1+m.specialSize())
	b[0] = opMeta
	encodeMeta(b[1:], m)
	return b
}

// decodeInitItems splits an init op's n items (fixed-size in layout 1,
// length-prefixed in layout 2).
func decodeInitItems(op opaque, n int, rest []byte) ([][]byte, error) {
	var items [][]byte
	if op.layout == layout1 {
		size := leafItemSize1
		if !op.isLeaf() {
			size = internalItemSize1
		}
		if len(rest) != n*size {
			return nil, fmt.Errorf("%d items of %d bytes in %d bytes", n, size, len(rest))
		}
		for i := range n {
			items = append(items, rest[i*size:(i+1)*size:(i+1)*size])
		}
		return items, nil
	}
	for i := range n {
		if len(rest) < 2 {
			return nil, fmt.Errorf("item %d of %d: no length", i+1, n)
		}
		l := int(binary.LittleEndian.Uint16(rest))
		if len(rest) < 2+l {
			return nil, fmt.Errorf("item %d of %d: %d bytes, %d left", i+1, n, l, len(rest)-2)
		}
		items = append(items, rest[2:2+l:2+l])
		rest = rest[2+l:]
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%d bytes after %d items", len(rest), n)
	}
	return items, nil
}

// decodeBlockOp parses BlockRef.Data; it never panics on bad input.
func decodeBlockOp(b []byte) (blockOp, error) {
	if len(b) == 0 {
		return blockOp{}, fmt.Errorf("empty block data")
	}
	d := blockOp{kind: b[0]}
	rest := b[1:]
	switch d.kind {
	case opInit:
		if len(rest) < specialSize2 {
			return blockOp{}, fmt.Errorf("init op of %d bytes is too short", len(b))
		}
		size := specialSize2
		if binary.LittleEndian.Uint16(rest[14:]) == layout1 {
			size = specialSize1
		}
		if len(rest) < size+2 {
			return blockOp{}, fmt.Errorf("init op of %d bytes is too short", len(b))
		}
		op, err := decodeOpaque(rest[:size])
		if err != nil {
			return blockOp{}, fmt.Errorf("init op: %w", err)
		}
		n := int(binary.LittleEndian.Uint16(rest[size:]))
		rest = rest[size+2:]
		items, err := decodeInitItems(op, n, rest)
		if err != nil {
			return blockOp{}, fmt.Errorf("init op: %w", err)
		}
		if op.layout == layout2 && op.hasHigh() {
			if len(items) == 0 {
				return blockOp{}, fmt.Errorf("init op: a page with a right sibling and no high key")
			}
			if op.high, _, err = decodeItem(items[0], layout2, highItem); err != nil {
				return blockOp{}, fmt.Errorf("init op: high key: %w", err)
			}
			items = items[1:]
		}
		kind := leafItem
		if !op.isLeaf() {
			kind = pivotItem
		}
		for i, it := range items {
			if _, _, err := decodeItem(it, op.layout, kind); err != nil {
				return blockOp{}, fmt.Errorf("init op item %d: %w", i+1, err)
			}
		}
		d.op, d.items = op, items
	case opInsert:
		if len(rest) < 2+tupleHeader2 {
			return blockOp{}, fmt.Errorf("insert op of %d bytes", len(b))
		}
		d.off = int(binary.LittleEndian.Uint16(rest))
		d.item = rest[2:]
		if d.off == 0 {
			return blockOp{}, fmt.Errorf("insert op at offset 0")
		}
	case opSetLeft:
		if len(rest) != 4 {
			return blockOp{}, fmt.Errorf("set-left op of %d bytes", len(b))
		}
		d.left = storage.BlockNumber(binary.LittleEndian.Uint32(rest))
	case opDelete:
		if len(rest) < 2 {
			return blockOp{}, fmt.Errorf("delete op of %d bytes", len(b))
		}
		n := int(binary.LittleEndian.Uint16(rest))
		if len(rest) != 2+2*n {
			return blockOp{}, fmt.Errorf("delete op: %d offsets in %d bytes", n, len(rest)-2)
		}
		for i := range n {
			d.offs = append(d.offs, page.OffsetNumber(binary.LittleEndian.Uint16(rest[2+2*i:])))
		}
	case opMeta:
		m, err := decodeMeta(rest)
		if err != nil {
			return blockOp{}, fmt.Errorf("meta op: %w", err)
		}
		d.meta = m
	default:
		return blockOp{}, fmt.Errorf("unknown block op %d", d.kind)
	}
	return d, nil
}

// apply performs d on p (used by redo; the forward path performs the same
// operations through the same helpers).
func (d blockOp) apply(p page.Page) error {
	switch d.kind {
	case opInit:
		return buildPage(p, d.op, d.items)
	case opMeta:
		buildMeta(p, d.meta)
		return nil
	}
	n, err := loadNode(p)
	if err != nil {
		return err
	}
	switch d.kind {
	case opInsert:
		if _, _, err := decodeItem(d.item, n.op.layout, n.kind()); err != nil {
			return fmt.Errorf("insert of an item that does not fit the page: %w", err)
		}
		if d.off < n.first() {
			return fmt.Errorf("insert at offset %d, before the page's first entry %d", d.off, n.first())
		}
		return p.InsertItemAt(d.item, page.OffsetNumber(d.off))
	case opSetLeft:
		n.op.left = d.left
		encodeOpaque(p.Special(), n.op)
	case opDelete:
		for _, o := range d.offs {
			if int(o) < n.first() || int(o) > n.last() {
				return fmt.Errorf("delete of item %d on a page of entries %d..%d", o, n.first(), n.last())
			}
		}
		p.DeleteItems(d.offs)
	}
	return nil
}

// Redo replays an RmgrBtree record: each block reference is applied unless
// its page already has the record (by LSN) or was restored from an image.
func Redo(env *redo.Env, rec *wal.Record) error {
	if rec.Rmgr != wal.RmgrBtree {
		return fmt.Errorf("btree redo of record at %X: rmgr %d", uint64(rec.StartLSN), rec.Rmgr)
	}
	for i := range rec.Blocks {
		if err := redoBlock(env, rec, i); err != nil {
			return fmt.Errorf("btree redo of record at %X (info %d) block %d: %w",
				uint64(rec.StartLSN), rec.Info, rec.Blocks[i].Block, err)
		}
	}
	return nil
}

func redoBlock(env *redo.Env, rec *wal.Record, i int) error {
	b, act, err := redo.ReadBlock(env, rec, i)
	if err != nil {
		return err
	}
	switch act {
	case redo.Skipped:
		return nil
	case redo.Done:
		redo.Release(b)
		return nil
	}
	d, err := decodeBlockOp(rec.Blocks[i].Data)
	if err == nil {
		err = d.apply(b.Page())
	}
	if err != nil {
		redo.Release(b)
		return err
	}
	redo.Finish(b, rec)
	return nil
}
