package engine

import (
	"context"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
)

func TestIndexFindsCurrentVersionsOnly(t *testing.T) {
	db, _ := newDB(t, testOpts())
	if err := db.CreateTable("t", accountCols); err != nil {
		t.Fatal(err)
	}
	tx := mustTx(t, db)
	tids := map[int64]page.TID{}
	for i := int64(0); i < 300; i++ {
		tid, err := tx.Insert("t", []any{i, "o", i % 7})
		if err != nil {
			t.Fatal(err)
		}
		tids[i] = tid
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	// The index is built from the existing rows.
	if err := db.CreateIndex("t_id", "t", "id"); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateIndex("t_bal", "t", "balance"); err != nil {
		t.Fatal(err)
	}
	tx = mustTx(t, db)
	// Move row 10 to key 1000; delete row 11.
	if _, err := tx.Update("t", tids[10], []any{int64(1000), "moved", int64(3)}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Delete("t", tids[11]); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}

	tx = mustTx(t, db)
	defer endTx(tx)
	lookup := func(index string, key int64) []Found {
		t.Helper()
		f, err := tx.IndexLookup(index, key)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	if f := lookup("t_id", 10); len(f) != 0 {
		t.Fatalf("old key 10 still finds %v", f)
	}
	if f := lookup("t_id", 11); len(f) != 0 {
		t.Fatalf("deleted row 11 found: %v", f)
	}
	if f := lookup("t_id", 1000); len(f) != 1 || string(bs(f[0].Row[1])) != "moved" {
		t.Fatalf("new key 1000 finds %v", f)
	}
	if f := lookup("t_id", 42); len(f) != 1 || f[0].TID != tids[42] {
		t.Fatalf("key 42 finds %v, want the row at %v", f, tids[42])
	}
	var keys []int64
	if err := tx.IndexRange("t_id", []any{5}, []any{14}, func(f Found) error { keys = append(keys, i64(f.Row[0])); return nil }); err != nil {
		t.Fatal(err)
	}
	if want := []int64{5, 6, 7, 8, 9, 12, 13, 14}; len(keys) != len(want) {
		t.Fatalf("range 5..14 = %v, want %v", keys, want)
	}
	// Balance 3: rows i%7==3 minus row 10 (3 -> 3 via update, still 3) ...
	n := 0
	for i := int64(0); i < 300; i++ {
		if i%7 == 3 && i != 11 {
			n++
		}
	}
	if f := lookup("t_bal", 3); len(f) != n {
		t.Fatalf("balance 3 finds %d rows, want %d", len(f), n)
	}

	stats, err := db.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	st := stats[0]
	if st.LiveTuples != 299 || st.DeadTuples != 2 || len(st.Indexes) != 2 || st.Indexes[0].Entries != 301 {
		t.Fatalf("stats %+v, want 299 live, 2 dead (old version of 10, deleted 11), 301 entries in t_id", st)
	}
	checkClean(t, db)
}
