package page

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// crc32c is the CRC-32C (Castagnoli) table, built once for the whole engine.
var crc32c = crc32.MakeTable(crc32.Castagnoli)

// CRC32C returns the CRC-32C (Castagnoli) of b. It is the one checksum of
// every byte layout the engine owns: pages, WAL records, the control file,
// the catalog and the clog.
func CRC32C(b []byte) uint32 { return crc32.Checksum(b, crc32c) }

// CRC32CUpdate continues the CRC-32C crc over b.
func CRC32CUpdate(crc uint32, b []byte) uint32 { return crc32.Update(crc, crc32c, b) }

// ChecksumError reports a page whose stored checksum does not match its
// contents for the block it was read as.
type ChecksumError struct {
	Block    uint32
	Stored   uint32
	Computed uint32
}

func (e *ChecksumError) Error() string {
	return fmt.Sprintf("checksum mismatch for block %d: stored %08x, computed %08x", e.Block, e.Stored, e.Computed)
}

// ComputeChecksum returns the CRC32C of p with its checksum field taken as
// zero, continued over blk. p is not modified.
func ComputeChecksum(p Page, blk uint32) uint32 {
	var zero [4]byte
	c := CRC32CUpdate(0, p[:offChecksum])
	c = CRC32CUpdate(c, zero[:])
	c = CRC32CUpdate(c, p[offChecksum+4:])
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], blk)
	return CRC32CUpdate(c, b[:])
}

// SetChecksum computes the CRC32C checksum of p for block blk (the block
// number is mixed in so a page written to the wrong place is caught) and
// stores it in the header. A Page of the wrong length is left untouched.
func SetChecksum(p Page, blk uint32) {
	if !p.ok() {
		return
	}
	binary.LittleEndian.PutUint32(p[offChecksum:], ComputeChecksum(p, blk))
}

// VerifyChecksum returns a non-nil error when p's stored checksum does not
// match; an all-zero page (never written) is valid. A mismatch is a
// *ChecksumError.
func VerifyChecksum(p Page, blk uint32) error {
	if !p.ok() {
		return fmt.Errorf("page is %d bytes, want %d", len(p), Size)
	}
	if AllZero(p) {
		return nil
	}
	stored := p.Checksum()
	if c := ComputeChecksum(p, blk); c != stored {
		return &ChecksumError{Block: blk, Stored: stored, Computed: c}
	}
	return nil
}

// IsZero reports whether every byte of p is zero (a block that was
// extended but never written).
func IsZero(p Page) bool { return AllZero(p) }

// AllZero reports whether every byte of b is zero.
func AllZero(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
