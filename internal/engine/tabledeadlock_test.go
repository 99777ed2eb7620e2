package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/hangtest"
)

// The tests of this file close wait-for cycles through table-level waits (a
// transaction's TRUNCATE waiting for a table another holds, a first use of a table
// waiting behind a DROP, a DROP waiting for the table's users) and want exactly one
// transaction of the cycle to fail with ErrDeadlock and the others to go on. Each once
// hung for good: only a cancel ended such a wait, and the engine server has no
// lock_timeout.

// balanceTables makes each named table (id, balance) in db, with rows 1..3.
func balanceTables(t *testing.T, db *DB, names ...string) {
	t.Helper()
	for _, name := range names {
		if err := db.CreateTable(name, balanceCols); err != nil {
			t.Fatal(err)
		}
		tx := mustTx(t, db)
		for id := 1; id <= 3; id++ {
			if _, err := tx.Insert(name, []any{id, int64(0)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
}

// twoTables makes tables a and b (id, balance), each with rows 1..3.
func twoTables(t *testing.T) *DB {
	t.Helper()
	db, _ := newDB(t, testOpts())
	balanceTables(t, db, "a", "b")
	return db
}

// read scans table in tx, which makes tx one of the table's users.
func read(tx *Tx, table string) (int, error) {
	n := 0
	err := tx.Scan(table, func(page.TID, []any) error { n++; return nil })
	return n, err
}

// outcome is what one transaction of a crossed pair met: a deadlock (and it rolled
// back), or its statement's error, or nil (and it committed).
type outcome struct {
	deadlock bool
	err      error
}

// crossed runs step in tx on a goroutine of its own: if step fails with ErrDeadlock
// the transaction rolls back, else (whatever step returned) it ends by a commit when
// step succeeded and a rollback when not. Its outcome arrives on the returned channel.
func crossed(tx *Tx, step func() error) <-chan outcome {
	ch := make(chan outcome, 1)
	go func() {
		err := step()
		if errors.Is(err, ErrDeadlock) {
			ch <- outcome{deadlock: true, err: errors.Join(err, tx.Rollback())}
			return
		}
		if err != nil {
			ch <- outcome{err: errors.Join(err, tx.Rollback())}
			return
		}
		ch <- outcome{err: tx.Commit()}
	}()
	return ch
}

// await waits for a crossed transaction's outcome, failing the test with every
// goroutine's stack when it never comes.
func await(t *testing.T, what string, ch <-chan outcome) outcome {
	t.Helper()
	var o outcome
	got := make(chan error, 1)
	go func() {
		o = <-ch
		got <- nil
	}()
	hangtest.Wait(t, what, got, 10*time.Second)
	return o
}

// waitForDDL waits until a DROP, TRUNCATE or VACUUM FULL of table waits for its users.
func waitForDDL(t *testing.T, db *DB, table string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); db.uses.waiting(table) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no DDL of %q ever waited for its users", table)
		}
	}
}

// TestTruncatesOfTwoTablesInOppositeOrdersGiveExactlyOneDeadlock: tx1 truncates a and
// tx2 truncates b, then each truncates the other's table. Each TRUNCATE holds its table
// to the end of its transaction, so each second TRUNCATE waits for the other
// transaction: one of them fails with ErrDeadlock naming the table, its transaction
// rolls back, and the other's TRUNCATE goes on and commits, leaving both tables empty.
func TestTruncatesOfTwoTablesInOppositeOrdersGiveExactlyOneDeadlock(t *testing.T) {
	db := twoTables(t)
	tx1, tx2 := mustTx(t, db), mustTx(t, db)
	defer endTx(tx1)
	defer endTx(tx2)
	if err := tx1.Truncate(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	if err := tx2.Truncate(context.Background(), "b"); err != nil {
		t.Fatal(err)
	}
	o1 := crossed(tx1, func() error { return tx1.Truncate(context.Background(), "b") })
	o2 := crossed(tx2, func() error { return tx2.Truncate(context.Background(), "a") })
	r1, r2 := await(t, "tx1's TRUNCATE b", o1), await(t, "tx2's TRUNCATE a", o2)
	if r1.deadlock == r2.deadlock {
		t.Fatalf("tx1: deadlock %v (%v), tx2: deadlock %v (%v); want exactly one deadlock", r1.deadlock, r1.err, r2.deadlock, r2.err)
	}
	victim, survivor := r1, r2
	if r2.deadlock {
		victim, survivor = r2, r1
	}
	if survivor.err != nil {
		t.Fatalf("the survivor: %v", survivor.err)
	}
	t.Logf("the victim: %v", victim.err)
	if msg := victim.err.Error(); !strings.Contains(msg, `table "a"`) && !strings.Contains(msg, `table "b"`) {
		t.Fatalf("the deadlock's message names no table: %s", msg)
	}
	for _, name := range []string{"a", "b"} {
		tx := mustTx(t, db)
		n, err := read(tx, name)
		endTx(tx)
		if err != nil || n != 0 {
			t.Fatalf("table %s after the survivor's commit: %d rows (%v), want 0", name, n, err)
		}
	}
	if ls := db.LockStats(); ls.Deadlocks != 1 {
		t.Fatalf("lock stats %+v, want exactly 1 deadlock", ls)
	}
}

// TestFirstUsesBehindTwoDropsGiveExactlyOneDeadlock: tx1 read a and tx2 read b; DROP a
// waits for tx1 and DROP b for tx2. Then tx1 reads b for the first time, which waits
// behind DROP b (so that new users cannot starve it), which waits for tx2; and tx2
// reads a, which waits behind DROP a, which waits for tx1. One of the reads fails with
// ErrDeadlock; once its transaction rolled back, the DROP it held up runs, the other read
// finds its table dropped, and once that transaction ends the other DROP runs too.
func TestFirstUsesBehindTwoDropsGiveExactlyOneDeadlock(t *testing.T) {
	db := twoTables(t)
	tx1, tx2 := mustTx(t, db), mustTx(t, db)
	defer endTx(tx1)
	defer endTx(tx2)
	if _, err := read(tx1, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := read(tx2, "b"); err != nil {
		t.Fatal(err)
	}
	dropA, dropB := make(chan error, 1), make(chan error, 1)
	go func() { dropA <- db.DropTable(context.Background(), "a") }()
	go func() { dropB <- db.DropTable(context.Background(), "b") }()
	waitForDDL(t, db, "a")
	waitForDDL(t, db, "b")
	o1 := crossed(tx1, func() error { _, err := read(tx1, "b"); return err })
	o2 := crossed(tx2, func() error { _, err := read(tx2, "a"); return err })
	r1, r2 := await(t, "tx1's read of b", o1), await(t, "tx2's read of a", o2)
	if r1.deadlock == r2.deadlock {
		t.Fatalf("tx1: deadlock %v (%v), tx2: deadlock %v (%v); want exactly one deadlock", r1.deadlock, r1.err, r2.deadlock, r2.err)
	}
	victim, survivor := r2, r1
	if r1.deadlock {
		victim, survivor = r1, r2
	}
	t.Logf("the victim: %v", victim.err)
	if !errors.Is(survivor.err, ErrNoSuchTable) {
		t.Fatalf("the survivor's read: %v, want ErrNoSuchTable (it waited for the DROP)", survivor.err)
	}
	hangtest.Wait(t, "DROP a", dropA, 10*time.Second)
	hangtest.Wait(t, "DROP b", dropB, 10*time.Second)
	for _, name := range []string{"a", "b"} {
		if _, err := db.Table(name); !errors.Is(err, ErrNoSuchTable) {
			t.Fatalf("table %s after both DROPs: %v, want ErrNoSuchTable", name, err)
		}
	}
}

// TestARowWaitAndAFirstUseBehindADropGiveExactlyOneDeadlock: the cycle runs through a
// row wait and a table wait. tx1 updated row 1 of a; tx2 read b; DROP b waits for tx2.
// tx2 then updates row 1 of a, which waits for tx1; tx1 reads b for the first time,
// which waits behind DROP b, which waits for tx2. One of the two fails with
// ErrDeadlock, and the other goes on once its transaction rolled back.
func TestARowWaitAndAFirstUseBehindADropGiveExactlyOneDeadlock(t *testing.T) {
	db := twoTables(t)
	tx1, tx2 := mustTx(t, db), mustTx(t, db)
	defer endTx(tx1)
	defer endTx(tx2)
	var row1 page.TID
	if err := tx1.Scan("a", func(tid page.TID, vals []any) error {
		if i64(vals[0]) == 1 {
			row1 = tid
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tx1.UpdateRow("a", row1, add(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := read(tx2, "b"); err != nil {
		t.Fatal(err)
	}
	dropB := make(chan error, 1)
	go func() { dropB <- db.DropTable(context.Background(), "b") }()
	waitForDDL(t, db, "b")
	o2 := crossed(tx2, func() error { _, _, err := tx2.UpdateRow("a", row1, add(10)); return err })
	o1 := crossed(tx1, func() error { _, err := read(tx1, "b"); return err })
	r1, r2 := await(t, "tx1's read of b", o1), await(t, "tx2's update of a", o2)
	if r1.deadlock == r2.deadlock {
		t.Fatalf("tx1: deadlock %v (%v), tx2: deadlock %v (%v); want exactly one deadlock", r1.deadlock, r1.err, r2.deadlock, r2.err)
	}
	hangtest.Wait(t, "DROP b", dropB, 10*time.Second)
	if r1.deadlock && r2.err != nil {
		t.Fatalf("tx2, the survivor: %v", r2.err)
	}
	if r2.deadlock && !errors.Is(r1.err, ErrNoSuchTable) {
		t.Fatalf("tx1's read, the survivor: %v, want ErrNoSuchTable (it waited for the DROP)", r1.err)
	}
}
