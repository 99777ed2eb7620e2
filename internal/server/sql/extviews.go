package sql

import "github.com/vacuumops/vacuum-operator/internal/server/types"

// View is a system view another package provides (package replication's
// pg_stat_replication and pg_replication_slots): its columns, and its rows when queried,
// with values of the columns' types as the session's own views use them (int64 for
// integers, string for text, time.Time for timestamps, nil for NULL). It is emitted by the
// same row emitter as the session's own views (Session.viewSource).
type View struct {
	Columns []ViewColumn
	Rows    func() [][]any
}

// ViewColumn is one column of a View.
type ViewColumn struct {
	Name string
	Type *types.T
}
