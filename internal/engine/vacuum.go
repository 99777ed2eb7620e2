package engine

import (
	"context"
	"fmt"
	"sync"

	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
)

// This file connects the engine to package vacuum (which never imports the
// engine): it turns a table into a vacuum.Target and runs it.

// VacuumTarget returns the named table as package vacuum sees it: its
// relations, the engine's services and the callbacks for the table lock
// and VACUUM FULL's catalog switch.
func (db *DB) VacuumTarget(name string) (*vacuum.Target, error) {
	h, err := db.TableHandle(name)
	if err != nil {
		return nil, err
	}
	in := db.Internals()
	t := &vacuum.Target{
		Name: h.Name, Columns: h.Columns, Heap: h.Heap,
		Dir: in.Dir, FS: in.FS, Pool: in.Pool, Log: in.Log, Txns: in.Txns, Storage: in.Storage,
		HeapDeps: db.HeapDeps(), BtreeDeps: db.BtreeDeps(),
		LockTable:        func() (func(), error) { return db.LockTable(name) },
		AllocRelfilenode: db.AllocRelfilenode,
		Swap: func(newHeap storage.RelFileNode, newIndexes map[string]storage.RelFileNode) error {
			return db.swapChecked(name, h, newHeap, newIndexes)
		},
	}
	for _, ix := range h.Indexes {
		t.Indexes = append(t.Indexes, vacuum.Index{Name: ix.Name, ColumnPos: ix.ColumnPos, Rel: ix.Rel, Tree: ix.Index})
	}
	return t, nil
}

// vacuumLock returns the named table's vacuum lock: a one-slot semaphore
// that every lazy vacuum and VACUUM FULL of the table holds from before its
// Target is built until it returns, so two never work on one table at once.
func (db *DB) vacuumLock(name string) chan struct{} {
	db.hmu.Lock()
	defer db.hmu.Unlock()
	l, ok := db.vlocks[name]
	if !ok {
		l = make(chan struct{}, 1)
		db.vlocks[name] = l
	}
	return l
}

// LockedVacuumTarget takes the named table's vacuum lock, waiting for
// another vacuum of the table to finish (until ctx is done), or failing at
// once with vacuum.ErrVacuumInProgress when noWait, and then returns the
// table's Target, built under the lock (so a FULL that finished meanwhile
// is seen). Target.Release lets the lock go; Batch.Vacuum and Batch.VacuumFull
// call it when they return. VacuumTarget, by contrast, takes no lock.
func (db *DB) LockedVacuumTarget(ctx context.Context, name string, noWait bool) (*vacuum.Target, error) {
	if _, err := db.Table(name); err != nil {
		return nil, err
	}
	l := db.vacuumLock(name)
	if noWait {
		select {
		case l <- struct{}{}:
		default:
			return nil, fmt.Errorf("table %q: %w", name, vacuum.ErrVacuumInProgress)
		}
	} else {
		select {
		case l <- struct{}{}:
		case <-ctx.Done():
			return nil, fmt.Errorf("table %q: waiting for another vacuum of it: %w", name, ctx.Err())
		}
	}
	var once sync.Once
	unlock := func() { once.Do(func() { <-l }) }
	t, err := db.VacuumTarget(name)
	if err != nil {
		unlock()
		return nil, err
	}
	t.Release = unlock
	return t, nil
}

// swapChecked refuses a switch when the table's relations changed since
// the target was built (another VACUUM FULL or DDL got there first), then
// switches. Like SwapRelfilenodes it owns the new files.
func (db *DB) swapChecked(name string, was *TableHandle, newHeap storage.RelFileNode, newIndexes map[string]storage.RelFileNode) error {
	changed := func(err error) error {
		db.mu.Lock()
		defer db.mu.Unlock()
		rels := []storage.RelFileNode{newHeap}
		for _, r := range newIndexes {
			rels = append(rels, r)
		}
		db.dropRels(fmt.Sprintf("swap %q", name), rels) // the catalog never named them
		return err
	}
	now, err := db.TableHandle(name)
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
	return db.SwapRelfilenodes(name, newHeap, newIndexes)
}

// Vacuum runs lazy vacuum on one table (PostgreSQL's VACUUM): dead tuples
// are removed in place, their index entries first, and trailing empty
// pages are given back. Rows stay readable and writable meanwhile (only
// the final truncation takes the table's lock briefly).
func (db *DB) Vacuum(ctx context.Context, table string, opts vacuum.Options) (*vacuum.Report, error) {
	run, err := vacuum.NewBatch(opts)
	if err != nil {
		return nil, err
	}
	t, err := db.LockedVacuumTarget(ctx, table, opts.NoWait)
	if err != nil {
		return nil, err
	}
	return run.Vacuum(ctx, t)
}

// VacuumFull rewrites one table and rebuilds its indexes (PostgreSQL's
// VACUUM FULL), holding the table's exclusive lock throughout. It first
// checks that the volume has room for the copy (vacuum.ErrNoSpace).
func (db *DB) VacuumFull(ctx context.Context, table string, opts vacuum.Options) (*vacuum.Report, error) {
	run, err := vacuum.NewBatch(opts)
	if err != nil {
		return nil, err
	}
	t, err := db.LockedVacuumTarget(ctx, table, opts.NoWait)
	if err != nil {
		return nil, err
	}
	return run.VacuumFull(ctx, t)
}

// VacuumTables vacuums several tables in one run (Options.Parallelism at
// once, lazily or FULL per Options.Full) under one shared throttle budget.
// Use vacuum.NewBatch and VacuumBatch instead to watch progress or re-throttle
// while it runs.
func (db *DB) VacuumTables(ctx context.Context, tables []string, opts vacuum.Options) (*vacuum.BatchReport, error) {
	run, err := vacuum.NewBatch(opts)
	if err != nil {
		return nil, err
	}
	return db.VacuumBatch(ctx, run, tables)
}

// VacuumBatch vacuums tables within an existing batch (vacuum.NewBatch), whose
// Progress and UpdateThrottle other goroutines may call meanwhile.
func (db *DB) VacuumBatch(ctx context.Context, run *vacuum.Batch, tables []string) (*vacuum.BatchReport, error) {
	for _, name := range tables {
		if _, err := db.Table(name); err != nil {
			return nil, err
		}
	}
	noWait := run.Options().NoWait
	return run.VacuumTables(ctx, tables, func(ctx context.Context, name string) (*vacuum.Target, error) {
		return db.LockedVacuumTarget(ctx, name, noWait)
	})
}
