package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/row"
)

var keyedCols = []Column{{Name: "k", Type: Int4}, {Name: "v", Type: Text}}

func newKeyed(t *testing.T) *DB {
	t.Helper()
	db, _ := newDB(t, testOpts())
	if err := db.CreateTable("kv", keyedCols); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateUniqueIndex("kv_k", "kv", "k"); err != nil {
		t.Fatal(err)
	}
	return db
}

// waitForWaiters polls until n waits have started (Wait counts a wait
// before it blocks).
func waitForWaiters(t *testing.T, db *DB, n int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for db.txns.Waits() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d waits after 20s, want %d", db.txns.Waits(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func wantUniqueViolation(t *testing.T, err error, index string, key int64) {
	t.Helper()
	var uv *UniqueViolationError
	if !errors.Is(err, ErrUniqueViolation) || !errors.As(err, &uv) || uv.Index != index || len(uv.Key) != 1 || i64(uv.Key[0]) != key {
		t.Fatalf("err = %v, want a unique violation of %q on key %d", err, index, key)
	}
}

// TestSecondInserterOfAKeyWaitsForTheFirst: two transactions insert the
// same key; the second waits for the first to end, then fails if it
// committed and succeeds if it rolled back.
func TestSecondInserterOfAKeyWaitsForTheFirst(t *testing.T) {
	for _, firstCommits := range []bool{true, false} {
		name := map[bool]string{true: "first commits", false: "first rolls back"}[firstCommits]
		t.Run(name, func(t *testing.T) {
			db := newKeyed(t)
			a := mustTx(t, db)
			if _, err := a.Insert("kv", []any{7, "a"}); err != nil {
				t.Fatal(err)
			}
			b := mustTx(t, db)
			defer endTx(b)
			done := make(chan error, 1)
			go func() {
				_, err := b.Insert("kv", []any{7, "b"})
				done <- err
			}()
			waitForWaiters(t, db, 1)
			select {
			case err := <-done:
				t.Fatalf("second insert returned %v while the first was open", err)
			case <-time.After(20 * time.Millisecond):
			}
			if firstCommits {
				if err := a.Commit(); err != nil {
					t.Fatal(err)
				}
				wantUniqueViolation(t, <-done, "kv_k", 7)
				return
			}
			if err := a.Rollback(); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatalf("second insert after the first rolled back: %v", err)
			}
			if err := b.Commit(); err != nil {
				t.Fatal(err)
			}
			rows := scanAll(t, db, "kv")
			if len(rows) != 1 {
				t.Fatalf("%d rows, want 1", len(rows))
			}
		})
	}
}

