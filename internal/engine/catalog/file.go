package catalog

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
)

// File layout constants (see doc.go).
const (
	FileName   = "catalog"
	tmpName    = "catalog.tmp"
	magic      = "VCAT"
	Version    = 3
	headerSize = 16
	maxPayload = 64 << 20
)

// ErrCorrupt: the catalog file fails its checks. ErrUnsupportedVersion: it
// was written by an unknown format version.
var (
	ErrCorrupt            = errors.New("corrupt catalog")
	ErrUnsupportedVersion = errors.New("unsupported catalog version")
)

// Encode returns the file bytes of c.
func Encode(c *Catalog) ([]byte, error) {
	payload, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode catalog: %w", err)
	}
	b := make([]byte, headerSize, headerSize+len(payload))
	copy(b, magic)
	binary.LittleEndian.PutUint32(b[4:], Version)
	binary.LittleEndian.PutUint32(b[8:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(b[12:], page.CRC32C(payload))
	return append(b, payload...), nil
}

// Decode parses and validates catalog file bytes. It never panics.
func Decode(b []byte) (*Catalog, error) { return decodeVersion(b, Version) }

// DecodeV2 parses a format-2 catalog file: the same JSON, except that an
// index names its one key column in "column" (Index.UnmarshalJSON reads
// it). The result is validated as Decode validates.
func DecodeV2(b []byte) (*Catalog, error) { return decodeVersion(b, 2) }

func decodeVersion(b []byte, want uint32) (*Catalog, error) {
	if len(b) < headerSize || string(b[:4]) != magic {
		return nil, fmt.Errorf("bad magic or short file (%d bytes): %w", len(b), ErrCorrupt)
	}
	if v := binary.LittleEndian.Uint32(b[4:]); v != want {
		return nil, fmt.Errorf("catalog version %d, this build reads %d: %w", v, want, ErrUnsupportedVersion)
	}
	n := binary.LittleEndian.Uint32(b[8:])
	if uint64(n) != uint64(len(b)-headerSize) {
		return nil, fmt.Errorf("payload length %d, file holds %d: %w", n, len(b)-headerSize, ErrCorrupt)
	}
	payload := b[headerSize:]
	if crc := page.CRC32C(payload); crc != binary.LittleEndian.Uint32(b[12:]) {
		return nil, fmt.Errorf("checksum mismatch: %w", ErrCorrupt)
	}
	c := &Catalog{}
	if err := json.Unmarshal(payload, c); err != nil {
		return nil, fmt.Errorf("%v: %w", err, ErrCorrupt)
	}
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("%v: %w", err, ErrCorrupt)
	}
	return c, nil
}

// Load reads <dir>/catalog. A missing file is an error matching
// fs.ErrNotExist.
func Load(fsys vfs.FS, dir string) (*Catalog, error) {
	path := filepath.Join(dir, FileName)
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("open catalog: %w", err)
	}
	defer func() { _ = f.Close() }() // opened read-only
	size, err := f.Size()
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	if size > maxPayload+headerSize {
		return nil, fmt.Errorf("%s is %d bytes: %w", path, size, ErrCorrupt)
	}
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil && size > 0 {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	c, err := Decode(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Exists reports whether <dir>/catalog exists.
func Exists(fsys vfs.FS, dir string) (bool, error) {
	_, err := fsys.Stat(filepath.Join(dir, FileName))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// Save replaces <dir>/catalog atomically with c: write a temporary file,
// fsync it, rename it into place, fsync the directory.
func Save(fsys vfs.FS, dir string, c *Catalog) error {
	if err := c.validate(); err != nil {
		return fmt.Errorf("save catalog: %w", err)
	}
	b, err := Encode(c)
	if err != nil {
		return err
	}
	if err := vfs.WriteFileAtomic(fsys, dir, FileName, tmpName, b); err != nil {
		return fmt.Errorf("save catalog: %w", err)
	}
	return nil
}
