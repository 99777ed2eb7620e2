package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
)

// RelFileNode names a relation's files on disk.
type RelFileNode uint32

// ForkNum selects one of a relation's forks.
type ForkNum uint8

// Forks.
const (
	MainFork ForkNum = 0
	FSMFork  ForkNum = 1
	VMFork   ForkNum = 2
)

// forks lists every fork, for Drop.
var forks = [...]ForkNum{MainFork, FSMFork, VMFork}

// suffix is the file name suffix of a fork.
func (f ForkNum) suffix() string {
	switch f {
	case FSMFork:
		return "_fsm"
	case VMFork:
		return "_vm"
	}
	return ""
}

// BlockNumber is a page's number within a fork.
type BlockNumber uint32

// InvalidBlock is a block number no relation reaches.
const InvalidBlock BlockNumber = 0xFFFFFFFF

// DefaultSegmentSize is the size of one segment file.
const DefaultSegmentSize = 1 << 30

// BaseDir is the subdirectory of the data directory holding relation files.
const BaseDir = "base"

// Options configure a Manager.
type Options struct {
	SegmentSize int64 // 0 = DefaultSegmentSize; must be a multiple of page.Size
	Direct      bool  // open relation files with O_DIRECT (falls back with a warning)
	Logf        func(format string, args ...any)
}

// CorruptPageError reports a page that failed verification on read.
type CorruptPageError struct {
	File   string
	Block  BlockNumber // block number within the fork
	Reason string
}

func (e *CorruptPageError) Error() string {
	return fmt.Sprintf("corrupt page: file %s block %d: %s", e.File, e.Block, e.Reason)
}

// ErrBeyondEnd is wrapped by Read when the block lies past the end of its
// fork (or the fork does not exist), and by Write when the block is more
// than one past the end.
var ErrBeyondEnd = errors.New("block beyond end of fork")

// ErrClosed is returned by every method after Close.
var ErrClosed = errors.New("storage manager closed")

// SyncFailedError is the sticky failure: once an fsync failed, data written
// before it may be lost, so the Manager refuses every later change.
type SyncFailedError struct {
	Err error // the first fsync failure
}

func (e *SyncFailedError) Error() string {
	return "storage unusable after a failed fsync (written data may be lost): " + e.Err.Error()
}

func (e *SyncFailedError) Unwrap() error { return e.Err }

type forkKey struct {
	rel  RelFileNode
	fork ForkNum
}

type segKey struct {
	forkKey
	seg uint32
}

// forkState is the open files and cached size of one fork.
type forkState struct {
	mu   sync.Mutex // guards segs and the changes of nblocks; held across an extension
	segs map[uint32]vfs.File
	// nblocks is the fork's size in blocks, -1 while unknown or being
	// changed. It is stored under mu and may be loaded without it.
	nblocks atomic.Int64
}

// Manager reads and writes relation blocks. Safe for concurrent use.
type Manager struct {
	fs      vfs.FS
	root    string // the data directory
	base    string // root/base
	segSize int64
	bps     uint32 // blocks per segment
	direct  bool
	logf    func(format string, args ...any)

	// mu is held shared by block I/O and exclusively by Truncate, Drop and
	// Close, which close files.
	mu sync.RWMutex

	// forks holds a *forkState by forkKey. Its reads take no lock: every
	// block I/O looks its fork up.
	forks sync.Map
	// failed is the sticky failure; closed is set by Close. Both are read
	// without a lock by every block I/O.
	failed atomic.Pointer[SyncFailedError]
	closed atomic.Bool

	stateMu      sync.Mutex          // guards the fields below; a leaf lock
	dirty        map[segKey]vfs.File // written since the last sync
	dirDirty     bool                // base has entries created or removed since the last sync
	warnedDirect bool

	bufs sync.Pool // *[]byte, aligned page buffers
}

