package online

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
)

// Table is one table to vacuum as the server's statistics describe it.
type Table struct {
	OID    uint32
	Schema string
	Name   string
	// Bytes is pg_relation_size (the main fork) when the table was picked.
	Bytes int64
	// Live and Dead are n_live_tup and n_dead_tup.
	Live, Dead int64
}

// Qualified is schema.name as reports show it.
func (t Table) Qualified() string { return t.Schema + "." + t.Name }

// Ident is the table quoted for SQL.
func (t Table) Ident() string { return pgx.Identifier{t.Schema, t.Name}.Sanitize() }

// DeadPercent is n_dead_tup as a percentage of all tuples (0 for an empty table).
func (t Table) DeadPercent() float64 {
	if t.Live+t.Dead <= 0 {
		return 0
	}
	return 100 * float64(t.Dead) / float64(t.Live+t.Dead)
}

const tableColumns = `c.oid, n.nspname, c.relname, pg_relation_size(c.oid),
	coalesce(s.n_live_tup, 0), coalesce(s.n_dead_tup, 0)
	FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	LEFT JOIN pg_stat_all_tables s ON s.relid = c.oid`

// PickTables returns the tables to vacuum: the named ones in their order (each must be a
// table; a name is read as to_regclass reads it, so "s.t" and quoted names work), or every
// table of pg_stat_user_tables, biggest first.
func PickTables(ctx context.Context, conn *pgx.Conn, names []string) ([]Table, error) {
	if len(names) == 0 {
		rows, err := conn.Query(ctx, `SELECT `+tableColumns+`
			WHERE c.oid IN (SELECT relid FROM pg_stat_user_tables) AND c.relkind IN ('r', 'm')
			ORDER BY pg_relation_size(c.oid) DESC, n.nspname, c.relname`)
		if err != nil {
			return nil, fmt.Errorf("list tables: %w", err)
		}
		tables, err := pgx.CollectRows(rows, scanTable)
		if err != nil {
			return nil, fmt.Errorf("list tables: %w", err)
		}
		return tables, nil
	}
	var out []Table
	seen := map[uint32]bool{}
	var errs []error
	for i, name := range names {
		rows, err := conn.Query(ctx, `SELECT `+tableColumns+`
			WHERE c.oid = to_regclass($1) AND c.relkind IN ('r', 'm', 't')`, name)
		if err != nil {
			return nil, fmt.Errorf("look up table %q: %w", name, err)
		}
		t, err := pgx.CollectExactlyOneRow(rows, scanTable)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			errs = append(errs, &FieldError{Field: fmt.Sprintf("tables[%d]", i),
				Message: fmt.Sprintf("no table %q in database %q", name, conn.Config().Database)})
			continue
		case err != nil:
			return nil, fmt.Errorf("look up table %q: %w", name, err)
		}
		if !seen[t.OID] {
			seen[t.OID] = true
			out = append(out, t)
		}
	}
	return out, errors.Join(errs...)
}

func scanTable(row pgx.CollectableRow) (Table, error) {
	var t Table
	err := row.Scan(&t.OID, &t.Schema, &t.Name, &t.Bytes, &t.Live, &t.Dead)
	return t, err
}

// pickEngineTables is PickTables on the engine server, which has pg_stat_user_tables and
// pg_relation_size but no pg_class and no joins: it reads the view whole and picks and
// orders in Go. Its tables are all in schema public; a name may say so ("public.t").
func pickEngineTables(ctx context.Context, conn *pgx.Conn, names []string) ([]Table, error) {
	rows, err := conn.Query(ctx, `SELECT relid, schemaname, relname, pg_relation_size(relid), n_live_tup, n_dead_tup
		FROM pg_stat_user_tables`)
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	all, err := pgx.CollectRows(rows, scanTable)
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	if len(names) == 0 {
		slices.SortFunc(all, func(a, b Table) int {
			return cmp.Or(cmp.Compare(b.Bytes, a.Bytes), cmp.Compare(a.Name, b.Name))
		})
		return all, nil
	}
	var out []Table
	var errs []error
	seen := map[uint32]bool{}
	for i, name := range names {
		j := slices.IndexFunc(all, func(t Table) bool { return t.Name == name || t.Qualified() == name })
		if j < 0 {
			errs = append(errs, &FieldError{Field: fmt.Sprintf("tables[%d]", i),
				Message: fmt.Sprintf("no table %q in database %q", name, conn.Config().Database)})
			continue
		}
		if t := all[j]; !seen[t.OID] {
			seen[t.OID] = true
			out = append(out, t)
		}
	}
	return out, errors.Join(errs...)
}
