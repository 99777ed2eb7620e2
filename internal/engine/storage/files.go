package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
)

// Create creates the fork's first segment if it does not exist.
func (m *Manager) Create(rel RelFileNode, fork ForkNum) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if err := m.check(true); err != nil {
		return fmt.Errorf("create %s: %w", m.Path(rel, fork), err)
	}
	fs := m.forkState(rel, fork)
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if _, _, err := m.openSeg(fs, rel, fork, 0, true); err != nil {
		return fmt.Errorf("create %s: %w", m.Path(rel, fork), err)
	}
	return nil
}

// Exists reports whether the fork has a file.
func (m *Manager) Exists(rel RelFileNode, fork ForkNum) (bool, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if err := m.check(false); err != nil {
		return false, err
	}
	fs := m.forkState(rel, fork)
	fs.mu.Lock()
	open := fs.segs[0] != nil
	fs.mu.Unlock()
	if open {
		return true, nil
	}
	_, err := m.fs.Stat(m.Path(rel, fork))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("stat %s: %w", m.Path(rel, fork), err)
	}
	return true, nil
}

// Truncate shortens the fork to nblocks blocks (removing whole segments).
// Segments past the last kept one are removed, highest first; the last
// kept segment (always segment 0 at least) is truncated. The change is
// durable after the next Sync or SyncAll. Truncating to at least the
// current size does nothing.
func (m *Manager) Truncate(rel RelFileNode, fork ForkNum, nblocks BlockNumber) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(true); err != nil {
		return fmt.Errorf("truncate %s: %w", m.Path(rel, fork), err)
	}
	fs := m.forkState(rel, fork)
	fs.mu.Lock()
	defer fs.mu.Unlock()
	cur, err := m.nblocksLocked(fs, rel, fork)
	if err != nil {
		return fmt.Errorf("truncate %s: %w", m.Path(rel, fork), err)
	}
	if nblocks >= cur {
		return nil
	}
	fs.nblocks.Store(-1) // recomputed from the files whatever happens below
	keep := uint32(0)
	if nblocks > 0 {
		keep = (uint32(nblocks) - 1) / m.bps
	}
	segs, err := m.segments(rel, fork)
	if err != nil {
		return fmt.Errorf("truncate %s: %w", m.Path(rel, fork), err)
	}
	for _, seg := range slices.Backward(segs) {
		if seg <= keep {
			break
		}
		if err := m.removeSeg(fs, rel, fork, seg); err != nil {
			return fmt.Errorf("truncate %s to %d blocks: %w", m.Path(rel, fork), nblocks, err)
		}
	}
	f, _, err := m.openSeg(fs, rel, fork, keep, false)
	if err != nil {
		return fmt.Errorf("truncate %s to %d blocks: %w", m.Path(rel, fork), nblocks, err)
	}
	size := int64(uint32(nblocks)-keep*m.bps) * page.Size
	if err := f.Truncate(size); err != nil {
		return fmt.Errorf("truncate %s to %d bytes: %w", m.SegmentPath(rel, fork, keep), size, err)
	}
	m.markDirty(segKey{forkKey{rel, fork}, keep}, f)
	fs.nblocks.Store(int64(nblocks))
	return nil
}

// removeSeg closes and removes one segment file. Caller holds m.mu and
// fs.mu.
func (m *Manager) removeSeg(fs *forkState, rel RelFileNode, fork ForkNum, seg uint32) error {
	var cerr error
	if f := fs.segs[seg]; f != nil {
		cerr = f.Close()
		delete(fs.segs, seg)
	}
	m.stateMu.Lock()
	delete(m.dirty, segKey{forkKey{rel, fork}, seg})
	m.dirDirty = true
	m.stateMu.Unlock()
	name := m.SegmentPath(rel, fork, seg)
	if err := m.fs.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return errors.Join(fmt.Errorf("remove %s: %w", name, err), cerr)
	}
	if cerr != nil {
		return fmt.Errorf("close %s: %w", name, cerr)
	}
	return nil
}

