package engine

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/vacuumops/vacuum-operator/internal/engine/buffer"
	"github.com/vacuumops/vacuum-operator/internal/engine/catalog"
	"github.com/vacuumops/vacuum-operator/internal/engine/heap"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/row"
	"github.com/vacuumops/vacuum-operator/internal/engine/txn"
)

// Recheck is the caller's condition and new values for a row, called by
// UpdateRow with the row's current version (as the statement first saw
// it, and again with each newer version after a wait, as PostgreSQL's
// EvalPlanQual re-evaluates a WHERE clause). It returns the values to
// store and true, or false to leave the row alone. It runs with no engine
// lock held, as Scan's fn does, so it may read the DB (the catalog, say);
// it must not use the transaction.
type Recheck func(cur []any) (vals []any, ok bool, err error)

// UpdateRow updates the row at tid as READ COMMITTED does: the values are
// f's, computed from the row's current version. If another open
// transaction changed the row, UpdateRow waits for it to end (cancelled
// by BeginTx's context; ErrDeadlock if the wait would close a cycle); if
// it rolled back, f runs again on the same version; if it committed an
// update, UpdateRow follows the update chain to the newest version and
// runs f on that; if it deleted the row, nothing is updated. It returns
// the new version's TID and whether a row was updated.
func (tx *Tx) UpdateRow(table string, tid page.TID, f Recheck) (page.TID, bool, error) {
	return tx.modifyRow(table, tid, f)
}

// DeleteRow is UpdateRow for a delete: f's values are ignored, its ok
// says whether the row (in its newest version) is still to be deleted.
func (tx *Tx) DeleteRow(table string, tid page.TID, f Recheck) (bool, error) {
	_, ok, err := tx.modifyRow(table, tid, func(cur []any) ([]any, bool, error) {
		_, ok, err := f(cur)
		return nil, ok, err
	})
	return ok, err
}

// modifyRow is UpdateRow, and DeleteRow when f returns nil values.
func (tx *Tx) modifyRow(table string, tid page.TID, f Recheck) (page.TID, bool, error) {
	unlock, err := tx.enter(table)
	if err != nil {
		return page.TID{}, false, err
	}
	defer func() { unlock() }()
	if err := tx.db.writable(); err != nil {
		return page.TID{}, false, err
	}
	t, err := tx.db.cat.Table(table)
	if err != nil {
		return page.TID{}, false, err
	}
	newest := false // after a wait: tid is a version the snapshot may not see
	// The statement found the row already: reading it again is no new access of its page
	// (buffer.RevisitOf).
	rv := buffer.RevisitOf(nil)
	for {
		cur, ok, err := tx.current(t, tid, newest, rv)
		if err != nil || !ok {
			return page.TID{}, false, err
		}
		// f is the caller's: it runs with the operation's locks let go (callOut), as
		// Scan's and IndexRange's callbacks do. Under them, a catalog read of f's (the
		// engine server's WHERE to_regclass(...)) took db.mu shared a second time, behind
		// a DDL waiting for it, which waited for the first hold: both hung for good.
		var vals []any
		if err := tx.callOut(t, &unlock, func() error {
			var err error
			vals, ok, err = f(cur)
			return err
		}); err != nil || !ok {
			return page.TID{}, false, err
		}
		// Indexes created meanwhile get the new version's entries too.
		if t, err = tx.db.cat.Table(table); err != nil {
			return page.TID{}, false, err
		}
		for { // write vals over this version, waiting out its changers
			ntid, err := tx.applyRow(&t, &unlock, tid, cur, vals, newest)
			var cue *heap.ConcurrentUpdateError
			if !errors.As(err, &cue) {
				return ntid, err == nil, err
			}
			if !cue.InProgress {
				if !cue.Updated {
					return page.TID{}, false, nil // deleted by a committed transaction
				}
				tid, newest = cue.Next, true
				break // re-check f on the newer version
			}
			rel := t.Rel
			unlock()
			unlock = func() {}
			if err := tx.waitFor(cue.Xmax); err != nil {
				return page.TID{}, false, fmt.Errorf("update %q at %v: %w", table, tid, err)
			}
			if unlock, err = tx.enter(table); err != nil {
				return page.TID{}, false, err
			}
			if t, err = tx.db.cat.Table(table); err != nil {
				return page.TID{}, false, err
			}
			if t.Rel != rel {
				return page.TID{}, false, fmt.Errorf("table %q: %w", table, ErrTableRewritten)
			}
			// The same version again: if its changer rolled back, vals
			// (computed from it) still hold.
		}
	}
}

