package heap

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/vacuumops/vacuum-operator/internal/engine/buffer"
	"github.com/vacuumops/vacuum-operator/internal/engine/fsm"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/txn"
	"github.com/vacuumops/vacuum-operator/internal/engine/usage"
	"github.com/vacuumops/vacuum-operator/internal/engine/vm"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// Errors callers branch on (wrapped with context).
var (
	// ErrTupleTooLarge: the row does not fit in an empty page.
	ErrTupleTooLarge = errors.New("tuple too large for a heap page")
	// ErrNotFound: no tuple at the TID, or it is not visible to the
	// transaction's snapshot.
	ErrNotFound = errors.New("tuple not found")
	// ErrConcurrentUpdate: another transaction deleted or updated the tuple
	// and is still running or committed after this snapshot was taken.
	ErrConcurrentUpdate = errors.New("tuple concurrently updated")
)

// Deps are the engine services a heap relation uses.
type Deps struct {
	Pool    *buffer.Pool
	Storage *storage.Manager
	Log     *wal.Log
	Txns    *txn.Manager
}

// Rel is one heap relation (a table's main fork plus its VM and FSM).
// Safe for concurrent use.
type Rel struct {
	d    Deps
	node storage.RelFileNode
	vm   *vm.Map
	fsm  *fsm.Map

	extendMu sync.Mutex
	// target is the block the last insert used (PostgreSQL's
	// rd_targblock), -1 when none: inserts try it before the FSM.
	target atomic.Int64
}

// Open returns the heap relation stored under node. Its files must exist
// (Create makes them).
func Open(d Deps, node storage.RelFileNode) *Rel {
	r := &Rel{d: d, node: node,
		vm:  vm.New(d.Pool, d.Storage, d.Log, node),
		fsm: fsm.New(d.Pool, d.Storage, node)}
	r.target.Store(-1)
	return r
}

// Create creates the relation's main fork file (the VM and FSM forks are
// created on first use) and returns it opened. WAL-logging the creation is
// the caller's (catalog) business.
func Create(d Deps, node storage.RelFileNode) (*Rel, error) {
	if err := d.Storage.Create(node, storage.MainFork); err != nil {
		return nil, fmt.Errorf("create heap relation %d: %w", node, err)
	}
	return Open(d, node), nil
}

// Node is the relation's relfilenode.
func (r *Rel) Node() storage.RelFileNode { return r.node }

// VM is the relation's visibility map.
func (r *Rel) VM() *vm.Map { return r.vm }

// FSM is the relation's free space map.
func (r *Rel) FSM() *fsm.Map { return r.fsm }

// NBlocks is the number of blocks in the main fork.
func (r *Rel) NBlocks() (uint32, error) {
	n, err := r.d.Storage.NBlocks(r.node, storage.MainFork)
	if err != nil {
		return 0, fmt.Errorf("size of heap relation %d: %w", r.node, err)
	}
	return uint32(n), nil
}

func (r *Rel) tag(blk uint32) buffer.Tag {
	return buffer.Tag{Rel: r.node, Fork: storage.MainFork, Block: storage.BlockNumber(blk)}
}

// read pins block blk of the main fork.
func (r *Rel) read(blk uint32, s *buffer.Strategy) (*buffer.Buffer, error) {
	b, err := r.d.Pool.Read(r.tag(blk), s)
	if err != nil {
		return nil, fmt.Errorf("read block %d of heap relation %d: %w", blk, r.node, err)
	}
	return b, nil
}

func usageOf(s *buffer.Strategy) *usage.Counters {
	if s == nil {
		return nil
	}
	return s.Usage
}

// logChange inserts rec and stamps every page it names with its LSN. The
// caller holds the pages' exclusive locks and has called MarkDirty.
func (r *Rel) logChange(rec *wal.Record, s *buffer.Strategy, pages ...page.Page) error {
	lsn, err := r.d.Log.Insert(rec, usageOf(s))
	if err != nil {
		return fmt.Errorf("log heap change (info %d) in relation %d: %w", rec.Info, r.node, err)
	}
	for _, p := range pages {
		p.SetLSN(uint64(lsn))
	}
	return nil
}

// clearAllVisible clears the page's all-visible flag and the VM bit; it
// reports whether the flag was set (the record must then say so). The
// caller holds the heap page's exclusive lock.
func (r *Rel) clearAllVisible(blk uint32, p page.Page, s *buffer.Strategy) (uint8, error) {
	if p.Flags()&page.FlagAllVisible == 0 {
		return 0, nil
	}
	p.SetFlags(p.Flags() &^ page.FlagAllVisible)
	if _, err := r.vm.Clear(storage.BlockNumber(blk), s); err != nil {
		return 0, err
	}
	return flagAllVisibleCleared, nil
}

// tupleAt decodes the normal item at off, or reports why it cannot.
func tupleAt(p page.Page, off page.OffsetNumber) (item []byte, h TupleHeader, data []byte, err error) {
	item = p.ItemData(off)
	if item == nil {
		return nil, TupleHeader{}, nil, ErrNotFound
	}
	h, data, err = DecodeTuple(item)
	return item, h, data, err
}

// itemsFit reports whether a tuple of n bytes fits on p (a new page fits
// anything up to MaxItemSize).
func itemsFit(p page.Page, n int) bool {
	if p.IsNew() {
		return n <= MaxItemSize
	}
	return (n+page.MaxAlign-1)&^(page.MaxAlign-1) <= p.FreeSpace()
}

// setPruneXID lowers the page's prune hint to xid.
func setPruneXID(p page.Page, xid txn.XID) {
	if cur := p.PruneXID(); cur == 0 || uint64(xid) < cur {
		p.SetPruneXID(uint64(xid))
	}
}

// Prefetch reads up to n blocks from blk on ahead of their use into s's
// ring (buffer.Pool.Prefetch): the read-ahead of lazy vacuum's heap passes.
func (r *Rel) Prefetch(blk uint32, n int, s *buffer.Strategy) (int, error) {
	got, err := r.d.Pool.Prefetch(r.tag(blk), n, s)
	if err != nil {
		return got, fmt.Errorf("prefetch block %d of heap relation %d: %w", blk, r.node, err)
	}
	return got, nil
}
