package vm

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"sync"

	"github.com/vacuumops/vacuum-operator/internal/engine/buffer"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/usage"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// Layout constants (see doc.go).
const (
	// MapBytes is the bitmap bytes of one VM page (its special space).
	MapBytes = page.Size - page.HeaderSize
	// BitsPerPage is the number of heap pages one VM page covers.
	BitsPerPage = MapBytes * 8

	// InfoSetAllVisible is the RmgrVM record that sets a bit.
	InfoSetAllVisible uint8 = 1
)

// Locate returns where heap block h's bit lives: the VM block, the byte
// index within the bitmap and the bit within that byte.
func Locate(h storage.BlockNumber) (vmBlk storage.BlockNumber, byteIdx int, bit uint) {
	return h / BitsPerPage, int(h%BitsPerPage) / 8, uint(h % 8)
}

// InitPage formats p as an empty VM page.
func InitPage(p page.Page) { page.Init(p, MapBytes) }

// bitmap returns p's bitmap, initialising a new page first when init.
func bitmap(p page.Page, init bool) []byte {
	if p.IsNew() {
		if !init {
			return nil
		}
		InitPage(p)
	}
	m := p.Special()
	if len(m) != MapBytes {
		return nil
	}
	return m
}

// Map is one relation's visibility map. Safe for concurrent use.
type Map struct {
	pool *buffer.Pool
	st   *storage.Manager
	log  *wal.Log
	rel  storage.RelFileNode

	extendMu sync.Mutex // serialises extension of the VM fork
}

// New returns the visibility map of rel.
func New(pool *buffer.Pool, st *storage.Manager, log *wal.Log, rel storage.RelFileNode) *Map {
	return &Map{pool: pool, st: st, log: log, rel: rel}
}

func (m *Map) tag(vmBlk storage.BlockNumber) buffer.Tag {
	return buffer.Tag{Rel: m.rel, Fork: storage.VMFork, Block: vmBlk}
}

func usageOf(s *buffer.Strategy) *usage.Counters {
	if s == nil {
		return nil
	}
	return s.Usage
}

// nblocks is the VM fork's length in pages.
func (m *Map) nblocks() (storage.BlockNumber, error) {
	n, err := m.st.NBlocks(m.rel, storage.VMFork)
	if err != nil {
		return 0, fmt.Errorf("visibility map of relation %d: %w", m.rel, err)
	}
	return n, nil
}

// IsSet reports whether heap block h is marked all-visible.
func (m *Map) IsSet(h storage.BlockNumber, s *buffer.Strategy) (bool, error) {
	vb, i, bit := Locate(h)
	n, err := m.nblocks()
	if err != nil || vb >= n {
		return false, err
	}
	b, err := m.pool.ReadOrZero(m.tag(vb), s)
	if err != nil {
		return false, fmt.Errorf("read visibility map block %d of relation %d: %w", vb, m.rel, err)
	}
	defer b.Release()
	b.RLock()
	defer b.RUnlock()
	bm := bitmap(b.Page(), false)
	return bm != nil && bm[i]&(1<<bit) != 0, nil
}

// extendTo makes the VM fork at least vb+1 pages long.
func (m *Map) extendTo(vb storage.BlockNumber, s *buffer.Strategy) error {
	m.extendMu.Lock()
	defer m.extendMu.Unlock()
	n, err := m.nblocks()
	if err != nil {
		return err
	}
	if err := m.pool.ExtendFork(m.st, m.rel, storage.VMFork, n, vb, s); err != nil {
		return fmt.Errorf("extend visibility map of relation %d: %w", m.rel, err)
	}
	return nil
}

// Set marks heap block h all-visible and WAL-logs it. When heap is not
// nil it is h's buffer, exclusively locked by the caller: its page gets
// FlagAllVisible and the record's LSN too. The caller decides that the
// page is all-visible; Set only records it.
func (m *Map) Set(h storage.BlockNumber, heap *buffer.Buffer, s *buffer.Strategy) error {
	return m.set(h, heap, s, nil, nil)
}

// SetPinned is Set (rec nil) or SetWith (rec given) through rd, which keeps the VM page
// pinned for the next call: a vacuum pass setting the bits of consecutive heap blocks
// reads each VM page once. rd nil is Set or SetWith.
func (m *Map) SetPinned(h storage.BlockNumber, heap *buffer.Buffer, s *buffer.Strategy, rec *wal.Record, rd *Reader) error {
	if rec != nil {
		if err := checkWith(m, h, heap, rec); err != nil {
			return err
		}
	}
	return m.set(h, heap, s, rec, rd)
}

