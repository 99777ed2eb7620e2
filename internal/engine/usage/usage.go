// Package usage holds the resource counters that every page access, page
// write and WAL insertion charges. A vacuum worker owns one Counters value and
// passes it down through the buffer pool and the WAL, so the throttle can
// charge cost per page access and the report can say exactly what this
// vacuum read, dirtied, wrote and logged. Counters may be chained: every
// increment is also applied to Parent, so a run-wide total and a per-table
// figure are kept at the same time without a second pass.
package usage

import "sync/atomic"

// Counters are monotonically increasing, safe for concurrent use, and may be
// nil at every call site (a nil *Counters ignores increments).
type Counters struct {
	// Parent, when set, receives every increment too.
	Parent *Counters

	Hits               atomic.Int64 // buffer found in the pool
	Misses             atomic.Int64 // buffer read from storage
	Dirtied            atomic.Int64 // buffer went from clean to dirty
	Written            atomic.Int64 // pages written to storage by this owner
	ReadBytes          atomic.Int64 // bytes read from relation files
	WriteBytes         atomic.Int64 // bytes written to relation files
	WALRecords         atomic.Int64 // WAL records inserted
	WALBytes           atomic.Int64 // WAL bytes inserted (record sizes incl. images)
	WALFPIs            atomic.Int64 // full-page images inserted
	WALFlushes         atomic.Int64 // WAL fsyncs this owner caused
	WALWriteBytes      atomic.Int64 // WAL bytes this owner's flushes wrote to disk
	RingDirtyEvictions atomic.Int64 // dirty ring buffers written before reuse
	RingWALFlushes     atomic.Int64 // of those, how many had to flush WAL first
}

// Field names one counter, for Add.
type Field int

// The counter fields.
const (
	Hits Field = iota
	Misses
	Dirtied
	Written
	ReadBytes
	WriteBytes
	WALRecords
	WALBytes
	WALFPIs
	WALFlushes
	WALWriteBytes
	RingDirtyEvictions
	RingWALFlushes
)

func (c *Counters) field(f Field) *atomic.Int64 {
	switch f {
	case Hits:
		return &c.Hits
	case Misses:
		return &c.Misses
	case Dirtied:
		return &c.Dirtied
	case Written:
		return &c.Written
	case ReadBytes:
		return &c.ReadBytes
	case WriteBytes:
		return &c.WriteBytes
	case WALRecords:
		return &c.WALRecords
	case WALBytes:
		return &c.WALBytes
	case WALFPIs:
		return &c.WALFPIs
	case WALFlushes:
		return &c.WALFlushes
	case WALWriteBytes:
		return &c.WALWriteBytes
	case RingDirtyEvictions:
		return &c.RingDirtyEvictions
	case RingWALFlushes:
		return &c.RingWALFlushes
	}
	return nil
}

// Add adds n to field f of c and of every ancestor. A nil c is a no-op.
func (c *Counters) Add(f Field, n int64) {
	for ; c != nil; c = c.Parent {
		if a := c.field(f); a != nil {
			a.Add(n)
		}
	}
}

// Reading is a plain copy of Counters at one moment.
type Reading struct {
	Hits, Misses, Dirtied, Written     int64
	ReadBytes, WriteBytes              int64
	WALRecords, WALBytes, WALFPIs      int64
	WALFlushes, WALWriteBytes          int64
	RingDirtyEvictions, RingWALFlushes int64
}

// Read reads every counter (each atomically; the set is not a
// transaction, which is fine for rates and reports).
func (c *Counters) Read() Reading {
	if c == nil {
		return Reading{}
	}
	return Reading{
		Hits: c.Hits.Load(), Misses: c.Misses.Load(), Dirtied: c.Dirtied.Load(), Written: c.Written.Load(),
		ReadBytes: c.ReadBytes.Load(), WriteBytes: c.WriteBytes.Load(),
		WALRecords: c.WALRecords.Load(), WALBytes: c.WALBytes.Load(), WALFPIs: c.WALFPIs.Load(),
		WALFlushes: c.WALFlushes.Load(), WALWriteBytes: c.WALWriteBytes.Load(),
		RingDirtyEvictions: c.RingDirtyEvictions.Load(), RingWALFlushes: c.RingWALFlushes.Load(),
	}
}

// Sub returns s - o field by field (the usage between two snapshots).
func (s Reading) Sub(o Reading) Reading {
	return Reading{
		Hits: s.Hits - o.Hits, Misses: s.Misses - o.Misses, Dirtied: s.Dirtied - o.Dirtied, Written: s.Written - o.Written,
		ReadBytes: s.ReadBytes - o.ReadBytes, WriteBytes: s.WriteBytes - o.WriteBytes,
		WALRecords: s.WALRecords - o.WALRecords, WALBytes: s.WALBytes - o.WALBytes, WALFPIs: s.WALFPIs - o.WALFPIs,
		WALFlushes: s.WALFlushes - o.WALFlushes, WALWriteBytes: s.WALWriteBytes - o.WALWriteBytes,
		RingDirtyEvictions: s.RingDirtyEvictions - o.RingDirtyEvictions, RingWALFlushes: s.RingWALFlushes - o.RingWALFlushes,
	}
}

// Add returns s + o field by field (the usage of two stretches together).
func (s Reading) Add(o Reading) Reading {
	return Reading{
		Hits: s.Hits + o.Hits, Misses: s.Misses + o.Misses, Dirtied: s.Dirtied + o.Dirtied, Written: s.Written + o.Written,
		ReadBytes: s.ReadBytes + o.ReadBytes, WriteBytes: s.WriteBytes + o.WriteBytes,
		WALRecords: s.WALRecords + o.WALRecords, WALBytes: s.WALBytes + o.WALBytes, WALFPIs: s.WALFPIs + o.WALFPIs,
		WALFlushes: s.WALFlushes + o.WALFlushes, WALWriteBytes: s.WALWriteBytes + o.WALWriteBytes,
		RingDirtyEvictions: s.RingDirtyEvictions + o.RingDirtyEvictions, RingWALFlushes: s.RingWALFlushes + o.RingWALFlushes,
	}
}
