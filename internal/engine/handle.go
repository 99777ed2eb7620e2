package engine

import (
	"fmt"
	"slices"
	"sync"

	"github.com/vacuumops/vacuum-operator/internal/engine/btree"
	"github.com/vacuumops/vacuum-operator/internal/engine/heap"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
)

// This file holds the engine's per-table plumbing for maintenance: the
// relations of a table at one moment, its exclusive lock, new relfilenodes
// and VACUUM FULL's switch. None of it is exported: package vacuum reaches
// it only through vacuum.Table (vacuumTable, engine/vacuum.go).

// indexHandle is one index of a tableHandle.
type indexHandle struct {
	Name       string
	Columns    []string // key columns
	KeyColumns []int    // positions of Columns in the table's columns
	Rel        storage.RelFileNode
	Index      *btree.Index
}

// tableHandle is a table's relations at one moment of the catalog.
type tableHandle struct {
	Name    string
	Columns []Column
	Rel     storage.RelFileNode
	Heap    *heap.Rel
	Indexes []indexHandle
}

// handle returns the named table's relations.
func (db *DB) handle(name string) (*tableHandle, error) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.closed.Load() {
		return nil, ErrClosed
	}
	t, err := db.cat.Table(name)
	if err != nil {
		return nil, err
	}
	h := &tableHandle{Name: t.Name, Columns: append([]Column(nil), t.Columns...), Rel: t.Rel, Heap: db.heapRel(t.Rel)}
	for _, ix := range t.Indexes {
		h.Indexes = append(h.Indexes, indexHandle{Name: ix.Name, Columns: slices.Clone(ix.Columns), KeyColumns: t.KeyPositions(&ix),
			Rel: ix.Rel, Index: db.indexTree(ix.Rel)})
	}
	return h, nil
}

// tableLock returns the lock of the named table (row operations hold it
// shared per call, VACUUM FULL exclusively). Lock order: table lock, then
// db.mu.
func (db *DB) tableLock(name string) *sync.RWMutex {
	if v, ok := db.tlocks.Load(name); ok {
		if l, ok := v.(*sync.RWMutex); ok {
			return l
		}
	}
	l := &sync.RWMutex{}
	if v, loaded := db.tlocks.LoadOrStore(name, l); loaded {
		if got, ok := v.(*sync.RWMutex); ok {
			return got
		}
	}
	return l
}

// indexTable names the table an index belongs to.
func (db *DB) indexTable(index string) (string, error) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.closed.Load() {
		return "", ErrClosed
	}
	t, _, err := db.cat.Index(index)
	if err != nil {
		return "", err
	}
	return t.Name, nil
}

// lockTable takes the named table's exclusive lock: row operations on it
// wait until unlock is called (VACUUM FULL's rewrite and switch). Other
// tables are not affected. Transactions keep their snapshots across it;
// TIDs they hold for the table are invalid after a rewrite.
func (db *DB) lockTable(name string) (unlock func(), err error) {
	if _, err := db.Table(name); err != nil {
		return nil, err
	}
	l := db.tableLock(name)
	l.Lock()
	return l.Unlock, nil
}

// allocRelfilenode returns a relfilenode no relation uses or will use
// (for VACUUM FULL's new files) and logs the creation of its main fork
// (relfile.go) under db.mu, so that the record precedes every catalog or
// checkpoint record that counts the OID. Files created under it and never
// switched into the catalog are removed at the next Open, or by Abandon.
func (db *DB) allocRelfilenode() (storage.RelFileNode, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed.Load() {
		return 0, ErrClosed
	}
	rel := storage.RelFileNode(db.cat.AllocOID())
	if err := db.logCreate(rel, storage.MainFork); err != nil {
		return 0, err
	}
	return rel, nil
}

// swapRelfilenodes is VACUUM FULL's switch: it makes the new heap (with its
// VM and FSM forks) and the new index files durable, replaces table's
// relfilenodes in the catalog (switchCatalog) and removes the old files.
// newIndexes maps every index name of the table to its new file. The
// caller holds the table's lock (lockTable) and hands the new files over:
// on an error that leaves the old catalog in place they are removed, and
// when the switch may have happened (ErrNeedsRecovery) neither the old
// nor the new files are removed, since the catalog on disk may name
// either. A crash before the catalog is saved leaves the old table;
// after, the new one; the files of the other are orphans for the next
// Open.
func (db *DB) swapRelfilenodes(table string, newHeap storage.RelFileNode, newIndexes map[string]storage.RelFileNode) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	what := fmt.Sprintf("swap %q", table)
	rels := []storage.RelFileNode{newHeap}
	for _, r := range newIndexes {
		rels = append(rels, r)
	}
	if db.closed.Load() {
		return ErrClosed
	}
	fail := func(err error) error {
		db.abandonRels(what, rels)
		return fmt.Errorf("%s: %w", what, db.failIfSyncFailed(err))
	}
	// Every change to the new files is WAL-logged; make it durable, then
	// write and fsync the files themselves so that the old WAL is not needed.
	if err := db.log.Flush(db.log.InsertLSN(), nil); err != nil {
		return fail(err)
	}
	if err := db.pool.FlushAll(); err != nil {
		return fail(err)
	}
	for _, r := range rels {
		for _, f := range []storage.ForkNum{storage.MainFork, storage.VMFork, storage.FSMFork} {
			if ok, err := db.st.Exists(r, f); err != nil {
				return fail(err)
			} else if ok {
				if err := db.st.Sync(r, f); err != nil {
					return fail(err)
				}
			}
		}
	}
	next := db.cat.Clone()
	old, err := next.SwapRelfilenodes(table, newHeap, newIndexes)
	if err != nil {
		return fail(err)
	}
	return db.switchCatalog(catalogSwitch{what: what, next: next, created: rels, retired: old})
}
