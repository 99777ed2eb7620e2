package sql

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/hangtest"
	"github.com/vacuumops/vacuum-operator/internal/server/pgerr"
)

// TestTruncatesInOppositeOrdersInTwoSessionsGiveOneDeadlockDetected: two sessions each
// TRUNCATE one table in a transaction block, then the other's. Each second TRUNCATE
// waits for the other session's transaction; one of them fails with SQLSTATE 40P01
// (deadlock_detected), as PostgreSQL's deadlock detector would report, and once that
// session rolls back the other's TRUNCATE completes and its COMMIT empties both tables.
// Both once waited for good (statement_timeout is 0 by default).
func TestTruncatesInOppositeOrdersInTwoSessionsGiveOneDeadlockDetected(t *testing.T) {
	db := newTestDB(t)
	s1 := NewSession(Config{DB: db, PID: 41, User: "tester"})
	s2 := NewSession(Config{DB: db, PID: 42, User: "tester"})
	for _, q := range []string{
		"CREATE TABLE a (id int)", "CREATE TABLE b (id int)",
		"INSERT INTO a VALUES (1), (2)", "INSERT INTO b VALUES (1), (2)",
	} {
		if got := runSQL(t, s1, q); strings.HasPrefix(got, "ERROR") {
			t.Fatalf("%s: %s", q, got)
		}
	}
	if got := runSQL(t, s1, "BEGIN; TRUNCATE a"); got != "BEGIN\nTRUNCATE TABLE\n" {
		t.Fatalf("session 1: %q", got)
	}
	if got := runSQL(t, s2, "BEGIN; TRUNCATE b"); got != "BEGIN\nTRUNCATE TABLE\n" {
		t.Fatalf("session 2: %q", got)
	}
	type result struct {
		s      *Session
		got    string
		detail string
	}
	results := make(chan result, 2)
	errs := make(chan error, 2)
	for _, c := range []struct {
		s *Session
		q string
	}{{s1, "TRUNCATE b"}, {s2, "TRUNCATE a"}} {
		go func() {
			var b strings.Builder
			var detail string
			err := c.s.Query(context.Background(), c.q, func(r *Result) error { b.WriteString(r.Tag); return nil })
			if err != nil {
				b.WriteString("ERROR " + pgerr.As(err).Code)
				detail = pgerr.As(err).Detail
			}
			results <- result{c.s, b.String(), detail}
			errs <- nil
		}()
	}
	hangtest.Wait(t, "the first crossed TRUNCATE", errs, 10*time.Second)
	first := <-results
	if first.got != "ERROR 40P01" {
		t.Fatalf("the first crossed TRUNCATE to end: %q, want ERROR 40P01 (the other still waits for it)", first.got)
	}
	if !strings.Contains(first.detail, `table "a"`) || !strings.Contains(first.detail, `table "b"`) {
		t.Fatalf("the deadlock's DETAIL %q does not name both tables of the cycle", first.detail)
	}
	t.Logf("DETAIL: %s", first.detail)
	if got := runSQL(t, first.s, "ROLLBACK"); got != "ROLLBACK\n" {
		t.Fatalf("ROLLBACK of the deadlocked session: %q", got)
	}
	hangtest.Wait(t, "the surviving TRUNCATE", errs, 10*time.Second)
	second := <-results
	if second.got != "TRUNCATE TABLE" {
		t.Fatalf("the surviving TRUNCATE: %q, want TRUNCATE TABLE", second.got)
	}
	if got := runSQL(t, second.s, "COMMIT"); got != "COMMIT\n" {
		t.Fatalf("COMMIT of the surviving session: %q", got)
	}
	for _, q := range []string{"SELECT count(*) FROM a", "SELECT count(*) FROM b"} {
		if got := runSQL(t, s1, q); got != "count\n0\nSELECT 1\n" {
			t.Fatalf("%s after the survivor's COMMIT: %q, want 0", q, got)
		}
	}
}
