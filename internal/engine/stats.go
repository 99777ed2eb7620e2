package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/vacuumops/vacuum-operator/internal/engine/buffer"
	"github.com/vacuumops/vacuum-operator/internal/engine/catalog"
	"github.com/vacuumops/vacuum-operator/internal/engine/usage"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// TableStats describe one table, measured by a full scan: tuples are
// classified against the current vacuum horizon (the oldest snapshot
// still running), as PostgreSQL's HeapTupleSatisfiesVacuum does.
type TableStats struct {
	Name               string
	Columns            []Column // the table's columns, with their types
	Pages              int64    // heap pages
	AllVisiblePages    int64    // pages flagged all-visible
	LiveTuples         int64    // visible to current and future snapshots (or being deleted)
	DeadTuples         int64    // dead to everyone: vacuum removes them
	RecentlyDeadTuples int64    // deleted, but an older snapshot may still see them
	InProgressTuples   int64    // inserted by transactions still running
	DeadLinePointers   int64    // pruned slots waiting for index vacuum
	LiveBytes          int64
	DeadBytes          int64
	FreeBytes          int64
	Indexes            []IndexStats
}

// IndexStats describe one index.
type IndexStats struct {
	Name    string
	Column  string   // the first key column (Columns[0])
	Columns []string // key columns, in key order
	Layout  int      // B-tree page layout: 1 (made before format 3), 2
	Pages   int64    // blocks, meta page included
	Entries int64    // leaf entries, including those of dead versions
}

// Stats scans every table and index (with a bulk-read ring, so the scan
// does not flush the pool) and returns their statistics: of the tables
// catalogued when it starts and not dropped before their turn, each as
// catalogued at its turn (eachTable).
func (db *DB) Stats(ctx context.Context) ([]TableStats, error) {
	horizon := db.txns.OldestXmin()
	var out []TableStats
	err := db.eachTable(ctx, func(t *catalog.Table) error {
		s := db.pool.NewStrategy(buffer.BulkRead, 0, nil)
		c, err := db.heapRel(t.Rel).CountTuplesReadOnly(ctx, horizon, s)
		if err != nil {
			return fmt.Errorf("stats of %q: %w", t.Name, err)
		}
		ts := TableStats{Name: t.Name, Columns: slices.Clone(t.Columns), Pages: c.Pages, AllVisiblePages: c.AllVisible,
			LiveTuples: c.Live + c.DeleteInProgress, DeadTuples: c.Dead, RecentlyDeadTuples: c.RecentlyDead,
			InProgressTuples: c.InsertInProgress, DeadLinePointers: c.DeadLinePointers,
			LiveBytes: c.LiveBytes, DeadBytes: c.DeadBytes, FreeBytes: c.FreeBytes}
		for _, ix := range t.Indexes {
			cs, err := db.indexTree(ix.Rel).Cleanup(s)
			if err != nil {
				return fmt.Errorf("stats of index %q: %w", ix.Name, err)
			}
			layout, err := db.indexTree(ix.Rel).Layout(s)
			if err != nil {
				return fmt.Errorf("stats of index %q: %w", ix.Name, err)
			}
			ts.Indexes = append(ts.Indexes, IndexStats{Name: ix.Name, Column: ix.Columns[0], Columns: slices.Clone(ix.Columns),
				Layout: layout, Pages: cs.Pages, Entries: cs.Entries})
		}
		out = append(out, ts)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// eachTable calls fn for every table catalogued now, one table at a time,
// each under its table lock and db.mu held shared, as a statement holds
// them for one operation: its files stay as the catalog names them (DROP,
// TRUNCATE and VACUUM FULL's swap take the table lock exclusively), and
// the DB stays open. Between two tables it holds no lock, so a DDL (a
// CREATE TABLE, say) waits for one table's turn, not for the whole walk,
// and so do the transactions queued behind it (Go's RWMutex lets no new
// reader past a waiting writer): Stats and Check once held db.mu across
// every table, and a DDL queued behind them stalled every new transaction
// until they ended. A table dropped before its turn is skipped; fn sees
// each table as catalogued at its turn. fn's error, or ctx's, ends the walk.
func (db *DB) eachTable(ctx context.Context, fn func(t *catalog.Table) error) error {
	db.mu.RLock()
	closed := db.closed.Load()
	names := make([]string, 0, len(db.cat.Tables))
	for _, t := range db.cat.Tables {
		names = append(names, t.Name)
	}
	db.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := db.withTable(name, fn); err != nil {
			return err
		}
	}
	return nil
}

// withTable calls fn for the named table under its table lock and db.mu,
// both held shared (nothing if the table is gone).
func (db *DB) withTable(name string, fn func(t *catalog.Table) error) error {
	tl := db.tableLock(name)
	tl.RLock()
	defer tl.RUnlock()
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.closed.Load() {
		return ErrClosed
	}
	t, err := db.cat.Table(name)
	if errors.Is(err, ErrNoSuchTable) {
		return nil
	}
	if err != nil {
		return err
	}
	return fn(t)
}

// RuntimeStats are process-wide counters of the open DB.
type RuntimeStats struct {
	Pool buffer.Stats
	WAL  wal.Stats
	// Commits is what foreground commits charged (WAL records, flushes).
	Commits usage.Reading
	// Checkpoints counts the checkpoints completed since Open (automatic,
	// requested and shutdown).
	Checkpoints int64
	// Direct says whether relation files are read and written with
	// O_DIRECT (false when the file system refused it and the engine fell
	// back to the page cache).
	Direct bool
}

// RuntimeStats returns the buffer pool's and the WAL's counters.
func (db *DB) RuntimeStats() RuntimeStats {
	var ws wal.Stats
	if db.log != nil { // a standby has no log of its own
		ws = db.log.Stats()
	}
	return RuntimeStats{Pool: db.pool.Stats(), WAL: ws, Commits: db.usage.Read(), Checkpoints: db.ckpts.Load(),
		Direct: db.st.Direct()}
}

// WAL returns the DB's write-ahead log, for a reader that follows it as it
// grows (a standby). It stays owned by the DB: do not close it, and do not
// use it after Close.
func (db *DB) WAL() *wal.Log { return db.log }

// FS returns the file system the data directory lives on, for a component
// that keeps files of its own in the directory (a primary's replication
// slots) and must see the same faults as the engine.
func (db *DB) FS() vfs.FS { return db.fs }

// TablePages returns the number of blocks of the named table's heap (its
// main fork; PostgreSQL's pg_relation_size divided by the block size),
// without scanning it.
func (db *DB) TablePages(name string) (int64, error) {
	h, err := db.handle(name)
	if err != nil {
		return 0, err
	}
	n, err := h.Heap.NBlocks()
	if err != nil {
		return 0, fmt.Errorf("size of table %q: %w", name, err)
	}
	return int64(n), nil
}
