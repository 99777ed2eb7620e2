package engine

import (
	"math/rand"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
)

// rowChangeBenchRows is the table size of the row-change benchmarks: small enough to stay
// in the buffer pool, large enough that consecutive changes rarely meet on one page.
const rowChangeBenchRows = 10_000

// rowChangeBenchCommitEvery is how many row changes share one transaction, so that the
// commit's WAL flush does not hide the cost of the change itself (with 100, the commit was
// half of an update's time). The fsyncs that remain vary much with the disk: TMPDIR on a
// tmpfs (/dev/shm) leaves them out when comparing two versions of the code.
const rowChangeBenchCommitEvery = 1000

// BenchmarkUpdateRowByKey measures Tx.UpdateRow of one row found by its primary key, with
// a Recheck that computes the new balance from the current version (the engine server's
// UPDATE t SET balance = balance + 1 WHERE id = k), as pgbench's UPDATEs reach the engine.
// The row's TID is known already, so the figure is UpdateRow's alone.
func BenchmarkUpdateRowByKey(b *testing.B) {
	db, _ := newDB(b, Options{BufferPoolBytes: 64 << 20})
	tids := loadRowChangeBenchTable(b, db, rowChangeBenchRows)
	rng := rand.New(rand.NewSource(1))
	recheck := func(cur []any) ([]any, bool, error) {
		nv := append([]any(nil), cur...)
		nv[2] = i64(cur[2]) + 1
		return nv, true, nil
	}
	b.ReportAllocs()
	b.ResetTimer()
	inRowChangeBatches(b, db, b.N, func(tx *Tx, _ int) {
		k := rng.Intn(len(tids))
		ntid, ok, err := tx.UpdateRow("t", tids[k], recheck)
		if err != nil || !ok {
			b.Fatalf("update of id %d at %v: updated %v, %v", k, tids[k], ok, err)
		}
		tids[k] = ntid
	})
}

// BenchmarkDeleteRowByKey is BenchmarkUpdateRowByKey for Tx.DeleteRow: each op deletes
// one row of b.N loaded beforehand, with a Recheck that reads the row's id (the engine
// server's DELETE FROM t WHERE id = k).
func BenchmarkDeleteRowByKey(b *testing.B) {
	db, _ := newDB(b, Options{BufferPoolBytes: 64 << 20})
	tids := loadRowChangeBenchTable(b, db, b.N)
	recheck := func(cur []any) ([]any, bool, error) { return nil, i64(cur[0]) >= 0, nil }
	b.ReportAllocs()
	b.ResetTimer()
	inRowChangeBatches(b, db, b.N, func(tx *Tx, i int) {
		ok, err := tx.DeleteRow("t", tids[i], recheck)
		if err != nil || !ok {
			b.Fatalf("delete of id %d at %v: deleted %v, %v", i, tids[i], ok, err)
		}
	})
}

// inRowChangeBatches calls change n times, i from 0, in transactions of
// rowChangeBenchCommitEvery calls each (the last may be shorter), and commits each.
func inRowChangeBatches(b *testing.B, db *DB, n int, change func(tx *Tx, i int)) {
	b.Helper()
	var tx *Tx
	for i := range n {
		if tx == nil {
			tx = mustTx(b, db)
		}
		change(tx, i)
		if i%rowChangeBenchCommitEvery == rowChangeBenchCommitEvery-1 {
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
			tx = nil
		}
	}
	if tx != nil {
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
}

// loadRowChangeBenchTable creates table t (accountCols, a unique index on id) with rows
// 0..n-1 and returns each row's TID by id.
func loadRowChangeBenchTable(b *testing.B, db *DB, n int) []page.TID {
	b.Helper()
	if err := db.CreateTable("t", accountCols); err != nil {
		b.Fatal(err)
	}
	if err := db.CreateUniqueIndex("t_id", "t", "id"); err != nil {
		b.Fatal(err)
	}
	owner := []byte("an owner of modest length")
	tids := make([]page.TID, n)
	tx := mustTx(b, db)
	for i := range tids {
		tid, err := tx.Insert("t", []any{int64(i), owner, int64(0)})
		if err != nil {
			b.Fatal(err)
		}
		tids[i] = tid
		if i%10_000 == 9_999 {
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
			tx = mustTx(b, db)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	return tids
}