// Open returns a Manager for the data directory dir, creating dir/base if
// needed (and making its creation durable).
func Open(fs vfs.FS, dir string, opts Options) (*Manager, error) {
	seg := opts.SegmentSize
	if seg == 0 {
		seg = DefaultSegmentSize
	}
	if seg < page.Size || seg%page.Size != 0 || seg/page.Size > int64(InvalidBlock) {
		return nil, fmt.Errorf("open storage in %s: segment size %d is not a positive multiple of %d", dir, seg, page.Size)
	}
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	m := &Manager{
		fs: fs, root: dir, base: filepath.Join(dir, BaseDir), segSize: seg, bps: uint32(seg / page.Size),
		direct: opts.Direct, logf: logf, dirty: map[segKey]vfs.File{},
	}
	m.bufs.New = func() any { b := vfs.AlignedBuffer(page.Size); return &b }
	if _, err := fs.Stat(m.base); errors.Is(err, os.ErrNotExist) {
		if err := fs.MkdirAll(m.base, 0o700); err != nil {
			return nil, fmt.Errorf("open storage: create %s: %w", m.base, err)
		}
		if err := fs.SyncDir(dir); err != nil {
			return nil, fmt.Errorf("open storage: %w", err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("open storage: %w", err)
	}
	return m, nil
}

// Path is the file of segment 0 of (rel, fork), for messages.
func (m *Manager) Path(rel RelFileNode, fork ForkNum) string {
	return filepath.Join(m.base, fmt.Sprintf("%d%s", rel, fork.suffix()))
}

// SegmentPath is the file of segment seg of (rel, fork).
func (m *Manager) SegmentPath(rel RelFileNode, fork ForkNum, seg uint32) string {
	if seg == 0 {
		return m.Path(rel, fork)
	}
	return fmt.Sprintf("%s.%d", m.Path(rel, fork), seg)
}

// BlocksPerSegment is the number of blocks in one full segment file.
func (m *Manager) BlocksPerSegment() uint32 { return m.bps }

// Direct reports whether O_DIRECT is in effect: requested, and not refused
// for any file opened so far (a refusal is logged once through
// Options.Logf and the files are used buffered).
func (m *Manager) Direct() bool {
	m.stateMu.Lock()
	defer m.stateMu.Unlock()
	return m.direct && !m.warnedDirect
}

func (m *Manager) locate(blk BlockNumber) (seg uint32, off int64) {
	return uint32(blk) / m.bps, int64(uint32(blk)%m.bps) * page.Size
}

// check returns ErrClosed, or for a change (mutating) the sticky failure.
func (m *Manager) check(mutating bool) error {
	if m.closed.Load() {
		return ErrClosed
	}
	if f := m.failed.Load(); mutating && f != nil {
		return f
	}
	return nil
}

func (m *Manager) forkState(rel RelFileNode, fork ForkNum) *forkState {
	k := forkKey{rel, fork}
	if v, ok := m.forks.Load(k); ok {
		if fs, ok := v.(*forkState); ok {
			return fs
		}
	}
	fs := &forkState{segs: map[uint32]vfs.File{}}
	fs.nblocks.Store(-1)
	if v, loaded := m.forks.LoadOrStore(k, fs); loaded {
		if got, ok := v.(*forkState); ok {
			return got
		}
	}
	return fs
}

func (m *Manager) markDirty(k segKey, f vfs.File) {
	m.stateMu.Lock()
	m.dirty[k] = f
	m.stateMu.Unlock()
}

func (m *Manager) markDirDirty() {
	m.stateMu.Lock()
	m.dirDirty = true
	m.stateMu.Unlock()
}

// fail records the first fsync failure and returns the sticky error.
func (m *Manager) fail(err error) error {
	if m.failed.CompareAndSwap(nil, &SyncFailedError{Err: err}) {
		m.logf("storage: fsync failed, refusing further writes: %v", err)
	}
	return m.failed.Load()
}

// openSeg returns the open file of segment seg, opening it (creating it
// when create) if needed. Caller holds fs.mu. created reports a new file.
func (m *Manager) openSeg(fs *forkState, rel RelFileNode, fork ForkNum, seg uint32, create bool) (f vfs.File, created bool, err error) {
	if f := fs.segs[seg]; f != nil {
		return f, false, nil
	}
	name := m.SegmentPath(rel, fork, seg)
	flag := os.O_RDWR
	if m.direct {
		flag |= vfs.ODirect
	}
	f, err = m.fs.OpenFile(name, flag, 0o600)
	if errors.Is(err, os.ErrNotExist) && create {
		f, err = m.fs.OpenFile(name, flag|os.O_CREATE|os.O_EXCL, 0o600)
		created = err == nil
		if errors.Is(err, os.ErrExist) {
			f, err = m.fs.OpenFile(name, flag, 0o600)
		}
	}
	if err != nil {
		return nil, false, err
	}
	if m.direct && !f.Direct() {
		m.stateMu.Lock()
		first := !m.warnedDirect
		m.warnedDirect = true
		m.stateMu.Unlock()
		if first {
			m.logf("storage: O_DIRECT requested but refused for %s, using buffered I/O", name)
		}
	}
	fs.segs[seg] = f
	if created {
		m.markDirDirty()
	}
	return f, created, nil
}

// nblocksLocked returns the fork's size in blocks, computing it from the
// segment files the first time. Caller holds fs.mu.
func (m *Manager) nblocksLocked(fs *forkState, rel RelFileNode, fork ForkNum) (BlockNumber, error) {
	if n := fs.nblocks.Load(); n >= 0 {
		return BlockNumber(n), nil
	}
	var n int64
	for seg := uint32(0); ; seg++ {
		size, err := m.segSizeOf(fs, rel, fork, seg)
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("size of %s: %w", m.SegmentPath(rel, fork, seg), err)
		}
		n += min(size, m.segSize) / page.Size
		if size < m.segSize {
			break
		}
	}
	fs.nblocks.Store(n)
	return BlockNumber(n), nil
}

func (m *Manager) segSizeOf(fs *forkState, rel RelFileNode, fork ForkNum, seg uint32) (int64, error) {
	if f := fs.segs[seg]; f != nil {
		return f.Size()
	}
	st, err := m.fs.Stat(m.SegmentPath(rel, fork, seg))
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// Close closes every open file. Unsynced writes stay in the OS cache; the
// engine checkpoints (SyncAll) before a clean Close.
func (m *Manager) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stateMu.Lock()
	defer m.stateMu.Unlock()
	if m.closed.Swap(true) {
		return nil
	}
	var errs []error
	m.forks.Range(func(_, v any) bool {
		fs, ok := v.(*forkState)
		if !ok {
			return true
		}
		for _, f := range fs.segs {
			if err := f.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close %s: %w", f.Name(), err))
			}
		}
		return true
	})
	m.forks.Clear()
	m.dirty = nil
	return errors.Join(errs...)
}
