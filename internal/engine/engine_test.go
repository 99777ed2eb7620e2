package engine

import (
	"bytes"
	"errors"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
)

func TestRowsSurviveCloseAndReopen(t *testing.T) {
	opts := testOpts()
	db, dir := newDB(t, opts)
	if err := db.CreateTable("accounts", accountCols); err != nil {
		t.Fatal(err)
	}
	tx := mustTx(t, db)
	tids := map[int64]page.TID{}
	for i := int64(0); i < 500; i++ {
		tid, err := tx.Insert("accounts", []any{i, []byte("owner"), i * 10})
		if err != nil {
			t.Fatal(err)
		}
		tids[i] = tid
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	tx = mustTx(t, db)
	if _, err := tx.Update("accounts", tids[7], []any{int64(7), []byte("new owner"), int64(-1)}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Delete("accounts", tids[8]); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db2, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer closeDB(t, db2)
	if ri := db2.RecoveryInfo(); !ri.CleanShutdown || ri.Replayed != 0 {
		t.Fatalf("recovery after clean close: %+v", ri)
	}
	rows := scanAll(t, db2, "accounts")
	if len(rows) != 499 {
		t.Fatalf("%d rows after reopen, want 499", len(rows))
	}
	if r := rows[7]; !bytes.Equal(bs(r[1]), []byte("new owner")) || i64(r[2]) != -1 {
		t.Fatalf("row 7 = %v, want the update", r)
	}
	if _, ok := rows[8]; ok {
		t.Fatal("deleted row 8 is visible")
	}
	if r := rows[499]; i64(r[2]) != 4990 {
		t.Fatalf("row 499 = %v", r)
	}
}

func TestUncommittedAndRolledBackRowsAreInvisible(t *testing.T) {
	db, _ := newDB(t, testOpts())
	if err := db.CreateTable("t", accountCols); err != nil {
		t.Fatal(err)
	}
	open := mustTx(t, db)
	if _, err := open.Insert("t", []any{1, "a", 1}); err != nil {
		t.Fatal(err)
	}
	rb := mustTx(t, db)
	if _, err := rb.Insert("t", []any{2, "b", 2}); err != nil {
		t.Fatal(err)
	}
	if err := rb.Rollback(); err != nil {
		t.Fatal(err)
	}
	if rows := scanAll(t, db, "t"); len(rows) != 0 {
		t.Fatalf("other transactions see %v", rows)
	}
	// A transaction sees its own insert.
	seen := 0
	if err := open.Scan("t", func(page.TID, []any) error { seen++; return nil }); err != nil || seen != 1 {
		t.Fatalf("own insert: seen %d, err %v", seen, err)
	}
	if err := open.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := open.Commit(); !errors.Is(err, ErrTxDone) {
		t.Fatalf("second commit: %v", err)
	}
	if rows := scanAll(t, db, "t"); len(rows) != 1 {
		t.Fatalf("after commit: %v", rows)
	}
}
