package sql

import (
	"context"
	"strings"
	"testing"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/vacuumops/vacuum-operator/internal/server/pgerr"
)

// TestTextAndMultiColumnKeysThroughSQL declares primary keys and unique constraints on
// text, varchar and several columns, creates [UNIQUE] indexes on them, and checks
// PostgreSQL's behaviour: 23505 on a duplicate, NULLs distinct in unique columns, NOT NULL
// on every primary-key column, PostgreSQL's index names, lookups and ranges on them, and
// integer bounds past an int4 key's range (no error).
func TestTextAndMultiColumnKeysThroughSQL(t *testing.T) {
	s := newTestSession(t)
	for _, tc := range []struct{ q, want string }{
		{"CREATE TABLE city (name text PRIMARY KEY, region varchar(8), n int4, UNIQUE (region, n))", "CREATE TABLE\n"},
		{"INSERT INTO city VALUES ('b', 'r1', 1), ('a', 'r1', 2), ('d', 'r2', 1), ('c', 'r1', NULL), ('e', 'r1', NULL), ('f', NULL, 1), ('g', NULL, 1)", "INSERT 0 7\n"},
		{"INSERT INTO city VALUES ('b', 'r9', 9)", "ERROR 23505\n"},
		{"INSERT INTO city VALUES ('h', 'r1', 2)", "ERROR 23505\n"},
		{"INSERT INTO city VALUES (NULL, 'r3', 3)", "ERROR 23502\n"},
		{"UPDATE city SET n = 1 WHERE name = 'a'", "ERROR 23505\n"},
		{"SELECT name, n FROM city WHERE name = 'd'", "name|n\nd|1\nSELECT 1\n"},
		{"SELECT name FROM city WHERE name >= 'b' AND name < 'd' ORDER BY name", "name\nb\nc\nSELECT 2\n"},
		{"SELECT name FROM city WHERE name > 'e' ORDER BY name", "name\nf\ng\nSELECT 2\n"},
		{"SELECT name FROM city WHERE name BETWEEN 'a' AND 'bz' ORDER BY name", "name\na\nb\nSELECT 2\n"},
		{"SELECT name FROM city WHERE region = 'r1' AND n >= 1 ORDER BY name", "name\na\nb\nSELECT 2\n"},
		{"SELECT name FROM city WHERE region = 'r1' AND n > 1 AND n < 100 ORDER BY name", "name\na\nSELECT 1\n"},
		{"SELECT name FROM city WHERE region = 'r1' AND n IS NULL ORDER BY name", "name\nc\ne\nSELECT 2\n"},
		{"SELECT count(*) FROM city WHERE region = 'r1'", "count\n4\nSELECT 1\n"},
		{"SELECT count(*) FROM city WHERE region = 'a-string-longer-than-eight'", "count\n0\nSELECT 1\n"},
		{"SELECT count(*) FROM city WHERE region = 'r1' AND n = 2 AND name = 'x'", "count\n0\nSELECT 1\n"},
		{"DELETE FROM city WHERE region = 'r1' AND n = 2", "DELETE 1\n"},
		{"INSERT INTO city VALUES ('h', 'r1', 2)", "INSERT 0 1\n"},
		{"CREATE INDEX ON city (n, name)", "CREATE INDEX\n"},
		{"CREATE UNIQUE INDEX ON city (region, name)", "CREATE INDEX\n"},
		{"CREATE UNIQUE INDEX city_n_key ON city (n)", "ERROR 23505\n"},
		{"SELECT name FROM city WHERE n = 1 AND name > 'b' ORDER BY name", "name\nd\nf\ng\nSELECT 3\n"},
		{"CREATE TABLE m (a int4, b text, v int4, PRIMARY KEY (a, b))", "CREATE TABLE\n"},
		{"INSERT INTO m VALUES (1, 'x', 0), (1, 'y', 0), (2, 'x', 0)", "INSERT 0 3\n"},
		{"INSERT INTO m VALUES (1, NULL, 0)", "ERROR 23502\n"},
		{"INSERT INTO m VALUES (1, 'y', 5)", "ERROR 23505\n"},
		{"UPDATE m SET v = v + 1 WHERE a = 1 AND b >= 'y'", "UPDATE 1\n"},
		{"SELECT a, b, v FROM m WHERE a = 1 ORDER BY b", "a|b|v\n1|x|0\n1|y|1\nSELECT 2\n"},
		{"SELECT count(*) FROM m WHERE a < 5000000000", "count\n3\nSELECT 1\n"},
		{"SELECT count(*) FROM m WHERE a > 5000000000", "count\n0\nSELECT 1\n"},
		{"SELECT count(*) FROM m WHERE a = 5000000000", "count\n0\nSELECT 1\n"},
		{"SELECT count(*) FROM m WHERE a >= -5000000000 AND a <= 1", "count\n2\nSELECT 1\n"},
		{"CREATE TABLE p (a int4, b varchar(4), c int8)", "CREATE TABLE\n"},
		{"INSERT INTO p VALUES (1, 'x', 1), (1, 'x', 2)", "INSERT 0 2\n"},
		{"ALTER TABLE p ADD PRIMARY KEY (a, b)", "ERROR 23505\n"},
		{"ALTER TABLE p ADD UNIQUE (a, b, c)", "ALTER TABLE\n"},
		{"INSERT INTO p VALUES (1, 'x', 2)", "ERROR 23505\n"},
		{"INSERT INTO p VALUES (1, 'x', NULL), (1, 'x', NULL)", "INSERT 0 2\n"},
		{"CREATE TABLE d (a int4, PRIMARY KEY (a, a))", "ERROR 42701\n"},
		{"CREATE TABLE d (a int4, UNIQUE (a, z))", "ERROR 42703\n"},
		{"CREATE INDEX ON p (a, a)", "ERROR 0A000\n"},
		{"CREATE INDEX ON p (a DESC)", "ERROR 0A000\n"},
		{"CREATE TABLE other (t timestamp PRIMARY KEY, b bytea UNIQUE, f boolean, c char(3), UNIQUE (f, c))", "CREATE TABLE\n"},
		{"INSERT INTO other VALUES ('2024-01-01 00:00:00', '\\x01', true, 'a'), ('2024-01-02 00:00:00', '\\x02', true, 'b')", "INSERT 0 2\n"},
		{"INSERT INTO other VALUES ('2024-01-01 00:00:00', '\\x03', false, 'a')", "ERROR 23505\n"},
		{"INSERT INTO other VALUES ('2024-01-03 00:00:00', '\\x01', false, 'a')", "ERROR 23505\n"},
		{"INSERT INTO other VALUES ('2024-01-03 00:00:00', '\\x03', true, 'a  ')", "ERROR 23505\n"},
		{"SELECT b FROM other WHERE c = 'b' AND f", "b\n\\x02\nSELECT 1\n"},
		{"INSERT INTO city VALUES ('" + strings.Repeat("k", 3000) + "', 'r5', 5)", "ERROR 54000\n"},
		{"SELECT count(*) FROM city WHERE region = 'r5'", "count\n0\nSELECT 1\n"},
	} {
		if got := runSQL(t, s, tc.q); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.q, got, tc.want)
		}
	}
	// PostgreSQL's message and detail for a duplicate of a two-column key.
	err := s.Query(context.Background(), "INSERT INTO city VALUES ('z', 'r1', 2)", func(*Result) error { return nil })
	if pe := pgerr.As(err); pe == nil || pe.Code != pgerr.UniqueViolation ||
		pe.Message != `duplicate key value violates unique constraint "city_region_n_key"` || pe.Detail != "Key (region, n)=(r1, 2) already exists." {
		t.Errorf("duplicate (region, n): %+v, want PostgreSQL's 23505 message and detail", pe)
	}
	ti, err := s.db.Table("city")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ix := range ti.Indexes {
		names = append(names, ix.Name)
	}
	if want := "city_pkey city_region_n_key city_n_name_idx city_region_name_idx"; strings.Join(names, " ") != want {
		t.Errorf("indexes of city: %q, want PostgreSQL's names %q", strings.Join(names, " "), want)
	}

	// Which index each WHERE uses: the most leading columns bound by equality, then a range.
	for _, c := range []struct {
		where string
		index string
		eq    int
		n     int // bounds
	}{
		{"name = 'd'", "city_pkey", 1, 1},
		{"name >= 'b' AND name < 'd'", "city_pkey", 0, 2},
		{"region = 'r1'", "city_region_n_key", 1, 1},
		{"region = 'r1' AND n > 1 AND n < 100", "city_region_n_key", 1, 3},
		{"region = 'r1' AND name = 'x'", "city_region_name_idx", 2, 2},
		{"name = 'x' AND n > 3", "city_pkey", 1, 1},
		{"n = 1 AND name > 'b'", "city_n_name_idx", 1, 2},
		{"region = 'r1' AND n = 1 AND name = 'a'", "city_region_n_key", 2, 2},
		{"n > 1", "city_n_name_idx", 0, 1},
		{"region > 'r1'", "city_region_n_key", 0, 1},
		{"n IS NULL", "", 0, 0},
		{"name || '' = 'd'", "", 0, 0},
	} {
		tree, err := pg.Parse("SELECT name FROM city WHERE " + c.where)
		if err != nil {
			t.Fatal(err)
		}
		q, err := s.planSelect(tree.Stmts[0].Stmt.GetSelectStmt(), nil)
		if err != nil {
			t.Fatalf("plan %s: %v", c.where, err)
		}
		if q.src.index != c.index || q.src.eq != c.eq || len(q.src.bounds) != c.n {
			t.Errorf("WHERE %s: index %q, %d equalities, %d bounds; want %q, %d, %d",
				c.where, q.src.index, q.src.eq, len(q.src.bounds), c.index, c.eq, c.n)
		}
	}
}
