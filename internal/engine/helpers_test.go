package engine

import (
	"context"
	"errors"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
)

// testOpts keeps the buffer pool and WAL segments small so tests exercise
// eviction and segment switches.
func testOpts() Options {
	return Options{BufferPoolBytes: 256 * page.Size, WALSegmentSize: 1 << 20, SegmentSize: 64 * page.Size}
}

// newDB initializes and opens a fresh data directory.
func newDB(t testing.TB, opts Options) (*DB, string) {
	t.Helper()
	dir := t.TempDir()
	if err := Init(dir, opts); err != nil {
		t.Fatalf("Init: %v", err)
	}
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("Close: %v", err)
		}
	})
	return db, dir
}

var accountCols = []Column{{Name: "id", Type: Int8}, {Name: "owner", Type: Bytea}, {Name: "balance", Type: Int8}}

func mustTx(t testing.TB, db *DB) *Tx {
	t.Helper()
	tx, err := db.Begin()
	if err != nil {
		t.Fatalf("Begin: %v", err)
	}
	return tx
}

// scanAll returns every visible row of table keyed by its first column.
func scanAll(t testing.TB, db *DB, table string) map[int64][]any {
	t.Helper()
	tx := mustTx(t, db)
	defer endTx(tx)
	out := map[int64][]any{}
	err := tx.Scan(table, func(tid page.TID, row []any) error {
		id := i64(row[0])
		if _, dup := out[id]; dup {
			t.Errorf("id %d visible twice (second at %v)", id, tid)
		}
		out[id] = row
		return nil
	})
	if err != nil {
		t.Fatalf("Scan %s: %v", table, err)
	}
	return out
}

// abandon drops db the way a crash would: no checkpoint, dirty buffers
// never written, the control file left "in production". Files and the
// lock are released so the directory can be reopened in this process.
func abandon(t testing.TB, db *DB) {
	t.Helper()
	if !db.closed.CompareAndSwap(false, true) {
		t.Fatal("abandon of a closed DB")
	}
	close(db.stop)
	db.bg.Wait()
	db.mu.Lock()
	defer db.mu.Unlock()
	if err := db.release(); err != nil {
		t.Logf("abandon: %v", err)
	}
}

// indexesAvailable: the crash tests create and verify an index on id.
var indexesAvailable = true

// verifyIndexes checks every committed row through the work table's index.
func verifyIndexes(t testing.TB, db *DB, committed map[int64]rowVal) {
	t.Helper()
	if !indexesAvailable {
		return
	}
	tx := mustTx(t, db)
	defer endTx(tx)
	for id, want := range committed {
		found, err := tx.IndexLookup(workTable+"_id", id)
		if err != nil {
			t.Fatalf("index lookup %d: %v", id, err)
		}
		if len(found) != 1 || i64(found[0].Row[2]) != want.N {
			t.Fatalf("index lookup %d: %v, want one row with n=%d", id, found, want.N)
		}
	}
}

// checkClean runs Check and fails on any problem.
func checkClean(t testing.TB, db *DB) {
	t.Helper()
	rep, err := db.Check(context.Background())
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	for _, p := range rep.Problems {
		t.Errorf("Check: %s", p)
	}
	if len(rep.Problems) > 0 {
		t.FailNow()
	}
}

// endTx rolls tx back unless it already finished.
func endTx(tx *Tx) {
	_ = tx.Rollback() // ErrTxDone after Commit is expected
}

// closeDB closes db, reporting any error but ErrClosed.
func closeDB(t testing.TB, db *DB) {
	t.Helper()
	if err := db.Close(); err != nil && !errors.Is(err, ErrClosed) {
		t.Errorf("Close: %v", err)
	}
}

// i64 and bs read a decoded column value (zero if of another type, which
// the comparison that follows then reports).
func i64(v any) int64 {
	switch x := v.(type) {
	case int32:
		return int64(x)
	case int16:
		return int64(x)
	}
	x, _ := v.(int64)
	return x
}

func bs(v any) []byte {
	x, _ := v.([]byte)
	return x
}
