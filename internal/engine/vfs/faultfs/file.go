package faultfs

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
)

// undoRec undoes one write or truncation: write saved back at off, then
// truncate the file to oldSize.
type undoRec struct {
	off     int64
	n       int64  // bytes the write wrote (0 for a truncation)
	saved   []byte // old contents of [off, off+len(saved)), within oldSize
	oldSize int64
}

// node is the durability state of one file (an inode: it follows renames).
type node struct {
	mu   sync.Mutex // held across a write and its undo record
	undo []undoRec  // changes since the last successful Sync, oldest first
}

// saveTruncate records the undo of truncating to size, reading old bytes
// through rd. Caller holds n.mu.
func (n *node) saveTruncate(rd vfs.File, size int64) error {
	old, err := rd.Size()
	if err != nil {
		return err
	}
	rec := undoRec{off: size, oldSize: old}
	if size < old {
		rec.saved = make([]byte, old-size)
		k, err := rd.ReadAt(rec.saved, size)
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("faultfs: save %s before truncate: %w", rd.Name(), err)
		}
		rec.saved = rec.saved[:k]
	}
	n.undo = append(n.undo, rec)
	return nil
}

// captured is a removed or replaced file: its contents at the time and the
// undo log that turns them into its durable contents.
type captured struct {
	data []byte
	undo []undoRec
}

type file struct {
	fs     *FS
	inner  vfs.File
	reader vfs.File // buffered read-only handle for saving old bytes
	node   *node
	name   string
	closed sync.Once
}

func (f *file) ReadAt(b []byte, off int64) (int, error) {
	if err := f.fs.begin(OpRead, false); err != nil {
		return 0, err
	}
	defer f.fs.end()
	if r := f.fs.fault(OpRead, f.name); r != nil {
		return 0, injectedErr(r, "read", f.name)
	}
	return f.inner.ReadAt(b, off)
}

func (f *file) WriteAt(b []byte, off int64) (int, error) {
	if err := f.fs.begin(OpWrite, true); err != nil {
		return 0, err
	}
	defer f.fs.end()
	size, err := f.inner.Size()
	if err != nil {
		return 0, err
	}
	ops := OpWrite
	if off+int64(len(b)) > size {
		ops |= OpExtend
		f.fs.count(OpExtend)
	}
	var short error
	if r := f.fs.fault(ops, f.name); r != nil {
		if r.Fault != ShortWrite {
			return 0, injectedErr(r, "write", f.name)
		}
		k := r.ShortBytes
		if k <= 0 || k >= len(b) {
			k = len(b) / 2
		}
		b, short = b[:k], io.ErrShortWrite
	}
	f.node.mu.Lock()
	defer f.node.mu.Unlock()
	size, err = f.inner.Size()
	if err != nil {
		return 0, err
	}
	rec := undoRec{off: off, n: int64(len(b)), oldSize: size}
	if off < size {
		rec.saved = make([]byte, min(int64(len(b)), size-off))
		k, err := f.reader.ReadAt(rec.saved, off)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, fmt.Errorf("faultfs: save old bytes of %s: %w", f.name, err)
		}
		rec.saved = rec.saved[:k]
	}
	n, err := f.inner.WriteAt(b, off)
	if n > 0 || err == nil {
		f.node.undo = append(f.node.undo, rec)
	}
	if err != nil {
		return n, err
	}
	return n, short
}

func (f *file) Truncate(size int64) error {
	if err := f.fs.begin(OpTruncate, true); err != nil {
		return err
	}
	defer f.fs.end()
	cur, err := f.inner.Size()
	if err != nil {
		return err
	}
	ops := OpTruncate
	if size > cur {
		ops |= OpExtend
		f.fs.count(OpExtend)
	}
	if r := f.fs.fault(ops, f.name); r != nil {
		return injectedErr(r, "truncate", f.name)
	}
	f.node.mu.Lock()
	defer f.node.mu.Unlock()
	if err := f.node.saveTruncate(f.reader, size); err != nil {
		return err
	}
	return f.inner.Truncate(size)
}

// Sync makes the changes made before it durable. A failed Sync (injected or
// real) leaves them non-durable.
func (f *file) Sync() error {
	if err := f.fs.begin(OpSync, true); err != nil {
		return err
	}
	defer f.fs.end()
	if r := f.fs.fault(OpSync, f.name); r != nil {
		return injectedErr(r, "fsync", f.name)
	}
	f.node.mu.Lock()
	upto := len(f.node.undo)
	f.node.mu.Unlock()
	if err := f.inner.Sync(); err != nil {
		return err
	}
	f.node.mu.Lock()
	// Only the changes made before the fsync started are known durable.
	f.node.undo = append(f.node.undo[:0:0], f.node.undo[upto:]...)
	f.node.mu.Unlock()
	return nil
}

func (f *file) Size() (int64, error) {
	if err := f.fs.begin(0, false); err != nil {
		return 0, err
	}
	defer f.fs.end()
	return f.inner.Size()
}

// Close closes the file. After PowerLoss (which closed it already) it
// returns ErrPoweredOff.
func (f *file) Close() error {
	if f.fs.dead.Load() {
		return ErrPoweredOff
	}
	f.fs.meta.Lock()
	delete(f.fs.open, f)
	f.fs.meta.Unlock()
	return f.closeInner()
}

func (f *file) closeInner() error {
	var err error
	f.closed.Do(func() { err = errors.Join(f.inner.Close(), f.reader.Close()) })
	return err
}

func (f *file) Name() string { return f.name }
func (f *file) Direct() bool { return f.inner.Direct() }
