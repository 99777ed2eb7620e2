package vfs

import (
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// OSFS is the FS of the operating system. Create it with OS or NewOS.
type OSFS struct {
	logf func(format string, args ...any)

	mu     sync.Mutex
	warned map[string]bool // file system names already warned about O_DIRECT

	// setDirect turns O_DIRECT on for an open descriptor; a test replaces
	// it to simulate a file system that refuses O_DIRECT.
	setDirect func(fd uintptr) error
}

var _ FS = (*OSFS)(nil)

// OS returns the operating system's FS, logging through the standard logger.
func OS() FS { return NewOS(nil) }

// NewOS returns the operating system's FS; logf (nil = log.Printf) receives
// the one-time warning when O_DIRECT is refused.
func NewOS(logf func(format string, args ...any)) *OSFS {
	if logf == nil {
		logf = log.Printf
	}
	return &OSFS{logf: logf, warned: map[string]bool{}, setDirect: fcntlDirect}
}

func fcntlDirect(fd uintptr) error {
	fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
	if err != nil {
		return err
	}
	_, err = unix.FcntlInt(fd, unix.F_SETFL, fl|unix.O_DIRECT)
	return err
}

// OpenFile opens name like os.OpenFile. With ODirect in flag it turns
// O_DIRECT on after the open (so that O_CREATE|O_EXCL behave the same either
// way); where the file system refuses it (EINVAL) the file stays buffered
// and a warning is logged once per file system.
func (o *OSFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	wantDirect := flag&ODirect != 0
	f, err := os.OpenFile(name, (flag&^ODirect)|unix.O_CLOEXEC, perm)
	if err != nil {
		return nil, err
	}
	of := &osFile{f: f}
	if !wantDirect {
		return of, nil
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, errors.Join(fmt.Errorf("open %s: %w", name, err), f.Close())
	}
	var derr error
	if err := rc.Control(func(fd uintptr) { derr = o.setDirect(fd) }); err != nil {
		return nil, errors.Join(fmt.Errorf("open %s: %w", name, err), f.Close())
	}
	switch {
	case derr == nil:
		of.direct = true
	case errors.Is(derr, unix.EINVAL):
		o.warnNoDirect(name)
	default:
		return nil, errors.Join(fmt.Errorf("open %s with O_DIRECT: %w", name, derr), f.Close())
	}
	return of, nil
}

func (o *OSFS) warnNoDirect(name string) {
	fsName := fsTypeName(filepath.Dir(name))
	o.mu.Lock()
	first := !o.warned[fsName]
	o.warned[fsName] = true
	o.mu.Unlock()
	if first {
		o.logf("O_DIRECT not supported on %s, using buffered I/O", fsName)
	}
}

// fsTypeName names the file system holding dir, for the O_DIRECT warning.
func fsTypeName(dir string) string {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return dir
	}
	names := map[int64]string{
		unix.TMPFS_MAGIC: "tmpfs", unix.EXT4_SUPER_MAGIC: "ext4", unix.XFS_SUPER_MAGIC: "xfs",
		unix.BTRFS_SUPER_MAGIC: "btrfs", unix.OVERLAYFS_SUPER_MAGIC: "overlayfs",
		unix.NFS_SUPER_MAGIC: "nfs", unix.FUSE_SUPER_MAGIC: "fuse",
	}
	if n, ok := names[int64(st.Type)]; ok { //nolint:unconvert // Statfs_t.Type differs in type across architectures
		return fmt.Sprintf("%s (%s)", n, dir)
	}
	return fmt.Sprintf("file system type %#x (%s)", st.Type, dir)
}

// Remove removes a file or empty directory.
func (o *OSFS) Remove(name string) error { return os.Remove(name) }

// Rename renames oldpath to newpath, replacing it.
func (o *OSFS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }

// MkdirAll creates path and its parents.
func (o *OSFS) MkdirAll(path string, perm os.FileMode) error { return os.MkdirAll(path, perm) }

// Stat returns the file's info.
func (o *OSFS) Stat(name string) (os.FileInfo, error) { return os.Stat(name) }

