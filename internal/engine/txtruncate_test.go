package engine

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/catalog"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs/faultfs"
)

// fillTruncateTable makes table t (id, owner, balance) with an index on id
// and rows 1..n.
func fillTruncateTable(t *testing.T, db *DB, n int) {
	t.Helper()
	if err := db.CreateTable("t", accountCols); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateIndex("t_id", "t", "id"); err != nil {
		t.Fatal(err)
	}
	tx := mustTx(t, db)
	for id := 1; id <= n; id++ {
		if _, err := tx.Insert("t", []any{id, "old", id}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// wantRows checks that t holds exactly the rows with ids want, by a scan and
// through the index.
func wantRows(t *testing.T, db *DB, what string, want ...int64) {
	t.Helper()
	rows := scanAll(t, db, "t")
	if len(rows) != len(want) {
		t.Fatalf("%s: %d rows, want %d (%v)", what, len(rows), len(want), want)
	}
	tx := mustTx(t, db)
	defer endTx(tx)
	for _, id := range want {
		if rows[id] == nil {
			t.Fatalf("%s: row %d missing", what, id)
		}
		found, err := tx.IndexLookup("t_id", id)
		if err != nil || len(found) != 1 {
			t.Fatalf("%s: index lookup of %d: %d rows, %v", what, id, len(found), err)
		}
	}
}

func TestTruncateInATransactionIsUndoneByRollbackAndKeptByCommit(t *testing.T) {
	db, _ := newDB(t, testOpts())
	fillTruncateTable(t, db, 50)
	old := make([]int64, 50)
	for i := range old {
		old[i] = int64(i + 1)
	}

	tx := mustTx(t, db)
	if err := tx.Truncate(context.Background(), "t"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Insert("t", []any{1000, "new", 1}); err != nil {
		t.Fatal(err)
	}
	seen := 0
	if err := tx.Scan("t", func(page.TID, []any) error { seen++; return nil }); err != nil || seen != 1 {
		t.Fatalf("the truncating transaction sees %d rows (%v), want its own 1", seen, err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	wantRows(t, db, "after TRUNCATE and ROLLBACK", old...)
	checkClean(t, db)

	tx = mustTx(t, db)
	if err := tx.Truncate(context.Background(), "t"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Truncate(context.Background(), "t"); err != nil { // twice in one transaction, as PostgreSQL allows
		t.Fatal(err)
	}
	if _, err := tx.Insert("t", []any{1000, "new", 1}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	wantRows(t, db, "after TRUNCATE and COMMIT", 1000)
	checkClean(t, db)
	if n := db.uses.waiting("t"); n != 0 {
		t.Fatalf("%d DDLs still hold the table after the transactions ended", n)
	}
}

// An open TRUNCATE holds the table as ACCESS EXCLUSIVE: it waits for a
// transaction that read the table, and a reader that starts meanwhile
// waits until the TRUNCATE's transaction ends, then sees its outcome.
func TestTruncateInATransactionWaitsForReadersAndMakesNewOnesWait(t *testing.T) {
	db, _ := newDB(t, testOpts())
	fillTruncateTable(t, db, 10)
	early := mustTx(t, db)
	if _, _, err := early.Get("t", page.TID{Block: 0, Off: 1}); err != nil {
		t.Fatal(err)
	}
	tx := mustTx(t, db)
	truncated := make(chan error, 1)
	go func() { truncated <- tx.Truncate(context.Background(), "t") }()
	select {
	case err := <-truncated:
		t.Fatalf("TRUNCATE returned (%v) while a transaction that read the table was open", err)
	case <-time.After(100 * time.Millisecond):
	}
	endTx(early)
	if err := <-truncated; err != nil {
		t.Fatal(err)
	}
	reader := mustTx(t, db)
	counted := make(chan int, 1)
	go func() {
		n := 0
		if err := reader.Scan("t", func(page.TID, []any) error { n++; return nil }); err != nil {
			t.Error(err)
		}
		counted <- n
	}()
	select {
	case n := <-counted:
		t.Fatalf("a reader saw %d rows while the TRUNCATE's transaction was open", n)
	case <-time.After(100 * time.Millisecond):
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n := <-counted; n != 10 {
		t.Fatalf("the reader that waited for the rolled-back TRUNCATE saw %d rows, want 10", n)
	}
	endTx(reader)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	holder := mustTx(t, db)
	if _, _, err := holder.Get("t", page.TID{Block: 0, Off: 1}); err != nil {
		t.Fatal(err)
	}
	other := mustTx(t, db)
	if err := other.Truncate(ctx, "t"); !errors.Is(err, ErrTableInUse) {
		t.Fatalf("TRUNCATE whose context ends while another transaction uses the table: %v, want ErrTableInUse", err)
	}
	endTx(other)
	endTx(holder)
	wantRows(t, db, "after a TRUNCATE that gave up", 1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
}

// A crash (the process gone, nothing flushed at close) with the TRUNCATE's
// transaction open keeps the old rows; after its commit, the new ones.
func TestTruncateInATransactionSurvivesACrashOnEitherSideOfItsCommit(t *testing.T) {
	for _, commit := range []bool{false, true} {
		t.Run(fmt.Sprintf("committed=%v", commit), func(t *testing.T) {
			opts := crashOpts()
			opts.LockTimeout = 0
			db, dir := newDB(t, opts)
			fillTruncateTable(t, db, 20)
			tx := mustTx(t, db)
			if err := tx.Truncate(context.Background(), "t"); err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Insert("t", []any{1000, "new", 1}); err != nil {
				t.Fatal(err)
			}
			if commit {
				// Crash between the commit record and the catalog's settling:
				// the settling is what the reopen must redo.
				db.mu.Lock()
				cat := db.cat.Clone()
				db.mu.Unlock()
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
				if tbl, _ := db.cat.Table("t"); tbl.Truncating != nil {
					t.Fatal("the commit left the TRUNCATE open in the catalog")
				}
				db.mu.Lock()
				if err := catalog.Save(db.fs, db.dir, cat); err != nil {
					db.mu.Unlock()
					t.Fatal(err)
				}
				db.mu.Unlock()
			}
			abandon(t, db)
			db, err := Open(dir, opts)
			if err != nil {
				t.Fatalf("reopen after the crash: %v", err)
			}
			defer closeDB(t, db)
			if commit {
				wantRows(t, db, "committed TRUNCATE after a crash", 1000)
			} else {
				want := make([]int64, 20)
				for i := range want {
					want[i] = int64(i + 1)
				}
				wantRows(t, db, "open TRUNCATE after a crash", want...)
			}
			if tbl, _ := db.cat.Table("t"); tbl.Truncating != nil {
				t.Fatal("the reopen left the TRUNCATE open in the catalog")
			}
			if ri := db.RecoveryInfo(); !commit && len(ri.OrphansRemoved) == 0 {
				t.Fatal("the reopen removed no file: the other file set was left behind")
			}
			checkClean(t, db)
		})
	}
}

// A power loss at every few file operations of BEGIN; TRUNCATE; INSERT;
// COMMIT leaves the old rows or the new ones, never a mix or an empty
// table, and the new ones whenever the commit returned.
func TestTruncateInATransactionUnderPowerLossKeepsOldOrNewRows(t *testing.T) {
	opts := crashOpts()
	opts.LockTimeout = 0
	dir := filepath.Join(t.TempDir(), "data")
	if err := Init(dir, opts); err != nil {
		t.Fatal(err)
	}
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	fillTruncateTable(t, db, 20)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	old := make([]int64, 20)
	for i := range old {
		old[i] = int64(i + 1)
	}
	cur := old // the table's committed contents
	sawOld, sawNew := 0, 0
	for n, round := 1, 0; ; n, round = n+3, round+1 {
		ffs := faultfs.New(vfs.OS())
		o := opts
		o.FS = ffs
		ffs.CrashAfter(n, faultfs.PowerLossOptions{TearProb: 0.5, Seed: uint64(n)})
		next := []int64{int64(2000 + round)}
		committed := false
		db, err := Open(dir, o)
		if err == nil {
			err = func() error {
				tx, err := db.Begin()
				if err != nil {
					return err
				}
				defer endTx(tx)
				if err := tx.Truncate(context.Background(), "t"); err != nil {
					return err
				}
				if _, err := tx.Insert("t", []any{next[0], "new", 1}); err != nil {
					return err
				}
				if err := tx.Commit(); err != nil {
					return err
				}
				committed = true
				return db.Close()
			}()
			abandonAfterPowerLoss(db)
		}
		done := err == nil
		if !done && !errors.Is(err, faultfs.ErrPoweredOff) {
			t.Fatalf("crash after %d operations: %v, want a power loss", n, err)
		}
		db, err = Open(dir, opts)
		if err != nil {
			t.Fatalf("reopen after a power loss at operation %d: %v", n, err)
		}
		rows := scanAll(t, db, "t")
		switch {
		case len(rows) == len(next) && rows[next[0]] != nil:
			wantRows(t, db, fmt.Sprintf("power loss at operation %d (new rows)", n), next...)
			cur = next
			sawNew++
		case committed:
			t.Fatalf("power loss at operation %d, after the commit returned: rows %v, want only %d", n, keys(rows), next[0])
		default:
			wantRows(t, db, fmt.Sprintf("power loss at operation %d (old rows)", n), cur...)
			sawOld++
		}
		checkClean(t, db)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if done {
			break
		}
	}
	t.Logf("power losses kept the old rows %d times, the new ones %d times", sawOld, sawNew)
	if sawOld == 0 || sawNew < 2 {
		t.Fatalf("old rows %d times, new %d: the sweep missed one side of the commit", sawOld, sawNew)
	}
}

func keys(m map[int64][]any) []int64 {
	var out []int64
	for k := range m {
		out = append(out, k)
	}
	return out
}
