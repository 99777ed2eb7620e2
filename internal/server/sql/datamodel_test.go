package sql

import (
	"testing"
	"time"
)

// TestTypesNullsKeysDropAndTruncateReachTheEngine covers the engine's data model through
// SQL: PostgreSQL's type names, NULLs, NOT NULL, unique indexes and primary keys (also
// added later), char(n) padding and varchar(n) limits, TRUNCATE and DROP.
func TestTypesNullsKeysDropAndTruncateReachTheEngine(t *testing.T) {
	s := newTestSession(t)
	for _, tc := range []struct{ q, want string }{
		{"CREATE TABLE t (a int2, b int4 NOT NULL, c int8, d boolean, e text, f varchar(3), g char(4), h bytea, i timestamp, j timestamptz) WITH (fillfactor=100)", "CREATE TABLE\n"},
		{"INSERT INTO t VALUES (1, 2, 3, true, 'x', 'abc', 'ab', '\\x01', '2024-01-02 03:04:05.5', '2024-01-02 03:04:05+00')", "INSERT 0 1\n"},
		{"INSERT INTO t (b) VALUES (7)", "INSERT 0 1\n"},
		{"INSERT INTO t (a) VALUES (1)", "ERROR 23502\n"},
		{"INSERT INTO t (b, f) VALUES (1, 'abcd')", "ERROR 22001\n"},
		{"INSERT INTO t (b, f) VALUES (1, 'abc   ')", "INSERT 0 1\n"},
		{"INSERT INTO t (b, a) VALUES (1, 40000)", "ERROR 22003\n"},
		{"SELECT a, b, c, d, e, f, g || '|', h, i, j FROM t WHERE a = 1", "a|b|c|d|e|f|?column?|h|i|j\n1|2|3|t|x|abc|ab||\\x01|2024-01-02 03:04:05.5|2024-01-02 03:04:05+00\nSELECT 1\n"},
		{"SELECT count(*), count(a), count(f) FROM t", "count|count|count\n3|1|2\nSELECT 1\n"},
		{"SELECT b FROM t WHERE a IS NULL ORDER BY b", "b\n1\n7\nSELECT 2\n"},
		{"UPDATE t SET a = NULL WHERE b = 2 RETURNING a IS NULL", "?column?\nt\nUPDATE 1\n"},
		{"UPDATE t SET b = NULL", "ERROR 23502\n"},
		{"CREATE TABLE k (id int4 PRIMARY KEY, u int8 UNIQUE, n int4)", "CREATE TABLE\n"},
		{"INSERT INTO k VALUES (1, 10, 0), (2, NULL, 0), (3, NULL, 0)", "INSERT 0 3\n"},
		{"INSERT INTO k VALUES (4, 10, 0)", "ERROR 23505\n"},
		{"INSERT INTO k VALUES (NULL, 11, 0)", "ERROR 23502\n"},
		{"UPDATE k SET id = 1 WHERE id = 2", "ERROR 23505\n"},
		{"UPDATE k SET n = n + 1 WHERE id BETWEEN 1 AND 2", "UPDATE 2\n"},
		{"CREATE UNIQUE INDEX k_n ON k (n)", "ERROR 23505\n"},
		{"ALTER TABLE t ADD PRIMARY KEY (a)", "ERROR 23502\n"},
		{"ALTER TABLE t ADD PRIMARY KEY (b)", "ALTER TABLE\n"},
		{"INSERT INTO t (b) VALUES (7)", "ERROR 23505\n"},
		{"CREATE TABLE p (id int4 NOT NULL, v int4)", "CREATE TABLE\n"},
		{"INSERT INTO p SELECT g, g FROM generate_series(1, 100) g", "INSERT 0 100\n"},
		{"ALTER TABLE p ADD PRIMARY KEY (id)", "ALTER TABLE\n"},
		{"INSERT INTO p VALUES (5, 0)", "ERROR 23505\n"},
		{"SELECT v FROM p WHERE id = 42", "v\n42\nSELECT 1\n"},
		{"BEGIN", "BEGIN\n"},
		{"TRUNCATE p, k", "TRUNCATE TABLE\n"},
		{"INSERT INTO p VALUES (5, 0)", "INSERT 0 1\n"},
		{"SELECT count(*) FROM p", "count\n1\nSELECT 1\n"},
		{"TRUNCATE p", "TRUNCATE TABLE\n"},
		{"ROLLBACK", "ROLLBACK\n"},
		{"SELECT count(*) FROM p", "count\n100\nSELECT 1\n"},
		{"SELECT v FROM p WHERE id = 42", "v\n42\nSELECT 1\n"},
		{"SELECT count(*) FROM k", "count\n3\nSELECT 1\n"},
		{"BEGIN; TRUNCATE p; COMMIT", "BEGIN\nTRUNCATE TABLE\nCOMMIT\n"},
		{"SELECT count(*) FROM p", "count\n0\nSELECT 1\n"},
		{"TRUNCATE k; INSERT INTO k VALUES (1, 10, 0); SELECT 1/0", "TRUNCATE TABLE\nINSERT 0 1\nERROR 22012\n"},
		{"SELECT count(*) FROM k", "count\n3\nSELECT 1\n"},
		{"INSERT INTO p VALUES (5, 0)", "INSERT 0 1\n"},
		{"SELECT count(*) FROM p", "count\n1\nSELECT 1\n"},
		{"DROP TABLE p, k", "DROP TABLE\n"},
		{"DROP TABLE p", "ERROR 42P01\n"},
		{"SELECT CURRENT_TIMESTAMP::timestamp IS NOT NULL, '2024-01-01'::timestamp < now()", "?column?|?column?\nt|t\nSELECT 1\n"},
	} {
		if got := runSQL(t, s, tc.q); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.q, got, tc.want)
		}
	}
}

