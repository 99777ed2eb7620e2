package engine

import (
	"context"
	"fmt"
	"sync"

	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
)

// This file connects the engine to package vacuum (which never imports the
// engine): it turns a table into a vacuum.Target whose Table is a
// vacuumTable, and runs it. The only public ways to vacuum are DB.Vacuum,
// DB.VacuumFull and DB.VacuumBatch; each takes the table's vacuum lock.

// vacuumTable is the engine's side of one table under vacuum: what
// package vacuum may ask of the engine (vacuum.Table), and nothing else.
type vacuumTable struct {
	db      *DB
	name    string
	was     *tableHandle // the relations the Target was built from
	release func()       // lets the vacuum lock go; nil when none is held
}

var _ vacuum.Table = (*vacuumTable)(nil)

// Lock takes the table's exclusive lock.
func (t *vacuumTable) Lock() (unlock func(), err error) { return t.db.lockTable(t.name) }

// NewRelfilenode returns a relfilenode no relation uses or will use.
func (t *vacuumTable) NewRelfilenode() (storage.RelFileNode, error) { return t.db.allocRelfilenode() }

// Abandon removes the files of new relfilenodes no catalog named and logs it.
func (t *vacuumTable) Abandon(rels []storage.RelFileNode) {
	t.db.abandonRels(fmt.Sprintf("vacuum full %q", t.name), rels)
}

// Swap switches the table to the new files, unless its relations changed
// since the Target was built.
func (t *vacuumTable) Swap(newHeap storage.RelFileNode, newIndexes map[string]storage.RelFileNode) error {
	return t.db.swapChecked(t.name, t.was, newHeap, newIndexes)
}

// Release lets the table's vacuum lock go (once; later calls do nothing).
func (t *vacuumTable) Release() {
	if t.release != nil {
		t.release()
	}
}

// target returns the named table as package vacuum sees it: its relations,
// the engine's services and its vacuumTable (which holds no vacuum lock;
// lockedTarget takes one).
func (db *DB) target(name string) (*vacuum.Target, *vacuumTable, error) {
	h, err := db.handle(name)
	if err != nil {
		return nil, nil, err
	}
	vt := &vacuumTable{db: db, name: name, was: h}
	t := &vacuum.Target{
		Name: h.Name, Columns: h.Columns, Heap: h.Heap,
		Dir: db.dir, FS: db.fs, Pool: db.pool, Log: db.log, Txns: db.txns, Storage: db.st,
		HeapDeps: db.heapDeps(), BtreeDeps: db.btreeDeps(),
		Table: vt,
	}
	for _, ix := range h.Indexes {
		t.Indexes = append(t.Indexes, vacuum.Index{Name: ix.Name, KeyColumns: ix.KeyColumns, Rel: ix.Rel, Tree: ix.Index})
	}
	return t, vt, nil
}

// lockedTarget takes the named table's vacuum lock (tableUses.lockVacuum),
// waiting for another vacuum of the table to finish (until ctx is done), or failing at once
// with vacuum.ErrVacuumInProgress when noWait, and then returns the
// table's Target, built under the lock (so a FULL that finished meanwhile
// is seen). Its Table.Release lets the lock go; Batch.Vacuum and
// Batch.VacuumFull call it when they return.
//
// For a FULL (full true) it then waits, as DROP and TRUNCATE do
// (lockForDDL), for every open transaction that used the table to end,
// and makes the transactions that have not used it yet wait before their
// first use until the FULL is over: PostgreSQL's ACCESS EXCLUSIVE lock,
// held to the end of the rewrite. Without it a statement of a transaction
// that had the table open (an UPDATE between its index lookup and its row
// change, a row change waiting for another transaction) would find every
// TID changed under it and fail with ErrTableRewritten, where PostgreSQL's
// sessions only wait. With noWait a FULL of a table in use fails at once
// with ErrTableInUse (SKIP_LOCKED).
func (db *DB) lockedTarget(ctx context.Context, name string, noWait, full bool) (*vacuum.Target, error) {
	if _, err := db.Table(name); err != nil {
		return nil, err
	}
	what := "VACUUM"
	if full {
		what = "VACUUM FULL"
	}
	who := opNode(fmt.Sprintf("%s %q", what, name))
	unlockVacuum, ok, err := db.uses.lockVacuum(ctx, name, who, noWait)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("table %q: %w", name, vacuum.ErrVacuumInProgress)
	}
	excluded := func() {}
	if full {
		wctx := ctx
		if noWait {
			c, cancel := context.WithCancel(ctx)
			cancel()
			wctx = c
		}
		release, err := db.uses.exclude(wctx, name, who)
		if err != nil {
			unlockVacuum()
			if noWait {
				return nil, fmt.Errorf("table %q: %w (SKIP_LOCKED)", name, ErrTableInUse)
			}
			return nil, err
		}
		excluded = release
	}
	var once sync.Once
	unlock := func() { once.Do(func() { excluded(); unlockVacuum() }) }
	t, vt, err := db.target(name)
	if err != nil {
		unlock()
		return nil, err
	}
	vt.release = unlock
	return t, nil
}

