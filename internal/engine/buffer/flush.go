package buffer

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/usage"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// write writes the dirty buffer b, which the caller has pinned and holds
// with a share content lock, after flushing the WAL up to its page LSN.
// ring says the write makes room in a strategy ring (counted separately).
// Only one IO runs on a buffer at a time; a buffer found clean once the
// running IO ends (someone else wrote it) is not written again.
func (p *Pool) write(b *Buffer, s *Strategy, ring bool) error {
	b.mu.Lock()
	for b.ioInProgress {
		ch := b.ioWaitLocked()
		b.mu.Unlock()
		<-ch
		b.mu.Lock()
	}
	if !b.dirty || !b.valid || !b.tagValid {
		b.mu.Unlock()
		return nil
	}
	b.ioInProgress = true
	b.justDirtied = false
	tag := b.tag
	// The copy is taken under the header lock: MarkDirtyHint may set the
	// page LSN under a share content lock, and it does so under this lock.
	imgp, _ := p.scratch.Get().(*[]byte) // the pool's New makes nothing else
	img := page.Page(*imgp)
	copy(img, b.frame)
	b.mu.Unlock()

	err := p.writePage(tag, img, s.counters(), ring)
	p.scratch.Put(imgp)

	b.endWrite(err)
	return err
}

// privateWriter is implemented by storage managers that can write a page
// from a buffer they may modify (*storage.Manager.WritePrivate).
type privateWriter interface {
	WritePrivate(rel storage.RelFileNode, fork storage.ForkNum, blk storage.BlockNumber, buf []byte, u *usage.Counters) error
}

// writePage enforces WAL-before-data and writes one page image (img is a
// private copy, which the storage manager may checksum in place).
func (p *Pool) writePage(tag Tag, img page.Page, u *usage.Counters, ring bool) error {
	lsn := wal.LSN(img.LSN())
	if lsn > p.log.FlushedLSN() {
		if ring {
			p.stats.ringWALFlushes.Add(1)
			u.Add(usage.RingWALFlushes, 1)
		}
		if err := p.log.Flush(lsn, u); err != nil {
			return fmt.Errorf("flush WAL to %X before writing block %d of rel %d fork %d: %w",
				uint64(lsn), tag.Block, tag.Rel, tag.Fork, err)
		}
	}
	write := p.st.Write
	if pw, ok := p.st.(privateWriter); ok {
		write = pw.WritePrivate // img is our scratch copy: storage may set its checksum in place
	}
	if err := write(tag.Rel, tag.Fork, tag.Block, img, u); err != nil {
		return fmt.Errorf("write block %d of rel %d fork %d: %w", tag.Block, tag.Rel, tag.Fork, err)
	}
	p.stats.written.Add(1)
	u.Add(usage.Written, 1)
	if ring {
		p.stats.ringDirtyEvictions.Add(1)
		u.Add(usage.RingDirtyEvictions, 1)
	}
	return nil
}

// FlushAll writes every dirty buffer (flushing WAL first as needed); the
// checkpoint calls it before SyncAll. Buffers are written in (rel, fork,
// block) order so that each file is written sequentially; each under a
// share content lock, so readers are not blocked. It stops at the first
// failed write.
func (p *Pool) FlushAll() error {
	_, err := p.FlushAllPaced(nil)
	return err
}

// FlushAllPaced is FlushAll with pace called after each of the buffers that
// were dirty when it began (done of total, written or found clean or evicted
// meanwhile): a spread checkpoint sleeps there while it is ahead of its
// schedule and asks the kernel to write back what it wrote. An error from
// pace stops the flush. A nil pace is FlushAll. It returns how many buffers
// it wrote itself (not those evicted, and so written, meanwhile), also on an
// error.
func (p *Pool) FlushAllPaced(pace func(done, total int) error) (int, error) {
	type dirtyBuf struct {
		id  int32
		tag Tag
	}
	var dirty []dirtyBuf
	for i := range p.bufs {
		b := &p.bufs[i]
		b.mu.Lock()
		if b.dirty && b.valid && b.tagValid {
			dirty = append(dirty, dirtyBuf{b.id, b.tag})
		}
		b.mu.Unlock()
	}
	slices.SortFunc(dirty, func(x, y dirtyBuf) int {
		return cmp.Or(cmp.Compare(x.tag.Rel, y.tag.Rel), cmp.Compare(x.tag.Fork, y.tag.Fork),
			cmp.Compare(x.tag.Block, y.tag.Block))
	})
	written := 0
	for i, d := range dirty {
		wrote, err := p.flushOne(d.id, d.tag)
		if wrote {
			written++
		}
		if err != nil {
			return written, err
		}
		if pace != nil {
			if err := pace(i+1, len(dirty)); err != nil {
				return written, fmt.Errorf("flush buffers: %w", err)
			}
		}
	}
	return written, nil
}

