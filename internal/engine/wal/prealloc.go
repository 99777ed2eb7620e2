package wal

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
)

// prealloc is the background creation of one future segment. Creating a
// segment (zero-fill, fsync, rename, directory fsync) takes a good part of
// a second on a slow disk; done when the writer first needs the segment,
// it stalls whoever is inserting or flushing WAL at that moment. So once
// the writer passes the middle of a segment, the next one is created in the
// background (unless it exists, e.g. recycled), and the writer only waits
// if it gets there first.
//
// The goroutine touches only the file system and its own fields; the
// segments maps stay with the busy holder, which adopts the result
// (adoptPrealloc) before it opens, recycles or removes that segment.
type prealloc struct {
	segno uint64
	done  chan struct{} // closed when the goroutine ends
	f     vfs.File      // the created segment, open; nil if it existed or on failure
	err   error         // the creation's failure (get then tries itself, unless it left a rename of uncertain durability)
}

// startPrealloc creates segment segno in the background, unless disabled,
// already open, or another creation is still pending.
func (s *segments) startPrealloc(segno uint64) {
	if s.noPrealloc || s.pre != nil {
		return
	}
	if _, ok := s.open[segno]; ok {
		return
	}
	pa := &prealloc{segno: segno, done: make(chan struct{})}
	s.pre = pa
	s.zeroBuf() // allocated here: create only reads it
	go func() {
		defer close(pa.done)
		_, err := s.fs.Stat(s.path(segno))
		switch {
		case err == nil:
			return // exists (recycled): nothing to do
		case !errors.Is(err, fs.ErrNotExist):
			pa.err = err
			return
		}
		pa.f, pa.err = s.create(segno)
	}()
}

// isFresh reports whether segment segno is full-sized and all zero, as a
// segment created ahead of need and never written is: Open keeps such a
// segment after the end of the log (it holds nothing stale) instead of
// removing it. A recycled or written segment fails on its first chunk.
func (s *segments) isFresh(segno uint64) (bool, error) {
	f, err := s.fs.OpenFile(s.path(segno), os.O_RDONLY, 0)
	if err != nil {
		return false, fmt.Errorf("open WAL segment %s: %w", s.path(segno), err)
	}
	defer f.Close()
	if size, err := f.Size(); err != nil || size != s.size {
		return false, err
	}
	buf := make([]byte, min(int64(zeroChunk), s.size))
	for off := int64(0); off < s.size; off += int64(len(buf)) {
		n, err := f.ReadAt(buf, off)
		if n < len(buf) {
			if err == nil || errors.Is(err, io.EOF) {
				return false, nil
			}
			return false, fmt.Errorf("read WAL segment %s at offset %d: %w", s.path(segno), off, err)
		}
		if !allZero(buf) {
			return false, nil
		}
	}
	return true, nil
}

// adoptPrealloc waits for a pending creation of segment segno and records
// its file as open.
func (s *segments) adoptPrealloc(segno uint64) {
	if pa := s.pre; pa != nil && pa.segno == segno {
		s.waitPrealloc()
	}
}

// waitPrealloc waits for the pending creation, if any, and adopts its
// file. The busy holder calls it before listing, recycling, removing or
// closing segments.
func (s *segments) waitPrealloc() {
	pa := s.pre
	if pa == nil {
		return
	}
	<-pa.done
	s.pre = nil
	if errors.Is(pa.err, errRenameUncertain) && s.failed == nil {
		// The segment is visible under its name but may not be after a
		// power loss: nothing may be written into it (see get).
		s.failed = fmt.Errorf("create WAL segment ahead of need: %w", pa.err)
	}
	if pa.f == nil {
		return
	}
	if _, ok := s.open[pa.segno]; ok {
		_ = pa.f.Close() // opened meanwhile through another handle
		return
	}
	s.open[pa.segno] = pa.f
}
