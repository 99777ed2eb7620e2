package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/txn"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// The saved positions of unfinished lazy vacuums (vacuum.Position): one
// file per table, <data>/vacuum_position/<heap relfilenode>, replaced
// atomically (vfs.WriteFileAtomic) after the WAL of the work it claims was
// flushed. The relfilenode in the name and in the file ties a position to
// one heap: TRUNCATE, VACUUM FULL and DROP give the table a new one or
// none, so an old position is never used for them, and Open removes the
// files of relfilenodes the catalog no longer names.
//
// Byte layout (little-endian, positionSize bytes):
//
//	0   4  magic "VPOS"
//	4   4  version (1)
//	8   4  heap relfilenode
//	12  4  block: the next block to scan
//	16  4  blocks: the heap's blocks when that vacuum started
//	20  1  finished (0 or 1)
//	21  3  zero
//	24  8  horizon (XID)
//	32  8  LSN the WAL was flushed to before the file was written
//	40  4  CRC32C of bytes 0..40
const (
	positionDirName = "vacuum_position"
	positionMagic   = "VPOS"
	positionVersion = 1
	positionSize    = 44
)

// savedPosition is one decoded position file.
type savedPosition struct {
	Rel storage.RelFileNode
	Pos vacuum.Position
	LSN wal.LSN
}

func encodePosition(p savedPosition) []byte {
	b := make([]byte, positionSize)
	copy(b[0:4], positionMagic)
	binary.LittleEndian.PutUint32(b[4:], positionVersion)
	binary.LittleEndian.PutUint32(b[8:], uint32(p.Rel))
	binary.LittleEndian.PutUint32(b[12:], p.Pos.Block)
	binary.LittleEndian.PutUint32(b[16:], p.Pos.Blocks)
	if p.Pos.Finished {
		b[20] = 1
	}
	binary.LittleEndian.PutUint64(b[24:], uint64(p.Pos.Horizon))
	binary.LittleEndian.PutUint64(b[32:], uint64(p.LSN))
	binary.LittleEndian.PutUint32(b[40:], page.CRC32C(b[:40]))
	return b
}

func decodePosition(b []byte) (savedPosition, error) {
	var p savedPosition
	switch {
	case len(b) != positionSize:
		return p, fmt.Errorf("%d bytes, want %d", len(b), positionSize)
	case string(b[0:4]) != positionMagic:
		return p, fmt.Errorf("bad magic %q", b[0:4])
	case binary.LittleEndian.Uint32(b[40:]) != page.CRC32C(b[:40]):
		return p, errors.New("checksum mismatch")
	case binary.LittleEndian.Uint32(b[4:]) != positionVersion:
		return p, fmt.Errorf("version %d, want %d", binary.LittleEndian.Uint32(b[4:]), positionVersion)
	}
	p.Rel = storage.RelFileNode(binary.LittleEndian.Uint32(b[8:]))
	p.Pos.Block = binary.LittleEndian.Uint32(b[12:])
	p.Pos.Blocks = binary.LittleEndian.Uint32(b[16:])
	if b[20] > 1 || b[21]|b[22]|b[23] != 0 {
		return p, fmt.Errorf("bad flags %x", b[20:24])
	}
	p.Pos.Finished = b[20] == 1
	if p.Pos.Finished && binary.LittleEndian.Uint32(b[12:]) != binary.LittleEndian.Uint32(b[16:]) {
		return p, errors.New("finished before its last block")
	}
	p.Pos.Horizon = txn.XID(binary.LittleEndian.Uint64(b[24:]))
	p.LSN = wal.LSN(binary.LittleEndian.Uint64(b[32:]))
	if p.Pos.Block > p.Pos.Blocks {
		return p, fmt.Errorf("block %d beyond the %d blocks it was recorded for", p.Pos.Block, p.Pos.Blocks)
	}
	return p, nil
}

func (db *DB) positionDir() string { return filepath.Join(db.dir, positionDirName) }

