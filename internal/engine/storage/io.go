package storage

import (
	"errors"
	"fmt"
	"io"
	"os"
	"unsafe"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/usage"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
)

// zeroPage is written by Extend; never modified.
var zeroPage = vfs.AlignedBuffer(page.Size)

func aligned(b []byte) bool {
	return len(b) > 0 && uintptr(unsafe.Pointer(&b[0]))%vfs.Alignment == 0
}

func (m *Manager) getBuf() *[]byte {
	if b, ok := m.bufs.Get().(*[]byte); ok {
		return b
	}
	b := vfs.AlignedBuffer(page.Size)
	return &b
}
func (m *Manager) putBuf(b *[]byte) { m.bufs.Put(b) }

// NBlocks is the number of blocks in the fork (0 when it does not exist).
func (m *Manager) NBlocks(rel RelFileNode, fork ForkNum) (BlockNumber, error) {
	// The fast path, taken by every fetch of a tuple by its TID: a size
	// already known is read with no lock, so readers do not queue on a mutex
	// the VACUUM's and the checkpoint's block I/O take too. A size being
	// changed reads as unknown (Truncate and Drop store -1 first) and takes
	// the locked path, which waits for them.
	if err := m.check(false); err != nil {
		return 0, err
	}
	if n := m.forkState(rel, fork).nblocks.Load(); n >= 0 {
		return BlockNumber(n), nil
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if err := m.check(false); err != nil {
		return 0, err
	}
	fs := m.forkState(rel, fork)
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return m.nblocksLocked(fs, rel, fork)
}

// Read reads block blk into buf (len page.Size) and verifies its checksum;
// a mismatch returns *CorruptPageError naming the file and block. Bytes read
// are charged to u (may be nil).
//
// A page that is not all zeros must also pass page.Validate, or it is
// corrupt too. A block past the end of the fork is an error wrapping
// ErrBeyondEnd.
func (m *Manager) Read(rel RelFileNode, fork ForkNum, blk BlockNumber, buf []byte, u *usage.Counters) error {
	if len(buf) != page.Size {
		return fmt.Errorf("read block %d of %s: buffer is %d bytes, want %d", blk, m.Path(rel, fork), len(buf), page.Size)
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if err := m.check(false); err != nil {
		return err
	}
	seg, off := m.locate(blk)
	name := func() string { return m.SegmentPath(rel, fork, seg) }
	fs := m.forkState(rel, fork)
	fs.mu.Lock()
	f, _, err := m.openSeg(fs, rel, fork, seg, false)
	fs.mu.Unlock()
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read block %d of %s: %w (file %s does not exist)", blk, m.Path(rel, fork), ErrBeyondEnd, name())
	}
	if err != nil {
		return fmt.Errorf("read block %d of %s: %w", blk, m.Path(rel, fork), err)
	}
	dst := buf
	var tmp *[]byte
	if f.Direct() && !aligned(buf) {
		tmp = m.getBuf()
		defer m.putBuf(tmp)
		dst = *tmp
	}
	n, err := f.ReadAt(dst, off)
	if n < page.Size {
		if err == nil || errors.Is(err, io.EOF) {
			return fmt.Errorf("read block %d of %s: %w (file %s has only %d of %d bytes at offset %d)",
				blk, m.Path(rel, fork), ErrBeyondEnd, name(), n, page.Size, off)
		}
		return fmt.Errorf("read block %d of %s (file %s offset %d): %w", blk, m.Path(rel, fork), name(), off, err)
	}
	if tmp != nil {
		copy(buf, dst)
	}
	u.Add(usage.ReadBytes, page.Size)
	if err := page.VerifyChecksum(buf, uint32(blk)); err != nil {
		return &CorruptPageError{File: name(), Block: blk, Reason: err.Error()}
	}
	if err := page.Page(buf).Validate(); err != nil {
		return &CorruptPageError{File: name(), Block: blk, Reason: err.Error()}
	}
	return nil
}

// Write writes buf as block blk (setting the checksum on a private copy,
// so buf is not modified), extending the fork when blk == NBlocks. Writes
// are not fsynced; SyncAll makes them durable. Bytes written go to u.
//
// An all-zero page is written as is (no checksum: it reads back as new).
// A page that fails page.Validate is refused, since it could not be read
// back. A block more than one past the end is an error wrapping
// ErrBeyondEnd.
func (m *Manager) Write(rel RelFileNode, fork ForkNum, blk BlockNumber, buf []byte, u *usage.Counters) error {
	return m.write(rel, fork, blk, buf, u, false)
}

// WritePrivate is Write for a caller that owns buf and does not need it
// unchanged: the checksum is set in buf itself, saving a page copy (the
// buffer pool writes from a private copy of the frame already). buf should
// be aligned for O_DIRECT (vfs.AlignedBuffer); an unaligned one is copied.
func (m *Manager) WritePrivate(rel RelFileNode, fork ForkNum, blk BlockNumber, buf []byte, u *usage.Counters) error {
	return m.write(rel, fork, blk, buf, u, true)
}

func (m *Manager) write(rel RelFileNode, fork ForkNum, blk BlockNumber, buf []byte, u *usage.Counters, private bool) error {
	if len(buf) != page.Size {
		return fmt.Errorf("write block %d of %s: buffer is %d bytes, want %d", blk, m.Path(rel, fork), len(buf), page.Size)
	}
	if blk == InvalidBlock {
		return fmt.Errorf("write block %d of %s: invalid block number", blk, m.Path(rel, fork))
	}
	if err := page.Page(buf).Validate(); err != nil {
		return fmt.Errorf("write block %d of %s: refusing invalid page: %w", blk, m.Path(rel, fork), err)
	}
	img := &buf
	if !private || !aligned(buf) {
		img = m.getBuf()
		defer m.putBuf(img)
		copy(*img, buf)
	}
	if !page.IsZero(*img) {
		page.SetChecksum(*img, uint32(blk))
	}

	m.mu.RLock()
	defer m.mu.RUnlock()
	if err := m.check(true); err != nil {
		return fmt.Errorf("write block %d of %s: %w", blk, m.Path(rel, fork), err)
	}
	fs := m.forkState(rel, fork)
	fs.mu.Lock()
	n, err := m.nblocksLocked(fs, rel, fork)
	if err != nil {
		fs.mu.Unlock()
		return fmt.Errorf("write block %d of %s: %w", blk, m.Path(rel, fork), err)
	}
	if blk > n {
		fs.mu.Unlock()
		return fmt.Errorf("write block %d of %s: %w (fork has %d blocks)", blk, m.Path(rel, fork), ErrBeyondEnd, n)
	}
	// An extending write keeps fs.mu across the I/O, serializing it with
	// Extend; a plain overwrite releases it once the file is open.
	extending := blk == n
	seg, off := m.locate(blk)
	f, _, err := m.openSeg(fs, rel, fork, seg, extending)
	if !extending {
		fs.mu.Unlock()
	}
	if err == nil {
		err = writeFull(f, *img, off)
	}
	if extending {
		if err == nil {
			fs.nblocks.Store(int64(n) + 1)
		}
		fs.mu.Unlock()
	}
	if err != nil {
		return fmt.Errorf("write block %d of %s: %w", blk, m.SegmentPath(rel, fork, seg), err)
	}
	m.markDirty(segKey{forkKey{rel, fork}, seg}, f)
	u.Add(usage.WriteBytes, page.Size)
	return nil
}

func writeFull(f vfs.File, b []byte, off int64) error {
	n, err := f.WriteAt(b, off)
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	if err != nil {
		return fmt.Errorf("wrote %d of %d bytes at offset %d: %w", n, len(b), off, err)
	}
	return nil
}

// Extend appends a zeroed block and returns its number. The fork's first
// segment is created if it does not exist yet.
func (m *Manager) Extend(rel RelFileNode, fork ForkNum, u *usage.Counters) (BlockNumber, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if err := m.check(true); err != nil {
		return 0, fmt.Errorf("extend %s: %w", m.Path(rel, fork), err)
	}
	fs := m.forkState(rel, fork)
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n, err := m.nblocksLocked(fs, rel, fork)
	if err != nil {
		return 0, fmt.Errorf("extend %s: %w", m.Path(rel, fork), err)
	}
	if n >= InvalidBlock {
		return 0, fmt.Errorf("extend %s: fork already has the maximum %d blocks", m.Path(rel, fork), n)
	}
	seg, off := m.locate(n)
	f, _, err := m.openSeg(fs, rel, fork, seg, true)
	if err == nil {
		err = writeFull(f, zeroPage, off)
	}
	if err != nil {
		return 0, fmt.Errorf("extend %s to block %d: %w", m.SegmentPath(rel, fork, seg), n, err)
	}
	fs.nblocks.Store(int64(n) + 1)
	m.markDirty(segKey{forkKey{rel, fork}, seg}, f)
	u.Add(usage.WriteBytes, page.Size)
	return n, nil
}

// ReadRun reads consecutive blocks start, start+1, ... into buf (a whole
// number of pages) with one system call, and verifies each page as Read
// does. The run stops at the end of start's segment and at the end of the
// fork. It returns how many leading pages of buf were read and verified; a
// page that fails verification ends the run there with *CorruptPageError
// naming that block (the pages before it are good). A run of zero pages
// because start lies past the end of the fork is an error wrapping
// ErrBeyondEnd. With O_DIRECT buf should be aligned (vfs.AlignedBuffer);
// an unaligned buf is refused rather than copied.
func (m *Manager) ReadRun(rel RelFileNode, fork ForkNum, start BlockNumber, buf []byte, u *usage.Counters) (int, error) {
	if len(buf) == 0 || len(buf)%page.Size != 0 {
		return 0, fmt.Errorf("read run from block %d of %s: buffer is %d bytes, want a positive multiple of %d", start, m.Path(rel, fork), len(buf), page.Size)
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if err := m.check(false); err != nil {
		return 0, err
	}
	seg, off := m.locate(start)
	name := func() string { return m.SegmentPath(rel, fork, seg) }
	// Do not cross into the next segment file.
	if left := int64(m.bps-uint32(start)%m.bps) * page.Size; int64(len(buf)) > left {
		buf = buf[:left]
	}
	fs := m.forkState(rel, fork)
	fs.mu.Lock()
	f, _, err := m.openSeg(fs, rel, fork, seg, false)
	fs.mu.Unlock()
	if errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("read run from block %d of %s: %w (file %s does not exist)", start, m.Path(rel, fork), ErrBeyondEnd, name())
	}
	if err != nil {
		return 0, fmt.Errorf("read run from block %d of %s: %w", start, m.Path(rel, fork), err)
	}
	if f.Direct() && !aligned(buf) {
		return 0, fmt.Errorf("read run from block %d of %s: buffer not aligned for O_DIRECT", start, m.Path(rel, fork))
	}
	n, err := f.ReadAt(buf, off)
	pages := n / page.Size
	if pages == 0 {
		if err == nil || errors.Is(err, io.EOF) {
			return 0, fmt.Errorf("read run from block %d of %s: %w (file %s has only %d of %d bytes at offset %d)",
				start, m.Path(rel, fork), ErrBeyondEnd, name(), n, page.Size, off)
		}
		return 0, fmt.Errorf("read run from block %d of %s (file %s offset %d): %w", start, m.Path(rel, fork), name(), off, err)
	}
	// A short read (end of file, or an error part way) still yields the
	// whole pages before it; the caller reads the rest again if it needs it.
	u.Add(usage.ReadBytes, int64(pages)*page.Size)
	for i := range pages {
		p := buf[i*page.Size : (i+1)*page.Size]
		blk := start + BlockNumber(i)
		if err := page.VerifyChecksum(p, uint32(blk)); err != nil {
			return i, &CorruptPageError{File: name(), Block: blk, Reason: err.Error()}
		}
		if err := page.Page(p).Validate(); err != nil {
			return i, &CorruptPageError{File: name(), Block: blk, Reason: err.Error()}
		}
	}
	return pages, nil
}

// WriteRun writes the pages in buf (a whole number of them) as consecutive
// blocks start, start+1, ..., one system call per segment file touched. It
// is WritePrivate for a run: each page must pass page.Validate and gets its
// checksum set in buf itself. Every block must already exist (a run never
// extends the fork); otherwise nothing is written and the error wraps
// ErrBeyondEnd. Writes are not fsynced; SyncAll makes them durable.
func (m *Manager) WriteRun(rel RelFileNode, fork ForkNum, start BlockNumber, buf []byte, u *usage.Counters) error {
	if len(buf) == 0 || len(buf)%page.Size != 0 {
		return fmt.Errorf("write run from block %d of %s: buffer is %d bytes, want a positive multiple of %d", start, m.Path(rel, fork), len(buf), page.Size)
	}
	pages := len(buf) / page.Size
	if uint64(start)+uint64(pages) > uint64(InvalidBlock) {
		return fmt.Errorf("write run from block %d of %s: %d pages run past the last block number", start, m.Path(rel, fork), pages)
	}
	for i := range pages {
		img := page.Page(buf[i*page.Size : (i+1)*page.Size])
		blk := start + BlockNumber(i)
		if err := img.Validate(); err != nil {
			return fmt.Errorf("write block %d of %s: refusing invalid page: %w", blk, m.Path(rel, fork), err)
		}
		if !page.IsZero(img) {
			page.SetChecksum(img, uint32(blk))
		}
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if err := m.check(true); err != nil {
		return fmt.Errorf("write run from block %d of %s: %w", start, m.Path(rel, fork), err)
	}
	fs := m.forkState(rel, fork)
	for done := 0; done < pages; {
		blk := start + BlockNumber(done)
		seg, off := m.locate(blk)
		k := min(pages-done, int(m.bps-uint32(blk)%m.bps))
		chunk := buf[done*page.Size : (done+k)*page.Size]
		fs.mu.Lock()
		n, err := m.nblocksLocked(fs, rel, fork)
		if err == nil && uint64(blk)+uint64(k) > uint64(n) {
			err = fmt.Errorf("%w (fork has %d blocks, run ends at %d)", ErrBeyondEnd, n, uint64(blk)+uint64(k))
		}
		var f vfs.File
		if err == nil {
			f, _, err = m.openSeg(fs, rel, fork, seg, false)
		}
		fs.mu.Unlock()
		if err == nil && f.Direct() && !aligned(chunk) {
			err = errors.New("buffer not aligned for O_DIRECT")
		}
		if err == nil {
			err = writeFull(f, chunk, off)
		}
		if err != nil {
			return fmt.Errorf("write run of blocks %d-%d of %s: %w", blk, blk+BlockNumber(k)-1, m.SegmentPath(rel, fork, seg), err)
		}
		m.markDirty(segKey{forkKey{rel, fork}, seg}, f)
		u.Add(usage.WriteBytes, int64(k)*page.Size)
		done += k
	}
	return nil
}
