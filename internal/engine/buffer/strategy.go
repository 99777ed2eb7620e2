package buffer

import (
	"errors"
	"sync/atomic"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/usage"
)

// StrategyKind selects an access strategy.
type StrategyKind int

// Access strategies, as in PostgreSQL.
const (
	Normal    StrategyKind = iota // use the shared pool
	BulkRead                      // 256 KiB ring for large sequential scans
	BulkWrite                     // 16 MiB ring for bulk loads
	Vacuum                        // ring of a given size; 0 = no ring
	// Revisit uses the shared pool for a page the caller's statement has just accessed
	// (the row an UPDATE or DELETE found, read again to change it): a hit does not raise
	// the usage count past 1, since it is not a new access (see RevisitOf).
	Revisit
)

// Ring sizes in bytes.
const (
	BulkReadRingBytes  = 256 << 10
	BulkWriteRingBytes = 16 << 20
	MinVacuumRingBytes = 128 << 10
)

// Strategy is an access strategy plus the counters its accesses charge.
// One Strategy belongs to one goroutine at a time: its ring slots, its run
// buffers and its staging buffers are that goroutine's scratch state, and a
// second goroutine using them meanwhile can leave a page under IO for ever
// (a read that waits for it then never returns). The pool checks it: a
// Read, ReadOrZero, Prefetch or Extend through a Strategy that another call
// is still using fails with ErrStrategyShared and changes nothing.
//
// A Strategy built as a literal (without NewStrategy) has no ring unless
// its Kind is BulkRead or BulkWrite, whose default rings are set up on the
// first access.
type Strategy struct {
	Kind  StrategyKind
	Usage *usage.Counters // may be nil

	ringReady bool
	ring      []int32 // frame ids; -1 = slot not filled yet
	cur       int     // slot used by the last ring access
	plain     *Strategy
	revisit   *Strategy
	busy      atomic.Bool // a pool call is using the strategy (enter, leave)

	// Sequential-read detection and the staging buffer of multi-block
	// reads (readrun.go).
	seqValid bool
	seqRel   storage.RelFileNode
	seqFork  storage.ForkNum
	seqNext  storage.BlockNumber
	stage    []byte
	wstage   []byte
	runBufs  []*Buffer
}

// Plain returns a strategy without a ring that charges the same counters
// (nil for a nil s). Callers use it for the visibility and free space map
// pages a ringed scan touches on every heap page, which PostgreSQL reads
// outside the ring: in a ring slot the one hot map page would be evicted,
// written and read again on every lap. The result is cached in s.
func (s *Strategy) Plain() *Strategy {
	if s == nil {
		return nil
	}
	if s.Kind == Normal || (s.ringReady && !s.ringed()) {
		return s
	}
	if s.plain == nil {
		s.plain = &Strategy{Kind: Normal, Usage: s.Usage, ringReady: true}
	}
	return s.plain
}

// RevisitOf returns the strategy to read again a page that an access through s (nil:
// Normal) has just counted: a Revisit strategy charging s's counters, or s itself when it
// has a ring (whose hits already do not raise the usage count past 1). PostgreSQL's
// PinBuffer raises a buffer's usage count only on a backend's first pin of it, and its
// executor keeps the page of the row it found pinned while heap_update and heap_delete
// pin it again, so changing a row does not make its page look hotter than reading it did.
// This engine's statements collect rows and then change them, so the second access is
// marked instead. Without it a bulk UPDATE (two pins per row, the fetch and the update)
// raised every page it changed to the maximum usage count, as hot as the pages its new
// versions filled, and the clock sweep then evicted both alike.
func RevisitOf(s *Strategy) *Strategy {
	switch {
	case s == nil:
		return &Strategy{Kind: Revisit, ringReady: true}
	case s.Kind == Revisit || s.ringed():
		return s
	}
	if s.revisit == nil {
		s.revisit = &Strategy{Kind: Revisit, Usage: s.Usage, ringReady: true}
	}
	return s.revisit
}

// NewStrategy returns a strategy; ringBytes applies to Vacuum (0 = no
// ring; otherwise clamped to [128 KiB, pool/8]). u may be nil.
func (p *Pool) NewStrategy(kind StrategyKind, ringBytes int64, u *usage.Counters) *Strategy {
	s := &Strategy{Kind: kind, Usage: u}
	s.setupRing(p, ringBytes)
	return s
}

// RingBuffers is how many buffers the strategy's ring holds (0 = none).
func (s *Strategy) RingBuffers() int {
	if s == nil {
		return 0
	}
	return len(s.ring)
}

// ringBuffersFor is the ring size in frames for kind in a pool of frames.
func ringBuffersFor(kind StrategyKind, ringBytes int64, frames int) int {
	var bytes int64
	switch kind {
	case BulkRead:
		bytes = BulkReadRingBytes
	case BulkWrite:
		bytes = BulkWriteRingBytes
	case Vacuum:
		if ringBytes <= 0 {
			return 0
		}
		bytes = max(ringBytes, MinVacuumRingBytes)
	default:
		return 0
	}
	n := bytes / page.Size
	// Like PostgreSQL, never let a ring take more than 1/8 of the pool.
	n = min(n, int64(frames/8))
	return int(max(n, 1))
}

func (s *Strategy) setupRing(p *Pool, ringBytes int64) {
	s.ringReady = true
	n := ringBuffersFor(s.Kind, ringBytes, p.Frames())
	if n == 0 {
		s.ring = nil
		return
	}
	s.ring = make([]int32, n)
	for i := range s.ring {
		s.ring[i] = -1
	}
	s.cur = n - 1
}

// ErrStrategyShared is returned by a pool call through a Strategy that
// another call, from another goroutine, is still using. It is a bug of the
// caller (see Strategy), reported instead of the hang it could cause.
var ErrStrategyShared = errors.New("buffer strategy used by two goroutines at once")

// enter marks s as used by the calling pool operation; false means another
// operation is using it (the caller fails with ErrStrategyShared). A nil
// Strategy holds no state and is always entered. Each successful enter is
// paired with leave.
func (s *Strategy) enter() bool { return s == nil || s.busy.CompareAndSwap(false, true) }

// leave ends the operation enter started (nil-safe).
func (s *Strategy) leave() {
	if s != nil {
		s.busy.Store(false)
	}
}

// ringed reports whether accesses through s use a ring (nil-safe).
func (s *Strategy) ringed() bool { return s != nil && len(s.ring) > 0 }

// counters is s.Usage, nil-safe.
func (s *Strategy) counters() *usage.Counters {
	if s == nil {
		return nil
	}
	return s.Usage
}

// prepare sets up the default ring of a literal BulkRead/BulkWrite
// strategy on its first use.
func (s *Strategy) prepare(p *Pool) {
	if s != nil && !s.ringReady {
		s.setupRing(p, 0)
	}
}

// ringNext advances the ring and returns its next buffer pinned if it may be
// reused (unpinned, usage <= 1); nil means "take a clock victim for this
// slot" (see ringSet).
func (s *Strategy) ringNext(p *Pool) *Buffer {
	s.cur = (s.cur + 1) % len(s.ring)
	id := s.ring[s.cur]
	if id < 0 || int(id) >= len(p.bufs) {
		return nil
	}
	b := &p.bufs[id]
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.refcount == 0 && b.usage <= 1 {
		b.refcount = 1
		return b
	}
	return nil
}

// ringSet remembers b as the current ring slot's buffer.
func (s *Strategy) ringSet(b *Buffer) { s.ring[s.cur] = b.id }
