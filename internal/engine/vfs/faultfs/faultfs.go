package faultfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
)

// ErrPoweredOff is returned by every operation after PowerLoss.
var ErrPoweredOff = errors.New("faultfs: powered off")

// FS wraps another vfs.FS, injecting faults and simulating power loss.
// Safe for concurrent use.
type FS struct {
	inner vfs.FS

	// life is held shared by every operation and exclusively by PowerLoss,
	// so the power is cut between operations, never inside one.
	life sync.RWMutex
	dead atomic.Bool

	// meta guards the namespace bookkeeping below and serializes
	// namespace operations (open/create, rename, remove, mkdir, syncdir).
	meta     sync.Mutex
	nodes    map[string]*node // by cleaned path
	journal  []dirOp          // directory operations not yet known durable
	seq      uint64           // sequence number of the last journal entry
	dirSync  map[string]uint64
	open     map[*file]struct{}
	crashAt  int64 // mutating operation number that cuts the power; 0 = never
	crashOpt PowerLossOptions

	locksMu sync.Mutex // guards locks; a leaf lock
	locks   map[*lockHandle]struct{}

	rulesMu sync.Mutex
	rules   []*RuleHandle

	mutating atomic.Int64
	counts   [numOps]atomic.Int64
}

var _ vfs.FS = (*FS)(nil)

// New wraps inner. Files that exist in inner are taken as durable.
func New(inner vfs.FS) *FS {
	return &FS{
		inner: inner, nodes: map[string]*node{}, dirSync: map[string]uint64{},
		open: map[*file]struct{}{}, locks: map[*lockHandle]struct{}{},
	}
}

// Stats are operation counts since New, by kind (a call counts once for
// each kind it is).
type Stats struct {
	Mutating int64 // writes, truncates, syncs, creates, renames, removes, mkdirs
	ByOp     map[string]int64
}

// Stats returns the operation counters.
func (fs *FS) Stats() Stats {
	s := Stats{Mutating: fs.mutating.Load(), ByOp: map[string]int64{}}
	for i := range fs.counts {
		s.ByOp[opNames[i]] = fs.counts[i].Load()
	}
	return s
}

// Count returns how many operations of any kind in ops were performed.
func (fs *FS) Count(ops Op) int64 {
	var n int64
	for i := range fs.counts {
		if ops&(1<<i) != 0 {
			n += fs.counts[i].Load()
		}
	}
	return n
}

// MutatingOps returns the number of mutating operations so far; CrashAfter
// counts the same way.
func (fs *FS) MutatingOps() int64 { return fs.mutating.Load() }

// PoweredOff reports whether PowerLoss has happened.
func (fs *FS) PoweredOff() bool { return fs.dead.Load() }

// CrashAfter makes the n-th mutating operation from now cut the power
// (with opts) instead of running: it and every later operation return
// ErrPoweredOff. n <= 0 disarms.
func (fs *FS) CrashAfter(n int, opts PowerLossOptions) {
	fs.meta.Lock()
	defer fs.meta.Unlock()
	if n <= 0 {
		fs.crashAt = 0
		return
	}
	fs.crashAt = fs.mutating.Load() + int64(n)
	fs.crashOpt = opts
}

// begin starts an operation: it takes the life lock shared, counts the
// operation, and cuts the power when this is the operation CrashAfter
// chose. On error the lock is not held.
func (fs *FS) begin(ops Op, mutating bool) error {
	fs.life.RLock()
	if fs.dead.Load() {
		fs.life.RUnlock()
		return ErrPoweredOff
	}
	if !mutating {
		fs.count(ops)
		return nil
	}
	n := fs.mutating.Add(1)
	fs.meta.Lock()
	crash := fs.crashAt > 0 && n >= fs.crashAt
	opts := fs.crashOpt
	if crash {
		fs.crashAt = 0
	}
	fs.meta.Unlock()
	if crash {
		fs.life.RUnlock()
		if err := fs.PowerLoss(opts); err != nil && !errors.Is(err, ErrPoweredOff) {
			return fmt.Errorf("%w (power loss simulation failed: %v)", ErrPoweredOff, err)
		}
		return ErrPoweredOff
	}
	fs.count(ops)
	return nil
}

func (fs *FS) end() { fs.life.RUnlock() }

func (fs *FS) count(ops Op) {
	for i := range fs.counts {
		if ops&(1<<i) != 0 {
			fs.counts[i].Add(1)
		}
	}
}