func positionName(rel storage.RelFileNode) string { return strconv.FormatUint(uint64(rel), 10) }

// SavedPosition reads the position recorded for the heap the Target was
// built from.
func (t *vacuumTable) SavedPosition() (vacuum.SavedPosition, error) {
	db, rel := t.db, t.was.Rel
	path := filepath.Join(db.positionDir(), positionName(rel))
	b, err := readSmall(db.fs, path)
	if errors.Is(err, fs.ErrNotExist) {
		return vacuum.SavedPosition{}, nil
	}
	if err != nil {
		return vacuum.SavedPosition{}, fmt.Errorf("read saved vacuum position %s: %w", path, err)
	}
	p, err := decodePosition(b)
	switch {
	case err != nil:
		return vacuum.SavedPosition{Untrusted: fmt.Sprintf("%s is unreadable (%v)", path, err)}, nil
	case p.Rel != rel:
		return vacuum.SavedPosition{Untrusted: fmt.Sprintf("%s was recorded for relfilenode %d, not %d", path, p.Rel, rel)}, nil
	case p.LSN > db.log.InsertLSN():
		return vacuum.SavedPosition{Untrusted: fmt.Sprintf("%s claims WAL up to %X, beyond the log's end %X",
			path, uint64(p.LSN), uint64(db.log.InsertLSN()))}, nil
	}
	return vacuum.SavedPosition{Position: p.Pos, Found: true}, nil
}

// VacuumPosition is the position the named table's last lazy vacuum
// recorded, as a resume would read it (Found false when there is none or
// it cannot be trusted): what a run that never reached the table knows of
// where it stands.
func (db *DB) VacuumPosition(name string) (vacuum.SavedPosition, error) {
	h, err := db.handle(name)
	if err != nil {
		return vacuum.SavedPosition{}, err
	}
	return (&vacuumTable{db: db, name: name, was: h}).SavedPosition()
}

// SavePosition flushes the WAL, then replaces the table's position file.
func (t *vacuumTable) SavePosition(p vacuum.Position) error {
	db := t.db
	lsn := db.log.InsertLSN()
	if err := db.log.Flush(lsn, nil); err != nil {
		return fmt.Errorf("save vacuum position of %q: %w", t.name, err)
	}
	dir := db.positionDir()
	if _, err := db.fs.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := db.fs.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("save vacuum position of %q: %w", t.name, err)
		}
		if err := db.fs.SyncDir(db.dir); err != nil {
			return fmt.Errorf("save vacuum position of %q: fsync %s: %w", t.name, db.dir, err)
		}
	}
	name := positionName(t.was.Rel)
	data := encodePosition(savedPosition{Rel: t.was.Rel, Pos: p, LSN: lsn})
	if err := vfs.WriteFileAtomic(db.fs, dir, name, name+".tmp", data); err != nil {
		return fmt.Errorf("save vacuum position of %q: %w", t.name, err)
	}
	return nil
}

// sweepPositions removes the position files of heaps the catalog no longer
// names (dropped, truncated, rewritten by FULL) and stale temporary files,
// at Open. A file left behind is harmless (its relfilenode is never reused
// and SavedPosition checks it), so failures are only logged.
func (db *DB) sweepPositions() {
	ents, err := db.fs.ReadDir(db.positionDir())
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			db.opts.Logf("list %s: %v", db.positionDir(), err)
		}
		return
	}
	heaps := map[string]bool{}
	for _, t := range db.cat.Tables {
		heaps[positionName(t.Rel)] = true
	}
	removed := 0
	for _, e := range ents {
		if heaps[e.Name()] && !strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		if err := db.fs.Remove(filepath.Join(db.positionDir(), e.Name())); err != nil {
			db.opts.Logf("remove stale vacuum position %s: %v", e.Name(), err)
			continue
		}
		removed++
	}
	if removed > 0 {
		if err := db.fs.SyncDir(db.positionDir()); err != nil {
			db.opts.Logf("fsync %s: %v", db.positionDir(), err)
		}
	}
}
