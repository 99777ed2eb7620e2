package fsm

import (
	"fmt"
	"sync"

	"github.com/vacuumops/vacuum-operator/internal/engine/buffer"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
)

// Layout constants (see doc.go).
const (
	// BytesPerPage is the number of heap pages one FSM page covers.
	BytesPerPage = page.Size - page.HeaderSize
	// CategoryBytes is the free-space granularity of one category step.
	CategoryBytes = 32
	// maxCategory is the largest category byte.
	maxCategory = 255
)

// Category is the byte stored for a page with free bytes of room.
func Category(free int) uint8 {
	if free <= 0 {
		return 0
	}
	return uint8(min(free/CategoryBytes, maxCategory))
}

// needCategory is the smallest category that guarantees need bytes.
func needCategory(need int) int {
	if need <= 0 {
		return 1 // any recorded free space
	}
	return (need + CategoryBytes - 1) / CategoryBytes
}

// Locate returns where heap block h's byte lives.
func Locate(h storage.BlockNumber) (fsmBlk storage.BlockNumber, idx int) {
	return h / BytesPerPage, int(h % BytesPerPage)
}

// Map is one relation's free space map. Safe for concurrent use.
type Map struct {
	pool *buffer.Pool
	st   *storage.Manager
	rel  storage.RelFileNode

	extendMu sync.Mutex // serialises extension of the FSM fork

	mu    sync.Mutex
	max   map[storage.BlockNumber]int // upper bound of each FSM page's largest category
	gen   map[storage.BlockNumber]int // bumped by Record, so a scan never stores a stale max
	next  map[storage.BlockNumber]int // slot where the next search of the page starts
	first storage.BlockNumber         // FSM page where searches start
}

// New returns the free space map of rel.
func New(pool *buffer.Pool, st *storage.Manager, rel storage.RelFileNode) *Map {
	return &Map{pool: pool, st: st, rel: rel,
		max: make(map[storage.BlockNumber]int), next: make(map[storage.BlockNumber]int),
		gen: make(map[storage.BlockNumber]int)}
}

func (m *Map) tag(fb storage.BlockNumber) buffer.Tag {
	return buffer.Tag{Rel: m.rel, Fork: storage.FSMFork, Block: fb}
}

func (m *Map) nblocks() (storage.BlockNumber, error) {
	n, err := m.st.NBlocks(m.rel, storage.FSMFork)
	if err != nil {
		return 0, fmt.Errorf("free space map of relation %d: %w", m.rel, err)
	}
	return n, nil
}

// slots returns the category bytes of an FSM page, initialising a new
// page when init (the caller holds the exclusive lock then).
func slots(p page.Page, init bool) []byte {
	if p.IsNew() {
		if !init {
			return nil
		}
		page.Init(p, BytesPerPage)
	}
	s := p.Special()
	if len(s) != BytesPerPage {
		return nil
	}
	return s
}

func (m *Map) extendTo(fb storage.BlockNumber, s *buffer.Strategy) error {
	m.extendMu.Lock()
	defer m.extendMu.Unlock()
	n, err := m.nblocks()
	if err != nil {
		return err
	}
	if err := m.pool.ExtendFork(m.st, m.rel, storage.FSMFork, n, fb, s); err != nil {
		return fmt.Errorf("extend free space map of relation %d: %w", m.rel, err)
	}
	return nil
}

// Record remembers that heap block h has free bytes of room.
func (m *Map) Record(h storage.BlockNumber, free int, s *buffer.Strategy) error {
	fb, i := Locate(h)
	c := Category(free)
	n, err := m.nblocks()
	if err != nil {
		return err
	}
	if fb >= n {
		if c == 0 {
			return nil // zero is what a missing page says
		}
		if err := m.extendTo(fb, s); err != nil {
			return err
		}
	}
	b, err := m.pool.ReadOrZero(m.tag(fb), s)
	if err != nil {
		return fmt.Errorf("read free space map block %d of relation %d: %w", fb, m.rel, err)
	}
	defer b.Release()
	b.Lock()
	sl := slots(b.Page(), true)
	changed := sl != nil && sl[i] != c
	if changed {
		sl[i] = c
		b.MarkDirty(s)
	}
	b.Unlock()
	if changed && c > 0 {
		m.mu.Lock()
		m.gen[fb]++
		if mx, ok := m.max[fb]; ok && int(c) > mx {
			m.max[fb] = int(c)
		}
		m.mu.Unlock()
	}
	return nil
}

