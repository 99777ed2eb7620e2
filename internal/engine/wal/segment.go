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
	"strings"

	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
)

// zeroChunk is the unit in which segments are zero-filled and scanned.
const zeroChunk = 256 << 10

// zeroLength is the end-of-log length field terminate writes (read only).
var zeroLength [4]byte

// Timeline is the timeline every segment name carries: the engine has no
// timeline switches (no promotion of a standby to a new history), so its
// WAL is PostgreSQL's timeline 1.
const Timeline = 1

// SegmentName is the file name of segment segno for segments of size
// bytes, as PostgreSQL names WAL segments: 24 upper-case hex digits, the
// timeline, then the segment number split into the "log" (4 GiB units)
// and the segment within it. For PostgreSQL's 16 MiB segments the names
// are PostgreSQL's own, so a pg_receivewal directory compares with the
// server's WAL directory file by file.
func SegmentName(segno uint64, size int64) string {
	per := segmentsPerID(size)
	return fmt.Sprintf("%08X%08X%08X", Timeline, segno/per, segno%per)
}

// ParseSegmentName returns the segment number a SegmentName names, and
// false for any other name.
func ParseSegmentName(name string, size int64) (uint64, bool) {
	if len(name) != 24 {
		return 0, false
	}
	tli, err1 := strconv.ParseUint(name[:8], 16, 32)
	log, err2 := strconv.ParseUint(name[8:16], 16, 32)
	seg, err3 := strconv.ParseUint(name[16:], 16, 32)
	per := segmentsPerID(size)
	if err1 != nil || err2 != nil || err3 != nil || tli != Timeline || seg >= per || name != strings.ToUpper(name) {
		return 0, false
	}
	return log*per + seg, true
}

// segmentsPerID is how many segments one 4 GiB "log" of a name holds.
func segmentsPerID(size int64) uint64 { return max(1, (1<<32)/uint64(size)) }

// segName is the file name of segment segno.
func segName(segno uint64, size int64) string { return SegmentName(segno, size) }

// SegmentPath is the path of the segment holding lsn in the data directory
// dir.
func SegmentPath(dir string, lsn LSN, size int64) string {
	return filepath.Join(walDir(dir), SegmentName(uint64(lsn)/uint64(size), size))
}

// WALDirName is the data directory's subdirectory holding the segments.
const WALDirName = "wal"

// walDir is the directory holding the segments of the data directory dir.
func walDir(dir string) string { return filepath.Join(dir, WALDirName) }

// ErrOldSegmentNames is wrapped by Open and NewReader when the WAL
// directory holds segments named as before PostgreSQL's naming (16 hex
// digits of the start LSN): RenameOldSegments (`vacuum-runner upgrade`)
// renames them.
var ErrOldSegmentNames = errors.New("WAL segments named in the old format (16 hex digits): upgrade the directory with \"vacuum-runner upgrade --data DIR\"")

// isOldSegmentName reports whether name is a segment name of the old
// format: 16 hex digits of the segment's start LSN.
func isOldSegmentName(name string) bool {
	if len(name) != 16 {
		return false
	}
	_, err := strconv.ParseUint(name, 16, 64)
	return err == nil
}

// listSegments returns the segment numbers present in walDir, ascending.
// Two segment files whose sizes are not size mean the directory was
// written with another segment size: an error, never a silent misread (one
// is a log cut short, which the reader handles). Segments of
// the old naming are ErrOldSegmentNames.
func listSegments(fsys vfs.FS, wdir string, size int64) ([]uint64, error) {
	ents, err := fsys.ReadDir(wdir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("list WAL directory %s: %w", wdir, err)
	}
	var segs []uint64
	odd, oddSize := "", int64(0) // the one segment of another size allowed (a log cut short)
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() {
			continue
		}
		if isOldSegmentName(name) {
			return nil, fmt.Errorf("%s: %w", filepath.Join(wdir, name), ErrOldSegmentNames)
		}
		segno, ok := ParseSegmentName(name, size)
		if !ok {
			continue
		}
		if info, err := e.Info(); err == nil && info.Size() != size {
			if odd != "" {
				return nil, fmt.Errorf("WAL segments %s and %s have %d and %d bytes, want %d: segment size mismatch",
					odd, filepath.Join(wdir, name), oddSize, info.Size(), size)
			}
			odd, oddSize = filepath.Join(wdir, name), info.Size()
		}
		segs = append(segs, segno)
	}
	slices.Sort(segs)
	return segs, nil
}

