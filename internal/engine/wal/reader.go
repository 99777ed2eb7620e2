package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
)

// readAhead is how much a Reader reads from the segment files at a time.
const readAhead = 256 << 10

// Reader reads records in order from a start LSN. It is not safe for
// concurrent use.
type Reader struct {
	fs   vfs.FS
	wdir string
	size int64

	pos       LSN // start of the next record
	lastStart LSN // start of the last record returned, 0 before the first
	end       LSN // end of the last record returned
	err       error

	// win holds the log bytes [winStart, winStart+len(win)).
	win      []byte
	winStart LSN

	file    vfs.File
	fileSeg uint64
}

// NewReader reads the log in dir/wal from start (0 means FirstLSN), which
// must be the start of a record (a checkpoint's redo or checkpoint LSN, or
// FirstLSN).
func NewReader(fsys vfs.FS, dir string, start LSN, opts Options) (*Reader, error) {
	size, err := opts.segmentSize()
	if err != nil {
		return nil, err
	}
	if start == 0 {
		start = FirstLSN
	}
	if start < FirstLSN {
		return nil, fmt.Errorf("wal: read from LSN %X: below the first LSN %X", uint64(start), uint64(FirstLSN))
	}
	if _, err := listSegments(fsys, walDir(dir), size); err != nil {
		return nil, fmt.Errorf("wal: read from LSN %X: %w", uint64(start), err)
	}
	return &Reader{fs: fsys, wdir: walDir(dir), size: size, pos: start, end: start}, nil
}

func (r *Reader) corrupt(format string, args ...any) error {
	r.err = &CorruptRecordError{LSN: r.pos, Reason: fmt.Sprintf(format, args...)}
	return r.err
}

// Next returns the next record; io.EOF at a clean end (zeros or no more
// data), *CorruptRecordError at a torn or damaged record. After an error
// every later call returns the same error.
func (r *Reader) Next() (*Record, error) {
	if r.err != nil {
		return nil, r.err
	}
	hdr, err := r.peek(r.pos, 4)
	if err != nil {
		return nil, err
	}
	if len(hdr) < 4 {
		if allZero(hdr) {
			r.err = io.EOF
			return nil, r.err
		}
		return nil, r.corrupt("partial record: the log ends %d bytes into its length field", len(hdr))
	}
	total := int(binary.LittleEndian.Uint32(hdr))
	if total == 0 {
		r.err = io.EOF
		return nil, r.err
	}
	if total < MinRecordSize || total > MaxRecordSize {
		return nil, r.corrupt("impossible record length %d", total)
	}
	b, err := r.peek(r.pos, total)
	if err != nil {
		return nil, err
	}
	if len(b) < total {
		return nil, r.corrupt("partial record: %d of %d bytes present", len(b), total)
	}
	rec, _, err := Decode(b)
	if err != nil {
		return nil, r.corrupt("%v", err)
	}
	switch {
	case rec.PrevLSN == r.pos:
		// A restart point: the first record written after Open.
	case r.lastStart != 0 && rec.PrevLSN != r.lastStart:
		return nil, r.corrupt("prev-record link %X, expected %X (stale or misplaced record)",
			uint64(rec.PrevLSN), uint64(r.lastStart))
	case rec.PrevLSN == 0 || rec.PrevLSN > r.pos:
		return nil, r.corrupt("prev-record link %X is impossible at %X", uint64(rec.PrevLSN), uint64(r.pos))
	}
	rec.StartLSN = r.pos
	rec.EndLSN = r.pos + LSN(total)
	r.lastStart = r.pos
	r.pos = rec.EndLSN
	r.end = rec.EndLSN
	return rec, nil
}

// EndLSN is the end of the last record returned (the start LSN before the
// first one). After io.EOF or a *CorruptRecordError it is where the log
// should be reopened.
func (r *Reader) EndLSN() LSN { return r.end }

// Close releases the reader's files.
func (r *Reader) Close() error {
	r.win = nil
	if r.file == nil {
		return nil
	}
	err := r.file.Close()
	r.file = nil
	if err != nil {
		return fmt.Errorf("close WAL segment: %w", err)
	}
	return nil
}

