package txn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
)

// Clog file layout constants (see doc.go).
const (
	clogMagic      = "VCLG"
	clogVersion    = 1
	clogHeaderSize = 24
	clogFileName   = "clog"
	clogTempName   = "clog.tmp"

	// maxClogXIDs bounds what a decoder accepts (4 Gi transactions, a 1 GiB
	// file), so a corrupt length never makes us allocate without limit.
	maxClogXIDs = 1 << 32
)

// CorruptClogError reports a clog file that failed verification.
type CorruptClogError struct {
	File   string
	Reason string
}

func (e *CorruptClogError) Error() string {
	return fmt.Sprintf("corrupt commit log %s: %s", e.File, e.Reason)
}

// ErrClogMissing is returned by NewManager when the clog file is absent
// but nextXID says transactions have run (a data directory that lost it).
var ErrClogMissing = errors.New("commit log file is missing")

// clogBytes is the number of status bytes covering xids 0..next-1.
func clogBytes(next XID) int { return int((uint64(next) + 3) / 4) }

// EncodeClog returns the clog file bytes for the status data covering xids
// 0..next-1 (data may be longer; the excess is ignored).
func EncodeClog(next XID, data []byte) []byte {
	n := clogBytes(next)
	b := make([]byte, clogHeaderSize+n)
	copy(b[0:4], clogMagic)
	binary.LittleEndian.PutUint16(b[4:], clogVersion)
	binary.LittleEndian.PutUint64(b[8:], uint64(next))
	binary.LittleEndian.PutUint32(b[16:], uint32(n))
	copy(b[clogHeaderSize:], data[:min(n, len(data))])
	binary.LittleEndian.PutUint32(b[20:], clogCRC(b))
	return b
}

func clogCRC(b []byte) uint32 {
	c := page.CRC32CUpdate(0, b[:20])
	return page.CRC32CUpdate(c, b[clogHeaderSize:])
}

// DecodeClog verifies and parses clog file bytes, returning nextXID and
// the status data (a fresh copy). It never panics; any defect is a
// *CorruptClogError with an empty File.
func DecodeClog(b []byte) (XID, []byte, error) {
	bad := func(format string, args ...any) (XID, []byte, error) {
		return 0, nil, &CorruptClogError{Reason: fmt.Sprintf(format, args...)}
	}
	if len(b) < clogHeaderSize {
		return bad("file is %d bytes, shorter than the %d-byte header", len(b), clogHeaderSize)
	}
	if string(b[0:4]) != clogMagic {
		return bad("bad magic %q", b[0:4])
	}
	if v := binary.LittleEndian.Uint16(b[4:]); v != clogVersion {
		return bad("unknown version %d", v)
	}
	if r := binary.LittleEndian.Uint16(b[6:]); r != 0 {
		return bad("reserved field is %d", r)
	}
	next := binary.LittleEndian.Uint64(b[8:])
	if next > maxClogXIDs {
		return bad("nextXID %d exceeds the supported %d", next, uint64(maxClogXIDs))
	}
	n := binary.LittleEndian.Uint32(b[16:])
	if int64(n) != int64(clogBytes(XID(next))) {
		return bad("data length %d does not cover nextXID %d", n, next)
	}
	if len(b) != clogHeaderSize+int(n) {
		return bad("file is %d bytes, header says %d", len(b), clogHeaderSize+int(n))
	}
	if got, want := clogCRC(b), binary.LittleEndian.Uint32(b[20:]); got != want {
		return bad("CRC mismatch: stored %08x, computed %08x", want, got)
	}
	data := append([]byte(nil), b[clogHeaderSize:]...)
	for i, c := range data {
		for j := 0; j < 4; j++ {
			if (c>>(2*j))&3 == 3 {
				return bad("invalid status code 3 for xid %d", i*4+j)
			}
		}
	}
	return XID(next), data, nil
}

// readClogFile loads <dir>/clog. ok is false when the file does not exist.
func readClogFile(fs vfs.FS, dir string) (next XID, data []byte, ok bool, err error) {
	path := filepath.Join(dir, clogFileName)
	f, err := fs.OpenFile(path, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil, false, nil
	}
	if err != nil {
		return 0, nil, false, fmt.Errorf("open commit log %s: %w", path, err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return 0, nil, false, fmt.Errorf("size of commit log %s: %w", path, err)
	}
	if size > clogHeaderSize+maxClogXIDs/4 {
		return 0, nil, false, &CorruptClogError{File: path, Reason: fmt.Sprintf("file is %d bytes, too large", size)}
	}
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		return 0, nil, false, fmt.Errorf("read commit log %s: %w", path, err)
	}
	next, data, err = DecodeClog(b)
	if err != nil {
		var ce *CorruptClogError
		if errors.As(err, &ce) {
			ce.File = path
		}
		return 0, nil, false, err
	}
	return next, data, true, nil
}

// writeClogFile replaces <dir>/clog atomically: temp file, fsync, rename,
// fsync directory.
func writeClogFile(fs vfs.FS, dir string, b []byte) error {
	return vfs.WriteFileAtomic(fs, dir, clogFileName, clogTempName, b)
}