func TestUniqueIndexChecksEveryWrite(t *testing.T) {
	db := newKeyed(t)
	setup := mustTx(t, db)
	tid1, err := setup.Insert("kv", []any{1, "one"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := setup.Insert("kv", []any{2, "two"}); err != nil {
		t.Fatal(err)
	}
	if err := setup.Commit(); err != nil {
		t.Fatal(err)
	}
	tx := mustTx(t, db)
	defer endTx(tx)
	_, err = tx.Insert("kv", []any{1, "again"})
	wantUniqueViolation(t, err, "kv_k", 1)
	// Keeping the key in an update is no conflict with the old version.
	tid1, err = tx.Update("kv", tid1, []any{1, "one'"})
	if err != nil {
		t.Fatalf("update keeping the key: %v", err)
	}
	_, err = tx.Update("kv", tid1, []any{2, "clash"})
	wantUniqueViolation(t, err, "kv_k", 2)
	tid3, err := tx.Insert("kv", []any{3, "three"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = tx.Insert("kv", []any{3, "own twice"})
	wantUniqueViolation(t, err, "kv_k", 3)
	if err := tx.Delete("kv", tid3); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Insert("kv", []any{3, "after own delete"}); err != nil {
		t.Fatalf("insert after deleting the key in the same transaction: %v", err)
	}
	for range 2 {
		if _, err := tx.Insert("kv", []any{nil, "NULL keys never conflict"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	checkClean(t, db)
}

// TestCrossedUniqueWaitsGiveExactlyOneDeadlock: A holds key 1 and wants
// 2, B holds 2 and wants 1. The wait that closes the cycle fails with
// ErrDeadlock; once that transaction rolls back the other goes on.
func TestCrossedUniqueWaitsGiveExactlyOneDeadlock(t *testing.T) {
	db := newKeyed(t)
	a, b := mustTx(t, db), mustTx(t, db)
	defer endTx(a)
	defer endTx(b)
	if _, err := a.Insert("kv", []any{1, "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Insert("kv", []any{2, "b"}); err != nil {
		t.Fatal(err)
	}
	aDone := make(chan error, 1)
	go func() {
		_, err := a.Insert("kv", []any{2, "a"})
		aDone <- err
	}()
	waitForWaiters(t, db, 1)
	_, err := b.Insert("kv", []any{1, "b"})
	if !errors.Is(err, ErrDeadlock) {
		t.Fatalf("closing the cycle: %v, want ErrDeadlock", err)
	}
	if err := b.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := <-aDone; err != nil {
		t.Fatalf("the other side after the deadlock victim rolled back: %v", err)
	}
	if err := a.Commit(); err != nil {
		t.Fatal(err)
	}
	if n := db.LockStats().Deadlocks; n != 1 {
		t.Fatalf("%d deadlocks reported, want exactly 1", n)
	}
}

func TestUniqueWaitEndsWithTheContext(t *testing.T) {
	db := newKeyed(t)
	a := mustTx(t, db)
	defer endTx(a)
	if _, err := a.Insert("kv", []any{5, "a"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	b, err := db.BeginTx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer endTx(b)
	if _, err := b.Insert("kv", []any{5, "b"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait past the deadline: %v, want context.DeadlineExceeded", err)
	}
}

// TestAddPrimaryKey: refused on a table with a duplicate key or a NULL
// (the catalog unchanged), made on a clean one: a unique index named
// <table>_pkey and the column NOT NULL, kept across a crash.
func TestAddPrimaryKey(t *testing.T) {
	db, dir := newDB(t, testOpts())
	cols := []Column{{Name: "id", Type: Int8}, {Name: "v", Type: Int2}}
	if err := db.CreateTable("t", cols); err != nil {
		t.Fatal(err)
	}
	tx := mustTx(t, db)
	for i := int64(1); i <= 100; i++ {
		if _, err := tx.Insert("t", []any{i, int16(i)}); err != nil {
			t.Fatal(err)
		}
	}
	dup, err := tx.Insert("t", []any{int64(50), int16(0)})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	wantUniqueViolation(t, db.AddPrimaryKey("t", "id"), "t_pkey", 50)
	if ti, _ := db.Table("t"); len(ti.Indexes) != 0 || ti.Columns[0].NotNull {
		t.Fatalf("refused primary key left %+v", ti)
	}
	tx = mustTx(t, db)
	if _, err := tx.Update("t", dup, []any{nil, int16(0)}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := db.AddPrimaryKey("t", "id"); !errors.Is(err, ErrNotNull) {
		t.Fatalf("primary key over a NULL: %v, want ErrNotNull", err)
	}
	old := mustTx(t, db) // its snapshot sees the NULL row throughout
	defer endTx(old)
	tx = mustTx(t, db)
	rows := 0
	err = tx.Scan("t", func(tid page.TID, r []any) error {
		rows++
		if r[0] == nil {
			return tx.Delete("t", tid)
		}
		return nil
	})
	if err != nil || rows != 101 {
		t.Fatalf("scan: %d rows, %v", rows, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := db.AddPrimaryKey("t", "id"); err != nil {
		t.Fatalf("primary key on a clean table: %v", err)
	}
	nulls := 0
	if err := old.Scan("t", func(_ page.TID, r []any) error {
		if r[0] == nil {
			nulls++
		}
		return nil
	}); err != nil || nulls != 1 {
		t.Fatalf("an older snapshot reads the NULL row deleted before the primary key: %d, %v", nulls, err)
	}
	checkClean(t, db)
	abandon(t, db)
	db, err = Open(dir, testOpts())
	if err != nil {
		t.Fatal(err)
	}
	defer closeDB(t, db)
	ti, _ := db.Table("t")
	if len(ti.Indexes) != 1 || ti.Indexes[0].Name != "t_pkey" || !ti.Indexes[0].Unique || !ti.Columns[0].NotNull {
		t.Fatalf("after a crash the primary key is %+v", ti)
	}
	tx = mustTx(t, db)
	defer endTx(tx)
	_, err = tx.Insert("t", []any{int64(10), int16(1)})
	wantUniqueViolation(t, err, "t_pkey", 10)
	_, err = tx.Insert("t", []any{nil, int16(1)})
	var ve *row.ValueError
	if !errors.Is(err, ErrNotNull) || !errors.As(err, &ve) || ve.Column != "id" {
		t.Fatalf("NULL into the primary key: %v, want ErrNotNull naming id", err)
	}
	found, err := tx.IndexLookup("t_pkey", 99)
	if err != nil || len(found) != 1 {
		t.Fatalf("lookup through the primary key: %v %v", found, err)
	}
	checkClean(t, db)
}

// TestCheckReportsTwoLiveRowsUnderOneUniqueKey: duplicates written while
// the index was not unique, then the catalog flag flipped under the
// engine (damage no write path can make), are a Check problem.
func TestCheckReportsTwoLiveRowsUnderOneUniqueKey(t *testing.T) {
	db, _ := newDB(t, testOpts())
	if err := db.CreateTable("kv", keyedCols); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateIndex("kv_k", "kv", "k"); err != nil {
		t.Fatal(err)
	}
	tx := mustTx(t, db)
	for range 2 {
		if _, err := tx.Insert("kv", []any{4, "dup"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	checkClean(t, db)
	db.mu.Lock()
	db.cat.Tables[0].Indexes[0].Unique = true
	db.mu.Unlock()
	rep, err := db.Check(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0].Message, `unique index "kv_k": key (4)`) {
		t.Fatalf("Check problems %v, want the duplicate key 4", rep.Problems)
	}
}

// TestUpdateRowKeepingItsKeyStillHoldsItAgainstOthers: an UpdateRow that keeps the unique
// key skips the uniqueness check, yet the key stays its own: another transaction inserting
// it waits, then fails once the update commits; an UpdateRow moving a row onto another
// row's key is still a violation.
func TestUpdateRowKeepingItsKeyStillHoldsItAgainstOthers(t *testing.T) {
	db := newKeyed(t)
	setup := mustTx(t, db)
	tid1, err := setup.Insert("kv", []any{1, "one"})
	if err != nil {
		t.Fatal(err)
	}
	tid2, err := setup.Insert("kv", []any{2, "two"})
	if err != nil {
		t.Fatal(err)
	}
	if err := setup.Commit(); err != nil {
		t.Fatal(err)
	}
	set := func(k int64, v string) Recheck {
		return func(cur []any) ([]any, bool, error) { return []any{k, v}, true, nil }
	}
	moving := mustTx(t, db)
	_, _, err = moving.UpdateRow("kv", tid2, set(1, "clash"))
	wantUniqueViolation(t, err, "kv_k", 1)
	if err := moving.Rollback(); err != nil {
		t.Fatal(err)
	}

	keeping := mustTx(t, db)
	if _, ok, err := keeping.UpdateRow("kv", tid1, set(1, "one'")); err != nil || !ok {
		t.Fatalf("UpdateRow keeping the key: %v, %v", ok, err)
	}
	inserter := mustTx(t, db)
	defer endTx(inserter)
	done := make(chan error, 1)
	go func() {
		_, err := inserter.Insert("kv", []any{1, "intruder"})
		done <- err
	}()
	waitForWaiters(t, db, 1)
	select {
	case err := <-done:
		t.Fatalf("insert of the key returned %v while the update keeping it was open", err)
	case <-time.After(20 * time.Millisecond):
	}
	if err := keeping.Commit(); err != nil {
		t.Fatal(err)
	}
	wantUniqueViolation(t, <-done, "kv_k", 1)
	checkClean(t, db)
}
