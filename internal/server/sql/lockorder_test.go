package sql

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/hangtest"
)

// TestAnUpdateWhoseWhereReadsTheCatalogBesideACreateTableEnds: an UPDATE and a DELETE
// whose WHERE calls to_regclass() and pg_relation_size() (each reads the engine's
// catalog) end while a CREATE TABLE waits for the engine's catalog lock, and so does the
// CREATE TABLE. The WHERE clause is checked again by the row change itself (READ
// COMMITTED's re-check), which once ran under the row operation's shared hold of db.mu:
// the catalog read took it shared again, behind the waiting CREATE TABLE, which waited
// for the first hold, and every session hung. pg_cancel_backend's signal (the test's)
// starts the CREATE TABLE and gives it time to queue.
func TestAnUpdateWhoseWhereReadsTheCatalogBesideACreateTableEnds(t *testing.T) {
	db := newTestDB(t)
	var n atomic.Int32
	ddl := make(chan error, 8)
	signal := func(uint32, bool) bool {
		if i := n.Add(1); i <= 8 {
			go func() { ddl <- db.CreateTable(fmt.Sprintf("w%d", i), []engine.Column{{Name: "a", Type: engine.Int8}}) }()
			time.Sleep(50 * time.Millisecond) // the CREATE TABLE is done, or waits for db.mu
		}
		return true
	}
	s := NewSession(Config{DB: db, PID: 42, User: "tester", Signal: signal})
	for _, q := range []string{"CREATE TABLE t (id int, v int)", "INSERT INTO t VALUES (1, 0), (2, 0)"} {
		if got := runSQL(t, s, q); strings.HasPrefix(got, "ERROR") {
			t.Fatalf("%s: %s", q, got)
		}
	}
	for _, q := range []string{
		"UPDATE t SET v = v + 1 WHERE id = 1 AND pg_cancel_backend(7) AND to_regclass('t') IS NOT NULL",
		"DELETE FROM t WHERE id = 2 AND pg_cancel_backend(7) AND pg_relation_size(to_regclass('t')) > 0",
	} {
		before := n.Load()
		done := make(chan error, 1)
		go func() { done <- s.Query(context.Background(), q, func(*Result) error { return nil }) }()
		hangtest.Wait(t, q, done, 10*time.Second)
		for i := before; i < n.Load() && i < 8; i++ {
			hangtest.Wait(t, "CREATE TABLE", ddl, 10*time.Second)
		}
		if n.Load() == before {
			t.Fatalf("%s: pg_cancel_backend was never called", q)
		}
	}
	if got, want := runSQL(t, s, "SELECT id, v FROM t"), "id|v\n1|1\nSELECT 1\n"; got != want {
		t.Fatalf("after the UPDATE and DELETE: got %q, want %q", got, want)
	}
}
