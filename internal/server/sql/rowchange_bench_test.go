package sql

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine"
)

// rowChangeBenchCommitEvery is how many statements share one transaction block, so that
// the commit's WAL flush does not hide the cost of the statement itself.
const rowChangeBenchCommitEvery = 1000

// BenchmarkUpdateByPrimaryKey measures pgbench's UPDATE of pgbench_accounts, prepared, on
// a 10,000-row table: UPDATE acc SET abalance = abalance + $1 WHERE aid = $2. The WHERE
// and SET run again inside the engine's row change (READ COMMITTED's re-check).
func BenchmarkUpdateByPrimaryKey(b *testing.B) {
	const rows = 10_000
	s := newRowChangeBenchSession(b, rows)
	st, err := s.Prepare("UPDATE acc SET abalance = abalance + $1 WHERE aid = $2", nil)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewSource(1))
	b.ReportAllocs()
	b.ResetTimer()
	runRowChangeBench(b, s, st, func(int) []any { return []any{int64(rng.Intn(10_000)), int64(rng.Intn(rows))} }, "UPDATE 1")
}

// BenchmarkDeleteByPrimaryKey is BenchmarkUpdateByPrimaryKey for DELETE FROM acc WHERE
// aid = $1, each op deleting one of b.N rows loaded beforehand.
func BenchmarkDeleteByPrimaryKey(b *testing.B) {
	s := newRowChangeBenchSession(b, b.N)
	st, err := s.Prepare("DELETE FROM acc WHERE aid = $1", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	runRowChangeBench(b, s, st, func(i int) []any { return []any{int64(i)} }, "DELETE 1")
}

// runRowChangeBench executes st b.N times with params(i), rowChangeBenchCommitEvery to a
// transaction block, and checks each command tag.
func runRowChangeBench(b *testing.B, s *Session, st *Statement, params func(int) []any, tag string) {
	b.Helper()
	ctx := context.Background()
	query := func(q string) {
		if err := s.Query(ctx, q, func(*Result) error { return nil }); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
	open := false
	for i := 0; i < b.N; i++ {
		if !open {
			query("BEGIN")
			open = true
		}
		res, err := s.Execute(ctx, st, params(i))
		if err != nil || res.Tag != tag {
			b.Fatalf("execution %d: %v %v", i, res, err)
		}
		if i%rowChangeBenchCommitEvery == rowChangeBenchCommitEvery-1 {
			query("COMMIT")
			open = false
		}
	}
	if open {
		query("COMMIT")
	}
}

// newRowChangeBenchSession is a session on a new engine whose table acc (aid integer
// PRIMARY KEY, abalance integer, filler text) holds aids 0..n-1.
func newRowChangeBenchSession(b *testing.B, n int) *Session {
	b.Helper()
	dir := b.TempDir()
	if err := engine.Init(dir, engine.Options{}); err != nil {
		b.Fatal(err)
	}
	db, err := engine.Open(dir, engine.Options{BufferPoolBytes: 64 << 20})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	s := NewSession(Config{DB: db, PID: 42, User: "bench"})
	query := func(q string) {
		if err := s.Query(context.Background(), q, func(*Result) error { return nil }); err != nil {
			b.Fatalf("%.60s: %v", q, err)
		}
	}
	query("CREATE TABLE acc (aid integer PRIMARY KEY, abalance integer, filler text)")
	var q strings.Builder
	for lo := 0; lo < n; lo += 1000 {
		q.Reset()
		q.WriteString("INSERT INTO acc VALUES ")
		for i := lo; i < min(lo+1000, n); i++ {
			if i > lo {
				q.WriteString(", ")
			}
			fmt.Fprintf(&q, "(%d, 0, '%84s')", i, "")
		}
		query(q.String())
	}
	return s
}