func clean(name string) string { return filepath.Clean(name) }

// nodeFor returns the node of path, creating it. Caller holds meta.
func (fs *FS) nodeFor(path string) *node {
	n := fs.nodes[path]
	if n == nil {
		n = &node{}
		fs.nodes[path] = n
	}
	return n
}

func (fs *FS) record(op dirOp) {
	fs.seq++
	op.seq = fs.seq
	fs.journal = append(fs.journal, op)
}

// OpenFile opens name in the inner FS. Creating a file is a directory
// operation, undone by PowerLoss unless the directory was synced since.
func (fs *FS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	path := clean(name)
	fs.meta.Lock()
	_, statErr := fs.inner.Stat(path)
	fs.meta.Unlock()
	creating := flag&os.O_CREATE != 0 && errors.Is(statErr, os.ErrNotExist)
	ops := OpOpen
	if creating {
		ops |= OpCreate
	}
	truncating := flag&os.O_TRUNC != 0 && statErr == nil
	if err := fs.begin(ops, creating || truncating); err != nil {
		return nil, err
	}
	defer fs.end()
	if r := fs.fault(ops, path); r != nil {
		return nil, injectedErr(r, "open", name)
	}
	fs.meta.Lock()
	defer fs.meta.Unlock()
	if truncating {
		// O_TRUNC is a truncation to 0: save the old contents first.
		if err := fs.saveForTruncate(fs.nodeFor(path), path, 0); err != nil {
			return nil, err
		}
	}
	_, statErr = fs.inner.Stat(path)
	f, err := fs.inner.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	n := fs.nodeFor(path)
	if errors.Is(statErr, os.ErrNotExist) {
		fs.record(dirOp{kind: opCreate, path: path, dirs: []string{filepath.Dir(path)}})
	}
	rd, err := fs.inner.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("faultfs: open %s for undo reads: %w", name, err), f.Close())
	}
	ff := &file{fs: fs, inner: f, reader: rd, node: n, name: name}
	fs.open[ff] = struct{}{}
	return ff, nil
}

// saveForTruncate records the undo of truncating path to size. Caller
// holds meta.
func (fs *FS) saveForTruncate(n *node, path string, size int64) error {
	rd, err := fs.inner.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer func() { _ = rd.Close() }()
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.saveTruncate(rd, size)
}

// Remove removes name; PowerLoss restores it (with its durable contents)
// unless its directory was synced since.
func (fs *FS) Remove(name string) error {
	if err := fs.begin(OpRemove, true); err != nil {
		return err
	}
	defer fs.end()
	path := clean(name)
	if r := fs.fault(OpRemove, path); r != nil {
		return injectedErr(r, "remove", name)
	}
	fs.meta.Lock()
	defer fs.meta.Unlock()
	st, err := fs.inner.Stat(path)
	if err != nil {
		return err
	}
	op := dirOp{kind: opRemove, path: path, dirs: []string{filepath.Dir(path)}, isDir: st.IsDir()}
	if !st.IsDir() {
		if op.saved, err = fs.capture(path); err != nil {
			return err
		}
	}
	if err := fs.inner.Remove(name); err != nil {
		return err
	}
	delete(fs.nodes, path)
	fs.record(op)
	return nil
}

// capture returns path's current contents and its undo log, from which
// PowerLoss can rebuild its durable state. Caller holds meta.
func (fs *FS) capture(path string) (*captured, error) {
	rd, err := fs.inner.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rd.Close() }()
	size, err := rd.Size()
	if err != nil {
		return nil, err
	}
	data := make([]byte, size)
	if _, err := rd.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("faultfs: save %s: %w", path, err)
	}
	c := &captured{data: data}
	if n := fs.nodes[path]; n != nil {
		n.mu.Lock()
		c.undo = append([]undoRec(nil), n.undo...)
		n.mu.Unlock()
	}
	return c, nil
}

