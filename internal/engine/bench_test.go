package engine

import (
	"math/rand"
	"testing"
	"time"
)

// BenchmarkBulkInsert measures rows per second inserted in transactions of
// 1000 rows into a table with one index.
func BenchmarkBulkInsert(b *testing.B) {
	opts := Options{BufferPoolBytes: 64 << 20}
	db, _ := newDB(b, opts)
	if err := db.CreateTable("t", accountCols); err != nil {
		b.Fatal(err)
	}
	if err := db.CreateIndex("t_id", "t", "id"); err != nil {
		b.Fatal(err)
	}
	owner := []byte("an owner of modest length")
	b.ResetTimer()
	start := time.Now()
	var tx *Tx
	for i := 0; i < b.N; i++ {
		if tx == nil {
			tx = mustTx(b, db)
		}
		if _, err := tx.Insert("t", []any{int64(i), owner, int64(i)}); err != nil {
			b.Fatal(err)
		}
		if i%1000 == 999 {
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
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "rows/s")
}

// BenchmarkIndexPointLookup measures point lookups per second through an
// index on a 100k-row table that fits in the buffer pool.
func BenchmarkIndexPointLookup(b *testing.B) {
	const rows = 100_000
	db, _ := newDB(b, Options{BufferPoolBytes: 128 << 20})
	if err := db.CreateTable("t", accountCols); err != nil {
		b.Fatal(err)
	}
	tx := mustTx(b, db)
	for i := 0; i < rows; i++ {
		if _, err := tx.Insert("t", []any{int64(i), "owner", int64(i)}); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	if err := db.CreateIndex("t_id", "t", "id"); err != nil {
		b.Fatal(err)
	}
	tx = mustTx(b, db)
	defer endTx(tx)
	rng := rand.New(rand.NewSource(1))
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		key := rng.Int63n(rows)
		f, err := tx.IndexLookup("t_id", key)
		if err != nil || len(f) != 1 {
			b.Fatalf("lookup %d: %v %v", key, f, err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "lookups/s")
}