// Sync fsyncs every segment of one fork (and the directory when files were
// created or removed in it since the last sync).
func (m *Manager) Sync(rel RelFileNode, fork ForkNum) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if err := m.check(true); err != nil {
		return fmt.Errorf("sync %s: %w", m.Path(rel, fork), err)
	}
	segs, err := m.segments(rel, fork)
	if err != nil {
		return fmt.Errorf("sync %s: %w", m.Path(rel, fork), err)
	}
	fs := m.forkState(rel, fork)
	for _, seg := range segs {
		fs.mu.Lock()
		f, _, err := m.openSeg(fs, rel, fork, seg, false)
		fs.mu.Unlock()
		if err != nil {
			return fmt.Errorf("sync %s: %w", m.SegmentPath(rel, fork, seg), err)
		}
		k := segKey{forkKey{rel, fork}, seg}
		m.stateMu.Lock()
		delete(m.dirty, k)
		m.stateMu.Unlock()
		if err := f.Sync(); err != nil {
			return fmt.Errorf("sync %s: %w", f.Name(), m.fail(err))
		}
	}
	return m.syncDirIfDirty()
}

// SyncAll fsyncs every file written or extended since the last SyncAll
// (the checkpoint's sync phase), then the base directory if entries were
// created or removed. A failed fsync is sticky: the Manager refuses every
// later change (Write, Extend, Create, Truncate, Drop, Sync, SyncAll) with
// a *SyncFailedError wrapping the first failure, because the kernel may
// have dropped the dirty data it could not write.
func (m *Manager) SyncAll() error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if err := m.check(true); err != nil {
		return fmt.Errorf("sync all: %w", err)
	}
	for _, f := range m.dirtyFiles(true) {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("sync all: sync %s: %w", f.Name(), m.fail(err))
		}
	}
	return m.syncDirIfDirty()
}

// StartWriteback asks the system to start writing back every segment file
// written since the last SyncAll (vfs.WritebackStarter), without waiting and
// without making anything durable: a spread checkpoint calls it as it
// writes, so that the SyncAll at its end does not meet all of its writes at
// once (a long fsync of a large dirty set stalls the whole machine). The
// files stay due for SyncAll.
func (m *Manager) StartWriteback() error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if err := m.check(true); err != nil {
		return fmt.Errorf("start writeback: %w", err)
	}
	for _, f := range m.dirtyFiles(false) {
		if w, ok := f.(vfs.WritebackStarter); ok {
			if err := w.StartWriteback(); err != nil {
				return fmt.Errorf("start writeback: %w", err)
			}
		}
	}
	return nil
}

// dirtyFiles lists the segment files written since the last SyncAll,
// taking them off that list when take is set (SyncAll's).
func (m *Manager) dirtyFiles(take bool) []vfs.File {
	m.stateMu.Lock()
	defer m.stateMu.Unlock()
	files := make([]vfs.File, 0, len(m.dirty))
	for _, f := range m.dirty {
		files = append(files, f)
	}
	if take {
		clear(m.dirty)
	}
	return files
}

func (m *Manager) syncDirIfDirty() error {
	m.stateMu.Lock()
	dirty := m.dirDirty
	m.dirDirty = false
	m.stateMu.Unlock()
	if !dirty {
		return nil
	}
	if err := m.fs.SyncDir(m.base); err != nil {
		return fmt.Errorf("sync directory %s: %w", m.base, m.fail(err))
	}
	return nil
}

// Drop closes and removes every fork and segment of rel. The removal is
// durable after the next Sync or SyncAll.
func (m *Manager) Drop(rel RelFileNode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(true); err != nil {
		return fmt.Errorf("drop relation %d: %w", rel, err)
	}
	errs := m.detach(rel, func(path string) error {
		if err := m.fs.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", path, err)
		}
		return nil
	})
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("drop relation %d: %w", rel, err)
	}
	return nil
}

