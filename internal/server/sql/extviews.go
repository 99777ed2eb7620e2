package sql

import (
	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/vacuumops/vacuum-operator/internal/server/types"
)

// View is a system view another package provides (package replication's
// pg_stat_replication and pg_replication_slots): its columns, and its rows when queried,
// with values of the columns' types as the session's own views use them (int64 for
// integers, string for text, time.Time for timestamps, nil for NULL).
type View struct {
	Columns []ViewColumn
	Rows    func() [][]any
}

// ViewColumn is one column of a View.
type ViewColumn struct {
	Name string
	Type *types.T
}

// extView returns the source of a View named by rv (nil: none).
func (s *Session) extView(rv *pg.RangeVar) *source {
	v, ok := s.views[rv.Relname]
	if !ok {
		return nil
	}
	alias := rv.Relname
	if rv.Alias != nil {
		alias = rv.Alias.Aliasname
	}
	cols := make([]column, len(v.Columns))
	for i, c := range v.Columns {
		cols[i] = column{table: alias, name: c.Name, t: c.Type}
	}
	return &source{cols: cols, rowsFn: func(_ *execCtx, fn func([]any) error) error {
		for _, r := range v.Rows() {
			if err := fn(r); err != nil {
				return err
			}
		}
		return nil
	}}
}
