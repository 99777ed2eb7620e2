package tidstore

import (
	"errors"
	"fmt"
	"math"
	"math/bits"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
)

// MaxOffset is the largest line pointer number a heap page can hold: every
// byte after the header given to 4-byte line pointers. AddBlock rejects
// larger offsets, which bounds a block's bitmap at maxBlockWords words.
const MaxOffset = page.OffsetNumber((page.Size - page.HeaderSize) / page.ItemIDSize)

const (
	blocksPerChunk = 64 // one present-bit per block in chunk.present
	chunkShift     = 6
	maxBlockWords  = (int(MaxOffset) + 63) / 64

	// auxFlag marks chunk.layout as an index into aux (variable widths).
	auxFlag = 1 << 31
	// maxAuxPerBlock is the most aux entries one AddBlock appends: turning
	// a full uniform chunk into a variable one writes 64 starts and the end.
	maxAuxPerBlock = blocksPerChunk + 1

	// Segment sizes, chosen so the allocator serves each exactly:
	// 8192 words = 64 KiB, 1024 chunks x 24 B = 24 KiB (a size class),
	// 4096 aux entries x 2 B = 8 KiB.
	wordSegShift  = 13
	chunkSegShift = 10
	auxSegShift   = 12
)

// ErrOutOfOrder is returned (wrapped) by AddBlock when a block number is not
// greater than the previous one.
var ErrOutOfOrder = errors.New("tidstore: blocks must be added in strictly increasing order")

// ErrInvalidOffset is returned (wrapped) by AddBlock for offset 0 or an
// offset above MaxOffset.
var ErrInvalidOffset = errors.New("tidstore: invalid offset number")

// ErrTooLarge is returned when the bitmap words would exceed 2^32 words
// (32 GiB): the chunk's base index is a uint32.
var ErrTooLarge = errors.New("tidstore: store exceeds 2^32 bitmap words")

// chunk describes up to 64 consecutive blocks (block>>6 == key). The
// bitmaps of its present blocks are stored back to back in words from
// base, in block order. layout is either the common width in words of every
// present block's bitmap (uniform chunk) or auxFlag|i where aux[i+r] is the
// start of the r-th present block relative to base and aux[i+popcount] its
// end (variable chunk).
type chunk struct {
	present uint64
	key     uint32
	base    uint32
	layout  uint32
}

// Store is a set of dead TIDs. Build it with AddBlock in increasing block
// order from one goroutine; once built, Contains, Iterate, Len and
// MemoryBytes may be called from any number of goroutines at once (they
// only read). The zero value is an empty store ready to use.
type Store struct {
	chunks segvec[chunk]
	words  segvec[uint64]
	aux    segvec[uint16]

	ntids   int
	nblocks int
	last    uint32 // last block added, valid when nblocks > 0
}

// New returns an empty store.
func New() *Store {
	s := &Store{}
	s.init()
	return s
}

func (s *Store) init() {
	s.chunks = newSegvec[chunk](chunkSegShift)
	s.words = newSegvec[uint64](wordSegShift)
	s.aux = newSegvec[uint16](auxSegShift)
}

// AddBlock adds the dead offsets offs of block blk. Blocks must come in
// strictly increasing order; offsets may come in any order and may repeat.
// An empty offs adds nothing. On error the store is unchanged.
func (s *Store) AddBlock(blk uint32, offs []page.OffsetNumber) error {
	if len(offs) == 0 {
		return nil
	}
	if s.nblocks > 0 && blk <= s.last {
		return fmt.Errorf("add block %d after block %d: %w", blk, s.last, ErrOutOfOrder)
	}
	var maxOff page.OffsetNumber
	for _, o := range offs {
		if o == page.InvalidOffset || o > MaxOffset {
			return fmt.Errorf("add block %d offset %d (valid 1..%d): %w", blk, o, MaxOffset, ErrInvalidOffset)
		}
		maxOff = max(maxOff, o)
	}
	if s.words.shift == 0 {
		s.init()
	}
	w := (int(maxOff)-1)/64 + 1
	if s.words.n+w > math.MaxUint32 {
		return fmt.Errorf("add block %d: %w", blk, ErrTooLarge)
	}

	key := blk >> chunkShift
	if s.chunks.n == 0 || s.chunks.at(s.chunks.n-1).key != key {
		s.chunks.push(chunk{key: key, base: uint32(s.words.n), layout: uint32(w)})
	}
	c := s.chunks.at(s.chunks.n - 1)
	rank := bits.OnesCount64(c.present)
	switch {
	case rank == 0:
		c.layout = uint32(w)
	case c.layout&auxFlag == 0 && int(c.layout) != w:
		// Widths differ: record every present block's start, then the end.
		cw := int(c.layout)
		c.layout = auxFlag | uint32(s.aux.n)
		for r := 0; r <= rank; r++ {
			s.aux.push(uint16(r * cw))
		}
	}
	if c.layout&auxFlag != 0 {
		// The chunk's last aux entry is its end, which is this block's start.
		end := int(s.aux.get(s.aux.n-1)) + w
		s.aux.push(uint16(end))
	}
	c.present |= 1 << (blk & (blocksPerChunk - 1))

	start := s.words.n
	for range w {
		s.words.push(0)
	}
	for _, o := range offs {
		i := int(o) - 1
		*s.words.at(start + i>>6) |= 1 << (i & 63)
	}
	for i := range w {
		s.ntids += bits.OnesCount64(s.words.get(start + i))
	}
	s.nblocks++
	s.last = blk
	return nil
}

