package sql

import (
	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/vacuumops/vacuum-operator/internal/server/types"
)

// pg_stat_user_tables, as far as an online run reads it to pick its tables: each table's
// OID, schema (always public), name and tuple counts. The counts are exact, from a scan of
// every table (the engine keeps no running statistics yet), so reading the view costs a
// pass over the data; n_dead_tup counts every deleted version not yet vacuumed (dead to
// every snapshot, or still seen by an older one), as PostgreSQL's does.
var userTablesColumns = []column{
	{name: "relid", t: types.Oid},
	{name: "schemaname", t: types.Text},
	{name: "relname", t: types.Text},
	{name: "n_live_tup", t: types.Int8},
	{name: "n_dead_tup", t: types.Int8},
}

// statsView returns the source of a statistics view of the tables (nil: none).
func (s *Session) statsView(rv *pg.RangeVar) *source {
	if rv.Schemaname != "" && rv.Schemaname != "pg_catalog" {
		return nil
	}
	if rv.Relname != "pg_stat_user_tables" && rv.Relname != "pg_stat_all_tables" {
		return nil
	}
	alias := rv.Relname
	if rv.Alias != nil {
		alias = rv.Alias.Aliasname
	}
	return viewSource(alias, userTablesColumns, func(e *execCtx, fn func([]any) error) error {
		tables, err := s.db.Tables()
		if err != nil {
			return engineError(err)
		}
		stats, err := s.db.Stats(e.ctx)
		if err != nil {
			return engineError(err)
		}
		byName := map[string]int{}
		for i, st := range stats {
			byName[st.Name] = i
		}
		for _, t := range tables {
			var live, dead int64
			if i, ok := byName[t.Name]; ok {
				live, dead = stats[i].LiveTuples, stats[i].DeadTuples+stats[i].RecentlyDeadTuples
			}
			if err := fn([]any{int64(t.OID), "public", t.Name, live, dead}); err != nil {
				return err
			}
		}
		return nil
	})
}