// current is the row at tid: as the snapshot sees it, or with newest
// the version itself when its inserter committed (ok false if neither),
// its page read through s.
func (tx *Tx) current(t *catalog.Table, tid page.TID, newest bool, s *buffer.Strategy) ([]any, bool, error) {
	if !newest {
		return tx.fetchWith(t, tid, s)
	}
	_, data, ok, err := tx.db.heapRel(t.Rel).Examine(tid, s)
	if err != nil || !ok {
		return nil, false, err
	}
	vals, err := row.Decode(t.Columns, data)
	if err != nil {
		return nil, false, fmt.Errorf("table %q at %v: %w", t.Name, tid, err)
	}
	return vals, true, nil
}

// applyRow writes vals over the version at tid (deletes it when vals is
// nil); old is the values of that version. The heap write comes first, so that a concurrent change of the
// row is met (and waited for) as a row conflict; then the unique keys are
// claimed and the index entries added, as PostgreSQL checks uniqueness
// when it inserts the index entry. A unique violation at that point
// leaves a version without its index entries: the transaction can only
// roll back (as any error does in PostgreSQL).
func (tx *Tx) applyRow(t **catalog.Table, unlock *func(), tid page.TID, old, vals []any, newest bool) (page.TID, error) {
	h := tx.db.heapRel((*t).Rel)
	if vals == nil {
		if newest {
			return page.TID{}, h.DeleteNewest(tx.t, tid, nil)
		}
		return page.TID{}, h.Delete(tx.t, tid, nil)
	}
	data, err := row.Encode((*t).Columns, vals)
	if err != nil {
		return page.TID{}, fmt.Errorf("update %q: %w", (*t).Name, err)
	}
	var ntid page.TID
	if newest {
		ntid, err = h.UpdateNewest(tx.t, tid, data, nil)
	} else {
		ntid, err = h.Update(tx.t, tid, data, nil)
	}
	if err != nil {
		return page.TID{}, err
	}
	// The old version now has xmax = this transaction: no conflict. An update that keeps
	// every unique key as it was cannot make a duplicate (any other writer of those keys
	// finds the old version, now this transaction's, and waits for it), so it skips the
	// check, which reads every version under each key (pgbench's tpcb-like spent a third of
	// its CPU there).
	same, err := uniqueKeysUnchanged(*t, old, vals)
	if err != nil {
		tx.failed = fmt.Errorf("update %q: %w", (*t).Name, err)
		return page.TID{}, tx.failed
	}
	if !same {
		release, err := tx.claimUniqueWaiting(t, unlock, vals, page.TID{})
		if err != nil {
			tx.failed = fmt.Errorf("update %q: %w", (*t).Name, err)
			return page.TID{}, tx.failed
		}
		defer release()
	}
	if err := tx.addIndexEntries(*t, vals, ntid); err != nil {
		return page.TID{}, fmt.Errorf("update %q: %w", (*t).Name, err)
	}
	return ntid, nil
}

// LockStats counts the waits of row changes and unique-key checks since
// Open, and the deadlocks of every wait (for the server's views:
// pg_locks-like figures).
type LockStats struct {
	Waits     int64 // row and unique-key waits that found the other transaction running
	Deadlocks int64 // waits refused with ErrDeadlock, table-level ones too
}

// LockStats returns the wait counters.
func (db *DB) LockStats() LockStats {
	return LockStats{Waits: db.txns.Waits(), Deadlocks: db.txns.Deadlocks() + db.uses.deadlocks.Load()}
}

// waitFor makes tx wait (until its context is done) for transaction x,
// which changed a row or holds a unique key tx needs, to end. The wait
// is an edge of the engine's wait-for graph (tableUses), so it fails with
// ErrDeadlock when it would close a cycle, table-level waits included.
func (tx *Tx) waitFor(x txn.XID) error {
	return tx.db.uses.waitTx(tx, x, func() error { return tx.db.txns.Wait(tx.ctx, tx.t.XID(), x) })
}

// uniqueKeysUnchanged reports whether vals have old's key in every unique index of t.
func uniqueKeysUnchanged(t *catalog.Table, old, vals []any) (bool, error) {
	if old == nil {
		return false, nil
	}
	for i := range t.Indexes {
		ix := &t.Indexes[i]
		if !ix.Unique {
			continue
		}
		a, aok, err := keyOfValues(t, ix, old)
		if err != nil {
			return false, err
		}
		b, bok, err := keyOfValues(t, ix, vals)
		if err != nil {
			return false, err
		}
		if aok != bok || !bytes.Equal(a, b) {
			return false, nil
		}
	}
	return true, nil
}
