package replication

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// BaseBackupCommand is the replication command that streams a base backup in the
// engine's own format (PostgreSQL's BASE_BACKUP sends tar archives of PostgreSQL's
// layout, which pg_basebackup would misread here, so the name differs).
const BaseBackupCommand = "VACUUMOPS_BASE_BACKUP"

// Base backup stream (CopyOutResponse, then CopyData messages, then CopyDone):
//
//	'F' u16 name length, name (slash-separated, relative)   a file starts
//	'D' bytes                                              the current file's next bytes
//	'M' u16 name length, name                              a directory
//	'W' u16 name length, name, u64 segment start, u64 length, u64 segment size
//	                                                        a WAL segment starts (its bytes
//	                                                        follow as 'D'; the rest of the
//	                                                        segment is zero)
//	'E' u64 end LSN, u64 redo LSN, control file bytes      the end: the control file is
//	                                                        written last
const (
	bbFile    = 'F'
	bbData    = 'D'
	bbDir     = 'M'
	bbSegment = 'W'
	bbEnd     = 'E'
)

// backupExcluded are the data directory entries a base backup does not copy: the lock, the
// control file (sent last, as read at the backup's checkpoint), the WAL (sent from the
// redo point), the slots (a standby starts without the primary's), quarantined files.
func backupExcluded(rel string) bool {
	switch rel {
	case engine.LockFileName, wal.ControlFileName, wal.WALDirName, SlotsFileName, engine.QuarantineDirName:
		return true
	}
	return strings.HasSuffix(rel, ".tmp")
}

// baseBackup runs VACUUMOPS_BASE_BACKUP: a checkpoint, the files copied while writes go
// on, then the WAL from the checkpoint's redo point to the end of WAL after the copy.
// Replaying that WAL over the copy (the engine's recovery, at the copy's first Open)
// repairs every page the copy caught mid-write: the first change of a page after the redo
// point carries its full image, and every page written out had its WAL flushed before, so
// no page is newer than the end.
func (c *replConn) baseBackup() error {
	p := c.p
	h := p.hold(p.log.RedoPtr())
	defer p.release(h)
	if err := p.db.Checkpoint(); err != nil {
		c.sendError("XX000", fmt.Sprintf("base backup: checkpoint: %v", err))
		c.ready()
		return c.be.Flush()
	}
	ctl, err := wal.ReadControl(p.fs, p.dir)
	if err != nil {
		c.sendError("XX000", fmt.Sprintf("base backup: %v", err))
		c.ready()
		return c.be.Flush()
	}
	p.moveHold(h, ctl.RedoLSN)
	c.be.Send(&pgproto3.CopyOutResponse{OverallFormat: 0})
	w := &backupWriter{c: c, buf: make([]byte, 0, maxSendBytes+64)}
	if err := w.tree(p.dir, ""); err != nil {
		return c.abortCopy(err)
	}
	end := p.log.FlushedLSN()
	for segno := uint64(ctl.RedoLSN) / uint64(p.segSize); segno*uint64(p.segSize) < uint64(end); segno++ {
		if err := w.segment(segno, end); err != nil {
			return c.abortCopy(err)
		}
	}
	b := []byte{bbEnd}
	b = binary.BigEndian.AppendUint64(b, uint64(end))
	b = binary.BigEndian.AppendUint64(b, uint64(ctl.RedoLSN))
	b = append(b, wal.EncodeControl(ctl)...)
	c.be.Send(&pgproto3.CopyData{Data: b})
	c.be.Send(&pgproto3.CopyDone{})
	c.be.Send(&pgproto3.CommandComplete{CommandTag: []byte(BaseBackupCommand)})
	p.cfg.Logf("replication: base backup for %s sent: redo %s, end %s", c.rc.User, FormatLSN(ctl.RedoLSN), FormatLSN(end))
	c.ready()
	return c.be.Flush()
}

