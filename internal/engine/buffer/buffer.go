package buffer

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/usage"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// Tag names a page.
type Tag struct {
	Rel   storage.RelFileNode
	Fork  storage.ForkNum
	Block storage.BlockNumber
}

// Storage is what the pool needs from the storage manager (*storage.Manager
// implements it).
type Storage interface {
	Read(rel storage.RelFileNode, fork storage.ForkNum, blk storage.BlockNumber, buf []byte, u *usage.Counters) error
	Write(rel storage.RelFileNode, fork storage.ForkNum, blk storage.BlockNumber, buf []byte, u *usage.Counters) error
	Extend(rel storage.RelFileNode, fork storage.ForkNum, u *usage.Counters) (storage.BlockNumber, error)
	NBlocks(rel storage.RelFileNode, fork storage.ForkNum) (storage.BlockNumber, error)
}

// WAL is what the pool needs from the log (*wal.Log implements it). Insert
// and RedoPtr serve MarkDirtyHint's full-page image for hint-only changes.
type WAL interface {
	Flush(upTo wal.LSN, u *usage.Counters) error
	FlushedLSN() wal.LSN
	Insert(rec *wal.Record, u *usage.Counters) (wal.LSN, error)
	RedoPtr() wal.LSN
}

// XLOGFPIForHint is the Info of the RmgrXLOG record MarkDirtyHint inserts:
// one BlockRef whose full-page image redo restores (nothing else to apply).
const XLOGFPIForHint uint8 = 0x10

// MaxUsage is the highest usage count a buffer reaches.
const MaxUsage = 5

// ErrNoUnpinnedBuffers is returned when a clock sweep finds every buffer
// pinned: the pool is too small for the number of pages held at once.
var ErrNoUnpinnedBuffers = errors.New("no unpinned buffers available")

// Options configure a Pool.
type Options struct {
	Frames int  // number of 8 KiB frames (at least 16)
	Direct bool // frames are aligned for O_DIRECT (always aligned is fine too)
}

// MinFrames is the smallest pool New accepts.
const MinFrames = 16

// Stats are pool-wide counters.
type Stats struct {
	Hits, Misses, Dirtied, Written, Evictions int64
	RingDirtyEvictions, RingWALFlushes        int64
}

type poolStats struct {
	hits, misses, dirtied, written, evictions atomic.Int64
	ringDirtyEvictions, ringWALFlushes        atomic.Int64
}

// Pool is a fixed set of frames with a sharded page table and clock-sweep
// replacement with usage counts. Safe for concurrent use.
type Pool struct {
	st    Storage
	log   WAL
	bufs  []Buffer
	slab  []byte // every frame, in id order (frames of consecutive ids are adjacent)
	table pageTable
	hand  atomic.Uint64 // clock hand; the frame is hand % len(bufs)
	stats poolStats

	scratch sync.Pool // *[]byte page-sized copies for writes
}

// New returns a pool over st and log.
func New(st Storage, log WAL, opts Options) (*Pool, error) {
	if st == nil || log == nil {
		return nil, errors.New("buffer pool needs a storage manager and a WAL")
	}
	if opts.Frames < MinFrames {
		return nil, fmt.Errorf("buffer pool of %d frames: need at least %d", opts.Frames, MinFrames)
	}
	slab := vfs.AlignedBuffer(opts.Frames * page.Size)
	p := &Pool{st: st, log: log, bufs: make([]Buffer, opts.Frames), slab: slab}
	for i := range p.bufs {
		b := &p.bufs[i]
		b.pool = p
		b.id = int32(i)
		b.frame = page.Page(slab[i*page.Size : (i+1)*page.Size : (i+1)*page.Size])
	}
	p.table.init()
	p.scratch.New = func() any {
		b := vfs.AlignedBuffer(page.Size)
		return &b
	}
	return p, nil
}

// Frames is the pool size in frames.
func (p *Pool) Frames() int { return len(p.bufs) }

