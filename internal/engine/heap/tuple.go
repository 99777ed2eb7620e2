package heap

import (
	"encoding/binary"
	"fmt"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/txn"
)

// Tuple header layout (see doc.go).
const (
	offXmin     = 0
	offXmax     = 8
	offCtidBlk  = 16
	offCtidOff  = 20
	offInfomask = 22
	offDataLen  = 24
	offReserved = 26

	// HeaderSize is the size of the tuple header; row data follows it.
	HeaderSize = 28

	// MaxItemSize is the largest item an empty heap page holds (its free
	// space, which reserves the item's line pointer).
	MaxItemSize = (page.Size - page.HeaderSize - page.ItemIDSize) &^ (page.MaxAlign - 1)
	// MaxTupleData is the largest row Insert and Update accept.
	MaxTupleData = MaxItemSize - HeaderSize
)

// Infomask bits.
const (
	XminCommitted uint16 = 1 << 0 // hint: inserter committed
	XminInvalid   uint16 = 1 << 1 // hint: inserter aborted
	XmaxCommitted uint16 = 1 << 2 // hint: deleter committed
	XmaxInvalid   uint16 = 1 << 3 // no deleter, or it aborted
	Updated       uint16 = 1 << 4 // deleted by an update: Ctid is the newer version

	hintBits  = XminCommitted | XminInvalid | XmaxCommitted | XmaxInvalid
	validBits = hintBits | Updated
)

// TupleHeader is a decoded tuple header.
type TupleHeader struct {
	Xmin     txn.XID
	Xmax     txn.XID
	Ctid     page.TID
	Infomask uint16
	DataLen  uint16
}

// HasXmax reports whether the tuple has a deleter that may not have
// aborted (xmax set and not known invalid).
func (h *TupleHeader) HasXmax() bool {
	return h.Xmax != txn.InvalidXID && h.Infomask&XmaxInvalid == 0
}

// EncodeTuple returns the item bytes of a tuple: h (with DataLen set from
// data) followed by data. The caller checks len(data) <= MaxTupleData.
func EncodeTuple(h TupleHeader, data []byte) []byte {
	b := make([]byte, HeaderSize+len(data))
	h.DataLen = uint16(len(data))
	putHeader(b, &h)
	copy(b[HeaderSize:], data)
	return b
}

func putHeader(b []byte, h *TupleHeader) {
	binary.LittleEndian.PutUint64(b[offXmin:], uint64(h.Xmin))
	binary.LittleEndian.PutUint64(b[offXmax:], uint64(h.Xmax))
	binary.LittleEndian.PutUint32(b[offCtidBlk:], h.Ctid.Block)
	binary.LittleEndian.PutUint16(b[offCtidOff:], uint16(h.Ctid.Off))
	binary.LittleEndian.PutUint16(b[offInfomask:], h.Infomask)
	binary.LittleEndian.PutUint16(b[offDataLen:], h.DataLen)
	binary.LittleEndian.PutUint16(b[offReserved:], 0)
}

// writeHeader rewrites the header of an item in place (DataLen kept). The
// caller holds the page's exclusive lock.
func writeHeader(item []byte, h *TupleHeader) {
	hh := *h
	hh.DataLen = binary.LittleEndian.Uint16(item[offDataLen:])
	putHeader(item, &hh)
}

// putInfomask rewrites only the infomask of an item in place. The caller
// holds the page's exclusive lock.
func putInfomask(item []byte, mask uint16) {
	binary.LittleEndian.PutUint16(item[offInfomask:], mask)
}

// TupleError describes an item that is not a valid tuple.
type TupleError struct {
	Reason string
}

func (e *TupleError) Error() string { return "invalid heap tuple: " + e.Reason }

// DecodeTuple parses an item into its header and row data (aliasing item).
// It never panics; a malformed item is a *TupleError.
func DecodeTuple(item []byte) (TupleHeader, []byte, error) {
	if len(item) < HeaderSize {
		return TupleHeader{}, nil, &TupleError{fmt.Sprintf("item is %d bytes, shorter than the %d-byte header", len(item), HeaderSize)}
	}
	h := TupleHeader{
		Xmin:     txn.XID(binary.LittleEndian.Uint64(item[offXmin:])),
		Xmax:     txn.XID(binary.LittleEndian.Uint64(item[offXmax:])),
		Ctid:     page.TID{Block: binary.LittleEndian.Uint32(item[offCtidBlk:]), Off: page.OffsetNumber(binary.LittleEndian.Uint16(item[offCtidOff:]))},
		Infomask: binary.LittleEndian.Uint16(item[offInfomask:]),
		DataLen:  binary.LittleEndian.Uint16(item[offDataLen:]),
	}
	switch {
	case int(h.DataLen) != len(item)-HeaderSize:
		return h, nil, &TupleError{fmt.Sprintf("data length %d, item holds %d", h.DataLen, len(item)-HeaderSize)}
	case binary.LittleEndian.Uint16(item[offReserved:]) != 0:
		return h, nil, &TupleError{"reserved field is not zero"}
	case h.Infomask&^validBits != 0:
		return h, nil, &TupleError{fmt.Sprintf("unknown infomask bits %#04x", h.Infomask&^validBits)}
	case h.Infomask&(XminCommitted|XminInvalid) == XminCommitted|XminInvalid:
		return h, nil, &TupleError{"xmin both committed and invalid"}
	case h.Infomask&(XmaxCommitted|XmaxInvalid) == XmaxCommitted|XmaxInvalid:
		return h, nil, &TupleError{"xmax both committed and invalid"}
	case h.Xmin == txn.InvalidXID:
		return h, nil, &TupleError{"xmin is invalid (0)"}
	case h.Infomask&XmaxCommitted != 0 && h.Xmax == txn.InvalidXID:
		return h, nil, &TupleError{"xmax committed hint without an xmax"}
	}
	return h, item[HeaderSize:], nil
}
