package engine

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
)

var balanceCols = []Column{{Name: "id", Type: Int4, NotNull: true}, {Name: "balance", Type: Int8, NotNull: true}}

// newBalances makes table acct with rows id 1..n, balance 0, and returns
// their TIDs.
func newBalances(t *testing.T, n int) (*DB, []page.TID) {
	t.Helper()
	db, _ := newDB(t, testOpts())
	if err := db.CreateTable("acct", balanceCols); err != nil {
		t.Fatal(err)
	}
	tx := mustTx(t, db)
	var tids []page.TID
	for id := 1; id <= n; id++ {
		tid, err := tx.Insert("acct", []any{id, int64(0)})
		if err != nil {
			t.Fatal(err)
		}
		tids = append(tids, tid)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return db, tids
}

// add is the statement `balance = balance + d`.
func add(d int64) Recheck {
	return func(cur []any) ([]any, bool, error) {
		return []any{cur[0], i64(cur[1]) + d}, true, nil
	}
}

func balanceOf(t *testing.T, db *DB, id int) int64 {
	t.Helper()
	tx := mustTx(t, db)
	defer endTx(tx)
	var bal []int64
	if err := tx.Scan("acct", func(_ page.TID, r []any) error {
		if r[0] == int32(id) {
			bal = append(bal, i64(r[1]))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(bal) != 1 {
		t.Fatalf("row %d visible %d times, want once", id, len(bal))
	}
	return bal[0]
}

func rowCount(t *testing.T, db *DB) int {
	t.Helper()
	tx := mustTx(t, db)
	defer endTx(tx)
	n := 0
	if err := tx.Scan("acct", func(page.TID, []any) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSecondUpdaterWaitsThenAppliesItsChangeToTheFirstsResult: two
// transactions run `balance = balance + 1` on one row; the second waits
// for the first, then works on the first's result if it committed (the
// balance ends at 2), on the original if it rolled back (1), and updates
// nothing if the first deleted the row.
func TestSecondUpdaterWaitsThenAppliesItsChangeToTheFirstsResult(t *testing.T) {
	for _, first := range []string{"commit", "rollback", "delete"} {
		t.Run(first, func(t *testing.T) {
			db, tids := newBalances(t, 1)
			a := mustTx(t, db)
			if first == "delete" {
				if ok, err := a.DeleteRow("acct", tids[0], add(0)); err != nil || !ok {
					t.Fatalf("delete: %v %v", ok, err)
				}
			} else if _, ok, err := a.UpdateRow("acct", tids[0], add(1)); err != nil || !ok {
				t.Fatalf("first update: %v %v", ok, err)
			}
			b := mustTx(t, db)
			type result struct {
				ok  bool
				err error
			}
			done := make(chan result, 1)
			go func() {
				_, ok, err := b.UpdateRow("acct", tids[0], add(1))
				done <- result{ok, err}
			}()
			waitForWaiters(t, db, 1)
			select {
			case r := <-done:
				t.Fatalf("second update returned %+v while the first was open", r)
			case <-time.After(20 * time.Millisecond):
			}
			var err error
			if first == "rollback" {
				err = a.Rollback()
			} else {
				err = a.Commit()
			}
			if err != nil {
				t.Fatal(err)
			}
			r := <-done
			if r.err != nil || r.ok != (first != "delete") {
				t.Fatalf("second update after the first's %s: ok %v, %v", first, r.ok, r.err)
			}
			if err := b.Commit(); err != nil {
				t.Fatal(err)
			}
			want := map[string]int64{"commit": 2, "rollback": 1}[first]
			if first == "delete" {
				if n := rowCount(t, db); n != 0 {
					t.Fatalf("%d rows after the delete, want 0", n)
				}
			} else if got := balanceOf(t, db, 1); got != want {
				t.Fatalf("balance %d, want %d", got, want)
			}
			checkClean(t, db)
		})
	}
}

// TestRecheckSeesTheNewestVersion: the second statement's condition
// (balance < 1) held on the version it first saw but not on the newest.
func TestRecheckSeesTheNewestVersion(t *testing.T) {
	db, tids := newBalances(t, 1)
	a := mustTx(t, db)
	if _, _, err := a.UpdateRow("acct", tids[0], add(1)); err != nil {
		t.Fatal(err)
	}
	b := mustTx(t, db)
	defer endTx(b)
	var seen []int64
	done := make(chan error, 1)
	go func() {
		_, ok, err := b.UpdateRow("acct", tids[0], func(cur []any) ([]any, bool, error) {
			seen = append(seen, i64(cur[1]))
			return []any{cur[0], int64(100)}, i64(cur[1]) < 1, nil
		})
		if err == nil && ok {
			err = errors.New("updated although the newest balance is 1")
		}
		done <- err
	}()
	waitForWaiters(t, db, 1)
	if err := a.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 || seen[0] != 0 || seen[1] != 1 {
		t.Fatalf("the condition saw balances %v, want [0 1]", seen)
	}
}

func TestCrossedRowUpdatesGiveExactlyOneDeadlock(t *testing.T) {
	db, tids := newBalances(t, 2)
	a, b := mustTx(t, db), mustTx(t, db)
	defer endTx(a)
	defer endTx(b)
	if _, _, err := a.UpdateRow("acct", tids[0], add(1)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.UpdateRow("acct", tids[1], add(1)); err != nil {
		t.Fatal(err)
	}
	aDone := make(chan error, 1)
	go func() {
		_, _, err := a.UpdateRow("acct", tids[1], add(10))
		aDone <- err
	}()
	waitForWaiters(t, db, 1)
	if _, _, err := b.UpdateRow("acct", tids[0], add(10)); !errors.Is(err, ErrDeadlock) {
		t.Fatalf("closing the cycle: %v, want ErrDeadlock", err)
	}
	if err := b.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := <-aDone; err != nil {
		t.Fatalf("the survivor: %v", err)
	}
	if err := a.Commit(); err != nil {
		t.Fatal(err)
	}
	if ls := db.LockStats(); ls.Deadlocks != 1 || ls.Waits != 1 {
		t.Fatalf("lock stats %+v, want 1 wait and exactly 1 deadlock", ls)
	}
	if b1, b2 := balanceOf(t, db, 1), balanceOf(t, db, 2); b1 != 1 || b2 != 10 {
		t.Fatalf("balances %d %d, want 1 10", b1, b2)
	}
}

func TestRowWaitEndsWithTheContext(t *testing.T) {
	db, tids := newBalances(t, 1)
	a := mustTx(t, db)
	defer endTx(a)
	if _, _, err := a.UpdateRow("acct", tids[0], add(1)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	b, err := db.BeginTx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer endTx(b)
	if _, _, err := b.UpdateRow("acct", tids[0], add(1)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait past the deadline: %v", err)
	}
}

// TestConcurrentIncrementsOnHotRowsAddUp: goroutines each commit
// `balance = balance + d` transactions on three hot rows (finding each
// row by a scan, as a statement would); no update is lost.
func TestConcurrentIncrementsOnHotRowsAddUp(t *testing.T) {
	db, _ := newBalances(t, 3)
	const workers, perWorker = 6, 40
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	want := [3]int64{}
	var mu sync.Mutex
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				id, d := int32((w+i)%3+1), int64(w*100+i)
				tx, err := db.Begin()
				if err != nil {
					errs <- err
					return
				}
				var tid page.TID
				err = tx.Scan("acct", func(t page.TID, r []any) error {
					if r[0] == id {
						tid = t
					}
					return nil
				})
				if err == nil {
					var ok bool
					_, ok, err = tx.UpdateRow("acct", tid, add(d))
					if err == nil && !ok {
						err = errors.New("row vanished")
					}
				}
				if err != nil {
					_ = tx.Rollback()
					errs <- err
					return
				}
				if err := tx.Commit(); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				want[id-1] += d
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for id := 1; id <= 3; id++ {
		if got := balanceOf(t, db, id); got != want[id-1] {
			t.Fatalf("row %d: balance %d, want %d (a lost update)", id, got, want[id-1])
		}
	}
	if db.txns.Waits() == 0 {
		t.Log("no update had to wait (the goroutines never overlapped)")
	}
	checkClean(t, db)
}

// VACUUM FULL takes the table as PostgreSQL's ACCESS EXCLUSIVE lock does:
// it waits for the open transactions that used the table (here one holding
// an updated row and one waiting for that row), and a transaction that had
// not used the table waits for the rewrite before its first use. None of
// them fails: the waiting update would otherwise wake to a rewritten table
// (every TID changed) and fail with ErrTableRewritten, which the server
// turns into a serialization failure of a pgbench transaction.
func TestVacuumFullWaitsForTransactionsThatUsedTheTableSoNoneSeesTheRewrite(t *testing.T) {
	db, tids := newBalances(t, 50)
	holder := mustTx(t, db)
	if _, ok, err := holder.UpdateRow("acct", tids[0], add(1)); err != nil || !ok {
		t.Fatalf("holder's update: %v %v", ok, err)
	}
	waiter := mustTx(t, db)
	waited := make(chan error, 1)
	go func() {
		_, ok, err := waiter.UpdateRow("acct", tids[0], add(10))
		if err == nil && !ok {
			err = errors.New("the waiting update changed no row")
		}
		if err == nil {
			err = waiter.Commit()
		}
		waited <- err
	}()
	time.Sleep(50 * time.Millisecond) // the waiter reaches its row wait
	full := make(chan error, 1)
	go func() {
		_, err := db.VacuumFull(context.Background(), "acct", vacuum.DefaultOptions())
		full <- err
	}()
	for deadline := time.Now().Add(20 * time.Second); db.uses.waiting("acct") == 0; time.Sleep(time.Millisecond) {
		select {
		case err := <-full:
			t.Fatalf("VACUUM FULL returned (%v) while transactions that used the table were open", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("VACUUM FULL never started waiting for the open transactions")
		}
	}
	late := mustTx(t, db) // has not used acct: waits behind the FULL
	read := make(chan error, 1)
	go func() {
		_, _, err := late.Get("acct", tids[1])
		read <- err
	}()
	select {
	case err := <-full:
		t.Fatalf("VACUUM FULL returned (%v) while transactions that used the table were open", err)
	case err := <-waited:
		t.Fatalf("the waiting update returned (%v) before the holder ended", err)
	case err := <-read:
		t.Fatalf("a new transaction's read returned (%v) while the FULL waited", err)
	case <-time.After(100 * time.Millisecond):
	}
	if err := holder.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Fatalf("the update that waited for the row beside VACUUM FULL: %v", err)
	}
	if err := <-full; err != nil {
		t.Fatalf("VACUUM FULL: %v", err)
	}
	if err := <-read; err != nil {
		t.Fatalf("the read that waited for the FULL: %v", err)
	}
	endTx(late)
	if got := balanceOf(t, db, 1); got != 11 {
		t.Fatalf("balance of row 1 after both updates and the FULL: %d, want 11", got)
	}
	checkClean(t, db)
}

// With SKIP_LOCKED (Options.NoWait) a VACUUM FULL of a table an open
// transaction used fails at once with ErrTableInUse instead of waiting.
func TestVacuumFullWithNoWaitFailsAtOnceWhileATransactionUsesTheTable(t *testing.T) {
	db, tids := newBalances(t, 5)
	holder := mustTx(t, db)
	if _, ok, err := holder.UpdateRow("acct", tids[0], add(1)); err != nil || !ok {
		t.Fatalf("holder's update: %v %v", ok, err)
	}
	opts := vacuum.DefaultOptions()
	opts.NoWait = true
	if _, err := db.VacuumFull(context.Background(), "acct", opts); !errors.Is(err, ErrTableInUse) {
		t.Fatalf("VACUUM FULL with NoWait beside an open transaction: %v, want ErrTableInUse", err)
	}
	if err := holder.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.VacuumFull(context.Background(), "acct", opts); err != nil {
		t.Fatalf("VACUUM FULL with NoWait once the transaction ended: %v", err)
	}
	if n := db.uses.waiting("acct"); n != 0 {
		t.Fatalf("%d DDLs still registered on the table after the FULLs", n)
	}
}
