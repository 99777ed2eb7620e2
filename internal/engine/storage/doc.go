// Package storage is the relation storage manager (PostgreSQL's md.c): it
// maps (relfilenode, fork, block) to a segment file and an offset, and reads
// and writes whole 8 KiB pages there through a vfs.FS.
//
// # Files
//
//	<dir>/base/<relfilenode>[_fsm|_vm][.<segment>]
//
// The main fork has no suffix, the free space map "_fsm", the visibility
// map "_vm". Segment 0 has no ".N" suffix; segment N > 0 holds blocks
// N*BlocksPerSegment .. (N+1)*BlocksPerSegment-1. Every segment but the
// last is exactly SegmentSize bytes (1 GiB by default; tests use a few
// pages). A fork's size in blocks is the sum over its segments, counting
// segments until the first one shorter than SegmentSize; a trailing partial
// page (an extension torn by a crash) is not counted and is overwritten by
// the next extension. Blocks are stored as is: the page format (checksum,
// header) is package page's.
//
// # Invariants
//
//   - Write sets the page checksum (with the block number mixed in) on a
//     private aligned copy; the caller's buffer is not modified. An
//     all-zero page is written without a checksum and reads back as new.
//     Write refuses a page that fails page.Validate: nothing is written
//     that Read would reject.
//   - Read verifies the checksum and, for a page that is not all zeros,
//     page.Validate; either failure is a *CorruptPageError naming the
//     segment file and the block number within the fork. A block past the
//     end of the fork is an error wrapping ErrBeyondEnd.
//   - Write of block NBlocks extends the fork (as Extend does with a zero
//     page); a write further past the end is refused, so files never have
//     holes that would confuse the segment arithmetic.
//   - Nothing is durable until Sync (one fork) or SyncAll (every file
//     written, extended or truncated since the last sync, then the base
//     directory when files were created or removed in it). A failed fsync
//     is sticky: every later change returns a *SyncFailedError wrapping the
//     first failure, since the kernel may have dropped the unwritten pages;
//     only a restart with WAL replay can recover. Reads keep working.
//   - One process owns a data directory (the engine holds its lock), so a
//     fork's size is cached after the first look and kept up to date by
//     Extend, Write, Truncate and Drop.
//
// # Accounting
//
// ReadRun and WriteRun move a run of consecutive blocks with one system
// call per segment (the buffer pool's sequential reads and ring evictions);
// they verify, validate and checksum each page as Read and WritePrivate do,
// a run never extends a fork, and ReadRun stops at the end of the fork, at
// the end of the segment, or at a page that fails verification (named in
// the error), returning the good pages before it.
//
// Read and ReadRun charge usage.ReadBytes, Write, WriteRun and Extend usage.WriteBytes, on the
// caller's counters (nil allowed). Pages written (usage.Written) are
// charged by the buffer pool, which decides what a page write is, so they
// are not counted twice.
//
// # Concurrency and files
//
// A Manager is safe for concurrent use. Segment files are opened on first
// use and cached until Truncate/Drop remove them or Close; block I/O runs
// concurrently (pread/pwrite), extensions of one fork are serialized.
// With Options.Direct the files are opened with vfs.ODirect; all I/O uses
// page-sized, aligned private buffers and page-aligned offsets, so callers
// need not align their own buffers (except for ReadRun and WriteRun, which
// refuse an unaligned buffer under O_DIRECT rather than copy a whole run).
package storage