// abortCopy ends a failed base backup: an ErrorResponse ends the COPY for the client.
func (c *replConn) abortCopy(err error) error {
	c.p.cfg.Logf("replication: base backup failed: %v", err)
	c.sendError("XX000", fmt.Sprintf("base backup: %v", err))
	c.ready()
	if ferr := c.be.Flush(); ferr != nil {
		return ferr
	}
	return nil
}

type backupWriter struct {
	c   *replConn
	buf []byte
}

func (w *backupWriter) send(b []byte) error {
	w.c.be.Send(&pgproto3.CopyData{Data: b})
	return w.c.be.Flush()
}

func (w *backupWriter) named(kind byte, name string) []byte {
	b := append(w.buf[:0], kind)
	b = binary.BigEndian.AppendUint16(b, uint16(len(name)))
	return append(b, name...)
}

// tree sends the directory dir/rel and everything under it but the excluded entries.
func (w *backupWriter) tree(dir, rel string) error {
	fsys := w.c.p.fs
	ents, err := fsys.ReadDir(filepath.Join(dir, filepath.FromSlash(rel)))
	if err != nil {
		if rel != "" && errors.Is(err, fs.ErrNotExist) {
			return nil // removed during the backup (a dropped relation's directory)
		}
		return fmt.Errorf("list %s: %w", filepath.Join(dir, rel), err)
	}
	for _, e := range ents {
		name := path.Join(rel, e.Name())
		if backupExcluded(name) {
			continue
		}
		if e.IsDir() {
			if err := w.send(w.named(bbDir, name)); err != nil {
				return err
			}
			if err := w.tree(dir, name); err != nil {
				return err
			}
			continue
		}
		if err := w.file(filepath.Join(dir, filepath.FromSlash(name)), name); err != nil {
			return err
		}
	}
	return nil
}

// file sends one file as it is while it is read (writes may go on: WAL replay repairs).
func (w *backupWriter) file(full, name string) error {
	f, err := w.c.p.fs.OpenFile(full, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // removed during the backup: WAL replay recreates what it needs
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", full, err)
	}
	defer func() { _ = f.Close() }() // read-only
	if err := w.send(w.named(bbFile, name)); err != nil {
		return err
	}
	return w.copy(f, 0, -1)
}

// copy sends bytes [off, off+n) of f as data messages (n < 0: to the end of the file).
func (w *backupWriter) copy(f interface {
	ReadAt([]byte, int64) (int, error)
}, off, n int64) error {
	buf := make([]byte, maxSendBytes)
	for n != 0 {
		want := int64(len(buf))
		if n > 0 {
			want = min(want, n)
		}
		m, err := f.ReadAt(buf[:want], off)
		if m > 0 {
			msg := append([]byte{bbData}, buf[:m]...)
			if serr := w.send(msg); serr != nil {
				return serr
			}
			off += int64(m)
			if n > 0 {
				n -= int64(m)
			}
		}
		if errors.Is(err, io.EOF) {
			if n > 0 {
				return fmt.Errorf("WAL segment ends %d bytes early", n)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
	}
	return nil
}

// segment sends segment segno's WAL up to end.
func (w *backupWriter) segment(segno uint64, end wal.LSN) error {
	p := w.c.p
	start := segno * uint64(p.segSize)
	n := min(uint64(end)-start, uint64(p.segSize))
	f, err := p.openSegment(wal.LSN(start))
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }() // read-only
	b := w.named(bbSegment, wal.SegmentName(segno, p.segSize))
	b = binary.BigEndian.AppendUint64(b, start)
	b = binary.BigEndian.AppendUint64(b, n)
	b = binary.BigEndian.AppendUint64(b, uint64(p.segSize))
	if err := w.send(b); err != nil {
		return err
	}
	if err := w.copy(f, 0, int64(n)); err != nil {
		return fmt.Errorf("WAL segment %s: %w", f.Name(), err)
	}
	return nil
}
