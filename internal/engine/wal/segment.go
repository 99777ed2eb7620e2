package wal

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
)

// zeroChunk is the unit in which segments are zero-filled and scanned.
const zeroChunk = 256 << 10

// zeroLength is the end-of-log length field terminate writes (read only).
var zeroLength [4]byte

// segName is the file name of segment segno.
func segName(segno uint64, size int64) string {
	return fmt.Sprintf("%016X", segno*uint64(size))
}

// walDir is the directory holding the segments of the data directory dir.
func walDir(dir string) string { return filepath.Join(dir, "wal") }

// listSegments returns the segment numbers present in walDir, ascending.
// A segment name that is not a multiple of size means the directory was
// written with another segment size: an error, never a silent misread.
func listSegments(fsys vfs.FS, wdir string, size int64) ([]uint64, error) {
	ents, err := fsys.ReadDir(wdir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("list WAL directory %s: %w", wdir, err)
	}
	var segs []uint64
	for _, e := range ents {
		name := e.Name()
		if len(name) != 16 || e.IsDir() {
			continue
		}
		start, err := strconv.ParseUint(name, 16, 64)
		if err != nil {
			continue
		}
		if start%uint64(size) != 0 {
			return nil, fmt.Errorf("WAL segment %s does not start on a %d-byte boundary: segment size mismatch",
				filepath.Join(wdir, name), size)
		}
		segs = append(segs, start/uint64(size))
	}
	slices.Sort(segs)
	return segs, nil
}

// segments manages the open segment files of a Log. It is not safe for
// concurrent use: only the goroutine holding the Log's busy role uses it.
type segments struct {
	fs    vfs.FS
	dir   string // the wal directory
	size  int64
	open  map[uint64]vfs.File
	dirty map[uint64]bool // written since their last fsync
	zeros []byte

	noPrealloc bool      // Options.NoPrealloc
	pre        *prealloc // pending background creation (prealloc.go)
	failed     error     // a background creation's rename may not be durable: no segment may be used
}

func newSegments(fsys vfs.FS, wdir string, size int64, noPrealloc bool) *segments {
	return &segments{fs: fsys, dir: wdir, size: size, open: map[uint64]vfs.File{}, dirty: map[uint64]bool{},
		noPrealloc: noPrealloc}
}

func (s *segments) path(segno uint64) string { return filepath.Join(s.dir, segName(segno, s.size)) }

func (s *segments) zeroBuf() []byte {
	if s.zeros == nil {
		s.zeros = make([]byte, min(int64(zeroChunk), s.size))
	}
	return s.zeros
}

// get returns the open file of segment segno, opening it, or creating it
// zero-filled when it does not exist (or adopting the one created ahead).
func (s *segments) get(segno uint64) (vfs.File, error) {
	if f, ok := s.open[segno]; ok {
		return f, nil
	}
	s.adoptPrealloc(segno)
	if s.failed != nil {
		return nil, s.failed
	}
	if f, ok := s.open[segno]; ok {
		return f, nil
	}
	name := s.path(segno)
	f, err := s.fs.OpenFile(name, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		f, err = s.create(segno)
	}
	if err != nil {
		return nil, fmt.Errorf("open WAL segment %s: %w", name, err)
	}
	s.open[segno] = f
	return f, nil
}

// create makes segment segno durable and zero-filled: write <name>.tmp,
// fsync it, rename it into place, fsync the directory.
func (s *segments) create(segno uint64) (vfs.File, error) {
	name := s.path(segno)
	tmp := name + ".tmp"
	f, err := s.fs.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (vfs.File, error) {
		_ = f.Close()
		_ = s.fs.Remove(tmp)
		return nil, err
	}
	z := s.zeroBuf()
	for off := int64(0); off < s.size; off += int64(len(z)) {
		n := min(int64(len(z)), s.size-off)
		if _, err := f.WriteAt(z[:n], off); err != nil {
			return fail(fmt.Errorf("zero-fill %s: %w", tmp, err))
		}
	}
	if err := f.Sync(); err != nil {
		return fail(fmt.Errorf("fsync %s: %w", tmp, err))
	}
	if err := s.fs.Rename(tmp, name); err != nil {
		return fail(fmt.Errorf("rename %s: %w", tmp, err))
	}
	if err := s.fs.SyncDir(s.dir); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("fsync directory %s: %w: %w", s.dir, errRenameUncertain, err)
	}
	return f, nil
}

// write writes data at log position start, across as many segments as it
// spans, and marks them dirty.
func (s *segments) write(start LSN, data []byte) error {
	pos := uint64(start)
	for len(data) > 0 {
		segno := pos / uint64(s.size)
		off := int64(pos % uint64(s.size))
		n := min(int64(len(data)), s.size-off)
		f, err := s.get(segno)
		if err != nil {
			return err
		}
		s.dirty[segno] = true
		if _, err := f.WriteAt(data[:n], off); err != nil {
			return fmt.Errorf("write WAL segment %s at offset %d: %w", f.Name(), off, err)
		}
		data = data[n:]
		pos += uint64(n)
	}
	if pos%uint64(s.size) >= uint64(s.size)/2 {
		// Past the middle of a segment: have the next one ready in time.
		s.startPrealloc(pos/uint64(s.size) + 1)
	}
	return s.terminate(LSN(pos))
}

