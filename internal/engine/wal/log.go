package wal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/usage"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
)

// Buffering thresholds: Insert writes the buffer out (without fsync) once
// it holds writeOutBytes, and waits for the writer when it holds
// maxBufferBytes while another goroutine is writing.
const (
	writeOutBytes  = 1 << 20
	maxBufferBytes = 16 << 20
	maxSpareBytes  = 4 << 20
)

// Log appends records and makes them durable. Safe for concurrent use.
//
// Concurrency: mu guards the insert state. At most one goroutine at a time
// holds the "busy" role (writing the buffer out, fsyncing, removing
// segments); it owns segs and performs I/O without holding mu, so inserts
// continue while a flush is in progress. Waiters sleep on cond.
type Log struct {
	fs   vfs.FS
	wdir string
	opts Options
	size int64
	segs *segments // owned by the busy holder

	mu        sync.Mutex
	cond      sync.Cond
	busy      bool
	closed    bool
	err       error  // sticky write/fsync failure
	buf       []byte // bytes [bufStart, insert) not yet handed to the OS
	spare     []byte
	bufStart  LSN
	prev      LSN // start of the last inserted record (0 = unknown)
	written   LSN // end of the bytes handed to the OS
	redo      LSN
	retention LSN
	stats     Stats
	warned    bool

	insertLSN  atomic.Uint64
	flushedLSN atomic.Uint64
}

