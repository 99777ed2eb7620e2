package engine

import (
	"context"
	"fmt"
	"slices"

	"github.com/vacuumops/vacuum-operator/internal/engine/btree"
	"github.com/vacuumops/vacuum-operator/internal/engine/catalog"
	"github.com/vacuumops/vacuum-operator/internal/engine/heap"
	"github.com/vacuumops/vacuum-operator/internal/engine/row"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
)

func (db *DB) btreeDeps() btree.Deps {
	return btree.Deps{Pool: db.pool, Storage: db.st, Log: db.log}
}

// indexTree returns the (cached) index handle of relfilenode rel.
func (db *DB) indexTree(rel storage.RelFileNode) *btree.Index {
	db.hmu.Lock()
	defer db.hmu.Unlock()
	if t, ok := db.handles[rel].(*btree.Index); ok {
		return t
	}
	t := btree.Open(db.btreeDeps(), rel)
	db.handles[rel] = t
	return t
}

// buildIndex builds ix bottom-up from an entry for every tuple of t that
// is not dead to everyone (live, recently dead, or written by a
// transaction still running), so that every snapshot finds its rows. The
// caller holds db.mu exclusively, so no row changes run meanwhile.
//
// A unique index (or a primary key, notNull) is refused when two versions
// that hold their key now, or may once their transaction ends (live or
// pending: heap.ClaimOf), share a key (ErrUniqueViolation), or when such a
// version holds NULL and notNull is set (ErrNotNull).
func (db *DB) buildIndex(ctx context.Context, t *catalog.Table, ix *catalog.Index, notNull bool) error {
	col := t.ColumnIndex(ix.Column)
	horizon := db.txns.OldestXmin()
	h := db.heapRel(t.Rel)
	var entries []btree.Entry
	var claimed []int64 // keys of versions that are not gone, for the unique check

	err := db.walkHeap(ctx, t.Rel, horizon, nil, func(hp *heapPage) error {
		for _, tup := range hp.Tuples {
			if tup.Status == heap.Dead {
				continue
			}
			key, ok, err := indexKey(t.Columns, tup.Data, col)
			if err != nil {
				return fmt.Errorf("table %q at %v: %w", t.Name, tup.TID, err)
			}
			gone := h.ClaimOf(&tup.Header, 0).State == heap.ClaimGone
			if !ok && notNull && !gone {
				return &row.ValueError{Column: ix.Column, Type: t.Columns[col].TypeName(),
					Err: fmt.Errorf("a row at %v holds NULL: %w", tup.TID, ErrNotNull)}
			}
			if ok {
				entries = append(entries, btree.Entry{Key: key, TID: tup.TID})
				if ix.Unique && !gone {
					claimed = append(claimed, key)
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	slices.Sort(claimed)
	for i := 1; i < len(claimed); i++ {
		if claimed[i] == claimed[i-1] {
			return &UniqueViolationError{Index: ix.Name, Column: ix.Column, Key: claimed[i]}
		}
	}
	slices.SortFunc(entries, btree.Compare)
	i := 0
	next := func() (btree.Entry, bool, error) {
		if i >= len(entries) {
			return btree.Entry{}, false, nil
		}
		i++
		return entries[i-1], true, nil
	}
	tree, err := btree.Build(db.btreeDeps(), ix.Rel, next, nil, func() error { return ctx.Err() })
	if err != nil {
		return err
	}
	db.hmu.Lock()
	db.handles[ix.Rel] = tree
	db.hmu.Unlock()
	return nil
}

// indexKey is the key of column col of an encoded row, false when it is
// NULL (a NULL key has no index entry).
func indexKey(cols []Column, data []byte, col int) (int64, bool, error) {
	v, err := row.ValueAt(cols, data, col)
	if err != nil || v == nil {
		return 0, false, err
	}
	k, ok := row.AsInt64(v)
	if !ok {
		return 0, false, fmt.Errorf("column %q: %T is not an index key", cols[col].Name, v)
	}
	return k, true, nil
}
