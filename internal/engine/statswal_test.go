package engine

import (
	"context"
	"testing"
)

// TestStatsAfterACheckpointWritesNoWAL: reading the table statistics (pg_stat_user_tables)
// is a read. Rows no scan has hinted yet, on pages a checkpoint has made clean, are what a
// hinting pass logs a full-page image for; Stats must leave them as they are, and a scan
// afterwards shows that it would have logged them.
func TestStatsAfterACheckpointWritesNoWAL(t *testing.T) {
	db, _ := newDB(t, testOpts())
	defer closeDB(t, db)
	if err := db.CreateTable("t", accountCols); err != nil {
		t.Fatal(err)
	}
	tx := mustTx(t, db)
	for i := int64(0); i < 400; i++ {
		if _, err := tx.Insert("t", []any{i, []byte("a row long enough to fill a few pages of the heap"), i}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}

	before := db.log.InsertLSN()
	st, err := db.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 1 || st[0].LiveTuples != 400 {
		t.Fatalf("stats %+v, want table t with 400 live tuples", st)
	}
	if after := db.log.InsertLSN(); after != before {
		t.Errorf("Stats wrote %d bytes of WAL after a checkpoint; a read of the statistics writes none", after-before)
	}

	// The same rows, read by a scan that hints them, are logged: the check above was not
	// vacuous.
	before = db.log.InsertLSN()
	if n := len(scanAll(t, db, "t")); n != 400 {
		t.Fatalf("scan saw %d rows, want 400", n)
	}
	if db.log.InsertLSN() == before {
		t.Fatal("a hinting scan after the checkpoint wrote no WAL: the rows were hinted already, so the test shows nothing")
	}
}