// Stats returns pool-wide counters.
func (p *Pool) Stats() Stats {
	return Stats{
		Hits: p.stats.hits.Load(), Misses: p.stats.misses.Load(),
		Dirtied: p.stats.dirtied.Load(), Written: p.stats.written.Load(),
		Evictions:          p.stats.evictions.Load(),
		RingDirtyEvictions: p.stats.ringDirtyEvictions.Load(),
		RingWALFlushes:     p.stats.ringWALFlushes.Load(),
	}
}

// Buffer is a pinned frame: the descriptor of one frame of the pool. Every
// successful Read, ReadOrZero or Extend must be paired with exactly one
// Release; two holders of the same page share one *Buffer.
type Buffer struct {
	pool  *Pool
	id    int32
	frame page.Page

	mu           sync.Mutex // header lock: every field below except content
	tag          Tag
	tagValid     bool // tag is in the page table
	valid        bool // frame holds the page's bytes
	dirty        bool
	justDirtied  bool // dirtied since the current write began
	readAhead    bool // read by a run for a later access, not accessed yet
	ioInProgress bool
	ioDone       chan struct{} // made by the first waiter, closed when the current IO ends
	refcount     int32
	usage        int32

	content sync.RWMutex
}

// Tag is the page this buffer holds.
func (b *Buffer) Tag() Tag { return b.tag }

// Page is the frame's bytes; read them under at least a share lock.
func (b *Buffer) Page() page.Page { return b.frame }

// Lock takes the exclusive content lock.
func (b *Buffer) Lock() { b.content.Lock() }

// Unlock releases the exclusive content lock.
func (b *Buffer) Unlock() { b.content.Unlock() }

// RLock takes a share content lock.
func (b *Buffer) RLock() { b.content.RLock() }

// RUnlock releases a share content lock.
func (b *Buffer) RUnlock() { b.content.RUnlock() }

// LSN is the page LSN read under the header lock, safe under a share
// content lock even while MarkDirtyHint runs on the same page.
func (b *Buffer) LSN() wal.LSN {
	b.mu.Lock()
	defer b.mu.Unlock()
	return wal.LSN(b.frame.LSN())
}

// Release unpins the buffer.
func (b *Buffer) Release() {
	b.mu.Lock()
	if b.refcount > 0 {
		b.refcount--
	}
	b.mu.Unlock()
}

// pinLocked adds a pin and bumps the usage count (header lock held): a
// Normal access counts up to MaxUsage, a ring or Revisit access only lifts
// 0 to 1.
func (b *Buffer) pinLocked(s *Strategy) {
	b.refcount++
	if s.ringed() || (s != nil && s.Kind == Revisit) {
		if b.usage == 0 {
			b.usage = 1
		}
	} else if b.usage < MaxUsage {
		b.usage++
	}
}

// MarkDirty marks the page changed (exclusive lock held). The first time a
// clean buffer is dirtied it charges Dirtied to s's counters.
func (b *Buffer) MarkDirty(s *Strategy) {
	b.mu.Lock()
	wasClean := !b.dirty
	b.dirty = true
	b.justDirtied = true
	b.mu.Unlock()
	if wasClean {
		b.pool.stats.dirtied.Add(1)
		s.counters().Add(usage.Dirtied, 1)
	}
}

// Resident reports whether tag's page is in the pool and, when it is, its usage count and
// whether it is dirty: for tests and diagnostics of the replacement policy (the answer may
// be stale as soon as it is returned).
func (p *Pool) Resident(tag Tag) (usageCount int, dirty, ok bool) {
	sh := p.table.shardFor(tag)
	sh.mu.RLock()
	id, found := sh.m[tag]
	sh.mu.RUnlock()
	if !found {
		return 0, false, false
	}
	b := &p.bufs[id]
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.tagValid || b.tag != tag || !b.valid {
		return 0, false, false
	}
	return int(b.usage), b.dirty, true
}