// Open opens (creating if needed) the log in dir/wal. The log continues
// after end, the LSN where valid WAL ended (found by recovery with a
// Reader); end 0 means FirstLSN (a fresh log). Anything after end is
// destroyed before Open returns: the rest of end's segment is zeroed and
// fsynced and later segments are removed (all-zero ones, created ahead of
// need, are kept), so no reader can ever see a stale record past the new
// end. With Options.KeepSpares (end is a clean shutdown's end) the later
// segments are kept as spares: recycled ones hold only records that can
// never link into the log. With Options.TailAside, end's segment is first copied there and
// the later segments are moved there instead of removed. The redo pointer
// starts at end.
func Open(fsys vfs.FS, dir string, end LSN, opts Options) (*Log, error) {
	size, err := opts.segmentSize()
	if err != nil {
		return nil, err
	}
	if end == 0 {
		end = FirstLSN
	}
	if end < FirstLSN {
		return nil, fmt.Errorf("wal: open at LSN %X: below the first LSN %X", uint64(end), uint64(FirstLSN))
	}
	wdir := walDir(dir)
	if err := fsys.MkdirAll(wdir, 0o700); err != nil {
		return nil, fmt.Errorf("create WAL directory %s: %w", wdir, err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		return nil, fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	if err := removeTemps(fsys, wdir); err != nil {
		return nil, err
	}
	present, err := listSegments(fsys, wdir, size)
	if err != nil {
		return nil, err
	}
	s := newSegments(fsys, wdir, size, opts.NoPrealloc)
	endSeg := uint64(end) / uint64(size)
	if opts.TailAside != "" {
		if err := s.copyAside(endSeg, opts.TailAside); err != nil {
			return nil, fmt.Errorf("wal: move the log tail after %X aside: %w", uint64(end), err)
		}
	}
	removed := 0
	for _, segno := range present {
		if segno > endSeg {
			if opts.KeepSpares && opts.TailAside == "" {
				continue // a spare of a clean log: fresh or recycled, nothing that links in
			}
			if fresh, err := s.isFresh(segno); err != nil {
				return nil, err
			} else if fresh {
				continue // created ahead of need and never written: nothing stale to hide
			}
			if opts.TailAside != "" {
				err = s.moveAside(segno, opts.TailAside)
			} else {
				err = s.remove(segno)
			}
			if err != nil {
				return nil, err
			}
			removed++
		}
	}
	if opts.TailAside != "" {
		if err := fsys.SyncDir(opts.TailAside); err != nil {
			return nil, fmt.Errorf("fsync directory %s: %w", opts.TailAside, err)
		}
	}
	if removed > 0 {
		// Routine after segment recycling (RemoveBefore renames old segments
		// to future names); not worth a message on every open.
		if err := fsys.SyncDir(wdir); err != nil {
			return nil, fmt.Errorf("fsync directory %s: %w", wdir, err)
		}
	}
	if err := s.zeroTail(endSeg, int64(uint64(end)%uint64(size))); err != nil {
		_ = s.closeAll()
		return nil, fmt.Errorf("wal: reset log tail after %X: %w", uint64(end), err)
	}
	l := &Log{fs: fsys, wdir: wdir, opts: opts, size: size, segs: s,
		bufStart: end, written: end, redo: end}
	l.cond.L = &l.mu
	l.insertLSN.Store(uint64(end))
	l.flushedLSN.Store(uint64(end))
	return l, nil
}

// removeTemps deletes segment files left half-created by a crash.
func removeTemps(fsys vfs.FS, wdir string) error {
	ents, err := fsys.ReadDir(wdir)
	if err != nil {
		return fmt.Errorf("list WAL directory %s: %w", wdir, err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tmp") {
			if err := fsys.Remove(filepath.Join(wdir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("remove %s: %w", filepath.Join(wdir, e.Name()), err)
			}
		}
	}
	return nil
}

// usable reports why the log cannot be used, if it cannot. Caller holds mu.
func (l *Log) usable() error {
	if l.err != nil {
		return fmt.Errorf("wal: log failed earlier, refusing to continue: %w", l.err)
	}
	if l.closed {
		return ErrClosed
	}
	return nil
}

// Insert appends rec, deciding full-page images as documented on BlockRef,
// and returns the record's end LSN, which the caller stores in every
// changed page. Usage (records, bytes, images) is charged to u. Insert
// does not flush, but may write the buffer out (charging u WALWriteBytes).
func (l *Log) Insert(rec *Record, u *usage.Counters) (LSN, error) {
	if rec == nil {
		return 0, errors.New("wal: insert of a nil record")
	}
	if rec.Rmgr == 0 {
		return 0, errors.New("wal: insert of a record with resource manager 0")
	}
	if len(rec.Blocks) > MaxBlocks {
		return 0, fmt.Errorf("wal: record has %d blocks, at most %d allowed", len(rec.Blocks), MaxBlocks)
	}
	if n := minEncodedSize(rec); n > MaxRecordSize {
		return 0, fmt.Errorf("wal: record of at least %d bytes exceeds the maximum %d", n, MaxRecordSize)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		if err := l.usable(); err != nil {
			return 0, err
		}
		if !(l.busy && len(l.buf) >= maxBufferBytes) {
			break
		}
		l.cond.Wait() // back-pressure: the writer is behind
	}
	var imgBuf [4][]byte // most records name at most a few blocks: no allocation
	images := imgBuf[:0]
	if len(rec.Blocks) > len(imgBuf) {
		images = make([][]byte, 0, len(rec.Blocks))
	}
	images = images[:len(rec.Blocks)]
	nimg := 0
	for i := range rec.Blocks {
		blk := &rec.Blocks[i]
		img := blk.Image
		if img == nil && !blk.WillInit && blk.Page != nil && LSN(blk.Page.LSN()) <= l.redo {
			img = blk.Page
		}
		if img != nil && len(img) != page.Size {
			return 0, fmt.Errorf("wal: block %d (rel %d fork %d block %d): image of %d bytes, want %d",
				i, blk.Rel, blk.Fork, blk.Block, len(img), page.Size)
		}
		if img != nil {
			nimg++
		}
		images[i] = img
	}
	start := l.bufStart + LSN(len(l.buf))
	prev := l.prev
	if prev == 0 {
		prev = start // first record after Open: the link restarts here
	}
	before := len(l.buf)
	var imgBytes int
	l.buf, imgBytes = appendRecord(l.buf, rec, prev, images)
	n := len(l.buf) - before
	if n > MaxRecordSize {
		l.buf = l.buf[:before]
		return 0, fmt.Errorf("wal: record of %d bytes exceeds the maximum %d", n, MaxRecordSize)
	}
	l.prev = start
	end := start + LSN(n)
	l.insertLSN.Store(uint64(end))
	l.stats.Records++
	l.stats.Bytes += int64(n)
	l.stats.FPIs += int64(nimg)
	l.stats.FPIBytes += int64(imgBytes)
	u.Add(usage.WALRecords, 1)
	u.Add(usage.WALBytes, int64(n))
	u.Add(usage.WALFPIs, int64(nimg))
	if len(l.buf) >= writeOutBytes && !l.busy {
		if err := l.writeBuffer(false, u); err != nil {
			return 0, err
		}
	}
	return end, nil
}

// minEncodedSize is the size of rec's encoding without its images: a lower
// bound that rejects oversized records before anything is copied.
func minEncodedSize(rec *Record) int {
	n := MinRecordSize + len(rec.Main)
	for i := range rec.Blocks {
		n += blockHeaderSize + len(rec.Blocks[i].Data)
	}
	return n
}

// writeBuffer takes the busy role, writes the buffer out (and fsyncs when
// sync is set) without holding mu, and records the outcome. Caller holds mu
// and has checked that nobody is busy.
func (l *Log) writeBuffer(sync bool, u *usage.Counters) error {
	l.busy = true
	data, start := l.buf, l.bufStart
	target := start + LSN(len(data))
	spare := l.spare
	if spare == nil {
		// No buffer came back from the last write (the first one, or one
		// above maxSpareBytes): start one as large as the buffer being
		// written, rather than growing it from nothing by doubling, which
		// copies and zeroes the bytes inserted meanwhile several times.
		spare = make([]byte, 0, min(cap(data), maxSpareBytes))
	}
	l.buf, l.spare = spare[:0], nil
	l.bufStart = target
	l.mu.Unlock()

	err := l.segs.write(start, data)
	nsync := 0
	if err == nil && sync {
		nsync, err = l.segs.sync()
	}
	if err == nil && sync {
		l.segs.closeBefore(uint64(target) / uint64(l.size))
	}

	l.mu.Lock()
	l.busy = false
	if cap(data) <= maxSpareBytes {
		l.spare = data[:0]
	}
	l.stats.Flushes += int64(nsync)
	u.Add(usage.WALFlushes, int64(nsync))
	defer l.cond.Broadcast()
	if err != nil {
		l.err = err
		return fmt.Errorf("wal: %w", err)
	}
	l.written = target
	l.stats.WriteBytes += int64(len(data))
	u.Add(usage.WALWriteBytes, int64(len(data)))
	if sync {
		l.flushedLSN.Store(uint64(target))
	}
	return nil
}

// Flush makes every record up to upTo durable (write + fsync). Concurrent
// callers share one fsync (group flush): while one caller writes and
// fsyncs, the others wait, and the next flusher takes everything inserted
// meanwhile. The fsync and bytes written are charged to u of the caller
// that performed them. A failed write or fsync is sticky: every later
// Insert and Flush returns it. upTo beyond the insert point is clamped to
// it (with a warning through Options.Logf).
func (l *Log) Flush(upTo LSN, u *usage.Counters) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		if err := l.usable(); err != nil {
			return err
		}
		if insert := l.bufStart + LSN(len(l.buf)); upTo > insert {
			if !l.warned {
				l.warned = true
				l.opts.logf("wal: flush requested up to %X, beyond the end of the log %X", uint64(upTo), uint64(insert))
			}
			upTo = insert
		}
		if LSN(l.flushedLSN.Load()) >= upTo {
			return nil
		}
		if l.busy {
			l.cond.Wait()
			continue
		}
		return l.writeBuffer(true, u)
	}
}

// SegmentSize is the size of the log's segment files.
func (l *Log) SegmentSize() int64 { return l.size }

// FlushedLSN is the durable end of the log.
func (l *Log) FlushedLSN() LSN { return LSN(l.flushedLSN.Load()) }

// InsertLSN is the end of the last inserted record.
func (l *Log) InsertLSN() LSN { return LSN(l.insertLSN.Load()) }

// SetRedoPtr starts a checkpoint: records inserted from now on compare
// their pages' LSNs with the returned pointer (the current insert LSN) to
// decide full-page images.
func (l *Log) SetRedoPtr() LSN {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.redo = l.bufStart + LSN(len(l.buf))
	return l.redo
}

// RedoPtr is the current redo pointer.
func (l *Log) RedoPtr() LSN {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.redo
}

// SetRetention keeps every segment holding WAL at or after lsn (a reader
// such as a simulated standby has not consumed it yet); 0 clears it.
func (l *Log) SetRetention(lsn LSN) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.retention = lsn
}