// RenameOldSegments renames the segments of the data directory dir named
// in the old format (16 hex digits of the start LSN) to SegmentName, then
// fsyncs the WAL directory, and returns how many it renamed. It is
// idempotent: a crash part way leaves both namings, and a second call
// finishes. A name that is not a multiple of size is a size mismatch.
func RenameOldSegments(fsys vfs.FS, dir string, size int64) (int, error) {
	wdir := walDir(dir)
	ents, err := fsys.ReadDir(wdir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, nil
		}
		return 0, fmt.Errorf("list WAL directory %s: %w", wdir, err)
	}
	n := 0
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || !isOldSegmentName(name) {
			continue
		}
		start, _ := strconv.ParseUint(name, 16, 64)
		if start%uint64(size) != 0 {
			return n, fmt.Errorf("WAL segment %s does not start on a %d-byte boundary: segment size mismatch",
				filepath.Join(wdir, name), size)
		}
		to := filepath.Join(wdir, SegmentName(start/uint64(size), size))
		if err := fsys.Rename(filepath.Join(wdir, name), to); err != nil {
			return n, fmt.Errorf("rename WAL segment %s to %s: %w", name, filepath.Base(to), err)
		}
		n++
	}
	if n > 0 {
		if err := fsys.SyncDir(wdir); err != nil {
			return n, fmt.Errorf("fsync directory %s: %w", wdir, err)
		}
	}
	return n, nil
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

// copyAside copies segment segno, as it is, into dir (which exists) and
// fsyncs the copy: Open keeps a discarded log tail before it zeroes it.
func (s *segments) copyAside(segno uint64, dir string) error {
	src, err := s.fs.OpenFile(s.path(segno), os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open WAL segment %s: %w", s.path(segno), err)
	}
	defer func() { _ = src.Close() }() // read-only
	size, err := src.Size()
	if err != nil {
		return fmt.Errorf("size of WAL segment %s: %w", s.path(segno), err)
	}
	name := filepath.Join(dir, filepath.Base(s.path(segno)))
	dst, err := s.fs.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	buf := make([]byte, zeroChunk)
	for off := int64(0); off < size; off += int64(len(buf)) {
		n := min(int64(len(buf)), size-off)
		if _, err := src.ReadAt(buf[:n], off); err != nil && !errors.Is(err, io.EOF) {
			return errors.Join(fmt.Errorf("read WAL segment %s: %w", s.path(segno), err), dst.Close())
		}
		if _, err := dst.WriteAt(buf[:n], off); err != nil {
			return errors.Join(fmt.Errorf("write %s: %w", name, err), dst.Close())
		}
	}
	if err := dst.Sync(); err != nil {
		return errors.Join(fmt.Errorf("fsync %s: %w", name, err), dst.Close())
	}
	return dst.Close()
}

// moveAside renames segment segno into dir.
func (s *segments) moveAside(segno uint64, dir string) error {
	s.adoptPrealloc(segno)
	if f, ok := s.open[segno]; ok {
		_ = f.Close()
		delete(s.open, segno)
		delete(s.dirty, segno)
	}
	to := filepath.Join(dir, filepath.Base(s.path(segno)))
	if err := s.fs.Rename(s.path(segno), to); err != nil {
		return fmt.Errorf("move WAL segment %s to %s: %w", s.path(segno), to, err)
	}
	return nil
}
