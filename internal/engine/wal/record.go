package wal

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
)

// Record layout constants (see doc.go).
const (
	recHeaderSize   = 28
	offRecLen       = 0
	offRecCRC       = 4
	offRecPrev      = 8
	offRecXID       = 16
	offRecRmgr      = 24
	offRecInfo      = 25
	offRecNBlocks   = 26
	offRecFlags     = 27
	blockHeaderSize = 14 // rel, fork, flags, block, data length
	imageHeaderSize = 6  // image length, hole offset, hole length
	mainLenSize     = 4

	// MinRecordSize is the size of a record with no blocks and no main data.
	MinRecordSize = recHeaderSize + mainLenSize
	// MaxRecordSize bounds a record's total length; Insert refuses larger
	// records and readers treat a larger length field as corruption.
	MaxRecordSize = 32 << 20
	// MaxBlocks is the most block references one record may carry.
	MaxBlocks = 255
)

// Block reference flags.
const (
	bkpHasImage = 0x01
	bkpWillInit = 0x02
	bkpHasData  = 0x04
	bkpAllFlags = bkpHasImage | bkpWillInit | bkpHasData
)

// ErrInvalidRecord is wrapped by every error Decode returns.
var ErrInvalidRecord = errors.New("invalid WAL record")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidRecord, fmt.Sprintf(format, args...))
}

// Encode returns the on-disk bytes of rec, with rec.PrevLSN as its prev
// link and an image for every block whose Image is set. An Image should be
// page.Size bytes; a shorter or longer one is zero-padded or cut to
// page.Size. Encode does not check MaxRecordSize or MaxBlocks (Insert does);
// blocks beyond MaxBlocks are dropped.
func Encode(rec *Record) []byte {
	blocks := rec.Blocks
	if len(blocks) > MaxBlocks {
		blocks = blocks[:MaxBlocks]
	}
	images := make([][]byte, len(blocks))
	for i := range blocks {
		img := blocks[i].Image
		if img != nil && len(img) != page.Size {
			full := make([]byte, page.Size)
			copy(full, img)
			img = full
		}
		images[i] = img
	}
	r := *rec
	r.Blocks = blocks
	b, _ := appendRecord(nil, &r, rec.PrevLSN, images)
	return b
}

// encodedSize is the exact size appendRecord will produce. images[i] is nil
// or page.Size bytes; holes are computed by the caller.
func encodedSize(rec *Record, holes []hole) int {
	n := recHeaderSize + mainLenSize + len(rec.Main)
	for i := range rec.Blocks {
		n += blockHeaderSize + len(rec.Blocks[i].Data)
		if holes[i].present {
			n += imageHeaderSize + page.Size - holes[i].length
		}
	}
	return n
}

// hole describes an image's omitted run of zeros.
type hole struct {
	present        bool // the block has an image
	offset, length int
}

// findHole returns the zero run [lower, upper) of an image when the page
// header describes one and it is really all zeros; an all-zero (new) page
// is one hole covering the whole page.
func findHole(img []byte) hole {
	p := page.Page(img)
	lo, up := p.Lower(), p.Upper()
	if lo >= page.HeaderSize && lo < up && up <= page.Size && allZero(img[lo:up]) {
		return hole{present: true, offset: lo, length: up - lo}
	}
	if page.IsZero(p) {
		return hole{present: true, offset: 0, length: page.Size}
	}
	return hole{present: true}
}

// allZero is page.AllZero, under the name this package's readers use.
func allZero(b []byte) bool { return page.AllZero(b) }

// appendRecord appends the encoding of rec (prev link prev, images[i] the
// page.Size image of block i or nil) to dst and returns it with the number
// of image bytes stored.
func appendRecord(dst []byte, rec *Record, prev LSN, images [][]byte) ([]byte, int) {
	var holeBuf [4]hole
	holes := holeBuf[:0]
	if len(rec.Blocks) > len(holeBuf) {
		holes = make([]hole, 0, len(rec.Blocks))
	}
	holes = holes[:len(rec.Blocks)]
	for i, img := range images {
		if img != nil {
			holes[i] = findHole(img)
		}
	}
	size := encodedSize(rec, holes)
	start := len(dst)
	dst = grow(dst, size)
	b := dst[start : start+size]

	le := binary.LittleEndian
	le.PutUint32(b[offRecLen:], uint32(size))
	le.PutUint64(b[offRecPrev:], uint64(prev))
	le.PutUint64(b[offRecXID:], rec.XID)
	b[offRecRmgr] = byte(rec.Rmgr)
	b[offRecInfo] = rec.Info
	b[offRecNBlocks] = byte(len(rec.Blocks))
	b[offRecFlags] = 0
	off := recHeaderSize
	imgBytes := 0
	for i := range rec.Blocks {
		blk := &rec.Blocks[i]
		flags := byte(0)
		if holes[i].present {
			flags |= bkpHasImage
		}
		if blk.WillInit {
			flags |= bkpWillInit
		}
		if len(blk.Data) > 0 {
			flags |= bkpHasData
		}
		le.PutUint32(b[off:], uint32(blk.Rel))
		b[off+4] = byte(blk.Fork)
		b[off+5] = flags
		le.PutUint32(b[off+6:], uint32(blk.Block))
		le.PutUint32(b[off+10:], uint32(len(blk.Data)))
		off += blockHeaderSize
		if h := holes[i]; h.present {
			img := images[i]
			n := page.Size - h.length
			le.PutUint16(b[off:], uint16(n))
			le.PutUint16(b[off+2:], uint16(h.offset))
			le.PutUint16(b[off+4:], uint16(h.length))
			off += imageHeaderSize
			off += copy(b[off:], img[:h.offset])
			off += copy(b[off:], img[h.offset+h.length:])
			imgBytes += n
		}
		off += copy(b[off:], blk.Data)
	}
	le.PutUint32(b[off:], uint32(len(rec.Main)))
	off += mainLenSize
	copy(b[off:], rec.Main)
	le.PutUint32(b[offRecCRC:], page.CRC32C(b[offRecPrev:]))
	return dst, imgBytes
}