// checkWith refuses a SetWith record whose only block is not heap block h's page.
func checkWith(m *Map, h storage.BlockNumber, heap *buffer.Buffer, rec *wal.Record) error {
	if heap == nil || rec == nil || len(rec.Blocks) != 1 || rec.Blocks[0].Fork != storage.MainFork || rec.Blocks[0].Block != h {
		return fmt.Errorf("visibility map set for block %d of relation %d: the heap record must have the heap page as its only block", h, m.rel)
	}
	return nil
}

// SetWith marks heap block h all-visible in the same WAL record as the
// caller's change of the heap page, so that a page vacuum logs one record
// rather than two (as PostgreSQL 17 logs prune, freeze and the VM bit in
// one). rec is the caller's record, not yet inserted, whose Blocks[0] is
// heap block h of the main fork; heap is h's buffer, exclusively locked by
// the caller, its page already changed as rec says. SetWith appends the VM
// page as rec's second block, sets the bit and the heap page's
// FlagAllVisible, inserts rec and stamps both pages with its LSN. The
// redo of such a record sets the bit with RedoSetBit.
func (m *Map) SetWith(h storage.BlockNumber, heap *buffer.Buffer, s *buffer.Strategy, rec *wal.Record) error {
	if err := checkWith(m, h, heap, rec); err != nil {
		return err
	}
	return m.set(h, heap, s, rec, nil)
}

// set is Set (rec nil: a record of its own) and SetWith (rec given), the VM page read
// through rd (kept pinned) when rd is not nil.
func (m *Map) set(h storage.BlockNumber, heap *buffer.Buffer, s *buffer.Strategy, rec *wal.Record, rd *Reader) error {
	vb, i, bit := Locate(h)
	if err := m.extendTo(vb, s); err != nil {
		return err
	}
	var b *buffer.Buffer
	var err error
	if rd != nil {
		b, err = rd.pin(vb)
	} else {
		b, err = m.pool.ReadOrZero(m.tag(vb), s)
		if err == nil {
			defer b.Release()
		}
	}
	if err != nil {
		return fmt.Errorf("read visibility map block %d of relation %d: %w", vb, m.rel, err)
	}
	b.Lock()
	defer b.Unlock()
	bm := bitmap(b.Page(), true)
	if bm == nil {
		return fmt.Errorf("visibility map block %d of relation %d has a bad header", vb, m.rel)
	}
	heapNeeds := heap != nil && heap.Page().Flags()&page.FlagAllVisible == 0
	if rec == nil && bm[i]&(1<<bit) != 0 && !heapNeeds {
		return nil
	}
	bm[i] |= 1 << bit
	b.MarkDirty(s)
	vmRef := wal.BlockRef{Rel: m.rel, Fork: storage.VMFork, Block: vb, Page: b.Page()}
	if rec == nil {
		var main [4]byte
		binary.LittleEndian.PutUint32(main[:], uint32(h))
		rec = &wal.Record{Rmgr: wal.RmgrVM, Info: InfoSetAllVisible, Main: main[:], Blocks: []wal.BlockRef{vmRef}}
		if heap != nil {
			rec.Blocks = append(rec.Blocks, wal.BlockRef{Rel: m.rel, Fork: storage.MainFork, Block: h, Page: heap.Page()})
		}
	} else {
		rec.Blocks = append(rec.Blocks, vmRef)
	}
	if heap != nil {
		hp := heap.Page()
		hp.SetFlags(hp.Flags() | page.FlagAllVisible)
		heap.MarkDirty(s)
	}
	lsn, err := m.log.Insert(rec, usageOf(s))
	if err != nil {
		return fmt.Errorf("log visibility map set for block %d of relation %d: %w", h, m.rel, err)
	}
	b.Page().SetLSN(uint64(lsn))
	if heap != nil {
		heap.Page().SetLSN(uint64(lsn))
	}
	return nil
}

// Clear unsets heap block h's bit and reports whether it was set. It is
// not WAL-logged: the caller's heap record says the bit was cleared and
// heap redo clears it again (see doc.go).
func (m *Map) Clear(h storage.BlockNumber, s *buffer.Strategy) (bool, error) {
	vb, i, bit := Locate(h)
	n, err := m.nblocks()
	if err != nil || vb >= n {
		return false, err
	}
	b, err := m.pool.ReadOrZero(m.tag(vb), s)
	if err != nil {
		return false, fmt.Errorf("read visibility map block %d of relation %d: %w", vb, m.rel, err)
	}
	defer b.Release()
	return clearBit(b, i, bit, s), nil
}

func clearBit(b *buffer.Buffer, i int, bit uint, s *buffer.Strategy) bool {
	b.Lock()
	defer b.Unlock()
	bm := bitmap(b.Page(), false)
	if bm == nil || bm[i]&(1<<bit) == 0 {
		return false
	}
	bm[i] &^= 1 << bit
	b.MarkDirty(s)
	return true
}

