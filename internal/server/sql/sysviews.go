package sql

import (
	"time"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/vacuumops/vacuum-operator/internal/server/types"
)

// Activity is one session as pg_stat_activity shows it; the wire layer reports it.
type Activity struct {
	PID          int64
	Database     string
	User         string
	AppName      string
	ClientAddr   string
	State        string // active, idle, idle in transaction, idle in transaction (aborted)
	Query        string // the running or last query
	BackendStart time.Time
	XactStart    time.Time // zero: no transaction
	QueryStart   time.Time // zero: none yet
}

// activityColumns are pg_stat_activity's columns this server fills, in PostgreSQL's order
// and with its types.
var activityColumns = []column{
	{name: "datname", t: types.Text},
	{name: "pid", t: types.Int4},
	{name: "usename", t: types.Text},
	{name: "application_name", t: types.Text},
	{name: "client_addr", t: types.Text},
	{name: "backend_start", t: types.Timestamptz},
	{name: "xact_start", t: types.Timestamptz},
	{name: "query_start", t: types.Timestamptz},
	{name: "state", t: types.Text},
	{name: "query", t: types.Text},
	{name: "backend_type", t: types.Text},
}

func orNull(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC()
}

// systemView returns the source of a system view this server answers (nil: none).
func (s *Session) systemView(rv *pg.RangeVar) *source {
	if rv.Schemaname != "" && rv.Schemaname != "pg_catalog" {
		return nil
	}
	if src := s.extView(rv); src != nil {
		return src
	}
	if rv.Relname != "pg_stat_activity" {
		return nil
	}
	alias := rv.Relname
	if rv.Alias != nil {
		alias = rv.Alias.Aliasname
	}
	cols := make([]column, len(activityColumns))
	for i, c := range activityColumns {
		c.table = alias
		cols[i] = c
	}
	return &source{cols: cols, rowsFn: func(x *execCtx, fn func([]any) error) error {
		if s.activity == nil {
			return nil
		}
		for _, a := range s.activity() {
			row := []any{a.Database, a.PID, a.User, a.AppName, nilIfEmpty(a.ClientAddr), orNull(a.BackendStart),
				orNull(a.XactStart), orNull(a.QueryStart), a.State, a.Query, "client backend"}
			if err := fn(row); err != nil {
				return err
			}
		}
		return nil
	}}
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}
