package heap

import (
	"encoding/binary"
	"fmt"

	"github.com/vacuumops/vacuum-operator/internal/engine/buffer"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/txn"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// InfoNewPage is the RmgrHeap record of a whole page written by a
// BulkLoader: Blocks[0] (WillInit), Data = lower u16 | upper u16 |
// page[0:lower] | page[upper:Size] (the free-space hole omitted).
const InfoNewPage uint8 = 7

// BulkLoader fills new pages at the end of a relation that nobody else
// inserts into (the target of a VACUUM FULL rewrite): tuples are packed
// into a private page that is installed and logged with one InfoNewPage
// record when full, instead of one insert record per tuple. Not safe for
// concurrent use; call Finish to write the last page.
type BulkLoader struct {
	r    *Rel
	s    *buffer.Strategy
	buf  *buffer.Buffer // the extended block being filled, pinned
	page page.Page      // its private contents
}

// NewBulkLoader returns a loader appending to r through strategy s.
func (r *Rel) NewBulkLoader(s *buffer.Strategy) *BulkLoader {
	return &BulkLoader{r: r, s: s}
}

// Add stores a tuple with header h as InsertRaw does and returns its TID
// (final: the page it is on is written by a later Add or by Finish).
func (l *BulkLoader) Add(h TupleHeader, data []byte) (page.TID, error) {
	if len(data) > MaxTupleData {
		return page.TID{}, fmt.Errorf("load %d-byte row into relation %d (max %d): %w", len(data), l.r.node, MaxTupleData, ErrTupleTooLarge)
	}
	h.Infomask &^= Updated
	if h.Xmax == txn.InvalidXID {
		h.Infomask = h.Infomask&^XmaxCommitted | XmaxInvalid
	}
	tup := EncodeTuple(h, data)
	if _, _, err := DecodeTuple(tup); err != nil {
		return page.TID{}, fmt.Errorf("load tuple into relation %d: %w", l.r.node, err)
	}
	if l.buf != nil && !itemsFit(l.page, len(tup)) {
		if err := l.flush(); err != nil {
			return page.TID{}, err
		}
	}
	if l.buf == nil {
		b, err := l.r.extend(l.s)
		if err != nil {
			return page.TID{}, err
		}
		l.r.target.CompareAndSwap(int64(b.Tag().Block), -1) // keep other inserters off it
		l.buf = b
		if l.page == nil {
			l.page = make(page.Page, page.Size)
		}
		page.Init(l.page, 0)
	}
	blk := uint32(l.buf.Tag().Block)
	off, err := placeTuple(l.page, blk, tup, 0)
	if err != nil {
		return page.TID{}, fmt.Errorf("load tuple into block %d of relation %d: %w", blk, l.r.node, err)
	}
	return page.TID{Block: blk, Off: off}, nil
}

// flush installs and logs the page being filled.
func (l *BulkLoader) flush() error {
	b := l.buf
	l.buf = nil
	defer b.Release()
	b.Lock()
	defer b.Unlock()
	p := b.Page()
	copy(p, l.page)
	b.MarkDirty(l.s)
	rec := &wal.Record{Rmgr: wal.RmgrHeap, Info: InfoNewPage,
		Blocks: []wal.BlockRef{{Rel: l.r.node, Fork: storage.MainFork, Block: b.Tag().Block,
			Page: p, WillInit: true, Data: encodeNewPage(p)}}}
	return l.r.logChange(rec, l.s, p)
}

// Finish writes the last page and records its free space in the FSM.
func (l *BulkLoader) Finish() error {
	if l.buf == nil {
		return nil
	}
	blk := l.buf.Tag().Block
	free := l.page.FreeSpace()
	if err := l.flush(); err != nil {
		return err
	}
	return l.r.fsm.Record(blk, free, l.s)
}

func encodeNewPage(p page.Page) []byte {
	lo, up := p.Lower(), p.Upper()
	b := make([]byte, 4, 4+lo+page.Size-up)
	binary.LittleEndian.PutUint16(b, uint16(lo))
	binary.LittleEndian.PutUint16(b[2:], uint16(up))
	b = append(b, p[:lo]...)
	return append(b, p[up:]...)
}

// decodeNewPage rebuilds a page from an InfoNewPage payload into dst and
// validates it.
func decodeNewPage(dst page.Page, b []byte) error {
	bad := func(format string, args ...any) error {
		return &RecordError{Info: InfoNewPage, Reason: fmt.Sprintf(format, args...)}
	}
	if len(b) < 4 {
		return bad("data is %d bytes", len(b))
	}
	lo, up := int(binary.LittleEndian.Uint16(b)), int(binary.LittleEndian.Uint16(b[2:]))
	if lo < page.HeaderSize || lo > up || up > page.Size || len(b) != 4+lo+page.Size-up {
		return bad("lower %d upper %d with %d bytes", lo, up, len(b))
	}
	img := make(page.Page, page.Size)
	copy(img, b[4:4+lo])
	copy(img[up:], b[4+lo:])
	if img.Lower() != lo || img.Upper() != up {
		return bad("page header says lower %d upper %d, record %d %d", img.Lower(), img.Upper(), lo, up)
	}
	if err := img.Validate(); err != nil {
		return bad("page: %v", err)
	}
	copy(dst, img)
	return nil
}