// TestConcurrentUpdatesOfOneRowWaitAndApplyToTheNewestVersion is READ COMMITTED's row
// wait: a second UPDATE of a row another open transaction changed waits for it to commit,
// then re-reads the row and applies its change on top (no 40001, no lost update); a
// statement in a block sees what committed before it began.
func TestConcurrentUpdatesOfOneRowWaitAndApplyToTheNewestVersion(t *testing.T) {
	a := newTestSession(t)
	runSQL(t, a, "CREATE TABLE c (id int4 PRIMARY KEY, n int4)")
	runSQL(t, a, "INSERT INTO c VALUES (1, 0)")
	b := NewSession(Config{DB: a.db, PID: 43, User: "tester"})
	defer b.Close()
	if got := runSQL(t, a, "BEGIN; UPDATE c SET n = n + 1 WHERE id = 1"); got != "BEGIN\nUPDATE 1\n" {
		t.Fatalf("a: %q", got)
	}
	runSQL(t, b, "BEGIN")
	done := make(chan string, 1)
	go func() { done <- runSQL(t, b, "UPDATE c SET n = n + 10 WHERE id = 1 AND n >= 0") }()
	select {
	case got := <-done:
		t.Fatalf("b's UPDATE did not wait for a: %q", got)
	case <-time.After(300 * time.Millisecond):
	}
	if got := runSQL(t, a, "COMMIT"); got != "COMMIT\n" {
		t.Fatalf("a: %q", got)
	}
	select {
	case got := <-done:
		if got != "UPDATE 1\n" {
			t.Fatalf("b's UPDATE after a committed: %q, want UPDATE 1 (re-checked on a's version)", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("b's UPDATE still waiting 10 s after a committed")
	}
	runSQL(t, b, "COMMIT")
	if got := runSQL(t, a, "SELECT n FROM c"); got != "n\n11\nSELECT 1\n" {
		t.Fatalf("after both: %q, want 11", got)
	}
	// Each statement of a block sees the commits made before it.
	runSQL(t, a, "BEGIN")
	if got := runSQL(t, a, "SELECT n FROM c"); got != "n\n11\nSELECT 1\n" {
		t.Fatalf("a: %q", got)
	}
	runSQL(t, b, "UPDATE c SET n = 12")
	if got := runSQL(t, a, "SELECT n FROM c"); got != "n\n12\nSELECT 1\n" {
		t.Fatalf("a's second statement: %q, want 12 (READ COMMITTED)", got)
	}
	runSQL(t, a, "COMMIT")
}