// ReadDir lists a directory, sorted by name.
func (o *OSFS) ReadDir(name string) ([]os.DirEntry, error) { return os.ReadDir(name) }

// SyncDir fsyncs the directory so that entries created, renamed or removed
// in it are durable.
func (o *OSFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync dir: %w", err)
	}
	if err := d.Sync(); err != nil {
		return errors.Join(fmt.Errorf("sync dir %s: %w", dir, err), d.Close())
	}
	return d.Close()
}

// Lock takes flock(LOCK_EX|LOCK_NB) on name through a descriptor of its
// own, so it excludes other processes and other Lock calls in this process
// alike. The returned Closer releases it.
func (o *OSFS) Lock(name string) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, errors.Join(fmt.Errorf("lock %s: %w", name, err), f.Close())
	}
	var lerr error
	if err := rc.Control(func(fd uintptr) { lerr = unix.Flock(int(fd), unix.LOCK_EX|unix.LOCK_NB) }); err != nil {
		lerr = err
	}
	if lerr != nil {
		cerr := f.Close()
		if errors.Is(lerr, unix.EWOULDBLOCK) {
			return nil, errors.Join(fmt.Errorf("lock %s: %w", name, ErrLocked), cerr)
		}
		return nil, errors.Join(fmt.Errorf("lock %s: %w", name, lerr), cerr)
	}
	return &fileLock{f: f}, nil
}

type fileLock struct {
	once sync.Once
	f    *os.File
	err  error
}

// Close releases the lock (closing the descriptor drops the flock).
func (l *fileLock) Close() error {
	l.once.Do(func() { l.err = l.f.Close() })
	return l.err
}

// FreeBytes reports Bavail*Bsize of the file system holding path.
func (o *OSFS) FreeBytes(path string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", path, err)
	}
	return st.Bavail * uint64(st.Bsize), nil
}

type osFile struct {
	f      *os.File
	direct bool
}

func (f *osFile) ReadAt(b []byte, off int64) (int, error)  { return f.f.ReadAt(b, off) }
func (f *osFile) WriteAt(b []byte, off int64) (int, error) { return f.f.WriteAt(b, off) }
func (f *osFile) Truncate(size int64) error                { return f.f.Truncate(size) }
func (f *osFile) Close() error                             { return f.f.Close() }
func (f *osFile) Name() string                             { return f.f.Name() }
func (f *osFile) Direct() bool                             { return f.direct }

// Sync makes the file's data durable with fdatasync (which also persists a
// changed size; it skips only timestamps).
func (f *osFile) Sync() error {
	return f.retryEINTR("fdatasync", func(fd int) error { return unix.Fdatasync(fd) })
}

// retryEINTR runs call on the file's descriptor, again while it is
// interrupted, and names op and the file in its error.
func (f *osFile) retryEINTR(op string, call func(fd int) error) error {
	rc, err := f.f.SyscallConn()
	if err != nil {
		return fmt.Errorf("%s %s: %w", op, f.f.Name(), err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			serr = call(int(fd))
			if !errors.Is(serr, unix.EINTR) {
				return
			}
		}
	}); err != nil {
		serr = err
	}
	if serr != nil {
		return &os.PathError{Op: op, Path: f.f.Name(), Err: serr}
	}
	return nil
}

// StartWriteback asks the kernel to start writing the file's dirty pages to
// the device without waiting for them (sync_file_range with
// SYNC_FILE_RANGE_WRITE), so that a later Sync has little left to write: a
// spread checkpoint calls it as it goes, as PostgreSQL's
// checkpoint_flush_after does. It does not make anything durable. A file
// opened with O_DIRECT has no dirty pages in the kernel: nothing to do.
func (f *osFile) StartWriteback() error {
	if f.direct {
		return nil
	}
	return f.retryEINTR("sync_file_range", func(fd int) error {
		return unix.SyncFileRange(fd, 0, 0, unix.SYNC_FILE_RANGE_WRITE)
	})
}

func (f *osFile) Size() (int64, error) {
	st, err := f.f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}