// MoveOut closes every fork and segment of rel and renames its files into
// dstDir (a directory on the same file system, which the caller creates
// and fsyncs), returning the paths they now have. Open uses it to
// quarantine relation files the catalog does not name instead of deleting
// them. Like Drop, the change to the base directory is durable after the
// next Sync or SyncAll.
func (m *Manager) MoveOut(rel RelFileNode, dstDir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(true); err != nil {
		return nil, fmt.Errorf("move out relation %d: %w", rel, err)
	}
	var moved []string
	errs := m.detach(rel, func(path string) error {
		dst := filepath.Join(dstDir, filepath.Base(path))
		if err := m.fs.Rename(path, dst); err != nil {
			return fmt.Errorf("move %s to %s: %w", path, dst, err)
		}
		moved = append(moved, dst)
		return nil
	})
	if err := errors.Join(errs...); err != nil {
		return moved, fmt.Errorf("move out relation %d: %w", rel, err)
	}
	return moved, nil
}

// detach is the walk Drop and MoveOut share: for each fork of rel it closes
// the open segment files, forgets the fork's cached state and dirty marks,
// and then applies act to the path of every segment file in the directory,
// the last segment first (so a crash part way leaves a prefix of the
// relation, as a truncation would). The caller holds m.mu exclusively. It
// returns every error met; the walk goes on after one.
func (m *Manager) detach(rel RelFileNode, act func(path string) error) []error {
	var errs []error
	for _, fork := range forks {
		segs, err := m.segments(rel, fork)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		fs := m.forkState(rel, fork)
		fs.mu.Lock()
		for seg, f := range fs.segs {
			if err := f.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close %s: %w", m.SegmentPath(rel, fork, seg), err))
			}
			delete(fs.segs, seg)
		}
		fs.nblocks.Store(-1)
		fs.mu.Unlock()
		m.stateMu.Lock()
		for _, seg := range segs {
			delete(m.dirty, segKey{forkKey{rel, fork}, seg})
		}
		if len(segs) > 0 {
			m.dirDirty = true
		}
		m.forks.Delete(forkKey{rel, fork})
		m.stateMu.Unlock()
		for _, seg := range slices.Backward(segs) {
			if err := act(m.SegmentPath(rel, fork, seg)); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errs
}

// List returns every relfilenode that has files in the directory (for
// orphan cleanup at open), in ascending order. Names that are not relation
// files are ignored.
func (m *Manager) List() ([]RelFileNode, error) {
	if err := m.check(false); err != nil {
		return nil, err
	}
	ents, err := m.fs.ReadDir(m.base)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", m.base, err)
	}
	var rels []RelFileNode
	for _, e := range ents {
		if rel, _, _, ok := ParseFileName(e.Name()); ok && !e.IsDir() {
			rels = append(rels, rel)
		}
	}
	slices.Sort(rels)
	return slices.Compact(rels), nil
}

// segments lists the segment numbers of (rel, fork) present in the
// directory, ascending.
func (m *Manager) segments(rel RelFileNode, fork ForkNum) ([]uint32, error) {
	ents, err := m.fs.ReadDir(m.base)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", m.base, err)
	}
	var segs []uint32
	for _, e := range ents {
		if r, f, s, ok := ParseFileName(e.Name()); ok && r == rel && f == fork {
			segs = append(segs, s)
		}
	}
	slices.Sort(segs)
	return segs, nil
}

// ParseFileName parses a relation file name "<relfilenode>[_fsm|_vm][.N]".
func ParseFileName(name string) (rel RelFileNode, fork ForkNum, seg uint32, ok bool) {
	base, segStr, hasSeg := strings.Cut(name, ".")
	if hasSeg {
		s, err := parseUint32(segStr)
		if err != nil || s == 0 {
			return 0, 0, 0, false
		}
		seg = s
	}
	switch {
	case strings.HasSuffix(base, "_fsm"):
		fork, base = FSMFork, strings.TrimSuffix(base, "_fsm")
	case strings.HasSuffix(base, "_vm"):
		fork, base = VMFork, strings.TrimSuffix(base, "_vm")
	}
	r, err := parseUint32(base)
	if err != nil {
		return 0, 0, 0, false
	}
	return RelFileNode(r), fork, seg, true
}

// parseUint32 accepts only canonical decimal (no sign, no leading zero).
func parseUint32(s string) (uint32, error) {
	if s == "" || (len(s) > 1 && s[0] == '0') || s[0] == '+' || s[0] == '-' {
		return 0, strconv.ErrSyntax
	}
	v, err := strconv.ParseUint(s, 10, 32)
	return uint32(v), err
}
