package btree

import (
	"errors"
	"fmt"
	"sync"

	"github.com/vacuumops/vacuum-operator/internal/engine/buffer"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// ErrDuplicate is returned by Insert for an entry (key and TID) that is
// already in the index.
var ErrDuplicate = errors.New("index entry already exists")

// CorruptError reports a tree page that cannot be interpreted.
type CorruptError struct {
	Rel    storage.RelFileNode
	Block  storage.BlockNumber
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("corrupt btree page: rel %d block %d: %s", e.Rel, e.Block, e.Reason)
}

// Deps are the engine services an index uses.
type Deps struct {
	Pool    *buffer.Pool
	Storage *storage.Manager
	Log     *wal.Log
}

// Index is one B-tree over byte-string keys (bytewise order), stored in the main fork of rel.
// Safe for concurrent use: lookups and range scans share an index-level
// read lock, taken per page visited; inserts hold the write lock for the
// whole descent and split; BulkDelete takes no index lock, only the
// exclusive lock of the one page it changes (it deletes items in place and
// never changes a page's high key or links).
type Index struct {
	d   Deps
	rel storage.RelFileNode
	mu  sync.RWMutex
}

// Open returns the index stored under rel (made by Create or Build).
func Open(d Deps, rel storage.RelFileNode) *Index { return &Index{d: d, rel: rel} }

// Rel is the index's relfilenode.
func (ix *Index) Rel() storage.RelFileNode { return ix.rel }

// Create makes an empty index in rel: the fork's file, the meta page
// (block 0) and an empty root leaf (block 1), WAL-logged as new pages, in
// page layout 2.
func Create(d Deps, rel storage.RelFileNode, s *buffer.Strategy) (*Index, error) {
	return create(d, rel, s, layout2)
}

// create is Create in the given page layout (tests make layout-1 indexes,
// as earlier builds did, with it).
func create(d Deps, rel storage.RelFileNode, s *buffer.Strategy, layout uint16) (*Index, error) {
	ix := Open(d, rel)
	metaBuf, err := ix.newFork(s)
	if err != nil {
		return nil, err
	}
	rootBuf, err := ix.extend(s)
	if err != nil {
		metaBuf.Unlock()
		metaBuf.Release()
		return nil, err
	}
	root := opaque{level: 0, flags: flagLeaf, layout: layout}
	cs := changeSet{ix: ix}
	data, err := encodeInitOp(root, nil)
	if err == nil {
		err = buildPage(rootBuf.Page(), root, nil)
	}
	if err != nil {
		return nil, ix.splitFailed(rootBuf.Tag().Block, err, rootBuf, metaBuf)
	}
	cs.add(rootBuf, data, true)
	m := meta{root: rootBuf.Tag().Block, layout: layout}
	buildMeta(metaBuf.Page(), m)
	cs.add(metaBuf, encodeMetaOp(m), true)
	if err := cs.commit(InfoCreate, s); err != nil {
		return nil, fmt.Errorf("create index %d: %w", rel, err)
	}
	return ix, nil
}

// newFork creates the fork's file and returns block 0, extended, pinned
// and exclusively locked. The fork must be empty.
func (ix *Index) newFork(s *buffer.Strategy) (*buffer.Buffer, error) {
	if err := ix.d.Storage.Create(ix.rel, storage.MainFork); err != nil {
		return nil, fmt.Errorf("create index %d: %w", ix.rel, err)
	}
	b, err := ix.extend(s)
	if err != nil {
		return nil, err
	}
	if b.Tag().Block != metaBlock {
		b.Unlock()
		b.Release()
		return nil, fmt.Errorf("create index %d: relation already has blocks", ix.rel)
	}
	return b, nil
}

func (ix *Index) extend(s *buffer.Strategy) (*buffer.Buffer, error) {
	b, err := ix.d.Pool.Extend(ix.rel, storage.MainFork, s)
	if err != nil {
		return nil, fmt.Errorf("extend index %d: %w", ix.rel, err)
	}
	return b, nil
}

func (ix *Index) tag(blk storage.BlockNumber) buffer.Tag {
	return buffer.Tag{Rel: ix.rel, Fork: storage.MainFork, Block: blk}
}

// read returns block blk pinned (not locked).
func (ix *Index) read(blk storage.BlockNumber, s *buffer.Strategy) (*buffer.Buffer, error) {
	b, err := ix.d.Pool.Read(ix.tag(blk), s)
	if err != nil {
		return nil, fmt.Errorf("index %d: %w", ix.rel, err)
	}
	return b, nil
}

func (ix *Index) corrupt(blk storage.BlockNumber, err error) error {
	return &CorruptError{Rel: ix.rel, Block: blk, Reason: err.Error()}
}

// readMeta returns the meta page's contents.
func (ix *Index) readMeta(s *buffer.Strategy) (meta, error) {
	b, err := ix.read(metaBlock, s)
	if err != nil {
		return meta{}, err
	}
	defer b.Release()
	b.RLock()
	defer b.RUnlock()
	m, err := decodeMeta(b.Page().Special())
	if err != nil {
		return meta{}, ix.corrupt(metaBlock, err)
	}
	return m, nil
}

// changeSet collects the pages one WAL record changes. Each page is pinned,
// exclusively locked, already modified and marked dirty; commit inserts
// the record, stamps every page with its LSN, then unlocks and releases.
type changeSet struct {
	ix     *Index
	bufs   []*buffer.Buffer
	blocks []wal.BlockRef
}

func (c *changeSet) add(b *buffer.Buffer, data []byte, willInit bool) {
	tag := b.Tag()
	c.bufs = append(c.bufs, b)
	c.blocks = append(c.blocks, wal.BlockRef{
		Rel: tag.Rel, Fork: tag.Fork, Block: tag.Block, Page: b.Page(), WillInit: willInit, Data: data,
	})
}

// commit WAL-logs the changes as one record. If the insert fails the pages
// stay changed in memory ahead of the log; the log's error is sticky, so
// the engine must stop without writing them (as PostgreSQL PANICs in a
// critical section).
func (c *changeSet) commit(info uint8, s *buffer.Strategy) error {
	if len(c.bufs) == 0 {
		return nil
	}
	for _, b := range c.bufs {
		b.MarkDirty(s)
	}
	rec := &wal.Record{Rmgr: wal.RmgrBtree, Info: info, Blocks: c.blocks}
	lsn, err := c.ix.d.Log.Insert(rec, counters(s))
	for _, b := range c.bufs {
		if err == nil {
			b.Page().SetLSN(uint64(lsn))
		}
		b.Unlock()
		b.Release()
	}
	c.bufs, c.blocks = nil, nil
	return err
}

// Layout is the index's page layout: 1 for an index made by a build
// before data format 3 (integer keys, fixed-size items), 2 otherwise.
func (ix *Index) Layout(s *buffer.Strategy) (int, error) {
	m, err := ix.readMeta(s)
	if err != nil {
		return 0, err
	}
	return int(m.layout), nil
}