// terminate writes a zero length field at end, the position after the
// last record written, when it fits in a segment that exists: a recycled
// segment holds stale bytes there, and the zero makes a reader see a
// clean end (io.EOF) instead of garbage. The next write overwrites it.
func (s *segments) terminate(end LSN) error {
	segno := uint64(end) / uint64(s.size)
	off := int64(uint64(end) % uint64(s.size))
	if off+4 > s.size {
		return nil
	}
	s.adoptPrealloc(segno)
	f, ok := s.open[segno]
	if !ok {
		var err error
		f, err = s.fs.OpenFile(s.path(segno), os.O_RDWR, 0)
		if errors.Is(err, fs.ErrNotExist) {
			return nil // created zero-filled when needed
		}
		if err != nil {
			return fmt.Errorf("open WAL segment %s: %w", s.path(segno), err)
		}
		s.open[segno] = f
	}
	s.dirty[segno] = true
	if _, err := f.WriteAt(zeroLength[:], off); err != nil {
		return fmt.Errorf("write WAL segment %s at offset %d: %w", f.Name(), off, err)
	}
	return nil
}

// recycle renames segment segno to segment to (a future one), to be
// reused without zero-filling a new file.
func (s *segments) recycle(segno, to uint64) error {
	s.adoptPrealloc(segno)
	if f, ok := s.open[segno]; ok {
		_ = f.Close() // before the redo pointer: already durable and unneeded
		delete(s.open, segno)
		delete(s.dirty, segno)
	}
	if err := s.fs.Rename(s.path(segno), s.path(to)); err != nil {
		return fmt.Errorf("recycle WAL segment %s as %s: %w: %w", s.path(segno), s.path(to), errRenameUncertain, err)
	}
	return nil
}

// sync fsyncs every dirty segment and returns how many it synced.
func (s *segments) sync() (int, error) {
	n := 0
	for _, segno := range slices.Sorted(maps.Keys(s.dirty)) {
		f, ok := s.open[segno]
		if !ok {
			return n, fmt.Errorf("WAL segment %s is dirty but not open", s.path(segno))
		}
		if err := f.Sync(); err != nil {
			return n, fmt.Errorf("fsync WAL segment %s: %w", f.Name(), err)
		}
		delete(s.dirty, segno)
		n++
	}
	return n, nil
}

// closeBefore closes the clean segments numbered below segno.
func (s *segments) closeBefore(segno uint64) {
	for n, f := range s.open {
		if n < segno && !s.dirty[n] {
			_ = f.Close() // synced already: a close error loses nothing
			delete(s.open, n)
		}
	}
}

// remove closes and deletes segment segno.
func (s *segments) remove(segno uint64) error {
	s.adoptPrealloc(segno)
	if f, ok := s.open[segno]; ok {
		_ = f.Close()
		delete(s.open, segno)
		delete(s.dirty, segno)
	}
	if err := s.fs.Remove(s.path(segno)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove WAL segment %s: %w", s.path(segno), err)
	}
	return nil
}

// closeAll closes every open segment.
func (s *segments) closeAll() error {
	s.waitPrealloc()
	var errs []error
	for n, f := range s.open {
		if err := f.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close WAL segment %s: %w", f.Name(), err))
		}
		delete(s.open, n)
	}
	return errors.Join(errs...)
}

// zeroTail makes bytes [from, size) of segment segno zero and the file
// full-sized, writing only chunks that are not zero already, and fsyncs the
// segment if it wrote anything. Open uses it so that nothing stale after
// the new end of the log can ever be read.
func (s *segments) zeroTail(segno uint64, from int64) error {
	f, err := s.get(segno)
	if err != nil {
		return err
	}
	fsize, err := f.Size()
	if err != nil {
		return fmt.Errorf("size of WAL segment %s: %w", f.Name(), err)
	}
	z := s.zeroBuf()
	buf := make([]byte, len(z))
	wrote := false
	for off := from; off < s.size; {
		n := min(int64(len(z)), s.size-off)
		need := off+n > fsize
		if !need {
			m, err := f.ReadAt(buf[:n], off)
			if err != nil && !(errors.Is(err, io.EOF) && int64(m) == n) {
				return fmt.Errorf("read WAL segment %s at offset %d: %w", f.Name(), off, err)
			}
			need = !allZero(buf[:n])
		}
		if need {
			if _, err := f.WriteAt(z[:n], off); err != nil {
				return fmt.Errorf("zero WAL segment %s at offset %d: %w", f.Name(), off, err)
			}
			wrote = true
		}
		off += n
	}
	if fsize > s.size {
		if err := f.Truncate(s.size); err != nil {
			return fmt.Errorf("truncate WAL segment %s: %w", f.Name(), err)
		}
		wrote = true
	}
	if wrote {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("fsync WAL segment %s: %w", f.Name(), err)
		}
	}
	return nil
}
