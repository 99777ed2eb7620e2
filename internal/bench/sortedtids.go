package bench

import (
	"fmt"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
)

// tidSize is the size of one TID in PostgreSQL's old dead-tuple array
// (ItemPointerData: 4-byte block, 2-byte offset).
const tidSize = 6

// SortedTIDs is the baseline of experiment 4: PostgreSQL's pre-17
// dead-tuple list, a sorted array of 6-byte TIDs searched by binary search
// (lazy_tid_reaped). Entries are big-endian so that byte order is TID
// order.
type SortedTIDs struct {
	b []byte
}

// NewSortedTIDs returns an empty array with room for n TIDs (allocated
// exactly, as PostgreSQL allocates maintenance_work_mem up front).
func NewSortedTIDs(n int) *SortedTIDs { return &SortedTIDs{b: make([]byte, 0, n*tidSize)} }

// Append adds tid, which must be greater than every TID already held.
func (s *SortedTIDs) Append(tid page.TID) error {
	if n := s.Len(); n > 0 {
		if last := s.at(n - 1); !tidLess(last, tid) {
			return fmt.Errorf("sorted TIDs: %v appended after %v", tid, last)
		}
	}
	s.b = append(s.b, byte(tid.Block>>24), byte(tid.Block>>16), byte(tid.Block>>8), byte(tid.Block),
		byte(tid.Off>>8), byte(tid.Off))
	return nil
}

// Len is the number of TIDs.
func (s *SortedTIDs) Len() int { return len(s.b) / tidSize }

// MemoryBytes is the array's allocated size.
func (s *SortedTIDs) MemoryBytes() int64 { return int64(cap(s.b)) }

func (s *SortedTIDs) at(i int) page.TID {
	e := s.b[i*tidSize : i*tidSize+tidSize]
	return page.TID{
		Block: uint32(e[0])<<24 | uint32(e[1])<<16 | uint32(e[2])<<8 | uint32(e[3]),
		Off:   page.OffsetNumber(uint16(e[4])<<8 | uint16(e[5])),
	}
}

// Contains reports whether tid is held, by binary search.
func (s *SortedTIDs) Contains(tid page.TID) bool {
	lo, hi := 0, s.Len()
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if tidLess(s.at(mid), tid) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo < s.Len() && s.at(lo) == tid
}

func tidLess(a, b page.TID) bool {
	return a.Block < b.Block || (a.Block == b.Block && a.Off < b.Off)
}
