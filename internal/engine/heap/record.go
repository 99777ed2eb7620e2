package heap

import (
	"encoding/binary"
	"fmt"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
)

// WAL record kinds of wal.RmgrHeap (Record.Info); payloads in doc.go.
const (
	InfoInsert   uint8 = 1
	InfoDelete   uint8 = 2
	InfoUpdate   uint8 = 3
	InfoPrune    uint8 = 4
	InfoVacuum   uint8 = 5
	InfoTruncate uint8 = 6
	// InfoVacuumVisible is InfoVacuum and the VM bit in one record: the
	// freed slots of the heap page (Blocks[0]), after which the page is
	// all-visible (its FlagAllVisible set) and its bit is set in the VM
	// page (Blocks[1]). 7 is InfoNewPage (bulk.go).
	InfoVacuumVisible uint8 = 8
)

// Per-block record flags.
const (
	flagInitPage          uint8 = 1 << 0 // the page was new: initialise it first
	flagAllVisibleCleared uint8 = 1 << 1 // clear FlagAllVisible and the VM bit
	flagSameBlock         uint8 = 1 << 2 // update: old and new tuple share the page

	validFlags = flagInitPage | flagAllVisibleCleared | flagSameBlock
)

// RecordError reports a heap WAL payload that does not parse.
type RecordError struct {
	Info   uint8
	Reason string
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("malformed heap record (info %d): %s", e.Info, e.Reason)
}

// tupleOp is the payload of an insert, delete or update block.
type tupleOp struct {
	off    page.OffsetNumber // the tuple's slot (insert/delete; new tuple of an update)
	flags  uint8
	oldOff page.OffsetNumber // update, new-page block: the old tuple's slot
	tuple  []byte            // insert/update new-page block: the full tuple item
}

func encodeInsert(off page.OffsetNumber, flags uint8, tuple []byte) []byte {
	b := make([]byte, 3+len(tuple))
	binary.LittleEndian.PutUint16(b, uint16(off))
	b[2] = flags
	copy(b[3:], tuple)
	return b
}

func encodeDelete(off page.OffsetNumber, flags uint8) []byte {
	return []byte{byte(off), byte(off >> 8), flags}
}

func encodeUpdateNew(newOff page.OffsetNumber, flags uint8, oldOff page.OffsetNumber, tuple []byte) []byte {
	b := make([]byte, 5+len(tuple))
	binary.LittleEndian.PutUint16(b, uint16(newOff))
	b[2] = flags
	binary.LittleEndian.PutUint16(b[3:], uint16(oldOff))
	copy(b[5:], tuple)
	return b
}

// decodeTupleOp parses the per-block data of an insert, delete or update
// record; isNewPage selects the update layout of Blocks[0].
func decodeTupleOp(info uint8, data []byte, isNewPage bool) (tupleOp, error) {
	bad := func(format string, args ...any) (tupleOp, error) {
		return tupleOp{}, &RecordError{Info: info, Reason: fmt.Sprintf(format, args...)}
	}
	if len(data) < 3 {
		return bad("block data is %d bytes", len(data))
	}
	op := tupleOp{off: page.OffsetNumber(binary.LittleEndian.Uint16(data)), flags: data[2]}
	if op.off == page.InvalidOffset {
		return bad("offset 0")
	}
	if op.flags&^validFlags != 0 {
		return bad("unknown flags %#x", op.flags)
	}
	rest := data[3:]
	switch {
	case info == InfoInsert:
		op.tuple = rest
	case info == InfoUpdate && isNewPage:
		if len(rest) < 2 {
			return bad("update data is %d bytes", len(data))
		}
		op.oldOff = page.OffsetNumber(binary.LittleEndian.Uint16(rest))
		if op.oldOff == page.InvalidOffset {
			return bad("old offset 0")
		}
		op.tuple = rest[2:]
	default:
		if len(rest) != 0 {
			return bad("%d trailing bytes", len(rest))
		}
	}
	if info == InfoInsert || (info == InfoUpdate && isNewPage) {
		if _, _, err := DecodeTuple(op.tuple); err != nil {
			return bad("tuple: %v", err)
		}
	}
	return op, nil
}

// encodeOffsets is n u16 | n×off u16, after an optional prefix.
func encodeOffsets(prefix []byte, offs []page.OffsetNumber) []byte {
	b := make([]byte, len(prefix)+2+2*len(offs))
	copy(b, prefix)
	binary.LittleEndian.PutUint16(b[len(prefix):], uint16(len(offs)))
	for i, o := range offs {
		binary.LittleEndian.PutUint16(b[len(prefix)+2+2*i:], uint16(o))
	}
	return b
}

func decodeOffsets(info uint8, b []byte) ([]page.OffsetNumber, error) {
	if len(b) < 2 {
		return nil, &RecordError{Info: info, Reason: fmt.Sprintf("offset list is %d bytes", len(b))}
	}
	n := int(binary.LittleEndian.Uint16(b))
	if len(b) != 2+2*n {
		return nil, &RecordError{Info: info, Reason: fmt.Sprintf("offset list of %d entries in %d bytes", n, len(b))}
	}
	offs := make([]page.OffsetNumber, n)
	for i := range offs {
		offs[i] = page.OffsetNumber(binary.LittleEndian.Uint16(b[2+2*i:]))
		if offs[i] == page.InvalidOffset {
			return nil, &RecordError{Info: info, Reason: "offset 0 in list"}
		}
	}
	return offs, nil
}

func encodePrune(pruneXID uint64, offs []page.OffsetNumber) []byte {
	var x [8]byte
	binary.LittleEndian.PutUint64(x[:], pruneXID)
	return encodeOffsets(x[:], offs)
}

func decodePrune(b []byte) (uint64, []page.OffsetNumber, error) {
	if len(b) < 8 {
		return 0, nil, &RecordError{Info: InfoPrune, Reason: fmt.Sprintf("data is %d bytes", len(b))}
	}
	offs, err := decodeOffsets(InfoPrune, b[8:])
	return binary.LittleEndian.Uint64(b), offs, err
}

func encodeTruncate(rel uint32, nblocks uint32) []byte {
	b := make([]byte, 8)
	binary.LittleEndian.PutUint32(b, rel)
	binary.LittleEndian.PutUint32(b[4:], nblocks)
	return b
}

func decodeTruncate(b []byte) (rel uint32, nblocks uint32, err error) {
	if len(b) != 8 {
		return 0, 0, &RecordError{Info: InfoTruncate, Reason: fmt.Sprintf("main data is %d bytes, want 8", len(b))}
	}
	return binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:]), nil
}
