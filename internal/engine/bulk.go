package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/vacuumops/vacuum-operator/internal/engine/buffer"
	"github.com/vacuumops/vacuum-operator/internal/engine/heap"
	"github.com/vacuumops/vacuum-operator/internal/engine/row"
)

// ErrHasIndexes is returned by BulkInsert on a table that has indexes:
// load first, then CreateIndex (which builds each index bottom-up).
var ErrHasIndexes = errors.New("bulk insert into a table with indexes")

// BulkInsert appends the rows next yields (until it returns false) to
// table, filling whole new pages at the end of the heap and logging one
// WAL record per page instead of one per row (PostgreSQL's COPY into a
// fresh table, roughly). The rows belong to this transaction like
// inserted ones: invisible to others until Commit, dead if it rolls back
// or the process dies first. The table must have no index
// (ErrHasIndexes); create them after the load. BulkInsert holds the
// table's exclusive lock, so row operations of other transactions on the
// table wait until it returns. next runs with that lock and db.mu held: it
// must not use the DB. It returns the number of rows stored; ctx is checked
// once a page.
func (tx *Tx) BulkInsert(ctx context.Context, table string, next func() ([]any, bool, error)) (n int64, err error) {
	tl := tx.db.tableLock(table)
	tl.Lock()
	defer tl.Unlock()
	tx.db.mu.RLock()
	defer tx.db.mu.RUnlock()
	switch {
	case tx.db.closed.Load():
		return 0, ErrClosed
	case tx.done:
		return 0, ErrTxDone
	}
	if err := tx.db.writable(); err != nil {
		return 0, err
	}
	t, err := tx.db.cat.Table(table)
	if err != nil {
		return 0, err
	}
	if len(t.Indexes) > 0 {
		return 0, fmt.Errorf("table %q has %d indexes: %w", table, len(t.Indexes), ErrHasIndexes)
	}
	s := tx.db.pool.NewStrategy(buffer.BulkWrite, 0, &tx.db.usage)
	loader := tx.db.heapRel(t.Rel).NewBulkLoader(s)
	tx.t.MarkWritten()
	h := heap.TupleHeader{Xmin: tx.t.XID(), Infomask: heap.XmaxInvalid}
	var data []byte
	lastBlock := uint32(0)
	defer func() {
		if ferr := loader.Finish(); ferr != nil && err == nil {
			err = fmt.Errorf("bulk insert into %q: %w", table, ferr)
		}
		if err != nil {
			// Rows already stored are the transaction's: it can only roll back.
			tx.failed = err
		}
	}()
	for {
		vals, ok, err := next()
		if err != nil {
			return n, fmt.Errorf("bulk insert into %q: row %d: %w", table, n, err)
		}
		if !ok {
			return n, nil
		}
		data, err = row.AppendEncode(data[:0], t.Columns, vals)
		if err != nil {
			return n, fmt.Errorf("bulk insert into %q: row %d: %w", table, n, err)
		}
		tid, err := loader.Add(h, data)
		if err != nil {
			return n, fmt.Errorf("bulk insert into %q: %w", table, err)
		}
		n++
		if tid.Block != lastBlock {
			lastBlock = tid.Block
			if err := ctx.Err(); err != nil {
				return n, fmt.Errorf("bulk insert into %q: %w", table, err)
			}
		}
	}
}