// Count returns how many of the heap blocks below nHeap are all-visible.
func (m *Map) Count(nHeap storage.BlockNumber, s *buffer.Strategy) (int, error) {
	n, err := m.nblocks()
	if err != nil {
		return 0, err
	}
	total := 0
	for vb := storage.BlockNumber(0); vb < n && vb*BitsPerPage < nHeap; vb++ {
		b, err := m.pool.ReadOrZero(m.tag(vb), s)
		if err != nil {
			return 0, fmt.Errorf("read visibility map block %d of relation %d: %w", vb, m.rel, err)
		}
		b.RLock()
		bm := bitmap(b.Page(), false)
		limit := min(uint64(nHeap)-uint64(vb)*BitsPerPage, BitsPerPage)
		for j := uint64(0); j < uint64(len(bm)) && j*8 < limit; j++ {
			c := bm[j]
			if rem := limit - j*8; rem < 8 {
				c &= byte(1<<rem) - 1
			}
			total += bits.OnesCount8(c)
		}
		b.RUnlock()
		b.Release()
	}
	return total, nil
}

// Truncate shrinks the map to cover nHeap heap blocks: bits of blocks at
// or past nHeap in the last kept VM page are cleared (not logged; the heap
// truncate record's redo repeats it) and later VM pages are removed.
func (m *Map) Truncate(nHeap storage.BlockNumber) error {
	return TruncateFork(m.pool, m.st, m.rel, nHeap)
}

// TruncateFork is Truncate without a Map (heap truncation and its redo).
func TruncateFork(pool *buffer.Pool, st *storage.Manager, rel storage.RelFileNode, nHeap storage.BlockNumber) error {
	n, err := st.NBlocks(rel, storage.VMFork)
	if err != nil {
		return fmt.Errorf("visibility map of relation %d: %w", rel, err)
	}
	keep := (nHeap + BitsPerPage - 1) / BitsPerPage
	if nHeap%BitsPerPage != 0 && keep-1 < n {
		vb, i, bit := Locate(nHeap)
		b, err := pool.ReadOrZero(buffer.Tag{Rel: rel, Fork: storage.VMFork, Block: vb}, nil)
		if err != nil {
			return fmt.Errorf("read visibility map block %d of relation %d: %w", vb, rel, err)
		}
		b.Lock()
		if bm := bitmap(b.Page(), false); bm != nil {
			bm[i] &= byte(1<<bit) - 1
			clear(bm[i+1:])
			b.MarkDirty(nil)
		}
		b.Unlock()
		b.Release()
	}
	if keep < n {
		pool.DropBlocksFrom(rel, storage.VMFork, keep)
		if err := st.Truncate(rel, storage.VMFork, keep); err != nil {
			return fmt.Errorf("truncate visibility map of relation %d to %d pages: %w", rel, keep, err)
		}
	}
	return nil
}

// Reader answers IsSet for a run of heap blocks, keeping the VM page of the
// last answer pinned, so a scan in block order reads each VM page once and
// charges one buffer access for it, not one per heap block (as PostgreSQL's
// visibilitymap_get_status keeps its vmbuffer). It belongs to one goroutine;
// Release drops the pin, and must be called before the VM fork is truncated.
type Reader struct {
	m  *Map
	s  *buffer.Strategy
	b  *buffer.Buffer
	vb storage.BlockNumber
}

// Reader returns a Reader of m that reads through s.
func (m *Map) Reader(s *buffer.Strategy) *Reader { return &Reader{m: m, s: s} }

// IsSet is Map.IsSet of heap block h.
func (r *Reader) IsSet(h storage.BlockNumber) (bool, error) {
	vb, i, bit := Locate(h)
	if r.b == nil || r.vb != vb {
		n, err := r.m.nblocks()
		if err != nil || vb >= n {
			return false, err
		}
		if _, err := r.pin(vb); err != nil {
			return false, fmt.Errorf("read visibility map block %d of relation %d: %w", vb, r.m.rel, err)
		}
	}
	r.b.RLock()
	defer r.b.RUnlock()
	bm := bitmap(r.b.Page(), false)
	return bm != nil && bm[i]&(1<<bit) != 0, nil
}

// pin makes VM page vb (which must exist) the pinned one and returns it.
func (r *Reader) pin(vb storage.BlockNumber) (*buffer.Buffer, error) {
	if r.b != nil && r.vb == vb {
		return r.b, nil
	}
	r.Release()
	b, err := r.m.pool.ReadOrZero(r.m.tag(vb), r.s)
	if err != nil {
		return nil, err
	}
	r.b, r.vb = b, vb
	return b, nil
}

// Release drops the pinned VM page, if any.
func (r *Reader) Release() {
	if r.b != nil {
		r.b.Release()
		r.b = nil
	}
}
