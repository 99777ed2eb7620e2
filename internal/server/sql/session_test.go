package sql

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/server/pgerr"
	"github.com/vacuumops/vacuum-operator/internal/server/types"
)

// newTestDB is a fresh engine directory opened with a 1 MiB buffer pool, closed when the
// test ends.
func newTestDB(t *testing.T) *engine.DB {
	t.Helper()
	dir := t.TempDir()
	if err := engine.Init(dir, engine.Options{}); err != nil {
		t.Fatal(err)
	}
	db, err := engine.Open(dir, engine.Options{BufferPoolBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func newTestSession(t *testing.T) *Session {
	t.Helper()
	return NewSession(Config{DB: newTestDB(t), PID: 42, User: "tester"})
}

// runSQL runs q and renders every result as psql's unaligned output would (header, rows,
// tag), or "ERROR <sqlstate>".
func runSQL(t *testing.T, s *Session, q string) string {
	t.Helper()
	var b strings.Builder
	err := s.Query(context.Background(), q, func(r *Result) error {
		if r.Columns != nil {
			var names []string
			for _, c := range r.Columns {
				names = append(names, c.Name)
			}
			b.WriteString(strings.Join(names, "|") + "\n")
			for _, row := range r.Rows {
				var vals []string
				for i, v := range row {
					if v == nil {
						vals = append(vals, "")
						continue
					}
					f, err := formatText(r.Columns[i], v)
					if err != nil {
						return err
					}
					vals = append(vals, f)
				}
				b.WriteString(strings.Join(vals, "|") + "\n")
			}
		}
		b.WriteString(r.Tag + "\n")
		return nil
	})
	if err != nil {
		var pe *pgerr.Error
		if !errors.As(err, &pe) {
			t.Fatalf("%s: error without SQLSTATE: %v", q, err)
		}
		b.WriteString("ERROR " + pe.Code + "\n")
	}
	return b.String()
}

func TestStatementsGiveWhatPostgreSQLGives(t *testing.T) {
	s := newTestSession(t)
	for _, tc := range []struct{ q, want string }{
		{"SELECT 1 AS one, 'x' || 'y' AS xy, 7 / 2, -7 % 3", "one|xy|?column?|?column?\n1|xy|3|-1\nSELECT 1\n"},
		{"CREATE TABLE acc (id bigint PRIMARY KEY, bal integer NOT NULL)", "CREATE TABLE\n"},
		{"CREATE TABLE IF NOT EXISTS acc (id bigint)", "CREATE TABLE\n"},
		{"CREATE TABLE acc (id bigint)", "ERROR 42P07\n"},
		{"INSERT INTO acc VALUES (1, 100), (2, 200), (3, 300)", "INSERT 0 3\n"},
		{"INSERT INTO acc (bal, id) VALUES (400, 4) RETURNING id, bal + 1 AS next", "id|next\n4|401\nINSERT 0 1\n"},
		{"INSERT INTO acc VALUES (2, 0)", "ERROR 23505\n"},
		{"INSERT INTO acc VALUES (5, NULL)", "ERROR 23502\n"},
		{"SELECT id, bal FROM acc WHERE id >= 2 AND id < 4 ORDER BY id DESC", "id|bal\n3|300\n2|200\nSELECT 2\n"},
		{"SELECT count(*), sum(bal), min(id), max(bal) FROM acc", "count|sum|min|max\n4|1000|1|400\nSELECT 1\n"},
		{"SELECT count(*) FROM acc WHERE bal BETWEEN 150 AND 350 OR id IN (1)", "count\n3\nSELECT 1\n"},
		{"SELECT id FROM acc ORDER BY bal DESC LIMIT 2 OFFSET 1", "id\n3\n2\nSELECT 2\n"},
		{"UPDATE acc SET bal = bal - 50 WHERE id = 1 RETURNING bal", "bal\n50\nUPDATE 1\n"},
		{"DELETE FROM acc WHERE id = 4", "DELETE 1\n"},
		{"SELECT id, count(*) FROM acc", "ERROR 42803\n"},
		{"SELECT nope FROM acc", "ERROR 42703\n"},
		{"SELECT * FROM nope", "ERROR 42P01\n"},
		{"SELEC 1", "ERROR 42601\n"},
		{"SELECT 2147483647 + 1", "ERROR 22003\n"},
		{"SELECT 9223372036854775807 * 2", "ERROR 22003\n"},
		{"SELECT 32767::smallint + 1::smallint", "ERROR 22003\n"},
		{"SELECT 1 / 0", "ERROR 22012\n"},
		{"SELECT 5 % 0", "ERROR 22012\n"},
		{"SELECT 'abc'::integer", "ERROR 22P02\n"},
		{"SELECT '42'::bigint + 1, 7::text, 'on'::boolean", "?column?|text|bool\n43|7|t\nSELECT 1\n"},
		{"SELECT g * 2 FROM generate_series(1, 3) AS g", "?column?\n2\n4\n6\nSELECT 3\n"},
		{"SELECT NULL IS NULL, 1 IS NOT NULL, NOT true", "?column?|?column?|?column?\nt|t|f\nSELECT 1\n"},
		{"SHOW TimeZone", "TimeZone\nUTC\nSHOW\n"},
		{"SET application_name TO 'app'", "SET\n"},
		{"SELECT current_setting('application_name'), pg_backend_pid()", "current_setting|pg_backend_pid\napp|42\nSELECT 1\n"},
		{"SET no_such_setting = 1", "ERROR 42704\n"},
		{"SELECT * FROM acc a JOIN acc b ON a.id = b.id", "ERROR 0A000\n"},
		{"DROP TABLE acc, nope", "ERROR 42P01\n"},
		{"SELECT count(*) FROM acc", "count\n3\nSELECT 1\n"},
		{"DROP TABLE IF EXISTS acc, nope", "DROP TABLE\n"},
		{"SELECT count(*) FROM acc", "ERROR 42P01\n"},
		{"CREATE TABLE s (t int4[])", "ERROR 0A000\n"},
		{"SHOW transaction_isolation", "transaction_isolation\nread committed\nSELECT 1\n"[:len("transaction_isolation\nread committed\n")] + "SHOW\n"},
		{"SET transaction_isolation = 'serializable'", "ERROR 0A000\n"},
	} {
		if got := runSQL(t, s, tc.q); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.q, got, tc.want)
		}
	}
}

func TestAbortedBlockRefusesUntilRollbackAndKeepsNothing(t *testing.T) {
	s := newTestSession(t)
	runSQL(t, s, "CREATE TABLE t (id bigint)")
	steps := []struct {
		q, want string
		status  byte
	}{
		{"BEGIN", "BEGIN\n", 'T'},
		{"INSERT INTO t VALUES (1)", "INSERT 0 1\n", 'T'},
		{"SELECT 1/0", "ERROR 22012\n", 'E'},
		{"SELECT 1", "ERROR 25P02\n", 'E'},
		{"COMMIT", "ROLLBACK\n", 'I'},
		{"SELECT count(*) FROM t", "count\n0\nSELECT 1\n", 'I'},
	}
	for _, st := range steps {
		if got := runSQL(t, s, st.q); got != st.want {
			t.Fatalf("%s: got %q, want %q", st.q, got, st.want)
		}
		if s.TxStatus() != st.status {
			t.Fatalf("after %s: status %c, want %c", st.q, s.TxStatus(), st.status)
		}
	}
}

func TestMultiStatementQueryIsOneImplicitTransaction(t *testing.T) {
	s := newTestSession(t)
	runSQL(t, s, "CREATE TABLE t (id bigint)")
	// The error in the third statement rolls back the first two, as PostgreSQL does.
	if got := runSQL(t, s, "INSERT INTO t VALUES (1); INSERT INTO t VALUES (2); SELECT 1/0; INSERT INTO t VALUES (3)"); got != "INSERT 0 1\nINSERT 0 1\nERROR 22012\n" {
		t.Fatalf("got %q", got)
	}
	if got := runSQL(t, s, "SELECT count(*) FROM t"); got != "count\n0\nSELECT 1\n" {
		t.Fatalf("after the failed query: %q", got)
	}
	runSQL(t, s, "INSERT INTO t VALUES (1); INSERT INTO t VALUES (2)")
	if got := runSQL(t, s, "SELECT count(*) FROM t"); got != "count\n2\nSELECT 1\n" {
		t.Fatalf("after the good query: %q", got)
	}
}

func TestIndexedEqualityAndRangeUseTheBTree(t *testing.T) {
	s := newTestSession(t)
	runSQL(t, s, "CREATE TABLE t (id bigint PRIMARY KEY, v bigint)")
	var vals []string
	for i := 1; i <= 200; i++ {
		vals = append(vals, fmt.Sprintf("(%d, %d)", i, i*10))
	}
	runSQL(t, s, "INSERT INTO t VALUES "+strings.Join(vals, ","))
	for _, tc := range []struct {
		where, index string
		bounds       int
	}{
		{"id = 5", "t_pkey", 1},
		{"5 < id AND id <= 9", "t_pkey", 2},
		{"id BETWEEN 3 AND 4", "t_pkey", 2},
		{"v = 50", "", 0},
		{"id = 5 OR id = 6", "", 0},
	} {
		stmts, err := Parse("SELECT v FROM t WHERE " + tc.where)
		if err != nil {
			t.Fatal(err)
		}
		var params []*types.T
		q, err := s.planSelect(stmts[0].Stmt.GetSelectStmt(), &params)
		if err != nil {
			t.Fatal(err)
		}
		if q.src.index != tc.index || len(q.src.bounds) != tc.bounds {
			t.Errorf("WHERE %s: plan %v, want index %q with %d bounds", tc.where, q, tc.index, tc.bounds)
		}
	}
	if got := runSQL(t, s, "SELECT v FROM t WHERE 5 < id AND id <= 7 ORDER BY v"); got != "v\n60\n70\nSELECT 2\n" {
		t.Fatalf("range through the index: %q", got)
	}
}

// TestSystemViewsShareOneRowEmitter reads a View another package provides and the
// session's own views through the same emitter: aliases, pg_catalog qualification, WHERE
// and column selection work alike, and a provided row of the wrong width is XX000, never
// a short row.
func TestSystemViewsShareOneRowEmitter(t *testing.T) {
	db := newTestDB(t)
	rows := [][]any{{int64(1), "one"}, {int64(2), nil}}
	s := NewSession(Config{DB: db, PID: 42, User: "tester", Views: map[string]View{
		"ext_view": {Columns: []ViewColumn{{Name: "n", Type: types.Int8}, {Name: "label", Type: types.Text}},
			Rows: func() [][]any { return rows }},
	}})
	for _, tc := range []struct{ q, want string }{
		{"SELECT * FROM ext_view", "n|label\n1|one\n2|\nSELECT 2\n"},
		{"SELECT e.label FROM pg_catalog.ext_view e WHERE e.n = 1", "label\none\nSELECT 1\n"},
		{"SELECT count(*) FROM pg_stat_progress_vacuum", "count\n0\nSELECT 1\n"},
		{"SELECT s.relname FROM pg_catalog.pg_stat_user_tables s", "relname\nSELECT 0\n"},
		{"SELECT kind FROM vacuumops_statement_latency", "kind\nSELECT 0\n"},
		{"SELECT system_identifier <> 0 FROM pg_control_system()", "?column?\nt\nSELECT 1\n"},
		{"SELECT * FROM other.ext_view", "ERROR 42P01\n"},
	} {
		if got := runSQL(t, s, tc.q); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.q, got, tc.want)
		}
	}
	rows = [][]any{{int64(3)}}
	if got := runSQL(t, s, "SELECT * FROM ext_view"); got != "n|label\nERROR XX000\n" && got != "ERROR XX000\n" {
		t.Errorf("a short row of a provided view: %q, want XX000", got)
	}
}
