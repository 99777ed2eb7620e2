package sql

import (
	"context"
	"errors"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/server/pgerr"
)

// executeText runs a prepared statement with one text parameter in its own implicit
// transaction and returns its rows' first column, or the error's SQLSTATE.
func executeText(t *testing.T, s *Session, st *Statement, param any) ([]any, string) {
	t.Helper()
	res, err := s.Execute(context.Background(), st, []any{param})
	if err != nil {
		var pe *pgerr.Error
		if !errors.As(err, &pe) {
			t.Fatalf("execute: %v", err)
		}
		s.Abort()
		return nil, pe.Code
	}
	if err := s.EndImplicit(); err != nil {
		t.Fatal(err)
	}
	var out []any
	for _, r := range res.Rows {
		out = append(out, r[0])
	}
	return out, ""
}

func TestPreparedSelectKeepsItsPlanUntilTheCatalogChanges(t *testing.T) {
	s := newTestSession(t)
	runSQL(t, s, "CREATE TABLE t (k integer, v text); CREATE INDEX t_k ON t (k); INSERT INTO t VALUES (1, 'a'), (2, 'b')")
	st, err := s.Prepare("SELECT v FROM t WHERE k = $1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if rows, code := executeText(t, s, st, int64(1)); code != "" || len(rows) != 1 || rows[0] != "a" {
		t.Fatalf("first execution: rows %v, error %q; want [a]", rows, code)
	}
	first := st.cached
	if first == nil {
		t.Fatal("a SELECT's plan was not kept")
	}
	if rows, code := executeText(t, s, st, int64(2)); code != "" || len(rows) != 1 || rows[0] != "b" {
		t.Fatalf("second execution: rows %v, error %q; want [b]", rows, code)
	}
	if st.cached != first {
		t.Fatal("the plan was made again with the catalog unchanged")
	}

	// Another session drops the table: the kept plan is stale and the statement fails as
	// PostgreSQL's does, then finds the new table of the same name with its own rows.
	other := NewSession(Config{DB: s.db, PID: 43, User: "tester"})
	runSQL(t, other, "DROP TABLE t")
	if rows, code := executeText(t, s, st, int64(1)); code != pgerr.UndefinedTable {
		t.Fatalf("after DROP TABLE: rows %v, error %q; want %s", rows, code, pgerr.UndefinedTable)
	}
	runSQL(t, other, "CREATE TABLE t (v text, k integer); INSERT INTO t VALUES ('c', 1)")
	if rows, code := executeText(t, s, st, int64(1)); code != "" || len(rows) != 1 || rows[0] != "c" {
		t.Fatalf("after the table was made again: rows %v, error %q; want [c]", rows, code)
	}
	if st.cached == first {
		t.Fatal("the plan of the dropped table was still used")
	}
}

func TestWritesArePlannedAtEachExecution(t *testing.T) {
	s := newTestSession(t)
	runSQL(t, s, "CREATE TABLE t (k integer, v text)")
	st, err := s.Prepare("INSERT INTO t VALUES ($1, 'x')", nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, code := executeText(t, s, st, int64(i)); code != "" {
			t.Fatalf("insert %d: error %s", i, code)
		}
	}
	if st.cached != nil {
		t.Fatal("an INSERT's plan was kept")
	}
	if got := runSQL(t, s, "SELECT count(*) FROM t"); got != "count\n2\nSELECT 1\n" {
		t.Fatalf("count: %q", got)
	}
}
