package vacuum

import (
	"errors"

	"github.com/vacuumops/vacuum-operator/internal/engine/btree"
	"github.com/vacuumops/vacuum-operator/internal/engine/buffer"
	"github.com/vacuumops/vacuum-operator/internal/engine/heap"
	"github.com/vacuumops/vacuum-operator/internal/engine/row"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/txn"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// Target is one table as the engine hands it to a vacuum: its relations
// and the engine services and callbacks a vacuum needs. Package vacuum
// never imports the engine; the engine builds a Target from its catalog
// (engine/vacuum.go).
type Target struct {
	Name    string
	Columns []row.Column
	Heap    *heap.Rel
	Indexes []Index

	Dir       string
	FS        vfs.FS
	Pool      *buffer.Pool
	Log       *wal.Log
	Txns      *txn.Manager
	Storage   *storage.Manager
	HeapDeps  heap.Deps
	BtreeDeps btree.Deps

	// LockTable takes the table's exclusive lock (row operations wait):
	// lazy vacuum's truncation and all of VACUUM FULL run under it.
	LockTable func() (unlock func(), err error)
	// AllocRelfilenode returns a fresh relfilenode (VACUUM FULL).
	AllocRelfilenode func() (storage.RelFileNode, error)
	// Swap makes the new files durable and switches the catalog to them
	// atomically, dropping the old files (VACUUM FULL; table lock held).
	// The new files are Swap's from the call on: on an error it removes
	// them only if the catalog on disk cannot name them.
	Swap func(newHeap storage.RelFileNode, newIndexes map[string]storage.RelFileNode) error
	// Release, when set, lets go of the table's vacuum lock the engine
	// took before building the Target (one vacuum of a table at a time);
	// Batch.Vacuum and Batch.VacuumFull call it when they return.
	Release func()
}

// ErrVacuumInProgress is returned (wrapped, naming the table) when
// another vacuum of the same table holds its vacuum lock and
// Options.NoWait is set.
var ErrVacuumInProgress = errors.New("another vacuum of the table is in progress")

func (t *Target) release() {
	if t != nil && t.Release != nil {
		t.Release()
	}
}

// Index is one index of a Target.
type Index struct {
	Name      string
	ColumnPos int // position of the key column in Target.Columns
	Rel       storage.RelFileNode
	Tree      *btree.Index
}

// ErrTargetIncomplete is returned for a Target missing a field the
// requested vacuum needs.
var ErrTargetIncomplete = errors.New("vacuum target is incomplete")

func (t *Target) check(full bool) error {
	if t == nil || t.Heap == nil || t.Pool == nil || t.Log == nil || t.Txns == nil || t.Storage == nil {
		return ErrTargetIncomplete
	}
	for _, ix := range t.Indexes {
		if ix.Tree == nil {
			return ErrTargetIncomplete
		}
	}
	if full && (t.LockTable == nil || t.AllocRelfilenode == nil || t.Swap == nil || t.FS == nil) {
		return ErrTargetIncomplete
	}
	return nil
}
