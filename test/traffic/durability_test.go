package traffic_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vacuumops/vacuum-operator/internal/engine"
)

// pairOffset separates a ledger entry's two rows: a transaction inserts id and id+pairOffset.
const pairOffset = 1 << 40

// ledgerWriter inserts pairs of rows into ledger, one transaction per pair, from its own pgx
// session until the session fails (the server was killed); it returns the ids whose COMMIT
// the server acknowledged.
func ledgerWriter(s *server, cycle int, next *int64) (wait func() []int64) {
	done := make(chan []int64, 1)
	go func() {
		var committed []int64
		defer func() { done <- committed }()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		c, err := pgx.Connect(ctx, s.connString())
		if err != nil {
			return
		}
		defer func() { _ = c.Close(context.Background()) }()
		for {
			id := *next
			*next++
			err := pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, "INSERT INTO ledger VALUES ($1, $2)", id, cycle); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, "INSERT INTO ledger VALUES ($1, $2)", id+pairOffset, cycle)
				return err
			})
			if err != nil {
				return
			}
			committed = append(committed, id)
		}
	}()
	var once sync.Once
	var ids []int64
	return func() []int64 {
		once.Do(func() { ids = <-done })
		return ids
	}
}

// checkDirectory runs the engine's whole-directory check (every page, tuple and index
// entry) on the stopped server's data directory.
func checkDirectory(t *testing.T, dir string) {
	t.Helper()
	db, err := engine.Open(dir, engine.Options{BufferPoolBytes: 16 << 20})
	if err != nil {
		t.Fatalf("open %s for check: %v", dir, err)
	}
	rep, err := db.Check(context.Background())
	if cerr := db.Close(); cerr != nil {
		t.Fatalf("close after check: %v", cerr)
	}
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	if !rep.OK() {
		t.Fatalf("check found %d problems: %+v", len(rep.Problems), rep.Problems)
	}
}

// TestSIGKILLBesidePgbenchLosesNoCommittedTransaction kills the engine server with SIGKILL
// (5 times, -traffic.kills for more) at a random moment while pgbench tpcb-like and a Go
// client writing a ledger run. Each restart recovers; every ledger transaction whose COMMIT
// the client saw acknowledged is there, both rows of every transaction or neither; the
// balance invariant holds over everything pgbench committed since -i
// (sum(abalance) = sum(bbalance) = sum(tbalance) = sum(delta)); and after a clean stop the
// engine's check of the directory is clean.
func TestSIGKILLBesidePgbenchLosesNoCommittedTransaction(t *testing.T) {
	s, _ := startPgbenchServer(t)
	c := s.connect(t)
	if _, err := c.Exec(context.Background(), "CREATE TABLE ledger (id bigint PRIMARY KEY, cycle int)"); err != nil {
		t.Fatal(err)
	}
	_ = c.Close(context.Background())
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("seed %d, %d kills", seed, *kills)
	var next int64 = 1
	var acknowledged []int64
	for cycle := 1; cycle <= *kills; cycle++ {
		wait := background(t, s, "", "-n", "-b", "tpcb-like", "-c", "4", "-j", "2", "-T", "60")
		writer := ledgerWriter(s, cycle, &next)
		after := time.Second + time.Duration(rng.Int64N(int64(2*time.Second)))
		time.Sleep(after)
		s.kill()
		b := wait()
		ids := writer()
		acknowledged = append(acknowledged, ids...)
		if len(ids) == 0 {
			t.Fatalf("cycle %d: the ledger writer committed nothing in %v", cycle, after)
		}
		s.start()
		c := s.connect(t)
		got := map[int64]bool{}
		rows, err := c.Query(context.Background(), "SELECT id FROM ledger")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			got[id] = true
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		for _, id := range acknowledged {
			if !got[id] || !got[id+pairOffset] {
				t.Fatalf("cycle %d: ledger transaction %d was acknowledged but after recovery has rows %v, %v", cycle, id, got[id], got[id+pairOffset])
			}
		}
		for id := range got {
			if id < pairOffset && !got[id+pairOffset] || id >= pairOffset && !got[id-pairOffset] {
				t.Fatalf("cycle %d: ledger transaction %d is half there after recovery", cycle, id%pairOffset)
			}
		}
		l := balances(t, c)
		l.consistent(t, "after recovery")
		t.Logf("cycle %d: killed after %v (pgbench had %d transactions, the ledger %d acknowledged); recovered: %d ledger rows, %d history rows",
			cycle, after, b.processed, len(ids), len(got), l.history)
		_ = c.Close(context.Background())
		s.stop()
		checkDirectory(t, s.data)
		s.start()
	}
}
