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

// Target is one table as the engine hands it to a vacuum: its relations,
// the engine services a vacuum drives, and the Table through which it asks
// the engine for anything else. Package vacuum never imports the engine
// (TestVacuumImportsNoPackageAboveIt holds it to that); the engine builds a
// Target from its catalog (engine/vacuum.go).
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

	// Table is the engine's side of the table (its locks and catalog).
	// Lazy vacuum without it skips truncation; VACUUM FULL needs it.
	Table Table
}

// Table is everything a vacuum may ask of the engine about the table it
// works on, and all it may ask: the engine implements it with one
// unexported type, and its exported DB methods are held to an allow-list
// (engine's TestDBExportsOnlyItsAllowList), so maintenance code has no other
// way in.
type Table interface {
	// Lock takes the table's exclusive lock (row operations wait until
	// unlock is called): lazy vacuum's truncation and all of VACUUM FULL
	// run under it.
	Lock() (unlock func(), err error)
	// NewRelfilenode returns a relfilenode no relation uses or will use
	// (VACUUM FULL's new files).
	NewRelfilenode() (storage.RelFileNode, error)
	// Abandon removes the files of relfilenodes NewRelfilenode returned
	// that no catalog ever named (a rewrite given up before Swap) and logs
	// their removal, so that standbys remove their copies too.
	Abandon(rels []storage.RelFileNode)
	// Swap makes the new files durable and switches the catalog to them
	// atomically, dropping the old files (VACUUM FULL; table lock held).
	// The new files are Swap's from the call on: on an error it removes
	// them only if the catalog on disk cannot name them. It fails with
	// ErrTableChanged when the table's relations changed since the
	// Target was built.
	Swap(newHeap storage.RelFileNode, newIndexes map[string]storage.RelFileNode) error
	// Release lets go of the table's vacuum lock, which the engine took
	// before building the Target (one vacuum of a table at a time).
	// Batch.Vacuum and Batch.VacuumFull call it once, when they return.
	Release()
	// SavedPosition returns the position the table's last unfinished lazy
	// vacuum recorded for its present relfilenode, if any can be trusted.
	SavedPosition() (SavedPosition, error)
	// SavePosition records p durably: the WAL of every change made so far
	// is flushed first, so the position never claims work a crash could
	// undo.
	SavePosition(p Position) error
}

// ErrVacuumInProgress is returned (wrapped, naming the table) when
// another vacuum of the same table holds its vacuum lock and
// Options.NoWait is set.
var ErrVacuumInProgress = errors.New("another vacuum of the table is in progress")

func (t *Target) release() {
	if t != nil && t.Table != nil {
		t.Table.Release()
	}
}

// Index is one index of a Target.
type Index struct {
	Name       string
	KeyColumns []int // positions of the key columns in Target.Columns (row.KeyOf)
	Rel        storage.RelFileNode
	Tree       *btree.Index
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
	if full && (t.Table == nil || t.FS == nil) {
		return ErrTargetIncomplete
	}
	return nil
}