// Contains reports whether tid is in the store.
func (s *Store) Contains(tid page.TID) bool {
	o := int(tid.Off) - 1
	if o < 0 || s.chunks.n == 0 {
		return false
	}
	ci, ok := s.findChunk(tid.Block >> chunkShift)
	if !ok {
		return false
	}
	c := s.chunks.at(ci)
	bit := tid.Block & (blocksPerChunk - 1)
	if c.present&(1<<bit) == 0 {
		return false
	}
	rank := bits.OnesCount64(c.present & (1<<bit - 1))
	start, w := s.blockWords(c, rank)
	wi := o >> 6
	if wi >= w {
		return false
	}
	return s.words.get(start+wi)>>(o&63)&1 != 0
}

// blockWords returns the index in words of the bitmap of the rank-th
// present block of c, and its width in words.
func (s *Store) blockWords(c *chunk, rank int) (start, width int) {
	if c.layout&auxFlag == 0 {
		w := int(c.layout)
		return int(c.base) + rank*w, w
	}
	a := int(c.layout&^auxFlag) + rank
	r0, r1 := int(s.aux.get(a)), int(s.aux.get(a+1))
	return int(c.base) + r0, r1 - r0
}

// findChunk returns the index of the chunk with the given key. Keys are
// strictly increasing, so the chunk of key k is at index <= k-first; when
// the table's dead blocks are dense (the usual case) it is exactly there.
func (s *Store) findChunk(key uint32) (int, bool) {
	first := s.chunks.at(0).key
	if key < first {
		return 0, false
	}
	hi := min(int(key-first), s.chunks.n-1)
	if s.chunks.at(hi).key == key {
		return hi, true
	}
	lo := 0
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s.chunks.at(m).key < key {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, s.chunks.at(lo).key == key
}

// Iterate calls fn for every block in increasing block order with its
// offsets in increasing order. offs is reused between calls: fn must copy
// it to keep it. Iterate stops at and returns fn's first error.
func (s *Store) Iterate(fn func(blk uint32, offs []page.OffsetNumber) error) error {
	var offs []page.OffsetNumber
	for ci := range s.chunks.n {
		c := s.chunks.at(ci)
		p := c.present
		for rank := 0; p != 0; rank++ {
			bit := bits.TrailingZeros64(p)
			p &= p - 1
			start, w := s.blockWords(c, rank)
			offs = offs[:0]
			for wi := range w {
				for word := s.words.get(start + wi); word != 0; word &= word - 1 {
					offs = append(offs, page.OffsetNumber(wi*64+bits.TrailingZeros64(word)+1))
				}
			}
			if err := fn(c.key<<chunkShift|uint32(bit), offs); err != nil {
				return err
			}
		}
	}
	return nil
}

// Len is the number of distinct TIDs in the store.
func (s *Store) Len() int { return s.ntids }

// Blocks is the number of blocks with at least one TID.
func (s *Store) Blocks() int { return s.nblocks }

// MemoryBytes is the exact size of the backing arrays the store holds,
// computed from their lengths and capacities: bitmap, chunk and aux
// segments plus their spines. The Store struct itself (under 200 bytes)
// and the allocator's 8-byte header on each spine are not counted.
func (s *Store) MemoryBytes() int64 {
	return s.words.bytes() + s.chunks.bytes() + s.aux.bytes()
}

// Full reports whether the store must not grow further under a budget of
// limitBytes: true when the next AddBlock, whatever its offsets, could
// take MemoryBytes above limitBytes. Checking Full before each AddBlock
// therefore keeps MemoryBytes <= limitBytes, except that an empty store is
// never full (it must accept one block for a vacuum to make progress).
// Memory grows in segments of at most 64 KiB, so a store reported full
// holds within about 64 KiB of limitBytes.
func (s *Store) Full(limitBytes int64) bool {
	if s.nblocks == 0 {
		return false
	}
	next := s.words.growthFor(maxBlockWords) + s.chunks.growthFor(1) + s.aux.growthFor(maxAuxPerBlock)
	return s.MemoryBytes()+next > limitBytes
}

// Reset empties the store and releases its memory.
func (s *Store) Reset() {
	*s = Store{}
	s.init()
}