// grow extends dst by n bytes (contents of the new bytes unspecified).
func grow(dst []byte, n int) []byte {
	if cap(dst)-len(dst) < n {
		nb := make([]byte, len(dst), 2*cap(dst)+n)
		copy(nb, dst)
		dst = nb
	}
	return dst[:len(dst)+n]
}

// Decode parses one record from the start of b and returns it with the
// number of bytes it occupies. The record's Data, Main and Image slices are
// private copies; images are full page.Size pages. StartLSN and EndLSN are
// left zero (the Reader sets them). Every error wraps ErrInvalidRecord.
func Decode(b []byte) (*Record, int, error) {
	le := binary.LittleEndian
	if len(b) < MinRecordSize {
		return nil, 0, invalid("%d bytes is shorter than a record header", len(b))
	}
	total := int(le.Uint32(b[offRecLen:]))
	if total < MinRecordSize || total > MaxRecordSize {
		return nil, 0, invalid("impossible record length %d", total)
	}
	if total > len(b) {
		return nil, 0, invalid("record length %d exceeds the %d bytes available", total, len(b))
	}
	if got, want := page.CRC32C(b[offRecPrev:total]), le.Uint32(b[offRecCRC:]); got != want {
		return nil, 0, invalid("CRC mismatch: stored %08x, computed %08x", want, got)
	}
	// Copy once so the record does not alias the caller's buffer.
	own := make([]byte, total)
	copy(own, b[:total])
	rec := &Record{
		PrevLSN: LSN(le.Uint64(own[offRecPrev:])),
		XID:     le.Uint64(own[offRecXID:]),
		Rmgr:    RmgrID(own[offRecRmgr]),
		Info:    own[offRecInfo],
	}
	if rec.Rmgr == 0 {
		return nil, 0, invalid("resource manager 0")
	}
	if f := own[offRecFlags]; f != 0 {
		return nil, 0, invalid("unknown record flags %#x", f)
	}
	nblocks := int(own[offRecNBlocks])
	off := recHeaderSize
	if nblocks > 0 {
		rec.Blocks = make([]BlockRef, nblocks)
	}
	for i := range nblocks {
		blk, n, err := decodeBlock(own[off:total])
		if err != nil {
			return nil, 0, fmt.Errorf("block %d: %w", i, err)
		}
		rec.Blocks[i] = blk
		off += n
	}
	if total-off < mainLenSize {
		return nil, 0, invalid("no room for the main data length")
	}
	mainLen := int(le.Uint32(own[off:]))
	off += mainLenSize
	if mainLen != total-off {
		return nil, 0, invalid("main data length %d, but %d bytes remain", mainLen, total-off)
	}
	if mainLen > 0 {
		rec.Main = own[off:total:total]
	}
	return rec, total, nil
}

// decodeBlock parses one block reference from the start of b (the rest of
// the record) and returns it with its encoded size.
func decodeBlock(b []byte) (BlockRef, int, error) {
	le := binary.LittleEndian
	if len(b) < blockHeaderSize {
		return BlockRef{}, 0, invalid("truncated block header")
	}
	flags := b[5]
	if flags&^bkpAllFlags != 0 {
		return BlockRef{}, 0, invalid("unknown block flags %#x", flags)
	}
	blk := BlockRef{
		Rel:      storage.RelFileNode(le.Uint32(b)),
		Fork:     storage.ForkNum(b[4]),
		Block:    storage.BlockNumber(le.Uint32(b[6:])),
		WillInit: flags&bkpWillInit != 0,
	}
	dataLen := uint64(le.Uint32(b[10:]))
	if (dataLen > 0) != (flags&bkpHasData != 0) {
		return BlockRef{}, 0, invalid("data length %d disagrees with the has-data flag", dataLen)
	}
	off := blockHeaderSize
	if flags&bkpHasImage != 0 {
		if len(b)-off < imageHeaderSize {
			return BlockRef{}, 0, invalid("truncated image header")
		}
		imgLen := int(le.Uint16(b[off:]))
		holeOff := int(le.Uint16(b[off+2:]))
		holeLen := int(le.Uint16(b[off+4:]))
		off += imageHeaderSize
		if imgLen+holeLen != page.Size || holeOff+holeLen > page.Size || (holeLen == 0 && holeOff != 0) {
			return BlockRef{}, 0, invalid("bad image: length %d, hole %d+%d", imgLen, holeOff, holeLen)
		}
		if len(b)-off < imgLen {
			return BlockRef{}, 0, invalid("image of %d bytes exceeds the record", imgLen)
		}
		img := make([]byte, page.Size)
		copy(img, b[off:off+holeOff])
		copy(img[holeOff+holeLen:], b[off+holeOff:off+imgLen])
		blk.Image = img
		off += imgLen
	}
	if dataLen > uint64(len(b)-off) {
		return BlockRef{}, 0, invalid("block data of %d bytes exceeds the record", dataLen)
	}
	if dataLen > 0 {
		end := off + int(dataLen)
		blk.Data = b[off:end:end]
		off = end
	}
	return blk, off, nil
}