// RemoveBefore deletes whole segments that end at or before lsn and are not
// retained (WAL recycling after a checkpoint). It never removes the segment
// holding the redo pointer, the retention LSN or the current write
// position, nor anything after them.
func (l *Log) RemoveBefore(lsn LSN) error {
	l.mu.Lock()
	for l.busy {
		l.cond.Wait()
	}
	if err := l.usable(); err != nil {
		l.mu.Unlock()
		return err
	}
	limit := min(lsn, l.redo, l.written)
	if l.retention != 0 {
		limit = min(limit, l.retention)
	}
	written := l.written
	l.busy = true
	l.mu.Unlock()

	err := l.removeSegments(limit, uint64(written)/uint64(l.size))

	l.mu.Lock()
	if err != nil && errors.Is(err, errRenameUncertain) {
		// A recycled segment's new name may not be durable: writing into
		// it could put acknowledged commits in a file a power loss
		// renames back. Stop, as for a failed fsync.
		l.err = err
	}
	l.busy = false
	l.cond.Broadcast()
	l.mu.Unlock()
	return err
}

// removeSegments deletes the segments that end at or before limit, or
// recycles them (renames them past curSeg, the segment being written) while
// fewer than the recycle limit are waiting there. Caller holds the busy
// role.
func (l *Log) removeSegments(limit LSN, curSeg uint64) error {
	l.segs.waitPrealloc() // its segment must be listed, not renamed over
	present, err := listSegments(l.fs, l.wdir, l.size)
	if err != nil {
		return err
	}
	future, last := 0, curSeg
	for _, segno := range present {
		if segno > curSeg {
			future++
			last = max(last, segno)
		}
	}
	changed := false
	for _, segno := range present {
		if (segno+1)*uint64(l.size) > uint64(limit) {
			break
		}
		if future < l.opts.recycleSegments() {
			last++
			if err := l.segs.recycle(segno, last); err != nil {
				return err
			}
			future++
		} else if err := l.segs.remove(segno); err != nil {
			return err
		}
		changed = true
	}
	if changed {
		if err := l.fs.SyncDir(l.wdir); err != nil {
			return fmt.Errorf("fsync directory %s: %w: %w", l.wdir, errRenameUncertain, err)
		}
	}
	return nil
}

// errRenameUncertain marks a failure after which a segment rename (a
// creation or a recycling) may or may not be durable; the Log fails
// sticky on it.
var errRenameUncertain = errors.New("segment rename may not be durable")

// Stats returns the log-wide counters.
func (l *Log) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stats
}

// Close flushes and closes the log. After Close every operation returns
// ErrClosed (or the sticky failure, if there was one); records inserted
// concurrently with Close are refused rather than silently dropped.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.busy {
		l.cond.Wait()
	}
	if l.closed {
		return nil
	}
	var ferr error
	if l.err != nil {
		ferr = l.usable()
	} else if LSN(l.flushedLSN.Load()) < l.bufStart+LSN(len(l.buf)) {
		l.closed = true // refuse new inserts while the final flush runs
		ferr = l.writeBuffer(true, nil)
	}
	l.closed = true
	l.cond.Broadcast()
	return errors.Join(ferr, l.segs.closeAll())
}
