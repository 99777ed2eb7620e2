package engine

import (
	"testing"
)

func TestOpenAfterCrashReplaysCommittedWorkAndDropsUncommitted(t *testing.T) {
	opts := testOpts()
	db, dir := newDB(t, opts)
	if err := db.CreateTable("t", accountCols); err != nil {
		t.Fatal(err)
	}
	tx := mustTx(t, db)
	for i := int64(0); i < 2000; i++ {
		if _, err := tx.Insert("t", []any{i, "x", i}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	loser := mustTx(t, db)
	for i := int64(5000); i < 5100; i++ {
		if _, err := loser.Insert("t", []any{i, "lost", i}); err != nil {
			t.Fatal(err)
		}
	}
	abandon(t, db)

	db2, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer closeDB(t, db2)
	ri := db2.RecoveryInfo()
	if ri.CleanShutdown || ri.Replayed == 0 || ri.TornTail != nil {
		t.Fatalf("recovery info %+v, want a replay without a torn tail", ri)
	}
	rows := scanAll(t, db2, "t")
	if len(rows) != 2000 {
		t.Fatalf("%d rows after recovery, want 2000", len(rows))
	}
	for id := range rows {
		if id >= 5000 {
			t.Fatalf("uncommitted row %d visible after recovery", id)
		}
	}
	// The replayed directory keeps working.
	tx = mustTx(t, db2)
	if _, err := tx.Insert("t", []any{int64(9999), "y", int64(1)}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}
