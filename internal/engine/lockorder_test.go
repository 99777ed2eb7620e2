package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
	"github.com/vacuumops/vacuum-operator/internal/hangtest"
)

// TestARecheckThatReadsTheCatalogBesideAWaitingDDLEnds: an UpdateRow whose Recheck reads
// the catalog (the engine server's WHERE to_regclass(...) or pg_relation_size(...) of an
// UPDATE or DELETE) while a DDL waits for db.mu ends, and so does the DDL. The Recheck
// once ran with the row operation's db.mu held shared: its db.Tables took db.mu shared
// a second time, behind the DDL's waiting exclusive request (Go's RWMutex lets no new
// reader past a waiting writer), and the DDL waited for the first hold: both, and every
// transaction after them, hung for good.
func TestARecheckThatReadsTheCatalogBesideAWaitingDDLEnds(t *testing.T) {
	db, tids := newBalances(t, 1)
	tx := mustTx(t, db)
	ddl, upd := make(chan error, 1), make(chan error, 1)
	var once sync.Once
	go func() {
		_, ok, err := tx.UpdateRow("acct", tids[0], func(cur []any) ([]any, bool, error) {
			once.Do(func() {
				go func() { ddl <- db.CreateTable("w", balanceCols) }()
				time.Sleep(100 * time.Millisecond) // the CREATE TABLE waits for db.mu by now
			})
			if _, err := db.Tables(); err != nil {
				return nil, false, err
			}
			bal, isInt := cur[1].(int64)
			if !isInt {
				return nil, false, fmt.Errorf("balance %v is not an int64", cur[1])
			}
			return []any{cur[0], bal + 1}, true, nil
		})
		if err == nil && !ok {
			err = fmt.Errorf("no row updated")
		}
		upd <- err
	}()
	hangtest.Wait(t, "UpdateRow with a Recheck that reads the catalog", upd, 10*time.Second)
	hangtest.Wait(t, "CREATE TABLE", ddl, 10*time.Second)
	commit := make(chan error, 1)
	go func() { commit <- tx.Commit() }()
	hangtest.Wait(t, "Commit", commit, 10*time.Second)
}

// TestATruncateOfATableItsTransactionUsedBesideAWaitingVacuumFullFailsAsADeadlock: a
// transaction that read a table, then TRUNCATEs it while a VACUUM FULL of the table waits
// for that transaction to end, gets ErrDeadlock, as PostgreSQL's lock upgrade does, and
// the VACUUM FULL runs once the transaction rolls back. The VACUUM FULL holds the table's
// vacuum lock (drop.go's order: vacuum lock, then the wait for the table's users); the
// TRUNCATE waited for that vacuum lock while its transaction was one of those users, so
// neither ever went on (the engine server has no lock_timeout).
func TestATruncateOfATableItsTransactionUsedBesideAWaitingVacuumFullFailsAsADeadlock(t *testing.T) {
	db, _ := newBalances(t, 1)
	tx := mustTx(t, db)
	if err := tx.Scan("acct", func(page.TID, []any) error { return nil }); err != nil {
		t.Fatal(err)
	}
	full := make(chan error, 1)
	go func() {
		_, err := db.VacuumFull(context.Background(), "acct", vacuum.DefaultOptions())
		full <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); db.uses.waiting("acct") == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the VACUUM FULL never waited for the transaction")
		}
	}
	trunc := make(chan error, 1)
	go func() {
		err := tx.Truncate(context.Background(), "acct")
		if !errors.Is(err, ErrDeadlock) {
			err = fmt.Errorf("TRUNCATE: got %v, want ErrDeadlock", err)
		} else {
			err = nil
		}
		trunc <- err
	}()
	hangtest.Wait(t, "TRUNCATE beside a VACUUM FULL waiting for its transaction", trunc, 10*time.Second)
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	hangtest.Wait(t, "VACUUM FULL", full, 10*time.Second)
}
