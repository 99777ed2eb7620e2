package wal

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

// State is the cluster state recorded in the control file.
type State uint8

// States.
const (
	StateShutdown     State = 1 // cleanly shut down: no replay needed
	StateInProduction State = 2 // open, or crashed while open
)

// Control is the control file (<dir>/control), written atomically (temp
// file, fsync, rename, fsync directory) and CRC-protected.
type Control struct {
	Version       uint32 // format version of the data directory
	State         State
	CheckpointLSN LSN    // where the last checkpoint record starts
	RedoLSN       LSN    // replay starts here
	NextXID       uint64 // first transaction id not yet assigned
	NextOID       uint32 // first relfilenode/oid not yet assigned
}

// Control file layout (see doc.go).
const (
	// ControlFileName is the control file's name in the data directory.
	ControlFileName = "control"
	// ControlSize is the exact size of the control file.
	ControlSize = 48
	// ControlLayoutVersion is the control file layout this package writes
	// and the only one it reads.
	ControlLayoutVersion = 1

	controlMagic    = 0x46434f56 // "VOCF" little-endian
	offCtlMagic     = 0
	offCtlLayout    = 4
	offCtlVersion   = 8
	offCtlState     = 12
	offCtlCheckpt   = 16
	offCtlRedo      = 24
	offCtlNextXID   = 32
	offCtlNextOID   = 40
	offCtlCRC       = 44
	controlTempName = "control.tmp"
)

// ErrUnsupportedVersion is wrapped by ReadControl and DecodeControl when the
// control file has a layout version this build does not know.
var ErrUnsupportedVersion = errors.New("unsupported control file version")

// ErrCorruptControl is wrapped by ReadControl and DecodeControl when the
// control file is damaged (wrong size, magic, CRC or state).
var ErrCorruptControl = errors.New("control file is corrupt")

// EncodeControl returns the ControlSize bytes of c.
func EncodeControl(c *Control) []byte {
	b := make([]byte, ControlSize)
	le := binary.LittleEndian
	le.PutUint32(b[offCtlMagic:], controlMagic)
	le.PutUint32(b[offCtlLayout:], ControlLayoutVersion)
	le.PutUint32(b[offCtlVersion:], c.Version)
	b[offCtlState] = byte(c.State)
	le.PutUint64(b[offCtlCheckpt:], uint64(c.CheckpointLSN))
	le.PutUint64(b[offCtlRedo:], uint64(c.RedoLSN))
	le.PutUint64(b[offCtlNextXID:], c.NextXID)
	le.PutUint32(b[offCtlNextOID:], c.NextOID)
	le.PutUint32(b[offCtlCRC:], page.CRC32C(b[:offCtlCRC]))
	return b
}

// DecodeControl parses and verifies control file bytes. Errors wrap
// ErrCorruptControl or ErrUnsupportedVersion.
func DecodeControl(b []byte) (*Control, error) {
	le := binary.LittleEndian
	if len(b) != ControlSize {
		return nil, fmt.Errorf("%w: %d bytes, want %d", ErrCorruptControl, len(b), ControlSize)
	}
	if m := le.Uint32(b[offCtlMagic:]); m != controlMagic {
		return nil, fmt.Errorf("%w: bad magic %08x", ErrCorruptControl, m)
	}
	if got, want := page.CRC32C(b[:offCtlCRC]), le.Uint32(b[offCtlCRC:]); got != want {
		return nil, fmt.Errorf("%w: CRC mismatch: stored %08x, computed %08x", ErrCorruptControl, want, got)
	}
	if v := le.Uint32(b[offCtlLayout:]); v != ControlLayoutVersion {
		return nil, fmt.Errorf("%w: layout version %d, this build reads %d", ErrUnsupportedVersion, v, ControlLayoutVersion)
	}
	c := &Control{
		Version:       le.Uint32(b[offCtlVersion:]),
		State:         State(b[offCtlState]),
		CheckpointLSN: LSN(le.Uint64(b[offCtlCheckpt:])),
		RedoLSN:       LSN(le.Uint64(b[offCtlRedo:])),
		NextXID:       le.Uint64(b[offCtlNextXID:]),
		NextOID:       le.Uint32(b[offCtlNextOID:]),
	}
	if c.State != StateShutdown && c.State != StateInProduction {
		return nil, fmt.Errorf("%w: unknown state %d", ErrCorruptControl, c.State)
	}
	if b[13]|b[14]|b[15] != 0 {
		return nil, fmt.Errorf("%w: reserved bytes are not zero", ErrCorruptControl)
	}
	return c, nil
}

// ReadControl reads and verifies the control file; a CRC mismatch or an
// unknown version is an error that says so (wrapping ErrCorruptControl or
// ErrUnsupportedVersion), and a missing file an error wrapping
// fs.ErrNotExist.
func ReadControl(fsys vfs.FS, dir string) (*Control, error) {
	name := filepath.Join(dir, ControlFileName)
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("open control file %s: %w", name, err)
	}
	defer func() { _ = f.Close() }() // read-only
	// Read one byte more than expected so a longer file is detected.
	b := make([]byte, ControlSize+1)
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read control file %s: %w", name, err)
	}
	c, err := DecodeControl(b[:n])
	if err != nil {
		return nil, fmt.Errorf("control file %s: %w", name, err)
	}
	return c, nil
}

// WriteControl replaces the control file atomically: it writes
// <dir>/control.tmp, fsyncs it, renames it to <dir>/control and fsyncs dir.
func WriteControl(fsys vfs.FS, dir string, c *Control) error {
	return vfs.WriteFileAtomic(fsys, dir, ControlFileName, controlTempName, EncodeControl(c))
}
