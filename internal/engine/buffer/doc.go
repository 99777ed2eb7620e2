// Package buffer is the shared buffer pool, after PostgreSQL's bufmgr.c and
// freelist.c (our own code, simplified).
//
// # Structure
//
// A Pool owns N frames of page.Size bytes carved from one slab aligned for
// O_DIRECT (vfs.AlignedBuffer), and one descriptor (*Buffer) per frame. A
// descriptor holds the frame's Tag, its pin count (refcount), a usage count
// (0..MaxUsage), the valid, dirty and just-dirtied flags, an IO-in-progress
// flag with a channel closed when the IO ends, and the content lock (a
// sync.RWMutex). The header fields are guarded by the descriptor's header
// mutex; the page bytes by the content lock.
//
// The page table maps Tag -> frame index in 64 shards, each a map with its
// own RWMutex. Lock order: shard lock, then header mutex. The content lock
// is never taken while a header mutex or shard lock is held.
//
// # Invariants
//
//   - WAL before data: a dirty page is written only after the WAL is
//     durable up to its page LSN; the pool enforces it on every write
//     (eviction by clock or ring, FlushAll), not the callers.
//   - A pinned buffer is never evicted: a victim is taken only with
//     refcount 0, and re-tagged only while the evictor is its single pin.
//   - Only one IO per buffer at a time: two goroutines reading the same
//     missing page do one storage read; the second waits for the first.
//     A page is written with its content share lock held (so no WAL-logged
//     change, which needs the exclusive lock, can run during the write);
//     a hint-bit change during the write sets the just-dirtied flag, which
//     keeps the buffer dirty after the write.
//   - Page content changes only under the exclusive content lock, followed
//     by MarkDirty before the lock is released (the caller's side of the
//     protocol, see ARCHITECTURE.md); hint-only changes under a share lock
//     call MarkDirtyHint.
//
// # Replacement
//
// Clock sweep: the hand skips pinned buffers, decrements the usage count of
// unpinned ones and takes the first unpinned buffer with usage 0. A hit by a
// Normal access raises the usage count by one (up to MaxUsage); an access
// through a ring strategy only raises 0 to 1, as in PostgreSQL, so a large
// scan cannot make its pages look hot. So does a Revisit access, the second
// access of a statement to a page it has just counted (RevisitOf). If a whole sweep finds every buffer
// pinned, Read returns ErrNoUnpinnedBuffers.
//
// A ring strategy (BulkRead 256 KiB, BulkWrite 16 MiB, Vacuum of a chosen
// size; all capped at 1/8 of the pool) reuses its own small set of buffers:
// a miss takes the ring's next slot if that buffer is unpinned and its usage
// count is at most 1. If it is dirty, the WAL is flushed up to its page LSN
// (RingWALFlushes counts the flushes this forced) and it is written
// (RingDirtyEvictions) before reuse. Otherwise the clock sweep picks a
// victim, which takes the ring slot. Hits never enter the ring.
//
// # Runs: one system call for consecutive blocks
//
// A miss through a BulkRead or Vacuum ring whose previous access was the
// block just before (a sequential scan: the vacuum's heap passes, a B-tree
// scan in block order, Tx.Scan) reads a run of up to MaxRunBlocks blocks,
// at most half the ring, with one storage ReadRun into the strategy's
// aligned staging buffer (so O_DIRECT works). Each following block not
// already mapped gets a victim, as a single miss would; all of the run's
// victims are chosen (a dirty one written) before any block is installed
// with IO in progress, so a foreground reader of one of the run's blocks
// waits at most for the run's one read, never behind the writes of its
// later victims. A block already in the pool (or mapped by another reader
// while the victims were chosen) is read over but its bytes are dropped,
// since the pool's copy may be newer.
// Each page is verified by the storage manager and copied into its frame;
// a block the read did not reach (end of the fork) or that failed
// verification has its IO aborted, so a later Read reads it alone and
// reports the error naming that block. The read-ahead buffers are left
// unpinned with a read-ahead flag: their first access counts as the miss
// it stands for, so Hits and Misses (and the vacuum's cost accounting) are
// what single-block reads would have charged; ReadBytes counts what was
// read.
//
// Before such a run takes its victims, the ring slots it is about to reuse
// are cleaned in one storage WriteRun when they hold dirty pages of
// consecutive blocks (as the ring holds after a vacuum lap): each buffer is
// pinned, share-locked without waiting and put under IO as a single write
// is, the WAL is flushed once up to the highest page LSN, and each buffer
// is marked clean unless dirtied meanwhile. A slot that does not fit ends
// the run and is written alone at eviction, as is every slot if the run
// write fails. Written and RingDirtyEvictions count pages, RingWALFlushes
// flushes, as for single writes.
//
// # Hint bits and torn pages
//
// Pages carry checksums, so a torn write of a page whose only change is a
// hint bit would be detected as corruption and could not be repaired from
// the WAL. MarkDirtyHint therefore follows PostgreSQL's wal_log_hints rule:
// if the buffer is not already dirty and its page LSN is <= the WAL's redo
// pointer (the page has not been imaged since the last checkpoint began), it
// first inserts an RmgrXLOG record of kind XLOGFPIForHint with one block
// reference carrying the page, for which wal.Insert stores a full-page image,
// and sets the page LSN to that record's end. Because this runs under a
// share content lock, the page LSN written here and every LSN read by the
// pool take the buffer header mutex, and both the image passed to the WAL
// and the bytes passed to Storage.Write are copies made under that mutex.
// Readers outside the pool that read the page LSN hold a content lock and
// must not run concurrently with MarkDirtyHint on the same page; in this
// engine they hold the exclusive lock (WAL insertion, redo).
//
// # Counters
//
// Read charges Hits or Misses to the strategy's usage counters (the storage
// manager charges ReadBytes); MarkDirty and MarkDirtyHint charge Dirtied on a
// clean-to-dirty transition; a write charges Written (and the storage
// manager WriteBytes) to the strategy whose access caused it. Pool-wide
// totals are in Stats.
package buffer
