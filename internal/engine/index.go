package engine

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/vacuumops/vacuum-operator/internal/engine/btree"
	"github.com/vacuumops/vacuum-operator/internal/engine/catalog"
	"github.com/vacuumops/vacuum-operator/internal/engine/heap"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/row"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
)

func (db *DB) btreeDeps() btree.Deps {
	return btree.Deps{Pool: db.pool, Storage: db.st, Log: db.log}
}

// indexTree returns the (cached) index handle of relfilenode rel.
func (db *DB) indexTree(rel storage.RelFileNode) *btree.Index {
	return cachedHandle(db, rel, func() *btree.Index { return btree.Open(db.btreeDeps(), rel) })
}

// buildIndex builds ix bottom-up from an entry for every tuple of t that
// is not dead to everyone (live, recently dead, or written by a
// transaction still running), so that every snapshot finds its rows. The
// caller holds db.mu exclusively, so no row changes run meanwhile.
//
// A unique index (or a primary key, notNull) is refused when two versions
// that hold their key now, or may once their transaction ends (live or
// pending: heap.ClaimOf), share a key without NULLs (ErrUniqueViolation),
// or when such a version holds NULL in a key column and notNull is set
// (ErrNotNull).
func (db *DB) buildIndex(ctx context.Context, t *catalog.Table, ix *catalog.Index, notNull bool) error {
	pos := t.KeyPositions(ix)
	keyCols := t.KeyColumns(ix)
	horizon := db.txns.OldestXmin()
	h := db.heapRel(t.Rel)
	var entries []btree.Entry
	var claimed [][]byte // keys of versions that are not gone, for the unique check

	err := db.walkHeap(ctx, t.Rel, horizon, nil, func(hp *heapPage) error {
		for _, tup := range hp.Tuples {
			if tup.Status == heap.Dead {
				continue
			}
			key, ok, err := row.KeyOf(t.Columns, tup.Data, pos)
			if err != nil {
				return fmt.Errorf("table %q at %v: %w", t.Name, tup.TID, err)
			}
			gone := h.ClaimOf(&tup.Header, 0).State == heap.ClaimGone
			if notNull && !gone && (!ok || row.KeyHasNull(keyCols, key)) {
				return db.nullKeyError(t, ix, tup.Data, tup.TID)
			}
			if !ok {
				continue
			}
			if len(key) > btree.MaxKeySize {
				return keyTooLong(ix, keyCols, key)
			}
			entries = append(entries, btree.Entry{Key: key, TID: tup.TID})
			if ix.Unique && !gone && !row.KeyHasNull(keyCols, key) {
				claimed = append(claimed, key)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	slices.SortFunc(claimed, bytes.Compare)
	for i := 1; i < len(claimed); i++ {
		if bytes.Equal(claimed[i], claimed[i-1]) {
			return uniqueViolation(ix, keyCols, claimed[i])
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
	db.handles.Store(ix.Rel, tree)
	return nil
}

// nullKeyError is ErrNotNull for the first key column of ix that the row
// data (at tid) holds NULL in.
func (db *DB) nullKeyError(t *catalog.Table, ix *catalog.Index, data []byte, tid page.TID) error {
	vals, err := row.Decode(t.Columns, data)
	if err != nil {
		return fmt.Errorf("table %q at %v: %w", t.Name, tid, err)
	}
	for _, p := range t.KeyPositions(ix) {
		if vals[p] == nil {
			return &row.ValueError{Column: t.Columns[p].Name, Type: t.Columns[p].TypeName(),
				Err: fmt.Errorf("a row at %v holds NULL: %w", tid, ErrNotNull)}
		}
	}
	return fmt.Errorf("table %q at %v: a NULL key without a NULL column: %w", t.Name, tid, ErrCorrupt)
}

// keyOfValues is ix's key of a row's values (vals in t's column order),
// false when every key column is NULL (no entry). A key longer than the
// B-tree takes is ErrKeyTooLong.
func keyOfValues(t *catalog.Table, ix *catalog.Index, vals []any) ([]byte, bool, error) {
	var key []byte
	allNull := true
	for _, p := range t.KeyPositions(ix) {
		if p < 0 || p >= len(vals) {
			return nil, false, fmt.Errorf("index %q: key column %d of a %d-column row: %w", ix.Name, p, len(vals), ErrCorrupt)
		}
		allNull = allNull && vals[p] == nil
		var err error
		if key, err = row.AppendKey(key, t.Columns[p:p+1], vals[p:p+1]); err != nil {
			return nil, false, err
		}
	}
	if allNull {
		return nil, false, nil
	}
	if len(key) > btree.MaxKeySize {
		return nil, false, keyTooLong(ix, t.KeyColumns(ix), key)
	}
	return key, true, nil
}

func keyTooLong(ix *catalog.Index, cols []row.Column, key []byte) error {
	return fmt.Errorf("index %q: key (%s) is %d bytes, at most %d: %w",
		ix.Name, strings.Join(ix.Columns, ", "), len(key), btree.MaxKeySize, ErrKeyTooLong)
}

// lookupKey encodes a lookup's values, a prefix of ix's columns (in t), as
// a key prefix; false when one is NULL (NULL equals nothing).
//
// An integer outside an int2 or int4 column's range is not an error here
// (an insert of it would be): it is encoded at int8 width, which every
// integer width shares, so it orders below or above every value the column
// can hold. A bound past the column's extremes thus clamps to them (an open
// range `id < 2^40` on an int4 key is every key, `id > 2^40` none, and an
// equality with it matches nothing), for every caller. Likewise a string
// longer than a varchar(n) column holds is encoded as text (the same
// bytes), not refused.
func lookupKey(t *catalog.Table, ix *catalog.Index, vals []any) ([]byte, bool, error) {
	if len(vals) > len(ix.Columns) {
		return nil, false, fmt.Errorf("index %q: %d key values for %d key columns: %w", ix.Name, len(vals), len(ix.Columns), ErrWrongType)
	}
	if slices.Contains(vals, nil) {
		return nil, false, nil
	}
	cols := slices.Clone(t.KeyColumns(ix)[:len(vals)])
	for i, c := range cols {
		switch {
		case (c.Type == row.Int2 || c.Type == row.Int4) && isGoInteger(vals[i]):
			cols[i].Type = row.Int8
		case c.Type == row.Varchar:
			cols[i].Type, cols[i].Length = row.Text, 0
		}
	}
	key, err := row.AppendKey(nil, cols, vals)
	if err != nil {
		return nil, false, fmt.Errorf("index %q: %w", ix.Name, err)
	}
	return key, true, nil
}

// isGoInteger reports whether v is of one of Go's integer types (those
// row.Normalize widens for an integer column).
func isGoInteger(v any) bool {
	switch v.(type) {
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return true
	}
	return false
}
