package engine

import (
	"errors"
	"fmt"
	"os"

	"github.com/vacuumops/vacuum-operator/internal/engine/btree"
	"github.com/vacuumops/vacuum-operator/internal/engine/heap"
	"github.com/vacuumops/vacuum-operator/internal/engine/redo"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/vm"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// rmgrRedo dispatches replayed records by resource manager (RmgrXLOG and
// RmgrXact are handled by the engine and txn directly).
var rmgrRedo = map[wal.RmgrID]func(*redo.Env, *wal.Record) error{
	wal.RmgrHeap:  heap.Redo,
	wal.RmgrBtree: btree.Redo,
	wal.RmgrVM:    vm.Redo,
}

func (db *DB) heapDeps() heap.Deps {
	return heap.Deps{Pool: db.pool, Storage: db.st, Log: db.log, Txns: db.txns}
}

// heapRel returns the (cached) heap handle of relfilenode rel.
func (db *DB) heapRel(rel storage.RelFileNode) *heap.Rel {
	return cachedHandle(db, rel, func() *heap.Rel { return heap.Open(db.heapDeps(), rel) })
}

// cachedHandle returns the cached handle of rel if it is a T, and otherwise
// opens one, caches and returns it. The lookup takes no lock (every statement
// makes it); an opening is serialized by db.hmu, so that two callers never
// cache two handles of one relation.
func cachedHandle[T any](db *DB, rel storage.RelFileNode, open func() T) T {
	cached := func() (T, bool) {
		v, _ := db.handles.Load(rel)
		h, ok := v.(T)
		return h, ok
	}
	if h, ok := cached(); ok {
		return h
	}
	db.hmu.Lock()
	defer db.hmu.Unlock()
	if h, ok := cached(); ok {
		return h
	}
	h := open()
	db.handles.Store(rel, h)
	return h
}

// forgetHandle drops the cached handle of rel (its files are going away).
func (db *DB) forgetHandle(rel storage.RelFileNode) {
	db.handles.Delete(rel)
}

// createHeap creates a table's heap files.
func (db *DB) createHeap(rel storage.RelFileNode) error {
	h, err := heap.Create(db.heapDeps(), rel)
	if err != nil {
		return err
	}
	for _, f := range []storage.ForkNum{storage.VMFork, storage.FSMFork} {
		if err := db.st.Create(rel, f); err != nil {
			return fmt.Errorf("create fork %d of relation %d: %w", f, rel, err)
		}
	}
	if err := db.st.Sync(rel, storage.MainFork); err != nil {
		return err
	}
	db.handles.Store(rel, h)
	return nil
}

// missingRelations lists, after recovery, every relation the catalog names
// whose main fork is missing. A missing one is damage, never a crash
// window: a table's heap file is fsynced with its directory entry before
// the catalog names it (createHeap), an index's pages are WAL-logged
// before the catalog names it and redo re-creates a fork file that WAL
// touches, and every checkpoint fsyncs the files and the directory.
// Re-creating the file empty would turn lost rows into a silently empty
// table, so Open fails with ErrCorrupt naming the file instead (after
// quarantining, never deleting, the files the catalog does not name).
func (db *DB) missingRelations() ([]string, error) {
	var missing []string
	check := func(what string, rel storage.RelFileNode) error {
		path := db.st.SegmentPath(rel, storage.MainFork, 0)
		_, err := db.fs.Stat(path)
		switch {
		case errors.Is(err, os.ErrNotExist):
			missing = append(missing, fmt.Sprintf("%s of %s", path, what))
		case err != nil:
			return fmt.Errorf("stat %s of %s: %w", path, what, err)
		}
		return nil
	}
	for _, t := range db.cat.Tables {
		if err := check("table "+t.Name, t.Rel); err != nil {
			return nil, err
		}
		for _, ix := range t.Indexes {
			if err := check("index "+ix.Name, ix.Rel); err != nil {
				return nil, err
			}
		}
	}
	return missing, nil
}
