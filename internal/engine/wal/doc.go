// Package wal is the write-ahead log and the control file.
//
// # Log, LSNs and segments
//
// The log is one infinite byte stream. An LSN is a byte position in it; a
// record's LSN (returned by Insert, stored in the pages it changed) is the
// position just past its end. The stream is cut into segment files of
// SegmentSize bytes (16 MiB by default; every opener of a directory must use
// the same size):
//
//	<dir>/wal/<timeline><log><seg>   (8 upper-case hex digits each)
//
// named as PostgreSQL names its WAL segments (SegmentName): timeline 1,
// log = n / (4 GiB / SegmentSize), seg = n % (4 GiB / SegmentSize), so with
// 16 MiB segments segment n = LSN / 16 MiB has PostgreSQL's own name and
// byte layout by position (pg_receivewal writes the same files). A
// directory written before this naming (16 hex digits of the start LSN) is
// refused (ErrOldSegmentNames) until RenameOldSegments (`vacuum-runner
// upgrade`) renames it. Every segment file is SegmentSize bytes; another
// size is a segment size mismatch.
//
// Segment n covers LSNs [n*SegmentSize, (n+1)*SegmentSize). Records are not
// aligned and freely cross segment boundaries. A new segment is created
// zero-filled to its full size (written as <name>.tmp, fsynced, renamed, the
// directory fsynced), so a crash never leaves a short segment.
//
// Once writing passes the middle of a segment, the next one is created in
// the background (same steps; skipped if it exists), so the writer rarely waits
// for a zero-fill and its fsyncs (Options.NoPrealloc turns this off). Open
// keeps such a segment after the end of the log when it is still all zero
// (it can hide nothing stale), and removes a leftover .tmp.
//
// RemoveBefore recycles up to Options.RecycleSegments old segments by
// renaming them to future segment names (as PostgreSQL does), so the log
// rarely pays for zero-filling. A recycled segment still holds stale
// records of an earlier cycle; they can never be mistaken for new ones
// because every record carries the start LSN of its predecessor (see
// below), and stale records carry LSNs of another cycle. Every write also
// puts a zero length field just past the last record it wrote (when that
// fits in an existing segment), so a log that ends inside a recycled
// segment reads as a clean end.
//
// LSN 0 is invalid. A fresh log starts at FirstLSN: the first FirstLSN bytes
// of segment 0 are reserved and stay zero. Open(end=0) means FirstLSN.
//
// # Record layout (all integers little-endian)
//
//	offset size field
//	     0    4 total length   bytes of the whole record, header included
//	     4    4 CRC32C         Castagnoli CRC over bytes [8, total length)
//	     8    8 prev LSN       start LSN of the previous record, or of this
//	                           record itself at a restart point
//	    16    8 xid            writing transaction, 0 if none
//	    24    1 rmgr           resource manager (RmgrID, never 0)
//	    25    1 info           record kind within the rmgr
//	    26    1 nblocks        number of block references that follow
//	    27    1 flags          reserved, 0
//	    28      block refs     nblocks times, see below
//	     .    4 main length
//	     .    n main data
//
// One block reference:
//
//	size field
//	   4 rel           storage.RelFileNode
//	   1 fork          storage.ForkNum
//	   1 flags         0x01 has image, 0x02 will init, 0x04 has data
//	   4 block         storage.BlockNumber
//	   4 data length   0 unless "has data"
//	                   if "has image":
//	   2   image length    bytes stored = page.Size - hole length
//	   2   hole offset     start of the omitted run of zeros
//	   2   hole length     length of the omitted run of zeros
//	   n   image bytes     page[0:hole offset] ++ page[hole offset+hole length:]
//	   n data bytes
//
// A full-page image omits the page's free space between lower and upper (the
// "hole") when it is all zeros, as PostgreSQL does; Decode restores it by
// zero-filling and always returns full page.Size images. Decode bounds every
// length by the remaining input and by MaxRecordSize, rejects unknown flags
// and trailing bytes, and never panics.
//
// # Validity and the end of the log
//
// A Reader validates, for each record: the length field (0 = clean end of
// the log; otherwise between MinRecordSize and MaxRecordSize), the whole
// record being present, the CRC, and the prev-LSN link: it must equal the
// start of the record read before it, or the record's own start (a restart
// point); for the first record a Reader returns, which it cannot check, it
// must at least lie before it. It returns io.EOF at a clean end (a zero
// length field, or no data at all where the next record would start) and
// *CorruptRecordError, naming the start LSN of the bad record, for a torn
// or damaged one (including stale bytes of a recycled segment). Recovery
// replays up to that point and reopens the Log there.
//
// Open(end) makes the log continue at end and guarantees that nothing stale
// can be read past it later: it zeroes (and fsyncs) the rest of the segment
// holding end and removes every segment after it (except all-zero ones,
// which hold nothing). The first record written
// after Open is a restart point (its prev LSN is its own start), because
// the Log does not know where the record ending at end began; all later
// records link normally. A self-link cannot be forged by stale data: an old
// record's self-link names the position it was written at in its own cycle.
//
// Open(end) with Options.KeepSpares, which the engine sets only when end is
// a clean shutdown's end, keeps the segments after end: nothing was written
// past a clean end, so they are spares, all zero or recycled at a
// checkpoint, and a recycled segment holds only records of segments that
// ended before a redo pointer. Their prev links point before that redo
// pointer, so they can neither continue the chain read from the current
// redo pointer nor pass ResumeAfterEnd's check (a link at or after the
// stop). After a crash the end is not clean (records of the same cycle may
// lie past the durable end), and Open removes them as above.
// SpareSegmentsFor sizes RecycleSegments from the checkpoint distance.
//
// # Full-page images
//
// Insert stores an image of BlockRef.Page when the page's LSN (before the
// caller sets the new one) is <= the redo pointer and WillInit is false, or
// when the writer set BlockRef.Image itself (a forced image). After Open the
// redo pointer is end, so the first change of every page after a restart is
// imaged, which is always safe.
//
// # Durability
//
// Insert only appends to an in-memory buffer (written out to the files,
// without fsync, once it grows past a threshold). Flush writes everything
// inserted so far and fsyncs every segment written since the last flush;
// concurrent callers wait for one flusher (group flush). A failed write or
// fsync is sticky: the log refuses every later Insert and Flush with an
// error wrapping it, because the kernel may have dropped the dirty data.
//
// # Control file
//
// <dir>/control, 48 bytes, replaced atomically (control.tmp, fsync, rename,
// fsync dir):
//
//	offset size field
//	     0    4 magic           "VOCF"
//	     4    4 layout version  ControlLayoutVersion
//	     8    4 Version         data directory format version
//	    12    1 State
//	    13    3 reserved        0
//	    16    8 CheckpointLSN
//	    24    8 RedoLSN
//	    32    8 NextXID
//	    40    4 NextOID
//	    44    4 CRC32C          over bytes [0, 44)
package wal