// flushOne writes buffer id if it still holds tag and is dirty, and reports
// whether it wrote it.
func (p *Pool) flushOne(id int32, tag Tag) (bool, error) {
	b := &p.bufs[id]
	b.mu.Lock()
	still := b.tagValid && b.tag == tag && b.dirty && b.valid
	if still {
		b.refcount++
	}
	b.mu.Unlock()
	if !still {
		return false, nil // evicted (and so written) or dropped meanwhile
	}
	b.content.RLock()
	err := p.write(b, nil, false)
	b.content.RUnlock()
	b.Release()
	if err != nil {
		return false, fmt.Errorf("flush buffers: %w", err)
	}
	return true, nil
}

// MarkDirtyHint marks a hint-only change (share lock is enough): the page
// is written eventually but nothing is WAL-logged for the change itself.
// Torn-page safety (wal_log_hints): when the buffer is not already dirty and
// the page has not been imaged since the last checkpoint's redo pointer, a
// full-page image record (RmgrXLOG, XLOGFPIForHint) is inserted first and
// the page LSN set to its end. If that insert fails the buffer is left as it
// was: the hint may be lost, which is harmless, and no unlogged torn write
// can happen.
func (b *Buffer) MarkDirtyHint(s *Strategy) {
	p := b.pool
	b.mu.Lock()
	if b.dirty && b.justDirtied {
		b.mu.Unlock()
		return
	}
	var img page.Page
	if wal.LSN(b.frame.LSN()) <= p.log.RedoPtr() {
		img = make(page.Page, page.Size)
		copy(img, b.frame)
	}
	tag := b.tag
	b.mu.Unlock()

	var lsn wal.LSN
	if img != nil {
		rec := &wal.Record{Rmgr: wal.RmgrXLOG, Info: XLOGFPIForHint, Blocks: []wal.BlockRef{{
			Rel: tag.Rel, Fork: tag.Fork, Block: tag.Block, Page: img,
		}}}
		var err error
		if lsn, err = p.log.Insert(rec, s.counters()); err != nil {
			return
		}
	}

	b.mu.Lock()
	if lsn > wal.LSN(b.frame.LSN()) {
		b.frame.SetLSN(uint64(lsn))
	}
	wasClean := !b.dirty
	b.dirty = true
	b.justDirtied = true
	b.mu.Unlock()
	if wasClean {
		p.stats.dirtied.Add(1)
		s.counters().Add(usage.Dirtied, 1)
	}
}

// DropRel forgets every buffer of rel without writing it (the relation's
// files are being removed). Buffers must not be pinned.
func (p *Pool) DropRel(rel storage.RelFileNode) {
	p.drop(func(t Tag) bool { return t.Rel == rel })
}

// DropBlocksFrom forgets buffers of (rel, fork) at blocks >= from (the fork
// is being truncated).
func (p *Pool) DropBlocksFrom(rel storage.RelFileNode, fork storage.ForkNum, from storage.BlockNumber) {
	p.drop(func(t Tag) bool { return t.Rel == rel && t.Fork == fork && t.Block >= from })
}

// drop removes matching buffers from the page table and discards their
// contents (dirty or not), after waiting for any IO running on them.
func (p *Pool) drop(match func(Tag) bool) {
	for i := range p.bufs {
		b := &p.bufs[i]
		b.mu.Lock()
		for b.ioInProgress {
			ch := b.ioWaitLocked()
			b.mu.Unlock()
			<-ch
			b.mu.Lock()
		}
		tag, ok := b.tag, b.tagValid && match(b.tag)
		b.mu.Unlock()
		if !ok {
			continue
		}
		sh := p.table.shardFor(tag)
		sh.mu.Lock()
		b.mu.Lock()
		if b.tagValid && b.tag == tag {
			if id, ok := sh.m[tag]; ok && id == b.id {
				delete(sh.m, tag)
			}
			b.tagValid = false
			b.valid = false
			b.dirty = false
			b.justDirtied = false
			b.usage = 0
		}
		b.mu.Unlock()
		sh.mu.Unlock()
	}
}