// peek returns up to n log bytes from pos; fewer when the log data (the
// segment files) ends sooner. The result aliases the reader's window.
func (r *Reader) peek(pos LSN, n int) ([]byte, error) {
	if pos >= r.winStart && pos+LSN(n) <= r.winStart+LSN(len(r.win)) {
		off := int(pos - r.winStart)
		return r.win[off : off+n], nil
	}
	want := max(n, readAhead)
	if cap(r.win) < want {
		r.win = make([]byte, want)
	}
	r.win = r.win[:want]
	got, err := r.readAt(pos, r.win)
	if err != nil {
		r.win = r.win[:0]
		return nil, err
	}
	r.win = r.win[:got]
	r.winStart = pos
	return r.win[:min(n, got)], nil
}

// readAt fills p with log bytes from pos, stopping early (without error)
// where a segment file is missing or shorter than the segment size.
func (r *Reader) readAt(pos LSN, p []byte) (int, error) {
	done := 0
	for done < len(p) {
		segno := uint64(pos) / uint64(r.size)
		off := int64(uint64(pos) % uint64(r.size))
		f, fsize, err := r.segment(segno)
		if err != nil {
			return done, err
		}
		if f == nil || off >= fsize {
			return done, nil
		}
		n := int(min(int64(len(p)-done), fsize-off))
		m, err := f.ReadAt(p[done:done+n], off)
		done += m
		pos += LSN(m)
		if err != nil && !errors.Is(err, io.EOF) {
			return done, fmt.Errorf("read WAL segment %s at offset %d: %w", f.Name(), off, err)
		}
		if m < n {
			return done, nil
		}
		if fsize < r.size {
			return done, nil // short segment: the data ends here
		}
	}
	return done, nil
}

// segment opens segment segno (nil when it does not exist) and returns its
// size, capped at the segment size.
func (r *Reader) segment(segno uint64) (vfs.File, int64, error) {
	if r.file == nil || r.fileSeg != segno {
		if r.file != nil {
			_ = r.file.Close() // read-only: nothing to lose
			r.file = nil
		}
		name := filepath.Join(r.wdir, segName(segno, r.size))
		f, err := r.fs.OpenFile(name, os.O_RDONLY, 0)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, 0, nil
		}
		if err != nil {
			return nil, 0, fmt.Errorf("open WAL segment %s: %w", name, err)
		}
		r.file, r.fileSeg = f, segno
	}
	fsize, err := r.file.Size()
	if err != nil {
		return nil, 0, fmt.Errorf("size of WAL segment %s: %w", r.file.Name(), err)
	}
	return r.file, min(fsize, r.size), nil
}

// ResumeAfterEnd looks past the point where Next stopped (io.EOF or a
// *CorruptRecordError) for a valid record of the same log: one whose CRC
// checks and whose prev-record link points at or after the position where
// reading stopped, so the chain resumes after the damage. Stale records
// of a recycled segment link to older positions and do not count. It
// scans to the end of the segment after the one reading stopped in (a
// mid-log damage is followed by valid records there or sooner). It
// returns the start of the first such record, or 0 when there is none: a
// torn or clean end.
func (r *Reader) ResumeAfterEnd() (LSN, error) {
	stop := r.pos
	limit := LSN((uint64(stop)/uint64(r.size) + 2) * uint64(r.size))
	chunk := make([]byte, 0, readAhead+recHeaderSize)
	for base := stop + 1; base < limit; {
		n := min(int(limit-base), readAhead)
		buf := chunk[:n+recHeaderSize]
		got, err := r.readAt(base, buf)
		if err != nil {
			return 0, err
		}
		if got < MinRecordSize {
			// The data ends here; a segment after a missing one is not read.
			if got == 0 && uint64(base)%uint64(r.size) != 0 {
				base = LSN((uint64(base)/uint64(r.size) + 1) * uint64(r.size))
				continue
			}
			return 0, nil
		}
		for i := 0; i+MinRecordSize <= got && i < n; i++ {
			total := int(binary.LittleEndian.Uint32(buf[i:]))
			if total < MinRecordSize || total > MaxRecordSize {
				continue
			}
			q := base + LSN(i)
			prev := LSN(binary.LittleEndian.Uint64(buf[i+offRecPrev:]))
			if prev < stop || prev >= q {
				continue
			}
			rec := make([]byte, total)
			m, err := r.readAt(q, rec)
			if err != nil {
				return 0, err
			}
			if m < total {
				continue
			}
			if _, _, err := Decode(rec); err == nil {
				return q, nil
			}
		}
		base += LSN(n)
	}
	return 0, nil
}
