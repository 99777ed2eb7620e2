package engine

import (
	"fmt"

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
	db.hmu.Lock()
	defer db.hmu.Unlock()
	if h, ok := db.handles[rel].(*heap.Rel); ok {
		return h
	}
	h := heap.Open(db.heapDeps(), rel)
	db.handles[rel] = h
	return h
}

// forgetHandle drops the cached handle of rel (its files are going away).
func (db *DB) forgetHandle(rel storage.RelFileNode) {
	db.hmu.Lock()
	delete(db.handles, rel)
	db.hmu.Unlock()
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
	db.hmu.Lock()
	db.handles[rel] = h
	db.hmu.Unlock()
	return nil
}

// ensureForks creates the main fork of every catalog relation that lost
// its file (created but not yet durable when the system crashed, and no
// WAL record touched it since).
func (db *DB) ensureForks() error {
	for rel := range db.cat.Rels() {
		if err := db.st.Create(rel, storage.MainFork); err != nil {
			return fmt.Errorf("relation %d: %w", rel, err)
		}
	}
	return nil
}
