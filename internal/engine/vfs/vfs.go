package vfs

import (
	"errors"
	"io"
	"os"
)

// ODirect may be OR-ed into OpenFile's flag to ask for O_DIRECT. The OS
// implementation falls back to buffered I/O (and logs once) where the file
// system refuses it; File.Direct reports what was obtained.
const ODirect = 1 << 30

// Alignment is the buffer and offset alignment O_DIRECT needs.
const Alignment = 4096

// ErrLocked is returned by Lock when another holder (this or another
// process) has the lock.
var ErrLocked = errors.New("locked by another process")

// FS is every file operation the engine uses.
type FS interface {
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	Remove(name string) error
	Rename(oldpath, newpath string) error
	MkdirAll(path string, perm os.FileMode) error
	Stat(name string) (os.FileInfo, error)
	ReadDir(name string) ([]os.DirEntry, error)
	// SyncDir fsyncs a directory so that creations, renames and removals
	// in it are durable.
	SyncDir(dir string) error
	// Lock takes an exclusive, non-blocking lock on the named file
	// (created if absent). ErrLocked (wrapped) if it is held elsewhere.
	Lock(name string) (io.Closer, error)
	// FreeBytes reports the bytes available to an unprivileged user on
	// the file system holding path.
	FreeBytes(path string) (uint64, error)
}

// File is an open file.
type File interface {
	io.ReaderAt
	io.WriterAt
	Sync() error
	Truncate(size int64) error
	Size() (int64, error)
	Close() error
	Name() string
	// Direct reports whether the file was opened with O_DIRECT in effect.
	Direct() bool
}

// WritebackStarter is a File that can ask its system to start writing its
// dirty data back without waiting (the operating system's files do). Callers
// check for it; a File without it simply has nothing started early.
type WritebackStarter interface {
	StartWriteback() error
}

// AlignedBuffer returns a zeroed slice of n bytes whose first byte is
// aligned to Alignment (Go does not align slices by itself).
func AlignedBuffer(n int) []byte {
	b := make([]byte, n+Alignment)
	off := 0
	if r := int(uintptrOf(b) % Alignment); r != 0 {
		off = Alignment - r
	}
	return b[off : off+n : off+n]
}