// swapChecked refuses a switch when the table's relations changed since
// the target was built (another VACUUM FULL or DDL got there first), then
// switches. Like swapRelfilenodes it owns the new files.
func (db *DB) swapChecked(name string, was *tableHandle, newHeap storage.RelFileNode, newIndexes map[string]storage.RelFileNode) error {
	changed := func(err error) error {
		db.mu.Lock()
		defer db.mu.Unlock()
		rels := []storage.RelFileNode{newHeap}
		for _, r := range newIndexes {
			rels = append(rels, r)
		}
		db.abandonRels(fmt.Sprintf("swap %q", name), rels) // the catalog never named them
		return err
	}
	now, err := db.handle(name)
	if err != nil {
		return changed(err)
	}
	if now.Rel != was.Rel || len(now.Indexes) != len(was.Indexes) {
		return changed(fmt.Errorf("table %q changed during VACUUM FULL: %w", name, vacuum.ErrTableChanged))
	}
	for i := range now.Indexes {
		if now.Indexes[i].Rel != was.Indexes[i].Rel {
			return changed(fmt.Errorf("table %q changed during VACUUM FULL: %w", name, vacuum.ErrTableChanged))
		}
	}
	return db.swapRelfilenodes(name, newHeap, newIndexes)
}

// Vacuum runs lazy vacuum on one table (PostgreSQL's VACUUM): dead tuples
// are removed in place, their index entries first, and trailing empty
// pages are given back. Rows stay readable and writable meanwhile (only
// the final truncation takes the table's lock briefly).
func (db *DB) Vacuum(ctx context.Context, table string, opts vacuum.Options) (*vacuum.Report, error) {
	return db.vacuumOne(ctx, table, opts, false, (*vacuum.Batch).Vacuum)
}

// VacuumFull rewrites one table and rebuilds its indexes (PostgreSQL's
// VACUUM FULL), holding the table's exclusive lock throughout. It first
// checks that the volume has room for the copy (vacuum.ErrNoSpace).
func (db *DB) VacuumFull(ctx context.Context, table string, opts vacuum.Options) (*vacuum.Report, error) {
	return db.vacuumOne(ctx, table, opts, true, (*vacuum.Batch).VacuumFull)
}

// vacuumOne vacuums one table in a batch of its own, with how (lazy or
// FULL), under the table's vacuum lock.
func (db *DB) vacuumOne(ctx context.Context, table string, opts vacuum.Options, full bool,
	how func(*vacuum.Batch, context.Context, *vacuum.Target) (*vacuum.Report, error),
) (*vacuum.Report, error) {
	if db.opts.Standby {
		return nil, ErrReadOnly
	}
	b, err := vacuum.NewBatch(opts)
	if err != nil {
		return nil, err
	}
	t, err := db.lockedTarget(ctx, table, opts.NoWait, full)
	if err != nil {
		return nil, err
	}
	return how(b, ctx, t)
}

// VacuumBatch vacuums several tables in one batch (vacuum.NewBatch):
// Options.Parallelism at once, lazily or FULL per Options.Full, under the
// batch's one throttle budget, each under its vacuum lock. Other
// goroutines may call the batch's Progress and UpdateThrottle meanwhile,
// and a batch may be given to VacuumBatch more than once (the engine
// server's VACUUM of several tables does, one table a call).
func (db *DB) VacuumBatch(ctx context.Context, run *vacuum.Batch, tables []string) (*vacuum.BatchReport, error) {
	if db.opts.Standby {
		return nil, ErrReadOnly
	}
	for _, name := range tables {
		if _, err := db.Table(name); err != nil {
			return nil, err
		}
	}
	noWait, full := run.Options().NoWait, run.Options().Full
	return run.VacuumTables(ctx, tables, func(ctx context.Context, name string) (*vacuum.Target, error) {
		return db.lockedTarget(ctx, name, noWait, full)
	})
}
