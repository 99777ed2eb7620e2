package engine

import (
	"context"
	"errors"
	"testing"
)

var bulkCols = []Column{{Name: "id", Type: Int8}, {Name: "pay", Type: Bytea}}

// rowsUpTo yields rows id 1..n with a 100-byte payload.
func rowsUpTo(n int64) func() ([]any, bool, error) {
	id := int64(0)
	return func() ([]any, bool, error) {
		if id >= n {
			return nil, false, nil
		}
		id++
		return []any{id, make([]byte, 100)}, true, nil
	}
}

func TestBulkInsertRowsAreCommittedIndexedAndSurviveACrash(t *testing.T) {
	db, dir := newDB(t, testOpts())
	if err := db.CreateTable("b", bulkCols); err != nil {
		t.Fatal(err)
	}
	tx := mustTx(t, db)
	n, err := tx.BulkInsert(context.Background(), "b", rowsUpTo(3000))
	if err != nil || n != 3000 {
		t.Fatalf("BulkInsert = %d, %v; want 3000 rows", n, err)
	}
	if got := len(scanAll(t, db, "b")); got != 0 {
		t.Errorf("another transaction sees %d uncommitted bulk rows", got)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateIndex("b_id", "b", "id"); err != nil {
		t.Fatal(err)
	}
	// Crash: the rows are in the WAL only (one record per page).
	abandon(t, db)
	db, err = Open(dir, testOpts())
	if err != nil {
		t.Fatal(err)
	}
	defer closeDB(t, db)
	rows := scanAll(t, db, "b")
	if len(rows) != 3000 {
		t.Fatalf("%d rows after recovery, want 3000", len(rows))
	}
	tx = mustTx(t, db)
	defer endTx(tx)
	for _, id := range []int64{1, 1500, 3000} {
		found, err := tx.IndexLookup("b_id", id)
		if err != nil || len(found) != 1 {
			t.Errorf("index lookup of %d: %v, %v", id, found, err)
		}
	}
	checkClean(t, db)
}

func TestBulkInsertRolledBackLeavesNoVisibleRows(t *testing.T) {
	db, _ := newDB(t, testOpts())
	if err := db.CreateTable("b", bulkCols); err != nil {
		t.Fatal(err)
	}
	tx := mustTx(t, db)
	if _, err := tx.BulkInsert(context.Background(), "b", rowsUpTo(500)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if got := len(scanAll(t, db, "b")); got != 0 {
		t.Errorf("%d rows visible after rollback", got)
	}
	checkClean(t, db)
}

func TestBulkInsertRefusesBadInput(t *testing.T) {
	db, _ := newDB(t, testOpts())
	if err := db.CreateTable("b", bulkCols); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateTable("ix", bulkCols); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateIndex("ix_id", "ix", "id"); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("source failed")
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name, table string
		ctx         context.Context
		next        func() ([]any, bool, error)
		want        error
	}{
		{"table with an index", "ix", context.Background(), rowsUpTo(1), ErrHasIndexes},
		{"no such table", "nope", context.Background(), rowsUpTo(1), ErrNoSuchTable},
		{"source error", "b", context.Background(), func() ([]any, bool, error) { return nil, false, boom }, boom},
		{"wrong type", "b", context.Background(), func() ([]any, bool, error) { return []any{"x", []byte{}}, true, nil }, nil},
		{"cancelled", "b", cancelled, rowsUpTo(1000), context.Canceled},
	} {
		t.Run(c.name, func(t *testing.T) {
			tx := mustTx(t, db)
			_, err := tx.BulkInsert(c.ctx, c.table, c.next)
			if err == nil || (c.want != nil && !errors.Is(err, c.want)) {
				t.Errorf("BulkInsert = %v, want %v", err, c.want)
			}
			if c.table == "b" {
				// The transaction holds a failed bulk load: it can only roll back.
				if err := tx.Commit(); err == nil {
					t.Errorf("Commit after a failed BulkInsert succeeded")
				}
			} else {
				endTx(tx)
			}
			if got := len(scanAll(t, db, "b")); got != 0 {
				t.Errorf("%d rows visible after a failed bulk insert", got)
			}
		})
	}
	checkClean(t, db)
}