// Rename renames oldpath to newpath; PowerLoss reverts it (restoring a
// replaced newpath) unless both directories were synced since.
func (fs *FS) Rename(oldpath, newpath string) error {
	if err := fs.begin(OpRename, true); err != nil {
		return err
	}
	defer fs.end()
	o, n := clean(oldpath), clean(newpath)
	if r := fs.fault(OpRename, o+"\x00"+n); r != nil {
		return injectedErr(r, "rename", oldpath)
	}
	fs.meta.Lock()
	defer fs.meta.Unlock()
	op := dirOp{kind: opRename, path: o, newPath: n, dirs: []string{filepath.Dir(o), filepath.Dir(n)}}
	if st, err := fs.inner.Stat(n); err == nil && !st.IsDir() {
		saved, err := fs.capture(n)
		if err != nil {
			return err
		}
		op.saved = saved
	}
	if err := fs.inner.Rename(oldpath, newpath); err != nil {
		return err
	}
	if nd := fs.nodes[o]; nd != nil {
		fs.nodes[n] = nd
	} else {
		delete(fs.nodes, n)
	}
	delete(fs.nodes, o)
	fs.record(op)
	return nil
}

// MkdirAll creates path and its missing parents; PowerLoss removes the ones
// whose parent directory was not synced since.
func (fs *FS) MkdirAll(path string, perm os.FileMode) error {
	p := clean(path)
	var missing []string
	for d := p; ; d = filepath.Dir(d) {
		if _, err := fs.inner.Stat(d); err == nil {
			break
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := fs.begin(OpMkdir, len(missing) > 0); err != nil {
		return err
	}
	defer fs.end()
	if r := fs.fault(OpMkdir, p); r != nil {
		return injectedErr(r, "mkdir", path)
	}
	fs.meta.Lock()
	defer fs.meta.Unlock()
	if err := fs.inner.MkdirAll(path, perm); err != nil {
		return err
	}
	for i := len(missing) - 1; i >= 0; i-- {
		fs.record(dirOp{kind: opMkdir, path: missing[i], dirs: []string{filepath.Dir(missing[i])}})
	}
	return nil
}

// Stat passes through.
func (fs *FS) Stat(name string) (os.FileInfo, error) {
	if err := fs.begin(0, false); err != nil {
		return nil, err
	}
	defer fs.end()
	return fs.inner.Stat(name)
}

// ReadDir passes through.
func (fs *FS) ReadDir(name string) ([]os.DirEntry, error) {
	if err := fs.begin(0, false); err != nil {
		return nil, err
	}
	defer fs.end()
	return fs.inner.ReadDir(name)
}

// SyncDir makes the directory operations in dir so far durable.
func (fs *FS) SyncDir(dir string) error {
	if err := fs.begin(OpSyncDir, true); err != nil {
		return err
	}
	defer fs.end()
	d := clean(dir)
	if r := fs.fault(OpSyncDir, d); r != nil {
		return injectedErr(r, "fsync", dir)
	}
	fs.meta.Lock()
	defer fs.meta.Unlock()
	seq := fs.seq
	if err := fs.inner.SyncDir(dir); err != nil {
		return err
	}
	fs.dirSync[d] = seq + 1
	kept := fs.journal[:0]
	for _, op := range fs.journal {
		if !fs.durable(op) {
			kept = append(kept, op)
		}
	}
	clear(fs.journal[len(kept):])
	fs.journal = kept
	return nil
}

// durable reports whether every directory op touched was synced after it.
// Caller holds meta.
func (fs *FS) durable(op dirOp) bool {
	for _, d := range op.dirs {
		if fs.dirSync[d] <= op.seq {
			return false
		}
	}
	return true
}

// Lock passes through; PowerLoss releases every lock taken through fs (the
// process holding them is gone).
func (fs *FS) Lock(name string) (io.Closer, error) {
	if err := fs.begin(0, false); err != nil {
		return nil, err
	}
	defer fs.end()
	c, err := fs.inner.Lock(name)
	if err != nil {
		return nil, err
	}
	h := &lockHandle{fs: fs, inner: c}
	fs.locksMu.Lock()
	fs.locks[h] = struct{}{}
	fs.locksMu.Unlock()
	return h, nil
}

type lockHandle struct {
	fs    *FS
	once  sync.Once
	inner io.Closer
	err   error
}

// Close releases the lock.
func (l *lockHandle) Close() error {
	l.once.Do(func() {
		l.err = l.inner.Close()
		l.fs.locksMu.Lock()
		delete(l.fs.locks, l)
		l.fs.locksMu.Unlock()
	})
	return l.err
}

// FreeBytes passes through.
func (fs *FS) FreeBytes(path string) (uint64, error) {
	if err := fs.begin(0, false); err != nil {
		return 0, err
	}
	defer fs.end()
	return fs.inner.FreeBytes(path)
}
