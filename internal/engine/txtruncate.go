package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/vacuumops/vacuum-operator/internal/engine/catalog"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/txn"
)

// This file is TRUNCATE inside a transaction (PostgreSQL's: undone by
// ROLLBACK). The table gets new, empty files at once, switched into the
// catalog with the old ones kept beside them (catalog.Table.Truncating);
// the transaction holds the table as PostgreSQL's ACCESS EXCLUSIVE lock
// does until it ends, so no other transaction sees the new files before
// the outcome. Its commit then removes the old files, its rollback brings
// them back and removes the new ones. A crash in between leaves the
// catalog naming both: the next Open keeps the new files if the commit
// log says the transaction committed, the old ones otherwise
// (resolveTruncations), before the orphan sweep.

// truncation is a table a transaction truncated, and what it holds of it
// until it ends.
type truncation struct {
	table   string
	release func() // lets the table's vacuum lock and its exclusion go
}

// Truncate empties table inside the transaction: it waits (until ctx or
// the transaction's context is done: ErrTableInUse) for a running vacuum
// of the table and for every other open transaction that used it (a wait
// that would close a cycle of waits fails with ErrDeadlock), then
// switches the table to new, empty files. Until the transaction ends,
// other transactions that use the table wait before their first use, and
// vacuums of it wait. Commit keeps the empty files (and what the
// transaction wrote into them since), Rollback restores the old contents.
func (tx *Tx) Truncate(ctx context.Context, table string) error {
	db := tx.db
	if db.opts.Standby {
		return ErrReadOnly
	}
	if tx.done {
		return ErrTxDone
	}
	if _, err := db.Table(table); err != nil {
		return err
	}
	held := false
	for _, tr := range tx.truncs {
		held = held || tr.table == table
	}
	if !held {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(tx.ctx, cancel)
		defer stop()
		// The vacuum lock's holder (a DROP, TRUNCATE or VACUUM FULL, or another
		// transaction's TRUNCATE) may wait, directly or through others, for this
		// transaction: for one that used the table, PostgreSQL's lock upgrade
		// deadlock. The wait-for graph refuses such a wait with ErrDeadlock.
		unlockVacuum, _, err := db.uses.lockVacuum(ctx, table, txNode(tx), false)
		if err != nil {
			return err
		}
		release, err := db.uses.excludeFor(ctx, table, txNode(tx), tx)
		if err != nil {
			unlockVacuum()
			return err
		}
		tx.truncs = append(tx.truncs, truncation{table: table, release: func() { release(); unlockVacuum() }})
		if err := db.uses.use(ctx, tx, table); err != nil {
			return err // not reached: the table is tx's own now
		}
	}
	tl := db.tableLock(table)
	tl.Lock()
	defer tl.Unlock()
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed.Load() {
		return ErrClosed
	}
	if err := db.writable(); err != nil {
		return err
	}
	tx.t.MarkWritten() // its commit must be durable: it decides which files the table keeps
	what := fmt.Sprintf("truncate %q", table)
	next := db.cat.Clone()
	t, err := next.Table(table)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	newHeap, newIndexes, created, err := db.emptyFiles(what, next, t)
	if err != nil {
		return err
	}
	replaced, err := next.BeginTruncate(table, uint64(tx.t.XID()), newHeap, newIndexes)
	if err != nil {
		db.abandonRels(what, created)
		return fmt.Errorf("%s: %w", what, err)
	}
	return db.switchCatalog(catalogSwitch{what: what, next: next, created: created, retired: replaced})
}

// endTruncations settles the transaction's TRUNCATEs once it ended
// (committed or not) and lets their tables go. The caller holds none of
// the DB's locks. A failure leaves the catalog naming both file sets, for
// the next Open to settle by the commit log; it is logged, not returned:
// the transaction's outcome is already decided.
func (tx *Tx) endTruncations(committed bool) {
	if len(tx.truncs) == 0 {
		return
	}
	db := tx.db
	defer func() {
		for _, tr := range tx.truncs {
			tr.release()
		}
		tx.truncs = nil
	}()
	var names []string
	for _, tr := range tx.truncs {
		names = append(names, tr.table)
		tl := db.tableLock(tr.table)
		tl.Lock()
		defer tl.Unlock()
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed.Load() {
		return
	}
	next := db.cat.Clone()
	var retired []storage.RelFileNode
	for _, name := range names {
		r, err := next.EndTruncate(name, committed)
		if err != nil {
			db.opts.Logf("end of the TRUNCATE of %q: %v", name, err)
			return
		}
		retired = append(retired, r...)
	}
	what := fmt.Sprintf("end truncate %s (committed %v)", strings.Join(names, ", "), committed)
	if err := db.switchCatalog(catalogSwitch{what: what, next: next, retired: retired}); err != nil {
		db.opts.Logf("%s: left for the next Open: %v", what, err)
	}
}

// resolveTruncations settles, at Open after replay, every TRUNCATE that
// was open when the DB stopped: the new files if its transaction
// committed, the old ones otherwise. The files no longer named are left
// to the orphan sweep.
func (db *DB) resolveTruncations() error {
	var next *catalog.Catalog
	for _, t := range db.cat.Tables {
		if t.Truncating == nil {
			continue
		}
		if next == nil {
			next = db.cat.Clone()
		}
		committed := db.txns.Status(txn.XID(t.Truncating.XID)) == txn.Committed
		if _, err := next.EndTruncate(t.Name, committed); err != nil {
			return err
		}
		db.opts.Logf("recovery: the TRUNCATE of %q by transaction %d was open: its transaction committed: %v", t.Name, t.Truncating.XID, committed)
	}
	if next == nil {
		return nil
	}
	next.Seq = db.cat.Seq + 1
	if err := catalog.Save(db.fs, db.dir, next); err != nil {
		return errors.Join(fmt.Errorf("recovery: settle the open TRUNCATEs"), err)
	}
	db.setCatalog(next)
	return nil
}