// Get returns the free bytes recorded for heap block h (a lower bound of
// the category), 0 when nothing is recorded.
func (m *Map) Get(h storage.BlockNumber, s *buffer.Strategy) (int, error) {
	fb, i := Locate(h)
	n, err := m.nblocks()
	if err != nil || fb >= n {
		return 0, err
	}
	b, err := m.pool.ReadOrZero(m.tag(fb), s)
	if err != nil {
		return 0, fmt.Errorf("read free space map block %d of relation %d: %w", fb, m.rel, err)
	}
	defer b.Release()
	b.RLock()
	defer b.RUnlock()
	sl := slots(b.Page(), false)
	if sl == nil {
		return 0, nil
	}
	return int(sl[i]) * CategoryBytes, nil
}

// Search returns a heap block recorded with at least need free bytes, and
// false when none is. The answer is a hint: the caller checks the page.
func (m *Map) Search(need int, s *buffer.Strategy) (storage.BlockNumber, bool, error) {
	want := needCategory(need)
	if want > maxCategory {
		return 0, false, nil
	}
	n, err := m.nblocks()
	if err != nil || n == 0 {
		return 0, false, err
	}
	m.mu.Lock()
	start := m.first % n
	m.mu.Unlock()
	for k := storage.BlockNumber(0); k < n; k++ {
		fb := (start + k) % n
		m.mu.Lock()
		mx, ok := m.max[fb]
		m.mu.Unlock()
		if ok && mx < want {
			continue
		}
		h, found, err := m.searchPage(fb, want, s)
		if err != nil {
			return 0, false, err
		}
		if found {
			m.mu.Lock()
			m.first = fb
			m.mu.Unlock()
			return h, true, nil
		}
	}
	return 0, false, nil
}

// searchPage scans FSM page fb from its next-slot hint for a category of
// at least want, refreshing the page's max hint on a full miss.
func (m *Map) searchPage(fb storage.BlockNumber, want int, s *buffer.Strategy) (storage.BlockNumber, bool, error) {
	b, err := m.pool.ReadOrZero(m.tag(fb), s)
	if err != nil {
		return 0, false, fmt.Errorf("read free space map block %d of relation %d: %w", fb, m.rel, err)
	}
	defer b.Release()
	m.mu.Lock()
	from, gen := m.next[fb], m.gen[fb]
	m.mu.Unlock()
	b.RLock()
	sl := slots(b.Page(), false)
	found, best := -1, 0
	for k := 0; k < len(sl); k++ {
		j := (from + k) % len(sl)
		c := int(sl[j])
		best = max(best, c)
		if c >= want {
			found = j
			break
		}
	}
	b.RUnlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	if found < 0 {
		if m.gen[fb] == gen {
			m.max[fb] = best // exact: the whole page was scanned and nothing raised since
		}
		return 0, false, nil
	}
	m.next[fb] = found // start here next time; a full page moves it on
	return fb*BytesPerPage + storage.BlockNumber(found), true, nil
}

// Truncate forgets heap blocks at or past nHeap: their bytes in the last
// kept FSM page are zeroed and later FSM pages are removed. Not logged (the
// heap truncate record's redo calls TruncateFork again).
func (m *Map) Truncate(nHeap storage.BlockNumber) error {
	m.Reset()
	return TruncateFork(m.pool, m.st, m.rel, nHeap)
}

// TruncateFork is Truncate without a Map (recovery).
func TruncateFork(pool *buffer.Pool, st *storage.Manager, rel storage.RelFileNode, nHeap storage.BlockNumber) error {
	n, err := st.NBlocks(rel, storage.FSMFork)
	if err != nil {
		return fmt.Errorf("free space map of relation %d: %w", rel, err)
	}
	keep := (nHeap + BytesPerPage - 1) / BytesPerPage
	if nHeap%BytesPerPage != 0 && keep-1 < n {
		fb, i := Locate(nHeap)
		b, err := pool.ReadOrZero(buffer.Tag{Rel: rel, Fork: storage.FSMFork, Block: fb}, nil)
		if err != nil {
			return fmt.Errorf("read free space map block %d of relation %d: %w", fb, rel, err)
		}
		b.Lock()
		if sl := slots(b.Page(), false); sl != nil {
			clear(sl[i:])
			b.MarkDirty(nil)
		}
		b.Unlock()
		b.Release()
	}
	if keep < n {
		pool.DropBlocksFrom(rel, storage.FSMFork, keep)
		if err := st.Truncate(rel, storage.FSMFork, keep); err != nil {
			return fmt.Errorf("truncate free space map of relation %d to %d pages: %w", rel, keep, err)
		}
	}
	return nil
}

// Reset drops the in-memory search hints (after a rebuild or truncation).
func (m *Map) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.max)
	clear(m.next)
	for k := range m.gen {
		m.gen[k]++
	}
	m.first = 0
}
