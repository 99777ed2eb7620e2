package engine

import (
	"context"
	"fmt"

	"github.com/vacuumops/vacuum-operator/internal/engine/btree"
	"github.com/vacuumops/vacuum-operator/internal/engine/catalog"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
)

// lockForDDL takes, for DROP TABLE and TRUNCATE, the table's vacuum lock
// (waiting for a running vacuum, until ctx is done), then waits for every
// open transaction that used the table to end (ErrTableInUse when ctx is
// done first; transactions that have not used it wait meanwhile), then
// takes its table lock exclusively (waiting for running row operations),
// then db.mu exclusively. The returned unlock frees them all. A wait that
// would close a cycle of waits fails with ErrDeadlock, which names the DDL
// by what ("DROP TABLE", say).
func (db *DB) lockForDDL(ctx context.Context, what, table string) (func(), error) {
	if _, err := db.Table(table); err != nil {
		return nil, err
	}
	who := opNode(fmt.Sprintf("%s %q", what, table))
	unlockVacuum, _, err := db.uses.lockVacuum(ctx, table, who, false)
	if err != nil {
		return nil, err
	}
	release, err := db.uses.exclude(ctx, table, who)
	if err != nil {
		unlockVacuum()
		return nil, err
	}
	tl := db.tableLock(table)
	tl.Lock()
	db.mu.Lock()
	return func() {
		db.mu.Unlock()
		tl.Unlock()
		release()
		unlockVacuum()
	}, nil
}

// DropTable removes a table, its indexes and their files, through the
// catalog switch (switchCatalog): a crash before the catalog's rename
// leaves the table whole, after it the table gone and its files orphans
// that the next Open removes; once the rename may have reached the disk
// no error removes a file the catalog may still name. It waits for a
// running vacuum of the table and, as PostgreSQL's ACCESS EXCLUSIVE lock
// does, for every open transaction that has used the table to commit or
// roll back (ctx bounds the wait: ErrTableInUse). A transaction that had
// not used the table waits for the drop, then gets ErrNoSuchTable. A
// caller must not drop a table its own open transaction used: it would
// wait for itself until ctx ends.
func (db *DB) DropTable(ctx context.Context, name string) error {
	if db.opts.Standby {
		return ErrReadOnly
	}
	unlock, err := db.lockForDDL(ctx, "DROP TABLE", name)
	if err != nil {
		return err
	}
	defer unlock()
	if db.closed.Load() {
		return ErrClosed
	}
	next := db.cat.Clone()
	old, err := next.RemoveTable(name)
	if err != nil {
		return fmt.Errorf("drop table: %w", err)
	}
	return db.switchCatalog(catalogSwitch{what: fmt.Sprintf("drop table %q", name), next: next, retired: old})
}

// TruncateTable empties a table: new, empty heap and index files switched
// into the catalog in place of the old ones (switchCatalog, crash-safe as
// VACUUM FULL's swap), then the old files removed. Locks and waits for
// open transactions as DropTable. As PostgreSQL's TRUNCATE, it is not
// MVCC-safe: a transaction whose snapshot predates it and that had not
// used the table sees the table empty.
func (db *DB) TruncateTable(ctx context.Context, name string) error {
	if db.opts.Standby {
		return ErrReadOnly
	}
	unlock, err := db.lockForDDL(ctx, "TRUNCATE", name)
	if err != nil {
		return err
	}
	defer unlock()
	if db.closed.Load() {
		return ErrClosed
	}
	what := fmt.Sprintf("truncate %q", name)
	next := db.cat.Clone()
	t, err := next.Table(name)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	newHeap, newIndexes, created, err := db.emptyFiles(what, next, t)
	if err != nil {
		return err
	}
	old, err := next.SwapRelfilenodes(name, newHeap, newIndexes)
	if err != nil {
		db.abandonRels(what, created)
		return fmt.Errorf("%s: %w", what, err)
	}
	return db.switchCatalog(catalogSwitch{what: what, next: next, created: created, retired: old})
}

// emptyFiles makes the new, empty heap and index files a TRUNCATE switches table t to:
// their relfilenodes come from next (and are never handed out twice, even on failure),
// and the empty indexes are WAL-logged and flushed, so they are durable before the catalog
// names them. On failure the files made so far are removed. created lists every new file.
func (db *DB) emptyFiles(what string, next *catalog.Catalog, t *catalog.Table) (storage.RelFileNode, map[string]storage.RelFileNode, []storage.RelFileNode, error) {
	newHeap := storage.RelFileNode(next.AllocOID())
	newIndexes := map[string]storage.RelFileNode{}
	created := []storage.RelFileNode{newHeap}
	for _, ix := range t.Indexes {
		r := storage.RelFileNode(next.AllocOID())
		newIndexes[ix.Name] = r
		created = append(created, r)
	}
	db.cat.NextOID = next.NextOID
	if err := db.logCreate(newHeap, heapForks...); err != nil {
		return 0, nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	for _, r := range created[1:] {
		if err := db.logCreate(r, storage.MainFork); err != nil {
			return 0, nil, nil, fmt.Errorf("%s: %w", what, err)
		}
	}
	if err := db.createHeap(newHeap); err != nil {
		db.abandonRels(what, created)
		return 0, nil, nil, fmt.Errorf("%s: %w", what, db.failIfSyncFailed(err))
	}
	for _, ix := range t.Indexes {
		tree, err := btree.Create(db.btreeDeps(), newIndexes[ix.Name], nil)
		if err != nil {
			db.abandonRels(what, created)
			return 0, nil, nil, fmt.Errorf("%s: index %q: %w", what, ix.Name, err)
		}
		db.handles.Store(newIndexes[ix.Name], tree)
	}
	if err := db.log.Flush(db.log.InsertLSN(), nil); err != nil {
		db.abandonRels(what, created)
		return 0, nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	return newHeap, newIndexes, created, nil
}
