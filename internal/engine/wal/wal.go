package wal

import (
	"errors"
	"fmt"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
)

// LSN is a position in the log.
type LSN uint64

// RmgrID names the resource manager that owns a record's redo.
type RmgrID uint8

// Resource managers.
const (
	RmgrXLOG    RmgrID = 1 // checkpoints, full-page-image-only records
	RmgrXact    RmgrID = 2 // commit, abort
	RmgrStorage RmgrID = 3 // relation file create, abandon (the engine's relfile.go)
	RmgrHeap    RmgrID = 4
	RmgrBtree   RmgrID = 5
	RmgrVM      RmgrID = 6
)

// BlockRef is one page a record changes.
type BlockRef struct {
	Rel   storage.RelFileNode
	Fork  storage.ForkNum
	Block storage.BlockNumber

	// Page is the page after the change (writer side only). The caller
	// holds its exclusive content lock and has NOT yet set its LSN, so
	// Page.LSN() is the previous LSN: if it is <= the redo pointer of the
	// last checkpoint, Insert stores a full image of Page.
	Page page.Page
	// WillInit says redo rebuilds the page from Data alone: never an image.
	WillInit bool
	// Data is per-block redo data for the owning resource manager.
	Data []byte

	// Image is the full-page image (page.Size bytes) on the reader side,
	// nil when none. A writer may set it to force an image (for example a
	// hint-bit "FPI for hint" record); Insert then stores it whatever the
	// page LSN.
	Image []byte
}

// Record is one WAL record.
type Record struct {
	Rmgr   RmgrID
	Info   uint8  // record kind within the resource manager
	XID    uint64 // transaction that wrote it, 0 if none
	Blocks []BlockRef
	Main   []byte // record-level data

	// PrevLSN is the start of the previous record (0 = unknown). Insert
	// sets it in the encoding; Encode uses it as given; Decode sets it.
	PrevLSN LSN

	// Set by the reader.
	StartLSN LSN // where the record begins
	EndLSN   LSN // where it ends (the LSN pages get)
}

// CorruptRecordError reports where valid WAL ends: a torn or damaged
// record. Replay stops there.
type CorruptRecordError struct {
	LSN    LSN
	Reason string
}

func (e *CorruptRecordError) Error() string {
	return fmt.Sprintf("WAL ends at LSN %X: %s", uint64(e.LSN), e.Reason)
}

// Options configure a Log.
type Options struct {
	SegmentSize int64 // 0 = 16 MiB
	// RecycleSegments is how many segments RemoveBefore keeps for reuse
	// (renamed to future segment names, so new segments need no zero-fill)
	// instead of deleting them: 0 = DefaultRecycleSegments, < 0 = none.
	RecycleSegments int
	// NoPrealloc disables creating the next segment in the background when
	// a segment is opened for writing (the writer then creates each new
	// segment itself, zero-fill and fsyncs included, when it reaches it).
	NoPrealloc bool
	// TailAside, for Open: a directory (created by the caller) where the
	// log tail Open discards is kept instead of destroyed: a copy of the
	// end's segment as it was, and the later segments moved there. The
	// engine sets it when recovery ended at a damaged record.
	TailAside string
	// KeepSpares, for Open: end is the end of a clean shutdown, so every
	// segment after it is a spare, either created ahead of need (all zero)
	// or recycled at a checkpoint (stale records of segments wholly before
	// a redo pointer, which never link into the log: see the package
	// documentation). Open keeps them for reuse instead of removing the
	// recycled ones. The caller must not set it after a crash: a segment
	// after a crash's end may hold records of the same cycle written past
	// the durable end, which could link into the records written next.
	KeepSpares bool
	Logf       func(format string, args ...any)
}

// Stats are the log-wide counters.
type Stats struct {
	Records, Bytes, FPIs, FPIBytes int64
	Flushes                        int64 // fsyncs of WAL files
	WriteBytes                     int64 // bytes written to WAL files
}

// DefaultSegmentSize is the size of a WAL segment file when
// Options.SegmentSize is 0.
const DefaultSegmentSize = 16 << 20

// Segment size bounds accepted by Open and NewReader.
const (
	MinSegmentSize = 4 << 10
	MaxSegmentSize = 1 << 30
)

// FirstLSN is where a fresh log starts; the bytes before it in segment 0
// are reserved (zero). LSN 0 is never a valid record position.
const FirstLSN LSN = 32

// ErrClosed is returned by operations on a closed Log.
var ErrClosed = errors.New("wal: log is closed")

func (o Options) segmentSize() (int64, error) {
	s := o.SegmentSize
	if s == 0 {
		return DefaultSegmentSize, nil
	}
	if s < MinSegmentSize || s > MaxSegmentSize {
		return 0, fmt.Errorf("wal: segment size %d outside [%d, %d]", s, MinSegmentSize, MaxSegmentSize)
	}
	return s, nil
}

// DefaultRecycleSegments is the number of segments kept for reuse when
// Options.RecycleSegments is 0.
const DefaultRecycleSegments = 4

// Bounds of SpareSegmentsFor.
const (
	// MaxSpareSegments caps the spares kept for reuse whatever the
	// checkpoint distance: 64 segments of 16 MiB are 1 GiB, PostgreSQL's
	// default max_wal_size, past which PostgreSQL removes rather than
	// recycles too.
	MaxSpareSegments = 64
)

// SpareSegmentsFor is Options.RecycleSegments for a log checkpointed every
// checkpointBytes of WAL (<= 0: no automatic checkpoints): enough spares
// for the WAL of two checkpoint distances, as PostgreSQL keeps about
// (1 + checkpoint_completion_target) distances' worth (XLOGfileslop), so
// that a writer between two checkpoints writes into recycled segments and
// rarely zero-fills and fsyncs a new one. At least DefaultRecycleSegments,
// at most MaxSpareSegments.
func SpareSegmentsFor(checkpointBytes, segmentSize int64) int {
	if segmentSize <= 0 {
		segmentSize = DefaultSegmentSize
	}
	if checkpointBytes <= 0 {
		return DefaultRecycleSegments
	}
	n := 2 * ((checkpointBytes + segmentSize - 1) / segmentSize)
	return int(min(max(n, DefaultRecycleSegments), MaxSpareSegments))
}

func (o Options) recycleSegments() int {
	switch {
	case o.RecycleSegments < 0:
		return 0
	case o.RecycleSegments == 0:
		return DefaultRecycleSegments
	}
	return o.RecycleSegments
}

func (o Options) logf(format string, args ...any) {
	if o.Logf != nil {
		o.Logf(format, args...)
	}
}
